"""Helpers the fused producers' GPU tests share (test_gpu_fused_rot.py, test_gpu_fused_sr.py):
a tensor's bits and equality on them, a producer's inputs on the device, the fused call, and
the storage cases with the fused call's quantization arguments. Importing this module needs
no GPU; calling its functions needs torch with a CUDA device."""
from conftest import cuda_available

if cuda_available():
    import torch
    import baracuda_quant.ops as bqo
    from test_gpu import gen

DEV = "cuda"
EPS = 1e-6
# storage: (dtype name, symmetric, the static scale and zero point of the per-tensor case)
STORAGE = {"int8": ("int8", True, 1 / 64, 0), "int8_asym": ("int8", False, 1 / 64, 3),
           "uint8": ("uint8", False, 1 / 96, 128), "e4m3": ("float8_e4m3fn", True, 1 / 16, 0)}


def bits(t):
    """t's bits as integers (torch.equal on them: exact, NaN and -0 included; FP8, FP4 as bytes;
    an integer tensor viewed as the integer type of its size, which keeps the comparison exact)"""
    t = t.contiguous()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def equal(a, b):
    """a and b have the same shape, the same type and the same bits"""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


def make_inputs(producer, T, shape, seed=1):
    """(x, weight or None, residual or None) on the device; x [..., D] or [..., 2 D] (D the last
    of shape)"""
    d = shape[-1]
    if producer.startswith("rms"):
        x = gen(shape, T, seed=seed, specials=False).to(DEV)
        w = gen((d,), T, seed=seed + 1, specials=False, scale=0.3).to(DEV)
        r = gen(shape, T, seed=seed + 2, specials=False).to(DEV) if producer == "rms_residual" else None
        return x, w, r
    x = gen(shape[:-1] + (2 * d,), T, seed=seed, specials=False, scale=0.5).to(DEV)
    return x, None, None


def fused(producer, inputs, values, **kw):
    """(the fused call's result, the residual after it): the residual is a copy (updated in place)"""
    x, w, r = inputs
    if producer.startswith("rms"):
        rr = None if r is None else r.clone()
        return bqo.rms_norm_quant(x, w, EPS, residual=rr, return_normed=values, **kw), rr
    f = bqo.silu_and_mul_quant if producer == "silu" else bqo.gelu_tanh_and_mul_quant
    return f(x, return_act=values, **kw), None


def quant_kw(gran, store, group_size=None):
    """the fused call's quantization arguments (per tensor STORAGE's static scale and zero point,
    per group group_size) and (dtype, symmetric, static scale, zero point)"""
    qname, sym, scale, zp = STORAGE[store]
    Q = getattr(torch, qname)
    kw = dict(out_dtype=Q, symmetric=sym)
    if gran == "tensor":
        kw.update(scale=scale, zero_point=zp)
    elif gran == "group":
        kw["group_size"] = group_size
    return kw, (Q, sym, scale, zp)

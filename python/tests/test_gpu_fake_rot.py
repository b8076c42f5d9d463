"""GPU tests of fake quantize's fused rotation (docs/numerics.md, "Rotation"): fake quantize
per tensor, per channel (along the rotated last dimension), per token and per group with
rotation_block=n gives, bit for bit, hadamard(x, n) -> the same fake quantize without the
rotation -> hadamard(..., inverse=True) (the package's own ops, each checked against the
CPU reference by the C suites), rounding to nearest or stochastically (one seed keying the
signs and the draws); its autograd gradient (and fake_quantize_backward with the forward's
options) is hadamard(inverse) of the unrotated fake quantize backward of hadamard(dy) at
hadamard(x), the mask that of the rotated x. For float32, float16 and bfloat16, int8 (a
q-range and zero points), uint8 and float8_e4m3fn storage, blocks of 2, 16 and 128, with and
without the random signs; the types are paired with the granularities so that each
granularity sees every float type and every storage type. Also the drop-in per-tensor and
per-channel functions (no saved mask with the rotation), the DLPack front end and
torch.compile."""
import pytest

from conftest import TensorProducer, cuda_available
import sr_reference as R

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant as bq

DEV = "cuda"
FLOATS = ["float32", "float16", "bfloat16"]
STORAGE = {"int8": (-100, 117), "uint8": (3, 250), "float8_e4m3fn": (None, None)}
SEED, OFF = 0x0123456789ABCDEF, (1 << 64) - 300  # (the element index wraps past 2^64 inside the tensors)
# granularity: x's shape (the last dimension a multiple of the blocks) and its parameter (the axis or G)
GRANS = {"tensor": ((7, 256), 0), "channel": ((4, 6, 256), 2), "token": ((3, 5, 256), 0), "group": ((12, 256), 32)}
BLOCKS = (2, 16, 128)
# each granularity with each float type, the storage type turning: every pair of types is met
COMBOS = [(g, f, list(STORAGE)[(gi + fi) % 3]) for gi, g in enumerate(GRANS) for fi, f in enumerate(FLOATS)]


def _bits(t):
    """t's bits as integers of its size (bit for bit comparisons, -0 included)"""
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(ints[t.element_size()])


def _same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(_bits(a), _bits(b))


def _data(shape, T, seed):
    """x of type T on the GPU, over several decades (in and out of the q-range), a row of zeros"""
    x = R.sr_data(shape, T, seed, specials=False)
    x.view(-1, shape[-1])[2] = 0
    return x.to(DEV)


def _params(gran, shape, p, T, qname, seed=3):
    """(scale argument, zero point argument, the granularity's keyword): scales f32 (x's type
    for half data per group), zero points int32 (none for FP8)"""
    g = torch.Generator().manual_seed(seed)
    fp8 = qname.startswith("float8")
    rows = 1
    for n in shape[:-1]:
        rows *= n
    if gran == "tensor":
        return 0.37, (0 if fp8 else 9), {}
    if gran == "channel":
        ps, kw = (shape[p],), {"axis": p}
    elif gran == "token":
        ps, kw = (rows,), {}
    else:
        ps, kw = (rows, shape[-1] // p), {"group_size": p}
    s = torch.rand(ps, generator=g) * 0.9 + 0.05
    if gran == "group" and T in (torch.float16, torch.bfloat16):
        s = s.to(T)
    z = None if fp8 else torch.randint(-20, 21, ps, generator=g, dtype=torch.int32)
    return s.to(DEV), (None if z is None else z.to(DEV)), kw


def _args(qname):
    qmin, qmax = STORAGE[qname]
    return qmin, qmax, getattr(torch, qname)


@pytest.mark.parametrize("gran,fname,qname", COMBOS)
def test_fused_equals_the_rotation_the_op_and_back_with_its_gradient(gran, fname, qname):
    T = getattr(torch, fname)
    qmin, qmax, Q = _args(qname)
    shape, p = GRANS[gran]
    x = _data(shape, T, 17)
    dy = _data(shape, T, 23)
    s, z, kw = _params(gran, shape, p, T, qname)
    zp = 0 if z is None else z
    fq = lambda t, **o: bq.fake_quantize(t, s, zp, qmin, qmax, dtype=Q, **kw, **o)  # noqa: E731
    fqb = lambda d, t, **o: bq.fake_quantize_backward(d, t, s, zp, qmin, qmax, dtype=Q, **kw, **o)  # noqa: E731
    for rounding in ("nearest", "stochastic"):
        sr = rounding == "stochastic"
        for n in BLOCKS:
            for signs in (False, True):
                seed = SEED ^ n if signs or sr else None  # (with both, one seed keys the signs and the draws)
                ks = seed if signs else None  # (hadamard's: the signs' key)
                draws = dict(rounding=rounding, seed=seed, offset=OFF) if sr else {}
                rot = dict(rotation_block=n, random_signs=signs)
                xr = bq.hadamard(x, n, seed=ks)
                want = bq.hadamard(fq(xr, **draws), n, inverse=True, seed=ks)
                got = fq(x, rounding=rounding, seed=seed, offset=OFF if sr else 0, **rot)
                assert got.dtype == T and _same(got, want), (rounding, n, signs)
                # the gradient: the unrotated backward on the rotated x and dy, rotated back
                want_dx = bq.hadamard(fqb(bq.hadamard(dy, n, seed=ks), xr), n, inverse=True, seed=ks)
                xg = x.clone().requires_grad_()
                y = fq(xg, rounding=rounding, seed=seed, offset=OFF if sr else 0, **rot)
                assert _same(y.detach(), got), "the same bits with a gradient to record"
                y.backward(dy)
                assert _same(xg.grad, want_dx), (rounding, n, signs)
                assert _same(fqb(dy, x, seed=ks, **rot), want_dx), (rounding, n, signs)
                if n == 16 and not signs:
                    assert not _same(got, fq(x, **draws)), "the rotation is applied"
                    assert not _same(want_dx, fqb(dy, x)), "the gradient's rotation is applied"


@pytest.mark.parametrize("fname", FLOATS)
def test_drop_in_functions_rotate_and_save_no_mask(fname):
    """fake_quantize_per_tensor_affine (a number or one-element tensors) and
    _per_channel_affine with the rotation: hadamard, the same call, hadamard back, and the
    gradient the same call's (its mask op's) at the rotated x and dy, rotated back; either
    rounding"""
    T = getattr(torch, fname)
    x = _data((16, 128), T, 29)
    dy = _data((16, 128), T, 31)
    sc = (torch.rand(128, generator=torch.Generator().manual_seed(4)) * 0.5 + 0.05).to(DEV)
    zc = torch.randint(-5, 6, (128,), generator=torch.Generator().manual_seed(5), dtype=torch.int32).to(DEV)
    t1, z1 = torch.full((1,), 0.25, device=DEV), torch.full((1,), 7.0, device=DEV)
    calls = (lambda t, **o: bq.fake_quantize_per_tensor_affine(t, 0.25, 7, -128, 127, **o),
             lambda t, **o: bq.fake_quantize_per_tensor_affine(t, t1, z1, -128, 127, **o),
             lambda t, **o: bq.fake_quantize_per_channel_affine(t, sc, zc, 1, 0, 255, **o))
    for n, signs, seed, sr in ((128, False, None, False), (16, True, -3, False), (2, True, 9, True),
                               (32, False, 11, True)):
        ks = seed % (1 << 64) if signs else None  # (hadamard's seed: unsigned; the others take it modulo 2^64)
        draws = dict(rounding="stochastic", seed=seed, offset=5) if sr else {}
        opts = dict(draws, rotation_block=n, random_signs=signs, seed=seed)
        xr, dyr = bq.hadamard(x, n, seed=ks), bq.hadamard(dy, n, seed=ks)
        for f in calls:
            want = bq.hadamard(f(xr, **draws), n, inverse=True, seed=ks)
            x2 = xr.clone().requires_grad_()
            f(x2, **draws).backward(dyr)
            want_dx = bq.hadamard(x2.grad, n, inverse=True, seed=ks)
            xg = x.clone().requires_grad_()
            y = f(xg, **opts)
            y.backward(dy)
            assert _same(y.detach(), want) and _same(xg.grad, want_dx), (n, signs, sr)


def test_dlpack_front_end_gives_the_same_bits():
    from baracuda_quant import dlpack
    x = _data((9, 256), torch.bfloat16, 41)
    dy = _data((9, 256), torch.bfloat16, 43)
    s = (torch.rand(9, 4, generator=torch.Generator().manual_seed(8)) * 0.5 + 0.01).to(DEV)
    kw = dict(rotation_block=64, random_signs=True, seed=12345)
    sr = dict(rounding="stochastic", offset=12, **kw)
    torch.cuda.synchronize()
    y = torch.from_dlpack(dlpack.fake_quantize(TensorProducer(x), TensorProducer(s), None, -128, 127, group_size=64,
                                               **sr))
    assert _same(y, bq.fake_quantize(x, s, None, -128, 127, group_size=64, **sr))
    dx = torch.from_dlpack(dlpack.fake_quantize_backward(TensorProducer(dy), TensorProducer(x), TensorProducer(s),
                                                         None, -128, 127, group_size=64, **kw))
    assert _same(dx, bq.fake_quantize_backward(dy, x, s, None, -128, 127, group_size=64, **kw))
    y = torch.from_dlpack(dlpack.fake_quantize_per_tensor_affine(TensorProducer(x), 0.5, 0, -128, 127,
                                                                 rotation_block=256))
    assert _same(y, bq.fake_quantize(x, 0.5, 0, -128, 127, rotation_block=256))


def test_torch_compile_fullgraph_forward_and_backward():
    """compiled fake quantize with the rotation (and its gradient) gives the eager bits"""
    import torch._dynamo
    torch._dynamo.reset()
    x = _data((16, 256), torch.float16, 47)
    dy = _data((16, 256), torch.float16, 53)
    s = (torch.rand(16, generator=torch.Generator().manual_seed(9)) * 0.1 + 0.01).to(DEV)
    kw = dict(rotation_block=32, random_signs=True, seed=(1 << 64) - 9)

    def step(t):
        return bq.fake_quantize(t, s, None, dtype=torch.float8_e4m3fn, rounding="stochastic", offset=33, **kw)
    grads = []
    for f in (step, torch.compile(step, fullgraph=True)):
        xg = x.clone().requires_grad_()
        y = f(xg)
        y.backward(dy)
        grads.append((y.detach(), xg.grad))
    assert _same(grads[0][0], grads[1][0]) and _same(grads[0][1], grads[1][1])

"""GPU tests of the package's per-block ops, scale formats (UE8M0, packed UE8M0X4, MN-major),
power-of-two scales and amax bounds, FP8 from the fused producers, the backward passes,
and the asymmetric linear layers: bit for bit against the contract (docs/numerics.md)
written in torch on the CPU, with C = f32 (f32, f16 and bf16 data). Outputs are fresh
tensors, and every reference is computed independently of the library."""
import pytest

from conftest import cuda_available
from sr_reference import sr_draws as _sr_draws

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant as bq
    import baracuda_quant.ops as bqo

    E8M0 = torch.float8_e8m0fnu
    FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
    QR = {torch.int8: (-128, 127), torch.uint8: (0, 255)}

DEV = "cuda"
FLOATS = ["float32", "float16", "bfloat16"]


def data(shape, T, seed, specials=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 5
    f = x.view(-1)
    n = f.numel()
    idx = torch.randperm(n, generator=g)[: n // 8]  # ties of simple scales
    f[idx] = (torch.randint(-300, 300, (idx.numel(),), generator=g).double() + 0.5) * 0.0625
    if specials:
        f[0], f[1], f[2], f[3] = float("nan"), float("inf"), -float("inf"), -0.0
    return x.to(T)


def fmax(Q):
    return 448.0 if Q == torch.float8_e4m3fn else 57344.0


def bits(t):
    t = t.cpu().contiguous()
    return t.view(torch.uint8) if t.element_size() == 1 else t


def same(a, b):
    a, b = a.cpu(), b.cpu()
    if a.dtype in FP8 or b.dtype in FP8 or a.dtype == E8M0:
        return torch.equal(bits(a), bits(b))
    if a.dtype.is_floating_point:
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all()) and \
            bool((torch.signbit(a) == torch.signbit(b))[~torch.isnan(a)].all())
    return torch.equal(a, b)


def quant_ref(x, s, zp, Q):
    """sat(rne(C(x) / s) + zp) into Q (an integer type), or fp8(C(x) / s) saturating; s, zp
    broadcast against x, in f32."""
    v = x.cpu().float() / s.cpu().float()
    if Q in FP8:  # saturating, NaN to the code 0x7F
        r = v.clamp(-fmax(Q), fmax(Q)).to(Q).view(torch.uint8)
        return torch.where(torch.isnan(v), torch.full_like(r, 0x7F), r).view(Q)
    lo, hi = QR[Q]
    zp = torch.as_tensor(zp).cpu().float()
    r = torch.round(v) + zp
    r = torch.where(torch.isnan(v), zp.expand_as(r), r)
    return r.clamp(lo, hi).to(Q)


def expand_blocks(s, rows, cols, B):
    return s.cpu().repeat_interleave(B, 0).repeat_interleave(B, 1)[:rows, :cols]


def pow2_up(s):
    """The contract's rounding up to a power of two (f32): s if it is one, else the next."""
    m, e = torch.frexp(s)
    up = torch.where(m == 0.5, s, torch.ldexp(torch.ones_like(s), e))
    return torch.where(torch.isinf(s) | torch.isnan(s), s, up)


def to_e8m0(s):
    """UE8M0 bytes of power-of-two f32 scales: e = log2 + 127 clamped to [0, 254]; inf/NaN 255."""
    m, e = torch.frexp(s)
    k = (e - 1).clamp(-127, 127) + 127
    k = torch.where(torch.isinf(s) | torch.isnan(s), torch.full_like(k, 255), k)
    return k.to(torch.uint8)


def e8m0_value(b):
    return torch.where(b == 255, torch.tensor(float("nan")), torch.ldexp(torch.tensor(1.0), b.long() - 127))


def segments(x, gran, size):
    """x [rows, cols] (f32, CPU) as [segments, elements] for the reductions, and the shape of
    the scales."""
    rows, cols = x.shape
    if gran == "tensor":
        return x.reshape(1, -1), (1,)
    if gran == "token":
        return x, (rows, 1)
    if gran == "group":
        return x.reshape(rows * (cols // size), size), (rows, cols // size)
    br, bc = -(-rows // size), -(-cols // size)
    p = torch.zeros(br * size, bc * size)  # zeros change no max |x|, min or max with 0
    p[:rows, :cols] = x
    return p.reshape(br, size, bc, size).permute(0, 2, 1, 3).reshape(br * bc, size * size), (br, bc)


def broadcast(s, gran, rows, cols, size):
    s = s.cpu()
    if gran == "tensor":
        return s.reshape(1, 1)
    if gran == "token":
        return s.reshape(rows, 1)
    if gran == "group":
        return s.reshape(rows, cols // size).repeat_interleave(size, 1)
    return expand_blocks(s.reshape(-(-rows // size), -(-cols // size)), rows, cols, size)


def dynamic_ref(x, gran, size, Q, symmetric=True, scale_dtype=None, pow2=False, bound=0.0):
    """(q, scales as stored, zero points) of a dynamic quantize, from the contract."""
    scale_dtype = scale_dtype or torch.float32
    xf = x.cpu().float()
    rows, cols = xf.shape
    seg, sshape = segments(torch.where(torch.isnan(xf), torch.zeros_like(xf), xf), gran, size)
    if Q in FP8:
        qmax, qmin = fmax(Q), None
    else:
        qmin, qmax = QR[Q]
    if symmetric:
        amax = seg.abs().amax(1)
        if bound:
            amax = torch.minimum(amax, torch.tensor(bound, dtype=torch.float32))
        s = amax / qmax
    else:
        hi, lo = seg.amax(1).clamp(min=0), seg.amin(1).clamp(max=0)
        s = (hi - lo) / (qmax - qmin)
    s = torch.where(s == 0, torch.ones_like(s), s)
    if pow2 or scale_dtype in (E8M0, torch.int32):
        s = pow2_up(s)
    if scale_dtype in (E8M0, torch.int32):
        stored = to_e8m0(s)
        sq = e8m0_value(stored)
    else:
        stored = s.to(scale_dtype)
        sq = stored.float()
    zp = 0
    if not symmetric:
        lo = seg.amin(1).clamp(max=0)
        zp = (qmin - torch.round(lo / sq)).clamp(qmin, qmax)
        zp = torch.where(torch.isnan(zp), torch.zeros_like(zp), zp)
    sb = broadcast(sq, gran, rows, cols, size)
    zb = broadcast(torch.as_tensor(zp, dtype=torch.float32).expand(sq.shape), gran, rows, cols, size)
    q = quant_ref(xf, sb, zb, Q)
    return q, stored.reshape(sshape), (None if symmetric else zp.to(torch.int32).reshape(sshape))


# ---- static per block ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("Qname", ["int8", "uint8", "float8_e4m3fn", "float8_e5m2"])
def test_per_block_quantize_dequantize_fake(fname, Qname):
    T, Q = getattr(torch, fname), getattr(torch, Qname)
    rows, cols, B = 100, 300, 32  # edge tiles partial both ways
    x = data((rows, cols), T, seed=1)
    g = torch.Generator().manual_seed(2)
    br, bc = -(-rows // B), -(-cols // B)
    s = torch.rand(br, bc, generator=g) * 0.05 + 0.01
    z = None if Q in FP8 else torch.randint(QR[Q][0] // 2, QR[Q][1] // 2 + 1, (br, bc), generator=g,
                                            dtype=torch.int32)
    sd, zd = s.to(DEV), (None if z is None else z.to(DEV))
    q = bqo.quantize_per_block(x.to(DEV), sd, zd, B, Q)
    sb = expand_blocks(s, rows, cols, B)
    zb = 0 if z is None else expand_blocks(z, rows, cols, B).float()
    assert same(q, quant_ref(x, sb, zb, Q))
    y = bqo.dequantize(q, sd, zd, block_size=B, out_dtype=T)
    assert same(y, ((q.cpu().float() - zb) * sb).to(T))
    f = bqo.fake_quantize(x.to(DEV), sd, zd, dtype=Q, block_size=B)
    assert same(f, ((quant_ref(x, sb, zb, Q).float() - zb) * sb).to(T))
    # a 3-d input is [rows, cols] over its last dimension
    q3 = bqo.quantize_per_block(x.to(DEV).view(4, 25, cols), sd, zd, B, Q)
    assert same(q3.view(rows, cols), q)


# ---- UE8M0, UE8M0X4 and MN-major scales in the static ops -----------------------------------------
@pytest.mark.parametrize("fname", FLOATS)
def test_ue8m0_and_mn_major_scales(fname):
    T = getattr(torch, fname)
    rows, cols, G = 37, 320, 32
    ng = cols // G
    x = data((rows, cols), T, seed=3)
    g = torch.Generator().manual_seed(4)
    e = torch.randint(117, 131, (rows, ng), generator=g, dtype=torch.uint8)
    sv = e8m0_value(e)
    want_i = quant_ref(x, sv.repeat_interleave(G, 1), 0, torch.int8)
    want_f = quant_ref(x, sv.repeat_interleave(G, 1), 0, torch.float8_e4m3fn)
    xd = x.to(DEV)
    se = e.to(DEV).view(E8M0)
    assert same(bqo.quantize_per_group(xd, se, None, G), want_i)
    assert same(bqo.quantize_per_group(xd, se, None, G, torch.float8_e4m3fn), want_f)
    # packed: four bytes a word along the row, the last word's unused bytes anything
    nw = -(-ng // 4)
    packed = torch.randint(0, 256, (rows, 4 * nw), generator=g, dtype=torch.uint8)
    packed[:, :ng] = e
    words = packed.view(torch.int32).to(DEV)
    assert same(bqo.quantize_per_group(xd, words, None, G), want_i)
    # MN-major: a transposed view of [groups, rows rounded up to 4]
    ld = -(-rows // 4) * 4
    mn = torch.zeros(ng, ld, dtype=torch.uint8)
    mn[:, :rows] = e.t()
    mnd = mn.to(DEV).view(E8M0)[:, :rows].t()
    assert mnd.stride() == (1, ld)
    assert same(bqo.quantize_per_group(xd, mnd, None, G), want_i)
    q = bqo.quantize_per_group(xd, mnd, None, G)
    assert same(bqo.dequantize(q, mnd, group_size=G, out_dtype=T), (q.cpu().float() * sv.repeat_interleave(G, 1)).to(T))
    # per block and per token with UE8M0
    eb = torch.randint(120, 130, (2, 10), generator=g, dtype=torch.uint8)
    assert same(bqo.quantize_per_block(xd, eb.to(DEV).view(E8M0), None, 32),
                quant_ref(x, expand_blocks(e8m0_value(eb), rows, cols, 32), 0, torch.int8))
    et = torch.randint(120, 130, (rows,), generator=g, dtype=torch.uint8)
    assert same(bqo.quantize_per_token(xd, et.to(DEV).view(E8M0)),
                quant_ref(x, e8m0_value(et).view(rows, 1), 0, torch.int8))


# ---- dynamic quantize: every granularity and scale format ------------------------------------------
# (granularity, size, storage, symmetric, scale dtype ("T": the data's), pow2_scales, amax_bound)
CASES = [
    ("tensor", 0, "int8", True, "float32", False, 0.0),
    ("tensor", 0, "uint8", False, "float32", False, 0.0),
    ("tensor", 0, "float8_e4m3fn", True, "float8_e8m0fnu", False, 0.0),
    ("token", 0, "int8", True, "float32", True, 0.0),
    ("token", 0, "int8", True, "T", False, 0.0),
    ("token", 0, "float8_e5m2", True, "float32", False, 3.0),
    ("group", 64, "int8", False, "float32", False, 0.0),
    ("group", 64, "float8_e4m3fn", True, "float8_e8m0fnu", False, 0.0),
    ("group", 32, "float8_e4m3fn", True, "int32", False, 0.0),
    ("group", 128, "int8", True, "float32", False, 2.5),
    ("block", 128, "float8_e4m3fn", True, "float32", False, 0.0),
    ("block", 32, "uint8", False, "float32", True, 0.0),
    ("block", 64, "float8_e4m3fn", True, "float8_e8m0fnu", False, 0.0),
]


@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("layout", ["row", "mn"])
def test_dynamic_quant(fname, case, layout):
    gran, size, Q, sym, sdt, pow2, bound = CASES[case]
    if layout == "mn" and gran != "group":
        return  # MN-major is per group only (test_dynamic_quant_refusals)
    T, Q = getattr(torch, fname), getattr(torch, Q)
    sdt = T if sdt == "T" else getattr(torch, sdt)
    rows, cols = 70, 640
    x = data((rows, cols), T, seed=10 + case, specials=False)
    x[5, 7] = float("nan")  # ignored by the reductions
    x[3] = 0  # an all-zero row: scale 1 (per token)
    kw = {"group_size": size} if gran == "group" else {"block_size": size} if gran == "block" else {}
    q, s, z = bqo.dynamic_quant(x.to(DEV), gran, dtype=Q, symmetric=sym, scale_dtype=sdt, scale_layout=layout,
                                pow2_scales=pow2, amax_bound=bound or None, **kw)
    rq, rs, rz = dynamic_ref(x, gran, size, Q, sym, sdt, pow2, bound)
    if sdt == torch.int32:  # packed: unpack the row's bytes, the unused ones written as 0
        nw = s.shape[1]
        b = s.cpu().contiguous().view(torch.uint8).view(rows, 4 * nw)
        assert torch.equal(b[:, rs.shape[1]:], torch.zeros_like(b[:, rs.shape[1]:]))
        assert torch.equal(b[:, :rs.shape[1]], rs)
    else:
        assert same(s.view(torch.uint8) if sdt == E8M0 else s, rs)
    if layout == "mn":
        assert s.stride() == (1, -(-rows // 4) * 4)
    assert same(q, rq)
    assert (z is None) == sym and (sym or torch.equal(z.cpu(), rz))


def test_dynamic_quant_refusals():
    x = torch.randn(8, 64, device=DEV)
    with pytest.raises(ValueError, match="granularity"):
        bqo.dynamic_quant(x, "channel")
    with pytest.raises(ValueError, match="group_size"):
        bqo.dynamic_quant(x, "token", group_size=8)
    with pytest.raises(ValueError, match="mn"):
        bqo.dynamic_quant(x, "token", scale_layout="mn")
    with pytest.raises(ValueError, match="symmetric"):
        bqo.dynamic_quant(x, "token", dtype=torch.float8_e4m3fn, symmetric=False)
    with pytest.raises(ValueError):
        bqo.dynamic_quant(x, "group", group_size=16, scale_dtype=torch.int32, symmetric=False)


# ---- backward passes -------------------------------------------------------------------------------
@pytest.mark.parametrize("fname", FLOATS)
def test_backward_passes(fname):
    T = getattr(torch, fname)
    rows, cols, B = 50, 96, 16
    x = data((rows, cols), T, seed=20)
    dy = data((rows, cols), T, seed=21, specials=False)
    g = torch.Generator().manual_seed(22)
    s = torch.rand(-(-rows // B), -(-cols // B), generator=g) * 0.02 + 0.005
    sb = expand_blocks(s, rows, cols, B)
    xd, dyd, sd = x.to(DEV), dy.to(DEV), s.to(DEV)
    v = x.float() / sb
    inside = (torch.round(v) >= -128) & (torch.round(v) <= 127) & ~torch.isnan(v)
    got = bqo.fake_quantize_backward(dyd, xd, sd, 0, -128, 127, block_size=B)
    assert same(got, torch.where(inside, dy, torch.zeros_like(dy)))
    got = bqo.quantize_backward(dyd, xd, sd, block_size=B)
    assert same(got, torch.where(inside, (dy.float() / sb).to(T), torch.zeros_like(dy)))
    got = bqo.dequantize_backward(dyd, sd, block_size=B)
    assert same(got, (dy.float() * sb).to(T))
    # autograd through fake_quantize at per group: the STE mask
    G = 32
    sg = (torch.rand(rows, cols // G, generator=g) * 0.02 + 0.005)
    xr = xd.clone().requires_grad_(True)
    y = bqo.fake_quantize(xr, sg.to(DEV), 0, -128, 127, group_size=G)
    y.backward(dyd)
    vg = x.float() / sg.repeat_interleave(G, 1)
    ing = (torch.round(vg) >= -128) & (torch.round(vg) <= 127) & ~torch.isnan(vg)
    assert same(xr.grad, torch.where(ing, dy, torch.zeros_like(dy)))


# ---- FP8 from the fused producers ----------------------------------------------------------------------
@pytest.mark.parametrize("fname", ["float16", "bfloat16"])
@pytest.mark.parametrize("qi", range(2))
def test_fused_fp8(fname, qi):
    T, Q = getattr(torch, fname), [torch.float8_e4m3fn, torch.float8_e5m2][qi]
    x = data((33, 512), T, seed=30, specials=False).to(DEV)
    w = data((512,), T, seed=31, specials=False).to(DEV)
    q, s, z, n = bqo.rms_norm_quant(x, w, 1e-6, out_dtype=Q, return_normed=True)
    assert z is None and q.dtype == Q
    rq, rs, _ = dynamic_ref(n.cpu(), "token", 0, Q)
    assert same(s, rs) and same(q, rq)
    # with the int8 path's normed values: one producer, any storage
    _, _, _, n8 = bqo.rms_norm_quant(x, w, 1e-6, return_normed=True)
    assert same(n, n8)
    # per group, scales in x's type
    q, s, _, n = bqo.rms_norm_quant(x, w, 1e-6, out_dtype=Q, group_size=128, return_normed=True, scale_dtype=T)
    rq, rs, _ = dynamic_ref(n.cpu(), "group", 128, Q, scale_dtype=T)
    assert same(s, rs) and same(q, rq)
    xg = data((33, 1024), T, seed=32, specials=False).to(DEV)
    q, s, _, a = bqo.silu_and_mul_quant(xg, out_dtype=Q, return_act=True)
    rq, rs, _ = dynamic_ref(a.cpu(), "token", 0, Q)
    assert same(s, rs) and same(q, rq)
    q, _, _ = bqo.gelu_tanh_and_mul_quant(xg, out_dtype=Q, scale=0.125)
    _, _, _, a = bqo.gelu_tanh_and_mul_quant(xg, return_act=True)
    assert same(q, quant_ref(a, torch.tensor(0.125), 0, Q))
    with pytest.raises(ValueError, match="symmetric"):
        bqo.silu_and_mul_quant(xg, out_dtype=Q, symmetric=False)


# ---- asymmetric and per-tensor linear layers ------------------------------------------------------------
def test_linear_asymmetric_and_per_tensor():
    g = torch.Generator().manual_seed(40)
    m, k, n = 48, 256, 96
    a = torch.randint(0, 256, (m, k), generator=g, dtype=torch.uint8)
    w = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8)
    zp = torch.randint(100, 156, (m,), generator=g, dtype=torch.int32)
    sa = torch.rand(m, generator=g) * 0.01 + 1e-3
    sw = torch.rand(n, generator=g) * 0.01 + 1e-3
    wd = w.to(DEV)
    sums = bqo.linear_weight_sums(wd)
    assert torch.equal(sums.cpu(), w.long().sum(1).int())
    acc = (a.long() - zp.long().view(m, 1)) @ w.long().t()
    want = ((acc.float() * sa.view(m, 1)) * sw.view(1, n)).half()
    y = bqo.int8_linear(a.to(DEV), wd, sa.to(DEV), sw.to(DEV), a_zero_points=zp.to(DEV))
    assert same(y, want)
    y = bqo.int8_linear(a.to(DEV), wd, sa.to(DEV), sw.to(DEV), a_zero_points=zp.to(DEV), w_sums=sums)
    assert same(y, want)
    # per tensor, a host scale and zero point
    acc = (a.long() - 128) @ w.long().t()
    want = ((acc.float() * torch.tensor(0.004)) * sw.view(1, n)).to(torch.bfloat16)
    y = bqo.int8_linear(a.to(DEV), wd, 0.004, sw.to(DEV), out_dtype=torch.bfloat16, a_zero_points=128)
    assert same(y, want)
    # QuantizedLinear asymmetric into uint8: the per-token activations, then the GEMM
    x = data((m, k), torch.float16, seed=41, specials=False).to(DEV)
    y = bqo.quantized_linear(x, wd, sw.to(DEV), symmetric=False, dtype=torch.uint8)
    qa, s, z = bqo.dynamic_quant(x, "token", dtype=torch.uint8, symmetric=False)
    acc = (qa.cpu().long() - z.cpu().long().view(m, 1)) @ w.long().t()
    assert same(y, ((acc.float() * s.cpu().view(m, 1)) * sw.view(1, n)).half())


# ---- torch.compile and CUDA graphs of an FP8 block-scaled step ----------------------------------------
def test_fp8_blocks_compile_and_graph():
    import torch._dynamo
    torch._dynamo.reset()
    Q = torch.float8_e4m3fn
    x = data((256, 512), torch.bfloat16, seed=50, specials=False).to(DEV)

    def step(t):
        q, s, _ = bqo.dynamic_quant(t, "block", block_size=128, dtype=Q)
        qg, sg, _ = bqo.dynamic_quant(t, "group", group_size=128, dtype=Q, scale_dtype=torch.int32,
                                      scale_layout="mn")
        y = bqo.dequantize(q, s, block_size=128, out_dtype=torch.bfloat16)
        return q, s, qg, sg, y, bqo.fake_quantize(t, s, dtype=Q, block_size=128)

    eager = step(x)
    got = torch.compile(step, fullgraph=True)(x)
    for e, c in zip(eager, got):
        assert e.dtype == c.dtype and e.shape == c.shape and same(e, c)
    graph = torch.cuda.CUDAGraph()
    step(x)  # plans selected outside the capture
    with torch.cuda.graph(graph):
        outs = step(x)
    graph.replay()
    torch.cuda.synchronize()
    for e, c in zip(eager, outs):
        assert same(e, c)


def test_top_level_dispatch():
    x = torch.randn(8, 64, device=DEV)
    q, s, _ = bq.dynamic_quant(x, "block", block_size=32, dtype=torch.float8_e4m3fn)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (1, 2)


# ---- the fused producers emitting a microscaling format --------------------------------------
def _bytes(t):
    """A tensor's bytes as uint8 (float4, float8 and UE8M0 codes compare as bytes, NaN codes too)"""
    return t.view(torch.uint8) if t.element_size() == 1 else t.contiguous().view(torch.uint8)


MX_FORMATS = {"mxfp4": ("e2m1", "float8_e8m0fnu", 32), "nvfp4": ("e2m1", "float8_e4m3fn", 16),
              "mxfp8": ("float8_e4m3fn", "float8_e8m0fnu", 32), "mxfp8_e5m2": ("float8_e5m2", "float8_e8m0fnu", 32)}


@pytest.mark.parametrize("fmt", sorted(MX_FORMATS))
@pytest.mark.parametrize("op", ["rms", "rms_res", "silu", "gelu"])
@pytest.mark.parametrize("fname", FLOATS)
def test_fused_mx_is_mx_quant_of_its_values(fmt, op, fname):
    """Fused = the producer's values (returned) then mx_quant of them, bit for bit, through the
    torch ops: codes, every scale byte (the blocked layout's padding too) and NVFP4's
    computed tensor scale, in each layout, under a rule of the format's kind; the residual's
    h as torch computes T(x + r)"""
    T = getattr(torch, fname)
    dtype, sdt, G = MX_FORMATS[fmt]
    rows, D = 150, 512
    layout = ("row", "mn", "blocked")[(len(op) + len(fname)) % 3]
    rule = ("te" if fmt == "nvfp4" else "floor") if len(fname) % 2 else "default"
    kw = dict(group_size=G, dtype=dtype, scale_dtype=sdt, scale_layout=layout, scale_rule=rule)
    x = data((rows, 2 * D if op in ("silu", "gelu") else D), T, 7).to(DEV)
    if op.startswith("rms"):
        w = data((D,), T, 8, specials=False).to(DEV)
        r = data((rows, D), T, 9, specials=False).to(DEV) if op == "rms_res" else None
        r0 = None if r is None else r.clone()
        q, s, g, vals = bq.rms_norm_mx_quant(x, w, 1e-6, residual=r, return_normed=True, **kw)
        if r is not None:  # h = T(x + r): an f32 sum rounded once to T is that (NaN payloads aside)
            h = (x.float() + r0.float()).to(T)
            nan = torch.isnan(h)
            assert torch.equal(nan, torch.isnan(r)) and torch.equal(h[~nan], r[~nan]), "h differs"
    else:
        f = bq.silu_and_mul_mx_quant if op == "silu" else bq.gelu_tanh_and_mul_mx_quant
        q, s, g, vals = f(x, return_act=True, **kw)
    q2, s2, g2 = bq.mx_quant(vals, **kw)
    if fmt in ("mxfp4", "nvfp4"):
        assert q.dtype == torch.float4_e2m1fn_x2 and q.shape == (rows, D // 2)
    assert s.dtype == (torch.float8_e4m3fn if fmt == "nvfp4" else torch.float8_e8m0fnu)
    assert torch.equal(_bytes(q), _bytes(q2)), "codes differ"
    assert torch.equal(_bytes(s), _bytes(s2)), "scales differ"
    assert (g is None) == (g2 is None) and (g is None or torch.equal(_bytes(g), _bytes(g2))), "tensor scale differs"


# ---- microscaling torch ops against a torch reference written from the contract --------------
_E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _ref_e2m1(v):
    """f32 values to E2M1 codes (one per element): the nearest of the eight magnitudes, a tie
    to the even code, saturating at 6 (inf too), NaN 0x7, the sign bit kept (-0 is 0x8)"""
    a = v.abs().double()
    grid = torch.tensor(_E2M1_GRID, dtype=torch.float64)
    dist = (a.unsqueeze(-1) - grid).abs()
    best = dist.min(dim=-1, keepdim=True).values
    ties = dist == best
    idx = torch.arange(8)
    # among the nearest, the even code where there are two
    pick = torch.where(ties, torch.where(idx % 2 == 0, idx, idx + 8), torch.full_like(idx, 99)).min(dim=-1).values
    code = torch.where(pick >= 8, pick - 8, pick)
    code = torch.where(a >= 6.0, torch.full_like(code, 7), code)
    code = torch.where(torch.isnan(v), torch.full_like(code, 7), code)
    sign = (v.view(torch.int32) < 0) & ~torch.isnan(v)
    return (code | (sign.to(torch.int64) << 3)).to(torch.uint8)


def _ref_e4m3(v):
    """f32 to E4M3FN codes: round to nearest even, saturating at 448, NaN 0x7F"""
    c = v.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    return torch.where(torch.isnan(v), torch.full_like(c, 0x7F), c)


def _ref_ue8m0_default(amax, maxe):
    """the library's rule: s = amax / max in f32 (1 where amax is 0) rounded up to a power of
    two, as a UE8M0 byte (exponent clamped to [-127, 127]; past 2^127, inf or NaN: 255)"""
    s = torch.where(amax == 0, torch.ones_like(amax), amax / maxe)
    m, e = torch.frexp(s.double())
    p = torch.where(m == 0.5, e - 1, e)
    code = (p.clamp(min=-127) + 127).to(torch.int64)
    return torch.where(~torch.isfinite(s) | (p > 127), torch.full_like(code, 255), code).to(torch.uint8)


def _ref_ue8m0_floor(amax, emax):
    """OCP / torchao FLOOR: 2^(floor(log2 amax) - emax) from amax's f32 exponent bits, the
    exponent clamped to [-127, 128]; inf: 255"""
    ef = (amax.view(torch.int32) >> 23) & 0xFF
    code = ((ef - 127 - emax).clamp(-127, 128) + 127).to(torch.int64)
    return torch.where(torch.isinf(amax), torch.full_like(code, 255), code).to(torch.uint8)


def _ref_mx(x, G, fmt, rule, g=None):
    """(element codes [rows, K] one a byte, scale codes [rows, K / G], sc [rows, K / G] f32) of
    x on the CPU, C = f32"""
    xf = x.float().cpu()
    rows, K = xf.shape
    grp = xf.view(rows, K // G, G)
    a = grp.abs()
    amax = torch.where(torch.isnan(a), torch.zeros_like(a), a).amax(dim=-1)  # (NaN elements skipped)
    if fmt == "nvfp4":
        b = (amax / 6.0) / g
        sc8 = _ref_e4m3(torch.maximum(b, torch.full_like(b, 2.0 ** -9)))
        sc = (g * sc8.view(torch.float8_e4m3fn).float())
    else:
        maxe, emax = (6.0, 2) if fmt == "mxfp4" else (448.0, 8)
        sc8 = _ref_ue8m0_default(amax, maxe) if rule == "default" else _ref_ue8m0_floor(amax, emax)
        sc = torch.where(sc8 == 255, torch.full_like(amax, float("nan")),
                         torch.ldexp(torch.ones_like(amax), sc8.to(torch.int32) - 127))
    quot = grp / sc.unsqueeze(-1)
    codes = _ref_e2m1(quot) if fmt in ("mxfp4", "nvfp4") else _ref_e4m3(quot)
    return codes.view(rows, K), sc8, sc


def _unpack(q):
    b = q.view(torch.uint8).cpu()
    return torch.stack((b & 15, b >> 4), dim=-1).view(b.shape[0], -1)


def _ref_value(codes, fmt):
    if fmt == "mxfp8":
        return codes.view(torch.float8_e4m3fn).float()
    mag = torch.tensor(_E2M1_GRID)[(codes & 7).long()]
    return torch.where((codes & 8) != 0, -mag, mag)


@pytest.mark.parametrize("fmt,rule", [("mxfp4", "default"), ("mxfp4", "floor"), ("mxfp8", "default"),
                                      ("mxfp8", "floor"), ("nvfp4", "default")])
@pytest.mark.parametrize("fname", FLOATS)
def test_mx_ops_against_the_torch_reference(fmt, rule, fname):
    """mx_quant (dynamic), mx_dequant, mx_fake_quant and its gradient, through the torch ops,
    against the contract written in torch: codes, scale bytes, values, and the STE mask"""
    T = getattr(torch, fname)
    G = 16 if fmt == "nvfp4" else 32
    rows, K = 67, 256
    x = data((rows, K), T, 11 + len(fmt) + len(rule)).to(DEV)
    x[5, :G] = 0.0  # a group of zeros (amax 0)
    dtype = torch.float8_e4m3fn if fmt == "mxfp8" else "e2m1"
    sdt = torch.float8_e4m3fn if fmt == "nvfp4" else torch.float8_e8m0fnu
    g = torch.tensor([0.0375], dtype=torch.float32, device=DEV) if fmt == "nvfp4" else None
    q, s, t = bq.mx_quant(x, group_size=G, dtype=dtype, scale_dtype=sdt, tensor_scale=g, scale_rule=rule)
    assert t is None and s.shape == (rows, K // G) and s.dtype == sdt
    codes, sc8, sc = _ref_mx(x, G, fmt, rule, None if g is None else g.cpu())
    got = q.view(torch.uint8).cpu() if fmt == "mxfp8" else _unpack(q)
    assert torch.equal(s.view(torch.uint8).cpu(), sc8), "scales"
    assert torch.equal(got, codes), "codes"
    # dequantize: T(value * sc), one f32 product
    y = bq.mx_dequant(q, s, group_size=G, dtype=dtype, tensor_scale=g, out_dtype=T)
    want = (_ref_value(codes, fmt).view(rows, K // G, G) * sc.unsqueeze(-1)).view(rows, K).to(T)
    yc = y.cpu()
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(yc), nan) and torch.equal(yc[~nan], want[~nan]), "dequantize"
    # fake quantize = dequantize(quantize), and its gradient the STE mask |x / sc| <= max
    xr = x.clone().requires_grad_(True)
    f = bq.mx_fake_quant(xr, s, group_size=G, dtype=dtype, tensor_scale=g)
    fc = f.detach().cpu()
    assert torch.equal(torch.isnan(fc), torch.isnan(yc)) and torch.equal(fc[~nan], yc[~nan]), "fake quantize"
    dy = torch.randn(rows, K, device=DEV).to(T)
    f.backward(dy)
    maxe = 448.0 if fmt == "mxfp8" else 6.0
    quot = x.float().cpu().view(rows, K // G, G) / sc.unsqueeze(-1)
    m = (quot.abs() <= maxe).view(rows, K)
    assert torch.equal(xr.grad.cpu(), torch.where(m, dy.cpu(), torch.zeros_like(dy.cpu()))), "the STE gradient"


# ---- stochastic rounding (docs/numerics.md, "Stochastic rounding"), its reference in Python ----
# (the draws' reference, _sr_draws, is sr_reference.py's, shared with test_gpu_affine_sr.py)


def _sr_value(v, u, fmt):
    """v (a float of C) rounded by the draw u onto the element grid, as a float (sign kept)"""
    import math
    mbits, emin, maxe = (3, -6, 448.0) if fmt == "mxfp8" else (1, 0, 6.0)
    a = abs(v)
    if not a < maxe:
        return math.copysign(maxe, v)  # (saturation; the data has no NaN)
    e = max(math.frexp(a)[1] - 1, emin) if a > 0 else emin
    q = math.ldexp(1.0, e - mbits)
    n = math.floor(a / q)
    m = min((n + (1 if (u + 0.5) * 2.0 ** -16 < a / q - n else 0)) * q, maxe)
    return math.copysign(m, v)


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp8", "nvfp4"])
@pytest.mark.parametrize("fname", FLOATS)
def test_mx_stochastic_rounding(fmt, fname):
    """mx_quant with rounding="stochastic": each code is the Python reference's rounding of
    x / sc by its Philox draw; rows quantized alone (offset advanced) give the same codes; the
    fake quantize is the dequantized codes and keeps the STE gradient; the mean error is
    zero within its confidence bound"""
    T = getattr(torch, fname)
    G = 16 if fmt == "nvfp4" else 32
    rows, K, seed, off = 6, 128, 0x1234_5678_9ABC_DEF0, (1 << 64) - 200  # (the index wraps in row 1)
    x = data((rows, K), T, 29 + len(fmt), specials=False).to(DEV)
    dtype = torch.float8_e4m3fn if fmt == "mxfp8" else "e2m1"
    sdt = torch.float8_e4m3fn if fmt == "nvfp4" else torch.float8_e8m0fnu
    g = torch.tensor([0.0375], dtype=torch.float32, device=DEV) if fmt == "nvfp4" else None
    kw = dict(group_size=G, dtype=dtype, tensor_scale=g)
    q, s, _ = bq.mx_quant(x, scale_dtype=sdt, rounding="stochastic", seed=seed, offset=off, **kw)
    _, sc8, sc = _ref_mx(x, G, fmt, "default", None if g is None else g.cpu())
    assert torch.equal(s.view(torch.uint8).cpu(), sc8), "scales"
    quot = (x.float().cpu().view(rows, K // G, G) / sc.unsqueeze(-1)).view(rows, K)
    draws = _sr_draws(seed, off, rows * K)
    want = torch.tensor([_sr_value(float(quot.view(-1)[i]), draws[i], fmt) for i in range(rows * K)]).view(rows, K)
    got = q.view(torch.uint8).cpu() if fmt == "mxfp8" else _unpack(q)
    assert torch.equal(_ref_value(got, fmt), want.float()), "codes"
    assert not torch.equal(q.view(torch.uint8), bq.mx_quant(x, scales=s, **kw).view(torch.uint8)), "as nearest"
    for r in range(rows):
        qr = bq.mx_quant(x[r:r + 1], scales=s[r:r + 1], rounding="stochastic", seed=seed, offset=off + r * K, **kw)
        assert torch.equal(qr.view(torch.uint8), q[r:r + 1].view(torch.uint8)), "row %d alone" % r
    xr = x.clone().requires_grad_(True)
    f = bq.mx_fake_quant(xr, s, rounding="stochastic", seed=seed, offset=off, **kw)
    assert torch.equal(f.detach(), bq.mx_dequant(q, s, out_dtype=T, **kw)), "fake quantize"
    f.backward(torch.ones_like(f))
    assert torch.equal(xr.grad, bq.mx_fake_quant_backward(torch.ones_like(x), x, s, **kw)), "the STE gradient"
    # unbiased: one value, many elements
    v = torch.full((256, K), 0.3 if fmt != "mxfp8" else 0.0123, dtype=T, device=DEV)
    sv = torch.full((256, K // G), 127 if fmt != "nvfp4" else 0x38, dtype=torch.uint8, device=DEV).view(sdt)
    gv = torch.ones(1, dtype=torch.float32, device=DEV) if fmt == "nvfp4" else None
    qv = bq.mx_quant(v, scales=sv, group_size=G, dtype=dtype, tensor_scale=gv, rounding="stochastic", seed=7)
    vals = _ref_value(qv.view(torch.uint8).cpu() if fmt == "mxfp8" else _unpack(qv), fmt).double()
    exact = float(v[0, 0].float())
    step = (vals.max() - vals.min()).item()
    assert step > 0, "no element went the other way"
    sd = step * 0.5 / (vals.numel() ** 0.5)
    assert abs(vals.mean().item() - exact) <= 5 * sd + step * 2.0 ** -17, (vals.mean().item(), exact)


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp8", "nvfp4"])
@pytest.mark.parametrize("fname", FLOATS)
def test_mx_fused_rotation(fmt, fname):
    """mx_quant with rotation_block is hadamard, then mx_quant, bit for bit (static and dynamic
    scales, with and without the random signs, with stochastic rounding too), and mx_dequant
    with it is mx_dequant, then the inverse hadamard"""
    T = getattr(torch, fname)
    G = 16 if fmt == "nvfp4" else 32
    x = data((8, 512), T, 41 + len(fmt), specials=False).to(DEV)
    dtype = torch.float8_e4m3fn if fmt == "mxfp8" else "e2m1"
    sdt = torch.float8_e4m3fn if fmt == "nvfp4" else torch.float8_e8m0fnu
    g = torch.tensor([0.0375], dtype=torch.float32, device=DEV) if fmt == "nvfp4" else None
    kw = dict(group_size=G, dtype=dtype, tensor_scale=g)
    blocks = [n for n in (2, 16, 64, 128, 256) if n <= 32 * 16 // x.element_size()]
    for n in blocks:
        for seed in (None, 0xC0FFEE):
            signs = dict(random_signs=True, seed=seed) if seed is not None else {}
            r = bq.hadamard(x, n, seed=seed)
            q1, s1, _ = bq.mx_quant(x, scale_dtype=sdt, rotation_block=n, **signs, **kw)
            q2, s2, _ = bq.mx_quant(r, scale_dtype=sdt, **kw)
            assert torch.equal(s1.view(torch.uint8), s2.view(torch.uint8)), (n, seed, "scales")
            assert torch.equal(q1.view(torch.uint8), q2.view(torch.uint8)), (n, seed, "dynamic")
            q3 = bq.mx_quant(x, scales=s2, rotation_block=n, **signs, **kw)
            assert torch.equal(q3.view(torch.uint8), q2.view(torch.uint8)), (n, seed, "static")
            sr = dict(rounding="stochastic", seed=7 if seed is None else seed, offset=3)
            q4 = bq.mx_quant(x, scales=s2, rotation_block=n, random_signs=seed is not None, **sr, **kw)
            q5 = bq.mx_quant(r, scales=s2, **sr, **kw)
            assert torch.equal(q4.view(torch.uint8), q5.view(torch.uint8)), (n, seed, "stochastic")
            y1 = bq.mx_dequant(q2, s2, out_dtype=T, rotation_block=n, **signs, **kw)
            y2 = bq.hadamard(bq.mx_dequant(q2, s2, out_dtype=T, **kw), n, inverse=True, seed=seed)
            assert torch.equal(y1, y2), (n, seed, "dequantize")

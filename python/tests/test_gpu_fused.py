"""GPU tests of the fused producers (rms_norm_quant, silu_and_mul_quant, gelu_tanh_and_mul_quant):
bit for bit against the contract of docs/numerics.md ("Fused producers", "exp_c and tanh_c")
written in torch ops on the CPU, each operation rounded once in C = f32 (f64 for float64
data), and against this library's own dynamic quantize applied to that reference's values
(the contract: the producer, then the existing quantize)."""
import pytest

from conftest import cuda_available

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant.ops as bqo
    from test_gpu import C, gen, ref_quantize, same

FLOATS = ["float32", "float64", "float16", "bfloat16"]
DEV = "cuda"
H = float.fromhex


def dt(name):
    return getattr(torch, name)


def cst(v, c):
    return torch.tensor(v, dtype=c)


# ---- the producers, in torch on the CPU ----------------------------------------------------------
def sqrt_rn(t):
    """The correctly rounded square root in t's type. torch.sqrt on the CPU is not that for
    float32 everywhere (a vectorized approximation); Python's math.sqrt is IEEE in double,
    and rounding that to float32 is the float32 square root (53 >= 2 * 24 + 2 bits)."""
    import math
    v = [math.sqrt(e) if e >= 0 else float("nan") for e in t.double().reshape(-1).tolist()]
    return torch.tensor(v, dtype=torch.float64).reshape(t.shape).to(t.dtype)


def ref_rmsnorm(x, w, eps, residual=None):
    """(h, n): h = T(C(x) + C(r)) or x; n = T((C(h) * rstd) * C(w)) with the contract's order of
    the sum of squares (256 threads over 16-byte accesses, warp butterflies, warps in order)."""
    T = x.dtype
    c = C(T)
    x = x.cpu()
    h = (x.to(c) + residual.cpu().to(c)).to(T) if residual is not None else x
    hc = h.to(c)
    rows, d = hc.shape
    v = 16 // x.element_size()
    nacc = (d + v - 1) // v
    k = (nacc + 255) // 256
    sq = torch.zeros(rows, k * 256 * v, dtype=c)
    sq[:, :d] = hc * hc  # each square rounded once; the padding adds +0, which changes no sum
    sq = sq.view(rows, k, 256, v)
    p = torch.zeros(rows, 256, dtype=c)
    for kk in range(k):  # thread t: its accesses t, t + 256, ... in order, each access's elements in order
        for e in range(v):
            p = p + sq[:, kk, :, e]
    p = p.view(rows, 8, 32)
    lanes = torch.arange(32)
    for o in (16, 8, 4, 2, 1):  # xor butterfly, from the values before each step
        p = p + p[:, :, lanes ^ o]
    ss = p[:, 0, 0]
    for wi in range(1, 8):
        ss = ss + p[:, wi, 0]
    mean = ss / cst(float(d), c)
    rstd = cst(1.0, c) / sqrt_rn(mean + cst(float(eps), c))
    n = ((hc * rstd[:, None]) * w.cpu().to(c)[None, :]).to(T)
    return h, n


# the contract's constants by C ("f32", "f64"); module level stays free of torch (imported only with a GPU)
_EXP = {  # LOG2E, SHIFTER, LN2_HI, LN2_LO, XMAX, XMIN, c_2.. (docs/numerics.md, tests/reference_fused.h)
    "f32": (H("0x1.715476p+0"), H("0x1.8p+23"), H("0x1.62e4p-1"), H("0x1.7f7d1cp-20"), 89.0, -104.0,
                    [H(s) for s in ("0x1.0p-1", "0x1.555556p-3", "0x1.555556p-5", "0x1.111112p-7",
                                    "0x1.6c16c2p-10", "0x1.a01a02p-13")]),
    "f64": (H("0x1.71547652b82fep+0"), H("0x1.8p+52"), H("0x1.62e42feep-1"), H("0x1.a39ef35793c76p-33"),
                    710.0, -746.0,
                    [H(s) for s in ("0x1.0p-1", "0x1.5555555555555p-3", "0x1.5555555555555p-5",
                                    "0x1.1111111111111p-7", "0x1.6c16c16c16c17p-10", "0x1.a01a01a01a01ap-13",
                                    "0x1.a01a01a01a01ap-16", "0x1.71de3a556c734p-19", "0x1.27e4fb7789f5cp-22",
                                    "0x1.ae64567f544e4p-26", "0x1.1eed8eff8d898p-29", "0x1.6124613a86d09p-33")]),
}
_TANH = {  # A0, SAT, P_0..
    "f32": (0.5625, 10.0, [H(s) for s in ("-0x1.555556p-2", "0x1.111102p-3", "-0x1.ba12d8p-5",
                                                  "0x1.655dcp-6", "-0x1.1680dcp-7", "0x1.460e8p-9")]),
    "f64": (0.5625, 20.0, [H(s) for s in (
        "-0x1.5555555555555p-2", "0x1.1111111110fbep-3", "-0x1.ba1ba1b9f19ap-5", "0x1.664f48727bbfdp-6",
        "-0x1.226e32212f8e9p-7", "0x1.d6d30f918e945p-9", "-0x1.7d9545835e3e5p-10", "0x1.34ad2f7abd75ap-11",
        "-0x1.eaf47874aab53p-13", "0x1.616f17dcc6fd8p-14", "-0x1.4ffe31971aeb8p-16")]),
}
_GELU = {"f32": (H("0x1.988454p-1"), H("0x1.6e4e26p-5")),
         "f64": (H("0x1.9884533d43651p-1"), H("0x1.6e4e26d4801f7p-5"))}


def _c(c):
    return "f64" if c == torch.float64 else "f32"


def _pow2(k, c):
    return torch.pow(2.0, k.to(torch.float64)).to(c)  # exact: k in the normal exponent range


def _exp_core(x, c):
    """(m, k): exp(x) = 2^k (1 + m), for finite x in range (others give garbage, masked by callers)."""
    log2e, sh, hi, lo, _, _, poly = _EXP[_c(c)]
    t = x * cst(log2e, c)
    kf = (t + cst(sh, c)) - cst(sh, c)
    r = (x - kf * cst(hi, c)) - kf * cst(lo, c)
    q = torch.full_like(x, poly[-1])
    for coef in reversed(poly[:-1]):
        q = q * r + cst(coef, c)
    kf = torch.where(torch.isfinite(kf), kf, torch.zeros_like(kf))
    return r + (r * r) * q, kf.to(torch.int64)


def exp_c(x):
    c = x.dtype
    _, _, _, _, xmax, xmin, _ = _EXP[_c(c)]
    xs = torch.where(torch.isfinite(x) & (x <= xmax) & (x >= xmin), x, torch.zeros_like(x))
    m, k = _exp_core(xs, c)
    k1 = torch.div(k, 2, rounding_mode="trunc")
    v = ((cst(1.0, c) + m) * _pow2(k1, c)) * _pow2(k - k1, c)
    v = torch.where(x > xmax, torch.full_like(x, float("inf")), v)
    v = torch.where(x < xmin, torch.zeros_like(x), v)
    return torch.where(torch.isnan(x), x + x, v)


def tanh_c(y):
    c = y.dtype
    a0, sat, poly = _TANH[_c(c)]
    a = y.abs()
    s = a * a
    p = torch.full_like(y, poly[-1])
    for coef in reversed(poly[:-1]):
        p = p * s + cst(coef, c)
    t_small = a + a * (s * p)
    am = torch.where((a >= a0) & (a <= sat), a, torch.full_like(a, a0))
    m, k = _exp_core(am + am, c)
    pk = _pow2(k, c)
    e = (pk - cst(1.0, c)) + pk * m
    t_mid = cst(1.0, c) - cst(2.0, c) / (e + cst(2.0, c))
    t = torch.where(a < a0, t_small, torch.where(a <= sat, t_mid, torch.ones_like(a)))
    t = torch.where(y < 0, -t, t)
    t = torch.where(y == 0, y, t)
    return torch.where(torch.isnan(y), y + y, t)


def ref_gated(x, act):
    """a = T(act(C(g)) * C(u)), g = x[:, :D], u = x[:, D:]."""
    T = x.dtype
    c = C(T)
    x = x.cpu().to(c)
    d = x.shape[1] // 2
    g, u = x[:, :d], x[:, d:]
    if act == "silu":
        f = g / (cst(1.0, c) + exp_c(-g))
    else:
        k0, k1 = _GELU[_c(c)]
        f = (cst(0.5, c) * g) * (cst(1.0, c) + tanh_c(cst(k0, c) * (g + (cst(k1, c) * g) * (g * g))))
    return (f * u).to(T)


# ---- the quantize half ------------------------------------------------------------------------------
def ref_dynamic(v, symmetric=True, group_size=None, qmin=-128, qmax=127, itype=None):
    """(q, scales [rows, groups] f32, zero points or None) of dynamic quantize on v [rows, D]."""
    itype = itype or torch.int8
    c = C(v.dtype)
    rows, d = v.shape
    g = group_size or d
    vg = v.cpu().to(c).reshape(rows, d // g, g)
    fin = torch.where(torch.isnan(vg), torch.zeros_like(vg), vg)
    if symmetric:
        s = (fin.abs().amax(2) / cst(float(qmax), c)).float()
        s = torch.where(s == 0, torch.ones_like(s), s)
        z = torch.zeros_like(s, dtype=torch.int32)
    else:
        hi, lo = fin.amax(2).clamp(min=0), fin.amin(2).clamp(max=0)
        s = ((hi - lo) / cst(float(qmax - qmin), c)).float()
        s = torch.where(s == 0, torch.ones_like(s), s)
        z = (qmin - torch.round(lo / s.to(c))).clamp(qmin, qmax).to(torch.int32)
    q = ref_quantize(v.cpu().reshape(rows, d // g, g), s[:, :, None], z[:, :, None], qmin, qmax, itype)
    return q.reshape(rows, d), s, (None if symmetric else z)


def check_quant(q, s, z, v, symmetric=True, group_size=None, qmin=-128, qmax=127, itype=None):
    itype = itype or torch.int8
    rq, rs, rz = ref_dynamic(v, symmetric, group_size, qmin, qmax, itype)
    assert same(s.reshape(rs.shape), rs)
    if symmetric:
        assert z is None
    else:
        assert same(z.reshape(rz.shape), rz)
    assert same(q.reshape(rq.shape), rq)
    if group_size is None and qmin == -128 and qmax == 127 and itype == torch.int8:
        # the library's own dynamic quantize of the reference values: the unfused pair
        q2, s2, z2 = bqo.dynamic_per_token_quant(v.to(DEV), symmetric=symmetric)
        assert same(q.reshape(q2.shape), q2) and same(s.reshape(s2.shape), s2)


def inputs(rows, d, T, seed, scale=1.0):
    x = gen((rows, d), T, seed=seed, specials=False, scale=scale)
    w = gen((d,), T, seed=seed + 1, specials=False, scale=0.3)
    return x, w


# ---- RMSNorm ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("d", [200, 2048, 4095, 4096, 14336, 20000])
def test_rms_norm_quant_per_token(fname, d):
    T = dt(fname)
    x, w = inputs(9, d, T, seed=d)
    x[4] = 0  # an all-zero row: rstd = 1 / sqrt(eps), n = 0 * w, scale 1
    eps = 1e-6
    _, n_ref = ref_rmsnorm(x, w, eps)
    q, s, z, n = bqo.rms_norm_quant(x.to(DEV), w.to(DEV), eps, return_normed=True)
    assert q.shape == x.shape and q.dtype == torch.int8 and s.shape == (9, 1) and s.dtype == torch.float32
    assert same(n, n_ref)
    check_quant(q, s, z, n_ref)


@pytest.mark.parametrize("fname", ["float32", "bfloat16"])
@pytest.mark.parametrize("in_place", [False, True])
def test_rms_norm_quant_residual(fname, in_place):
    T = dt(fname)
    x, w = inputs(17, 4096, T, seed=3)
    r = gen((17, 4096), T, seed=5, specials=False)
    h_ref, n_ref = ref_rmsnorm(x, w, 1e-5, r)
    xd, rd = x.to(DEV), r.to(DEV)
    if in_place:  # the residual may be x itself: x then holds h
        rd = xd
        h_ref, n_ref = ref_rmsnorm(x, w, 1e-5, x)
    q, s, z = bqo.rms_norm_quant(xd, w.to(DEV), 1e-5, residual=rd)
    assert same(rd, h_ref)
    check_quant(q, s, z, n_ref)


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("group_size", [None, 128, 64, 96])
def test_rms_norm_quant_granularity(symmetric, group_size):
    T = torch.bfloat16
    x, w = inputs(11, 4608, T, seed=7)
    _, n_ref = ref_rmsnorm(x, w, 1e-6)
    q, s, z = bqo.rms_norm_quant(x.to(DEV), w.to(DEV), 1e-6, symmetric=symmetric, group_size=group_size)
    ng = 4608 // group_size if group_size else 1
    assert s.shape == (11, ng) and (z is None) == symmetric
    check_quant(q, s, z, n_ref, symmetric, group_size)


def test_rms_norm_quant_q_range_and_uint8():
    x, w = inputs(6, 1024, torch.float16, seed=9)
    _, n_ref = ref_rmsnorm(x, w, 1e-6)
    q, s, z = bqo.rms_norm_quant(x.to(DEV), w.to(DEV), 1e-6, quant_min=-7, quant_max=7)
    check_quant(q, s, z, n_ref, qmin=-7, qmax=7)
    q, s, z = bqo.rms_norm_quant(x.to(DEV), w.to(DEV), 1e-6, symmetric=False, out_dtype=torch.uint8)
    assert q.dtype == torch.uint8
    check_quant(q, s, z, n_ref, False, qmin=0, qmax=255, itype=torch.uint8)


def test_rms_norm_quant_static_scale():
    x, w = inputs(8, 4096, torch.bfloat16, seed=11)
    _, n_ref = ref_rmsnorm(x, w, 1e-6)
    q, s, z, n = bqo.rms_norm_quant(x.to(DEV), w.to(DEV), 1e-6, scale=0.05, zero_point=3, return_normed=True)
    assert (s, z) == (0.05, 3) and same(n, n_ref)
    assert same(q, ref_quantize(n_ref, torch.tensor(0.05, dtype=torch.float64), 3, -128, 127, torch.int8))


def test_rms_norm_quant_batch_invariant_and_leading_dims():
    x, w = inputs(64, 4096, torch.bfloat16, seed=13)
    xd, wd = x.to(DEV), w.to(DEV)
    q, s, _ = bqo.rms_norm_quant(xd, wd, 1e-6)
    for i in (0, 17, 63):
        qi, si, _ = bqo.rms_norm_quant(xd[i:i + 1], wd, 1e-6)
        assert same(qi, q[i:i + 1]) and same(si, s[i:i + 1])
    q3, s3, _ = bqo.rms_norm_quant(xd.view(4, 16, 4096), wd, 1e-6)
    assert q3.shape == (4, 16, 4096) and same(q3.view(64, 4096), q) and same(s3.view(-1), s.view(-1))
    base = torch.empty(64, 4160, dtype=torch.bfloat16, device=DEV)
    base[:, :4096] = xd
    qs, ss, _ = bqo.rms_norm_quant(base[:, :4096], wd, 1e-6)  # row stride 4160
    assert same(qs, q) and same(ss, s)


# ---- gated activations --------------------------------------------------------------------------------
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("d", [200, 4096, 14336])
def test_gated_quant_per_token(fname, act, d):
    T = dt(fname)
    x = gen((7, 2 * d), T, seed=d + 1, specials=False, scale=2.0)
    a_ref = ref_gated(x, act)
    f = bqo.silu_and_mul_quant if act == "silu" else bqo.gelu_tanh_and_mul_quant
    q, s, z, a = f(x.to(DEV), return_act=True)
    assert q.shape == (7, d) and a.shape == (7, d) and a.dtype == T
    assert same(a, a_ref)
    check_quant(q, s, z, a_ref)


@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
def test_gated_quant_specials_group_and_static(act):
    T = torch.float32
    x = gen((4, 2 * 512), T, seed=21, specials=False, scale=20.0)  # saturates exp and tanh
    x[0, :6] = torch.tensor([0.0, -0.0, 90.0, -90.0, 1e-30, -1e-30])
    a_ref = ref_gated(x, act)
    f = bqo.silu_and_mul_quant if act == "silu" else bqo.gelu_tanh_and_mul_quant
    q, s, z, a = f(x.to(DEV), symmetric=False, group_size=128, return_act=True)
    assert same(a, a_ref)
    check_quant(q, s, z, a_ref, False, 128)
    q, s, z = f(x.to(DEV), scale=0.5)
    assert same(q, ref_quantize(a_ref, torch.tensor(0.5, dtype=torch.float64), 0, -128, 127, torch.int8))


def test_fused_under_torch_compile():
    x, w = inputs(32, 4096, torch.bfloat16, seed=23)
    xd, wd = x.to(DEV), w.to(DEV)
    g = gen((32, 2 * 4096), torch.bfloat16, seed=25, specials=False).to(DEV)

    def block(x, w, g):
        q, s, _ = bqo.rms_norm_quant(x, w, 1e-6)
        q2, s2, _ = bqo.silu_and_mul_quant(g)
        return q, s, q2, s2
    want = block(xd, wd, g)
    got = torch.compile(block, fullgraph=True)(xd, wd, g)
    for a, b in zip(want, got):
        assert same(a, b)


def test_dlpack_front_end_matches_ops():
    from baracuda_quant import dlpack
    from test_gpu import _Producer
    x, w = inputs(16, 4096, torch.bfloat16, seed=27)
    r = gen((16, 4096), torch.bfloat16, seed=28, specials=False)
    xd, wd, rd, rd2 = x.to(DEV), w.to(DEV), r.to(DEV), r.to(DEV)
    torch.cuda.synchronize()
    q, s, z, n = dlpack.rms_norm_quant(_Producer(xd), _Producer(wd), 1e-6, residual=_Producer(rd), symmetric=False,
                                       group_size=128, return_normed=True)
    torch.cuda.synchronize()
    q2, s2, z2, n2 = bqo.rms_norm_quant(xd, wd, 1e-6, residual=rd2, symmetric=False, group_size=128,
                                        return_normed=True)
    for a, b in ((q, q2), (s, s2), (z, z2), (n, n2)):
        assert same(torch.from_dlpack(a), b)
    assert same(rd, rd2)  # the residual, updated in place through DLPack
    g = gen((16, 2 * 1024), torch.float16, seed=29, specials=False).to(DEV)
    torch.cuda.synchronize()
    q, s, _ = dlpack.gelu_tanh_and_mul_quant(_Producer(g))
    torch.cuda.synchronize()
    q2, s2, _ = bqo.gelu_tanh_and_mul_quant(g)
    assert same(torch.from_dlpack(q), q2) and same(torch.from_dlpack(s), s2)

"""GPU tests of fp8_linear and FP8QuantizedLinear (FP8 tensor cores: sm_89 and later).

The tensor cores' FP8 sums are not IEEE f32 sums, so the contract is a bound, not bits:
with acc the hardware's sum of x[m, k] w[n, k] and S[m, n] = sum_k |x[m, k] w[n, k]|,
|acc - exact| <= 2^-9 S, and y = Tout(((acc * sa) * sw) + bias), each step rounded to nearest
in f32 (the library's FP8 LINEAR LAYERS section). Against the exact result (f64 on the CPU,
from the same FP8 values), each element of y is then within

    B = e + u_T (|exact| + e) + eta_T,    e = 2^-9 S' + 2^-22 (S' + |bias|),  S' = S |sa| |sw|

(2^-22 covers the three f32 roundings of the epilogue, each at most 2^-24 relative to a value
at most (1 + 2^-9) S' + |bias|; u_T = eps_T / 2 is the output type's unit roundoff and eta_T =
tiny_T eps_T / 2 its subnormal spacing: the final rounding). torch._scaled_mm(x, w.t(), sa,
sb, bias, out_dtype) computes the same thing within its own such bound, so the two agree
within 2 B (plus the unit roundoff of any extra rounding its fallback takes). What is exact is
tested bit for bit: a row's result depends on that row alone (not on M, the tile, a row
stride or leading dimensions), rowwise scales that are all equal give the tensorwise bits,
and FP8QuantizedLinear is dynamic_per_token_quant followed by fp8_linear."""
import pytest

from conftest import cuda_available

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant as bq
    import baracuda_quant.ops as bqo

    SM89 = torch.cuda.get_device_capability() >= (8, 9)
    E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
else:
    SM89 = False

needs_sm89 = pytest.mark.skipif(not SM89, reason="FP8 tensor cores need sm_89 or later")
DEV = "cuda"
OUTS = ["float32", "float16", "bfloat16"]
SHAPES = [(m, n, k) for m in (1, 7, 130, 300) for n in (64, 200) for k in (32, 1000)]


def fp8(shape, dtype, seed, scale=8.0):
    """random FP8 values (finite: well inside either format's range)"""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def operands(m, n, k, rowwise, out, seed, xdtype=None, bias=True):
    """x [m, k], w [n, k], the scales (rowwise [m, 1] and [1, n], torch._scaled_mm's shapes;
    tensorwise a 0-d scale_a and a one-element scale_b) and the bias, on the host"""
    g = torch.Generator().manual_seed(seed + 1)
    x, w = fp8((m, k), xdtype or E4, seed), fp8((n, k), E4, seed + 2, scale=1.0)
    if rowwise:
        sa = torch.rand(m, 1, generator=g) * 0.1 + 0.01
        sb = torch.rand(1, n, generator=g) * 0.1 + 0.01
    else:
        sa, sb = torch.tensor(0.0371), torch.tensor([0.0593])
    b = (torch.randn(n, generator=g) * 4).to(out) if bias else None
    return x, w, sa, sb, b


def dev(*ts):
    return [None if t is None else t.to(DEV) for t in ts]


def exact_and_bound(x, w, sa, sb, b, out):
    """the exact result (f64) of the host operands, the bound B of the module docstring, and
    S' + |bias| (what bounds any intermediate value of the epilogue)"""
    x64, w64 = x.double(), w.double()
    s = sa.double().reshape(-1, 1) * sb.double().reshape(1, -1)  # [M or 1, 1] x [1, N or 1]
    mag = (x64.abs() @ w64.abs().t()) * s.abs()
    bias = torch.zeros(w.shape[0], dtype=torch.float64) if b is None else b.double()
    exact = (x64 @ w64.t()) * s + bias
    e = 2.0 ** -9 * mag + 2.0 ** -22 * (mag + bias.abs())
    fi = torch.finfo(out)
    return exact, e + fi.eps / 2 * (exact.abs() + e) + fi.tiny * fi.eps / 2, mag + bias.abs()


def check_within(y, exact, bound, what):
    err = (y.cpu().double() - exact).abs()
    bad = err > bound
    if bad.any():
        i = int((err / bound).argmax())
        pytest.fail("%s: %d of %d elements past the bound; the worst, flat index %d: y %r, exact %r, bound %.3g"
                    % (what, int(bad.sum()), err.numel(), i, float(y.cpu().double().view(-1)[i]),
                       float(exact.view(-1)[i]), float(bound.view(-1)[i])))


def bits(t):
    t = t.cpu()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


@needs_sm89
@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_within_the_bound(m, n, k, rowwise, out):
    out = getattr(torch, out)
    x, w, sa, sb, b = operands(m, n, k, rowwise, out, seed=m * 7 + n * 3 + k)
    y = bq.fp8_linear(*dev(x, w, sa, sb, b), out_dtype=out)
    assert y.shape == (m, n) and y.dtype == out and y.device.type == DEV
    exact, bound, _ = exact_and_bound(x, w, sa, sb, b, out)
    check_within(y, exact, bound, "fp8_linear against the exact result")


@needs_sm89
@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
def test_e5m2_activations_without_bias(rowwise, out):
    out = getattr(torch, out)
    x, w, sa, sb, b = operands(130, 200, 1000, rowwise, out, seed=5, xdtype=E5, bias=False)
    y = bqo.fp8_linear(*dev(x, w, sa, sb, b), out_dtype=out)
    exact, bound, _ = exact_and_bound(x, w, sa, sb, None, out)
    check_within(y, exact, bound, "e5m2 x e4m3")


def _pad(t, rows, cols, fill=0):
    """t [r, c] in the top-left corner of a [rows, cols] tensor of its dtype filled with fill
    (FP8 through byte views: zero bytes are +0)"""
    if t.dtype in (E4, E5):
        p = torch.zeros(rows, cols, dtype=torch.uint8, device=t.device)
        p[:t.shape[0], :t.shape[1]] = t.view(torch.uint8)
        return p.view(t.dtype)
    p = torch.full((rows, cols), fill, dtype=t.dtype, device=t.device)
    p[:t.shape[0], :t.shape[1]] = t
    return p


REFUSED = (RuntimeError, ValueError, NotImplementedError)  # how torch._scaled_mm refuses a call


def scaled_mm(x, w, sa, sb, b, out, rowwise):
    """torch._scaled_mm(x, w.t(), sa, sb, bias=b, out_dtype=out) on the device, the scales in
    its shapes (rowwise [M, 1] and [1, N], else 0-d): K and N padded to multiples of 16 with
    zeros (cuBLASLt's rule; zero products leave every sum as it was), sb with ones. Where
    torch refuses that call (a bias with a float32 output, rowwise scales with some output
    types, on some GPUs), its float32 or bfloat16 output without the bias has the bias added
    in f32 and rounded to out. Returns (y [M, N], the unit roundoff of the extra rounding
    taken, 0 if none), or None where torch takes none of these."""
    m, k = x.shape
    n = w.shape[0]
    kp, np_ = -(-k // 16) * 16, -(-n // 16) * 16
    xp, wp = _pad(x, m, kp), _pad(w, np_, kp)
    if rowwise:
        sap, sbp = sa.reshape(m, 1), _pad(sb.reshape(1, n), 1, np_, 1.0)
    else:
        sap, sbp = sa.reshape(()), sb.reshape(())
    bp = None if b is None else _pad(b.view(1, -1), 1, np_).view(-1)
    try:
        return torch._scaled_mm(xp, wp.t(), sap, sbp, bias=bp, out_dtype=out)[:, :n], 0.0
    except REFUSED:
        pass
    for mid in (torch.float32, torch.bfloat16):
        try:
            r = torch._scaled_mm(xp, wp.t(), sap, sbp, out_dtype=mid)[:, :n].float()
        except REFUSED:
            continue
        if b is not None:
            r = r + b.float()
        return r.to(out), torch.finfo(mid).eps / 2 if mid != torch.float32 else 0.0
    return None


@needs_sm89
@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_against_scaled_mm(m, n, k, rowwise, out):
    out = getattr(torch, out)
    x, w, sa, sb, b = operands(m, n, k, rowwise, out, seed=m * 5 + n + k * 11)
    xd, wd, sad, sbd, bd = dev(x, w, sa, sb, b)
    ref = scaled_mm(xd, wd, sad, sbd, bd, out, rowwise)
    if ref is None:
        pytest.skip("torch._scaled_mm takes no form of this call here (%s, %s)" % (
            "rowwise" if rowwise else "tensorwise", out))
    ref, u_ref = ref
    y = bq.fp8_linear(xd, wd, sad, sbd, bd, out_dtype=out)
    exact, bound, big = exact_and_bound(x, w, sa, sb, b, out)
    # each within B of the exact result, the fallback's extra rounding within u_ref of a value
    # at most (1 + 2^-9) S' + |bias|
    tol = 2 * bound + 1.01 * u_ref * big
    err = (y.cpu().double() - ref.cpu().double()).abs()
    assert (err <= tol).all(), "fp8_linear against torch._scaled_mm: worst err / tol %.3g (err / B against the " \
        "exact result: fp8_linear %.3g, torch._scaled_mm %.3g)" % (
            float((err / tol).max()), float(((y.cpu().double() - exact).abs() / bound).max()),
            float(((ref.cpu().double() - exact).abs() / bound).max()))


@needs_sm89
@pytest.mark.parametrize("out", OUTS)
def test_rows_depend_on_their_row_alone(out):
    """a row's result is the same bits whatever M, the tile it falls in, x's row stride and
    leading dimensions; rowwise scales all equal give the tensorwise bits"""
    out = getattr(torch, out)
    x, w, sa, sb, b = dev(*operands(300, 200, 1000, True, out, seed=9))
    y = bqo.fp8_linear(x, w, sa, sb, b, out)
    for lo, hi in ((0, 1), (0, 7), (129, 259), (250, 300)):
        assert same(bqo.fp8_linear(x[lo:hi].clone(), w, sa[lo:hi].clone(), sb, b, out), y[lo:hi])
    for ld in (1040, 1003):  # rows on the 16-byte grid, and not
        wide = torch.zeros(300, ld, dtype=torch.uint8, device=DEV)
        wide[:, :1000] = x.view(torch.uint8)
        xs = wide.view(E4)[:, :1000]  # read in place, rows ld apart
        assert xs.stride() == (ld, 1)
        assert same(bqo.fp8_linear(xs, w, sa, sb, b, out), y), ld
    y3 = bqo.fp8_linear(x.view(3, 100, 1000), w, sa, sb.view(-1), b, out)
    assert y3.shape == (3, 100, 200) and same(y3.view(300, 200), y)
    c, d = torch.tensor(0.0371, device=DEV), torch.tensor(0.0593, device=DEV)
    t = bqo.fp8_linear(x, w, c, d.view(1), b, out)
    r = bqo.fp8_linear(x, w, c.expand(300, 1).contiguous(), d.expand(1, 200).contiguous(), b, out)
    assert same(t, r)


def block_operands(m, n, k, out, seed):
    """x [m, k], w [n, k], blockwise scales sa [m, ceil(k / 128)] and sb [ceil(n / 128),
    ceil(k / 128)] (row-major), a bias, on the host"""
    g = torch.Generator().manual_seed(seed + 3)
    kb, nb = -(-k // 128), -(-n // 128)
    x, w = fp8((m, k), E4, seed), fp8((n, k), E4, seed + 2, scale=1.0)
    sa = torch.rand(m, kb, generator=g) * 0.1 + 0.01
    sb = torch.rand(nb, kb, generator=g) * 0.1 + 0.01
    return x, w, sa, sb, (torch.randn(n, generator=g) * 4).to(out)


def block_exact_and_bound(x, w, sa, sb, b, out):
    """blockwise: the exact sum over K blocks of s_b = f32(sa[m][b] sb[n / 128][b]) times the
    block's products (f64), and its bound: the tensor cores' 2^-9 and each block's f32 fma
    (2^-23 per block, relative to the scaled magnitudes) on S' = sum_b |s_b| S_b, then the
    bias's and the output's roundings"""
    m, k = x.shape
    n = w.shape[0]
    x64, w64 = x.double(), w.double()
    exact = torch.zeros(m, n, dtype=torch.float64)
    mag = torch.zeros(m, n, dtype=torch.float64)
    nrep = torch.arange(n) // 128
    for kb in range(-(-k // 128)):
        sl = slice(128 * kb, min(k, 128 * kb + 128))
        s = (sa[:, kb:kb + 1] * sb[nrep, kb].view(1, n)).double()  # f32 products, then widened
        exact += (x64[:, sl] @ w64[:, sl].t()) * s
        mag += (x64[:, sl].abs() @ w64[:, sl].abs().t()) * s.abs()
    bias = b.double()
    exact += bias
    e = (2.0 ** -9 + -(-k // 128) * 2.0 ** -23) * mag + 2.0 ** -22 * (mag + bias.abs())
    fi = torch.finfo(out)
    return exact, e + fi.eps / 2 * (exact.abs() + e) + fi.tiny * fi.eps / 2


@needs_sm89
@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("m,n,k", [(1, 64, 1000), (7, 200, 300), (130, 300, 1000), (300, 256, 4096)])
def test_blockwise(m, n, k, out):
    """blockwise scales within the bound; row-major and MN-major activation scales (torch's
    layout, rows padded to 4), w's block scales and their transpose view give the same bits;
    a row's bits do not depend on M"""
    out = getattr(torch, out)
    x, w, sa, sb, b = block_operands(m, n, k, out, seed=m + n + k)
    exact, bound = block_exact_and_bound(x, w, sa, sb, b, out)
    xd, wd, sad, sbd, bd = dev(x, w, sa, sb, b)
    y = bqo.fp8_linear(xd, wd, sad, sbd, bd, out)
    check_within(y, exact, bound, "blockwise fp8_linear against the exact result")
    mp = -(-m // 4) * 4
    mn = torch.zeros(sa.shape[1], mp, device=DEV)
    mn[:, :m] = sad.t()
    sa_mn = mn.t()[:m]  # [m, kb], strides (1, mp)
    assert sa_mn.stride() == (1, mp) or m == 1
    assert same(bqo.fp8_linear(xd, wd, sa_mn, sbd, bd, out), y)
    assert same(bqo.fp8_linear(xd, wd, sad, sbd.t(), bd, out), y)  # torch._scaled_mm's scale_b form
    if m > 1:
        assert same(bqo.fp8_linear(xd[m - 1:], wd, sad[m - 1:], sbd, bd, out), y[m - 1:])


@needs_sm89
@pytest.mark.parametrize("m,n,k", [(128, 256, 512), (256, 384, 1024)])
def test_blockwise_against_scaled_mm(m, n, k):
    """against torch's blockwise scaled GEMM (1 x 128 x 128 x 128; sm_90 cuBLASLt), where this
    torch and GPU take it: both within their bound of the exact result, so within 2 B"""
    out = torch.bfloat16
    x, w, sa, sb, b = block_operands(m, n, k, out, seed=m + k)
    xd, wd, sad, sbd, _ = dev(x, w, sa, sb, b)
    sa_t = sad.t().contiguous().t()  # outer-dim-major, as cuBLASLt reads it
    try:
        if hasattr(torch.nn.functional, "scaled_mm") and hasattr(torch.nn.functional, "ScalingType"):
            F = torch.nn.functional
            ref = F.scaled_mm(xd, wd.t(), sa_t, F.ScalingType.BlockWise1x128, sbd.t(), F.ScalingType.BlockWise128x128,
                              output_dtype=out)
        else:
            ref = torch._scaled_mm(xd, wd.t(), sa_t, sbd.t(), out_dtype=out)
    except REFUSED as e:
        pytest.skip("torch's blockwise scaled GEMM refuses this call here: %s" % str(e).splitlines()[0])
    y = bqo.fp8_linear(xd, wd, sa_t, sbd.t(), None, out)
    exact, bound = block_exact_and_bound(x, w, sa, sb, torch.zeros(n, dtype=out), out)
    check_within(y, exact, bound, "blockwise fp8_linear against the exact result")
    err = (y.cpu().double() - ref.cpu().double()).abs()
    assert (err <= 2 * bound).all(), "against torch: worst err / 2B %.3g (torch err / B %.3g)" % (
        float((err / (2 * bound)).max()), float(((ref.cpu().double() - exact).abs() / bound).max()))


@needs_sm89
def test_k0_writes_the_bias():
    x, w = torch.empty(5, 0, dtype=E4, device=DEV), torch.empty(64, 0, dtype=E4, device=DEV)
    b = torch.randn(64, device=DEV).to(torch.bfloat16)
    y = bqo.fp8_linear(x, w, torch.ones(5, device=DEV), torch.ones(64, device=DEV), b)
    assert same(y, b.expand(5, 64).contiguous())
    y = bqo.fp8_linear(x, w, torch.ones((), device=DEV), torch.ones((), device=DEV), out_dtype=torch.float32)
    assert same(y, torch.zeros(5, 64))
    assert bqo.fp8_linear(torch.empty(0, 32, dtype=E4, device=DEV), w.new_empty(64, 32), torch.ones(0, device=DEV),
                          torch.ones(64, device=DEV)).shape == (0, 64)


@needs_sm89
def test_eager_calls_keep_their_validated_call():
    """a repeated geometry reuses its validated call with new pointers (new scales included);
    torch.ops gives the same bits"""
    keep = [dev(*operands(33, 64, 96, True, torch.float16, seed=s)) for s in (40, 41)]
    y0 = bqo.fp8_linear(*keep[0], torch.float16)
    n = bqo.prepared_count()
    y1 = bqo.fp8_linear(*keep[1], torch.float16)
    assert bqo.prepared_count() == n
    for (x, w, sa, sb, b), y in zip(keep, (y0, y1)):
        exact, bound, _ = exact_and_bound(x.cpu(), w.cpu(), sa.cpu(), sb.cpu(), b.cpu(), torch.float16)
        check_within(y, exact, bound, "a kept call")
        assert same(torch.ops.baracuda_quant.fp8_linear(x, w, sa, sb, b, torch.float16, 1), y)
    bqo.fp8_linear(keep[0][0][:20], keep[0][1], keep[0][2][:20], keep[0][3], keep[0][4], torch.float16)
    assert bqo.prepared_count() == n + 1


@needs_sm89
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_module(dtype):
    """FP8QuantizedLinear: the weight and the activations quantized per token to E4M3 by
    dynamic_per_token_quant, then fp8_linear rowwise, bit for bit; against the float layer
    (f64 on the CPU) within 5e-2 of the output's largest magnitude (E4M3's 3-bit significands
    on both operands: about 3.5e-2 for these inputs)"""
    T = getattr(torch, dtype)
    g = torch.Generator().manual_seed(19)
    lin = torch.nn.Linear(256, 192).to(DEV, T)
    with torch.no_grad():
        lin.weight.copy_((torch.randn(192, 256, generator=g) * 0.05).to(T))
        lin.bias.copy_((torch.randn(192, generator=g) * 0.1).to(T))
    x = torch.randn(3, 40, 256, generator=g).to(T).to(DEV)
    mod = bqo.FP8QuantizedLinear.from_float(lin)
    qw, sw, _ = bqo.dynamic_per_token_quant(lin.weight.detach(), dtype=E4)
    assert same(mod.weight, qw) and same(mod.w_scales, sw.view(-1)) and same(mod.bias, lin.bias.detach())
    y = mod(x)
    assert y.shape == (3, 40, 192) and y.dtype == T
    qa, sa, _ = bqo.dynamic_per_token_quant(x, dtype=E4)
    assert same(y, bqo.fp8_linear(qa, mod.weight, sa, mod.w_scales, lin.bias.detach(), T))
    ref = torch.nn.functional.linear(x.cpu().double(), lin.weight.detach().cpu().double(),
                                     lin.bias.detach().cpu().double())
    err = (y.cpu().double() - ref).abs().max()
    assert err <= 5e-2 * ref.abs().max(), float(err / ref.abs().max())


@needs_sm89
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("m", [1, 16, 64, 65, 300])
def test_module_blockwise(m, dtype):
    """FP8QuantizedLinear blockwise: the weight per 128 x 128 block, x per 1 x 128 group, in
    one call: bit for bit dynamic_quant per group then fp8_linear blockwise; against the float
    layer within 5e-2 of the output's largest magnitude"""
    T = getattr(torch, dtype)
    g = torch.Generator().manual_seed(23 + m)
    lin = torch.nn.Linear(512, 320).to(DEV, T)
    with torch.no_grad():
        lin.weight.copy_((torch.randn(320, 512, generator=g) * 0.05).to(T))
        lin.bias.copy_((torch.randn(320, generator=g) * 0.1).to(T))
    x = torch.randn(m, 512, generator=g).to(T).to(DEV)
    mod = bqo.FP8QuantizedLinear.from_float(lin, blockwise=True)
    qw, sw, _ = bqo.dynamic_quant(lin.weight.detach(), "block", block_size=128, dtype=E4)
    assert same(mod.weight, qw) and same(mod.w_scales, sw) and mod.w_scales.shape == (3, 4)
    y = mod(x)
    qa, sa, _ = bqo.dynamic_quant(x, "group", group_size=128, dtype=E4)
    assert same(y, bqo.fp8_linear(qa, mod.weight, sa, mod.w_scales, lin.bias.detach(), T))
    assert same(y, bqo.fp8_quantized_linear(x, mod.weight, mod.w_scales, lin.bias.detach()))
    ref = torch.nn.functional.linear(x.cpu().double(), lin.weight.detach().cpu().double(),
                                     lin.bias.detach().cpu().double())
    err = (y.cpu().double() - ref).abs().max()
    assert err <= 5e-2 * ref.abs().max(), float(err / ref.abs().max())


@needs_sm89
def test_quantized_linear_per_token_function():
    """fp8_quantized_linear per channel: dynamic_per_token_quant then fp8_linear rowwise, bit for
    bit, e5m2 activations too; strided x read in place"""
    g = torch.Generator().manual_seed(31)
    base = torch.randn(40, 300, generator=g).to(torch.bfloat16).to(DEV)
    x = base[:, :256]
    w = fp8((192, 256), E4, 5, scale=1.0).to(DEV)
    sb = (torch.rand(192, generator=g) * 0.01 + 0.001).to(DEV)
    b = torch.randn(192, generator=g).to(torch.bfloat16).to(DEV)
    for act in (E4, E5):
        y = bqo.fp8_quantized_linear(x, w, sb, b, act_dtype=act)
        q, s, _ = bqo.dynamic_per_token_quant(x.contiguous(), dtype=act)
        assert same(y, bqo.fp8_linear(q, w, s, sb, b, torch.bfloat16)), act


@pytest.mark.skipif(not cuda_available() or SM89, reason="a device before sm_89 is needed")
def test_older_devices_are_refused():
    x, w = torch.zeros(4, 32, dtype=E4, device=DEV), torch.zeros(64, 32, dtype=E4, device=DEV)
    with pytest.raises(bq.NotSupportedError):
        bqo.fp8_linear(x, w, torch.ones((), device=DEV), torch.ones((), device=DEV))

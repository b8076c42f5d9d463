"""GPU tests of the torch ops: bit for bit against the numerics contract (docs/numerics.md)
written in torch ops on the CPU, and against PyTorch's own ops where they exist. Where
PyTorch differs (it multiplies by a float reciprocal), every differing element must be one
level apart at a rounding tie or a documented special value; the counts are printed."""
import math

import pytest

from conftest import TensorProducer, cuda_available

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant as bq
    import baracuda_quant.ops as bqo

FLOATS = ["float32", "float64", "float16", "bfloat16"]
DEV = "cuda"


def dt(name):
    return getattr(torch, name)


def C(t):
    return torch.float64 if t == torch.float64 else torch.float32


def gen(shape, dtype, seed=0, specials=True, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * 3 * scale)
    flat = x.view(-1)
    n = flat.numel()
    # rounding ties of the scales used below, and range ends
    idx = torch.randperm(n, generator=g)[: n // 8]
    flat[idx] = (torch.randint(-300, 300, (idx.numel(),), generator=g).double() + 0.5) * 0.05 * scale
    x = x.to(dtype)
    if specials and n >= 8:
        f = x.view(-1)
        f[0], f[1], f[2], f[3] = float("nan"), float("inf"), -float("inf"), -0.0
        f[4], f[5] = 1e30 if dtype != torch.float16 else 6e4, -1e30 if dtype != torch.float16 else -6e4
    return x


# ---- the contract, in torch on the CPU ---------------------------------------------------------
def ref_quantize(x, s, zp, qmin, qmax, out_dtype):
    """q = sat(rne(C(x) / C(s)) + zp, qmin, qmax), NaN -> zp (zero point added after rounding)."""
    c = C(x.dtype)
    v = torch.round(x.cpu().to(c) / s.cpu().to(c))
    zpd = zp.cpu().double() if isinstance(zp, torch.Tensor) else torch.tensor(float(zp), dtype=torch.float64)
    q = torch.where(torch.isnan(v), zpd, v.double() + zpd)
    return q.clamp(qmin, qmax).to(out_dtype)


def ref_dequantize(q, s, zp, out_dtype):
    c = C(out_dtype)
    zp64 = zp.cpu().long() if isinstance(zp, torch.Tensor) else zp
    return ((q.cpu().long() - zp64).to(c) * s.cpu().to(c)).to(out_dtype)


def ref_mask(x, s, zp, qmin, qmax):
    c = C(x.dtype)
    v = torch.round(x.cpu().to(c) / s.cpu().to(c)).double() + (zp.cpu().double() if isinstance(zp, torch.Tensor)
                                                                else zp)
    return (v >= qmin) & (v <= qmax) & ~torch.isnan(v)


def tie(x, s):
    """x / s (computed our way) within 1 ulp of k + 0.5."""
    c = C(x.dtype)
    v = x.cpu().to(c) / s.cpu().to(c)
    t = torch.floor(v) + 0.5
    ulp = torch.nextafter(t.abs(), torch.full_like(t, math.inf)) - t.abs()
    return (v - t).abs() <= ulp


def same(a, b):
    a, b = a.cpu(), b.cpu()
    if a.dtype.is_floating_point:
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all()) and \
            bool((torch.signbit(a) == torch.signbit(b))[~torch.isnan(a)].all())
    return torch.equal(a, b)


def explain_q(label, ours, theirs, x, s):
    """Differences between two integer results: each one level at a tie, or x NaN."""
    ours, theirs = ours.cpu().long(), theirs.cpu().long()
    d = ours != theirs
    n = int(d.sum())
    ties = tie(x, s) & ((ours - theirs).abs() == 1)
    nan = torch.isnan(x.cpu())
    bad = d & ~ties & ~nan
    print("%s: %d of %d differ (%d at ties, %d NaN inputs), %d unexplained" % (
        label, n, d.numel(), int((d & ties).sum()), int((d & nan).sum()), int(bad.sum())))
    assert not bad.any(), "%s: unexplained differences at %s" % (label, bad.nonzero()[:8].tolist())


# ---- quantize / dequantize against the contract ------------------------------------------------
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("itype,qmin,qmax", [("int8", -128, 127), ("uint8", 0, 255), ("int8", -7, 7),
                                             ("uint8", 3, 200)])
def test_per_tensor_contract(fname, itype, qmin, qmax):
    x = gen((37, 129), dt(fname))
    s, zp = 0.05, (3 if itype == "int8" else 100)
    q = bqo.quantize_per_tensor(x.to(DEV), s, zp, dt(itype), qmin, qmax)
    assert q.dtype == dt(itype) and q.shape == x.shape
    r = ref_quantize(x, torch.tensor(s, dtype=torch.float64), zp, qmin, qmax, dt(itype))
    assert same(q, r)
    y = bqo.dequantize(q, s, zp, out_dtype=dt(fname))
    assert same(y, ref_dequantize(r, torch.tensor(s, dtype=torch.float64), zp, dt(fname)))


@pytest.mark.parametrize("fname", ["float32", "bfloat16"])
def test_per_channel_token_group_contract(fname):
    T = dt(fname)
    x = gen((6, 10, 32), T, seed=1)
    # per channel along axis 1, f32 scales, zero points
    sc = (torch.rand(10, generator=torch.Generator().manual_seed(2)) * 0.1 + 0.01).float()
    zc = torch.arange(-5, 5, dtype=torch.int32)
    q = bqo.quantize_per_channel(x.to(DEV), sc.to(DEV), zc.to(DEV), 1, torch.int8)
    r = ref_quantize(x, sc.view(1, 10, 1), zc.view(1, 10, 1), -128, 127, torch.int8)
    assert same(q, r)
    assert same(bqo.dequantize(q, sc.to(DEV), zc.to(DEV), axis=1, out_dtype=T),
                ref_dequantize(r, sc.view(1, 10, 1), zc.view(1, 10, 1), T))
    # per token over x.view(-1, 32), scales in the data's type
    st = (torch.rand(60, generator=torch.Generator().manual_seed(3)) * 0.1 + 0.01).to(T)
    q = bqo.quantize_per_token(x.to(DEV), st.to(DEV), None, torch.uint8, 0, 255)
    r = ref_quantize(x.view(60, 32), st.view(60, 1), 0, 0, 255, torch.uint8).view(x.shape)
    assert same(q, r)
    assert same(bqo.dequantize(q, st.to(DEV), out_dtype=T), ref_dequantize(r.view(60, 32), st.view(60, 1), 0,
                                                                            T).view(x.shape))
    # per group of 8
    sg = (torch.rand(60, 4, generator=torch.Generator().manual_seed(4)) * 0.1 + 0.01).float()
    zg = torch.randint(-20, 20, (60, 4), generator=torch.Generator().manual_seed(5), dtype=torch.int32)
    q = bqo.quantize_per_group(x.to(DEV), sg.to(DEV), zg.to(DEV), 8, torch.int8)
    se, ze = sg.repeat_interleave(8, 1), zg.repeat_interleave(8, 1)
    r = ref_quantize(x.view(60, 32), se, ze, -128, 127, torch.int8).view(x.shape)
    assert same(q, r)
    assert same(bqo.dequantize(q, sg.to(DEV), zg.to(DEV), group_size=8, out_dtype=T),
                ref_dequantize(r.view(60, 32), se, ze, T).view(x.shape))


@pytest.mark.parametrize("fname", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("shape,axis,routed", [
    ((24, 1040), 0, True), ((12, 4, 300), 0, True), ((1, 9, 1100), 1, True), ((1, 1, 6, 1024), -2, True),
    ((24, 40), 0, False), ((24, 40), 1, False), ((5, 12, 1100), 1, False), ((24, 1040), -1, False)])
def test_per_channel_every_layout(fname, shape, axis, routed):
    """Per channel along the outermost non-unit axis, rows of 1024 or more, runs the
    per-token kernels (the same contract); other layouts the per-channel ones: both bit for
    bit, and the route taken is the one expected."""
    T = dt(fname)
    x = gen(shape, T, seed=7)
    c = shape[axis]
    view = [1] * len(shape)
    view[axis] = c
    g = torch.Generator().manual_seed(8)
    sc = (torch.rand(c, generator=g) * 0.1 + 0.01).float()
    zc = torch.randint(-6, 6, (c,), generator=g, dtype=torch.int32)
    bqo._prepared.clear()
    q = bqo.quantize_per_channel(x.to(DEV), sc.to(DEV), zc.to(DEV), axis, torch.int8)
    grans = {k[3] for k in bqo._prepared if k[0] == "affine"}
    assert grans == {bqo.Granularity.PER_TOKEN if routed else bqo.Granularity.PER_CHANNEL}
    r = ref_quantize(x, sc.view(view), zc.view(view), -128, 127, torch.int8)
    assert same(q, r)
    assert same(bqo.dequantize(q, sc.to(DEV), zc.to(DEV), axis=axis, out_dtype=T),
                ref_dequantize(r, sc.view(view), zc.view(view), T))
    qs = bqo.quantize_per_channel(x.to(DEV), sc.to(DEV), None, axis, torch.uint8, 0, 200)
    assert same(qs, ref_quantize(x, sc.view(view), 0, 0, 200, torch.uint8))


def test_per_token_row_strides():
    base = gen((64, 96), torch.float16, seed=6).to(DEV)
    x = base[:, :80]  # rows 96 apart: passed as a row stride, no copy
    s = torch.full((64,), 0.05, device=DEV)
    q = bqo.quantize_per_token(x, s, None, torch.int8)
    assert same(q, bqo.quantize_per_token(x.contiguous(), s, None, torch.int8))
    qt = bqo.quantize_per_tensor(x.t(), 0.05, 0)  # non-contiguous: copied
    assert same(qt, bqo.quantize_per_tensor(x.t().contiguous(), 0.05, 0))


def test_broadcast_inputs_are_copied_outputs_refused():
    """A broadcast input (expand: a zero row stride, which the library reads as dense) is
    copied before the call and gives the bits of its contiguous copy; rows that overlap are
    copied too. A broadcast tensor the op writes (rms_norm_quant's residual) is refused."""
    row = gen((1, 4096), torch.bfloat16, seed=9).to(DEV)
    x = row.expand(64, 4096)
    s = torch.full((64,), 0.05, device=DEV)
    assert same(bqo.quantize_per_token(x, s, None, torch.int8), bqo.quantize_per_token(x.contiguous(), s, None,
                                                                                        torch.int8))
    q, sc, _ = bqo.dynamic_per_token_quant(x)
    q2, sc2, _ = bqo.dynamic_per_token_quant(x.contiguous())
    assert same(q, q2) and same(sc, sc2)
    flat = gen((4096 + 63 * 8,), torch.float16, seed=10).to(DEV)
    over = flat.as_strided((64, 4096), (8, 1))  # rows 8 apart: they overlap
    s16 = torch.full((64,), 0.05, device=DEV)
    assert same(bqo.quantize_per_token(over, s16, None, torch.int8),
                bqo.quantize_per_token(over.contiguous(), s16, None, torch.int8))
    w = torch.ones(4096, dtype=torch.bfloat16, device=DEV)
    xr = gen((64, 4096), torch.bfloat16, seed=11).to(DEV)
    with pytest.raises(bqo._lib.InvalidArgumentError, match="residual"):
        bqo.rms_norm_quant(xr, w, 1e-6, residual=row.expand(64, 4096))


# ---- against PyTorch's quantize ops ------------------------------------------------------------
@pytest.mark.parametrize("itype,qt", [("int8", "qint8"), ("uint8", "quint8")])
def test_against_torch_quantize(itype, qt):
    x = gen((64, 256), torch.float32, seed=7, specials=False)
    s, zp = 0.05, (0 if itype == "int8" else 128)
    ours = bqo.quantize_per_tensor(x.to(DEV), s, zp, dt(itype))
    for dev in ("cpu", DEV):
        theirs = torch.quantize_per_tensor(x.to(dev), s, zp, getattr(torch, qt)).int_repr()
        explain_q("quantize_per_tensor %s vs torch (%s)" % (itype, dev), ours, theirs, x,
                  torch.tensor(s, dtype=torch.float32))
    sc = (torch.rand(64, generator=torch.Generator().manual_seed(8)) * 0.1 + 0.01).float()
    zc = torch.randint(0, 10, (64,), generator=torch.Generator().manual_seed(9), dtype=torch.int32)
    ours = bqo.quantize_per_channel(x.to(DEV), sc.to(DEV), zc.to(DEV), 0, dt(itype))
    theirs = torch.quantize_per_channel(x, sc.double(), zc.long(), 0, getattr(torch, qt)).int_repr()
    explain_q("quantize_per_channel %s vs torch" % itype, ours, theirs, x, sc.view(64, 1))


@pytest.mark.parametrize("fname", ["float32", "float16", "bfloat16"])
def test_fake_quantize_against_torch(fname):
    T = dt(fname)
    x = gen((128, 96), T, seed=10, specials=False).to(DEV).requires_grad_()
    s, zp, qmin, qmax = 0.05, 2, -128, 127
    ours = bqo.fake_quantize_per_tensor_affine(x, s, zp, qmin, qmax)
    # the contract, bit for bit
    r = ref_quantize(x.detach(), torch.tensor(s, dtype=torch.float64), zp, qmin, qmax, torch.int32)
    assert same(ours.detach(), ref_dequantize(r, torch.tensor(s, dtype=torch.float64), zp, T))
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(11)).to(T).to(DEV)
    (gx,) = torch.autograd.grad(ours, x, dy)
    m = ref_mask(x.detach(), torch.tensor(s, dtype=torch.float64), zp, qmin, qmax)
    assert same(gx, torch.where(m, dy.cpu(), torch.zeros_like(dy.cpu())))
    # PyTorch's own op: forward and backward through autograd
    x2 = x.detach().clone().requires_grad_()
    try:
        theirs = torch.fake_quantize_per_tensor_affine(x2, s, zp, qmin, qmax)
        (gt,) = torch.autograd.grad(theirs, x2, dy)
    except (RuntimeError, NotImplementedError) as e:  # the contract checks above ran
        pytest.skip("PyTorch's fake_quantize_per_tensor_affine refuses %s: %s" % (fname, str(e).splitlines()[0]))
    sf = torch.tensor(s, dtype=torch.float32)
    q_ours = torch.round(ours.detach().cpu().double() / s).long()
    q_theirs = torch.round(theirs.detach().cpu().double() / s).long()
    explain_q("fake_quantize_per_tensor %s forward vs torch" % fname, q_ours, q_theirs, x.detach(), sf)
    eq = q_ours == q_theirs  # the same level: the same bits
    assert same(ours.detach().cpu()[eq], theirs.detach().cpu()[eq])
    explain_q("fake_quantize_per_tensor %s backward vs torch" % fname, (gx != 0).long(), (gt != 0).long(),
              x.detach(), sf)
    both = ((gx != 0) & (gt != 0)).cpu()
    assert same(gx.cpu()[both], gt.cpu()[both])
    # scale and zero point as one-element tensors: the same bits
    st, zt = torch.tensor([s], device=DEV), torch.tensor([zp], dtype=torch.int32, device=DEV)
    assert same(bqo.fake_quantize_per_tensor_affine(x, st, zt, qmin, qmax), ours)


@pytest.mark.parametrize("fname", ["float32", "float64", "float16", "bfloat16"])
def test_fake_quantize_mask_matches_x_backward(fname):
    """The saved mask (a bit an element) gives the backward pass computed from x, bit for bit:
    odd sizes (a partial last word), a view off the 16-byte grid, specials, per channel with
    runs of one channel that are not whole accesses; the mask's unused bits are 0."""
    T = dt(fname)
    d = torch.ops.baracuda_quant
    for n, off in ((1, 0), (31, 0), (4097, 0), (1000003, 0), (70001, 1), (4096, 3)):
        base = gen((n + off,), T, seed=20 + n, specials=True).to(DEV)
        x = base[off:]
        dy = gen((n,), T, seed=30 + n, specials=True).to(DEV)
        y, m = d.fake_quantize_per_tensor_mask(x, 0.05, 3, -128, 127)
        assert same(y, d.fake_quantize_per_tensor(x, 0.05, 3, -128, 127))
        r = ref_mask(x.cpu(), torch.tensor(0.05, dtype=torch.float64), 3, -128, 127).reshape(-1)
        bits = torch.zeros(m.numel() * 32, dtype=torch.bool)
        bits[:n] = r
        words = (bits.view(-1, 32).long() << torch.arange(32)).sum(1)
        assert torch.equal(m.cpu().long() & 0xffffffff, words), "mask words, n=%d off=%d" % (n, off)
        assert same(d.fake_quantize_per_tensor_mask_backward(dy, m, 0.05, 3, -128, 127),
                    d.fake_quantize_per_tensor_backward(dy, x, 0.05, 3, -128, 127))
        rows = 7 if n >= 7 else 1
        xc, dyc = x[:n - n % rows].view(rows, -1), dy[:n - n % rows].view(rows, -1)
        sc = (torch.rand(rows, generator=torch.Generator().manual_seed(n)) * 0.1 + 0.01).float().to(DEV)
        zc = torch.randint(0, 255, (rows,), generator=torch.Generator().manual_seed(n + 1), dtype=torch.int32).to(DEV)
        y, m = d.fake_quantize_per_channel_mask(xc, sc, zc, 0, 0, 255)
        assert same(y, d.fake_quantize_per_channel(xc, sc, zc, 0, 0, 255))
        assert same(d.fake_quantize_per_channel_mask_backward(dyc, m, sc, zc, 0, 0, 255),
                    d.fake_quantize_per_channel_backward(dyc, xc, sc, zc, 0, 0, 255))


@pytest.mark.parametrize("fname", ["float32", "float16"])
def test_fake_quantize_per_channel_against_torch(fname):
    T = dt(fname)
    x = gen((16, 40, 24), T, seed=12, specials=False).to(DEV).requires_grad_()
    sc = (torch.rand(40, generator=torch.Generator().manual_seed(13)) * 0.1 + 0.01).float().to(DEV)
    zc = torch.randint(0, 255, (40,), generator=torch.Generator().manual_seed(14), dtype=torch.int32).to(DEV)
    ours = bqo.fake_quantize_per_channel_affine(x, sc, zc, 1, 0, 255)
    r = ref_quantize(x.detach(), sc.view(1, 40, 1), zc.view(1, 40, 1), 0, 255, torch.int32)
    assert same(ours.detach(), ref_dequantize(r, sc.view(1, 40, 1), zc.view(1, 40, 1), T))
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(15)).to(T).to(DEV)
    (gx,) = torch.autograd.grad(ours, x, dy)
    m = ref_mask(x.detach(), sc.view(1, 40, 1), zc.view(1, 40, 1), 0, 255)
    assert same(gx, torch.where(m, dy.cpu(), torch.zeros_like(dy.cpu())))
    x2 = x.detach().clone().requires_grad_()
    try:
        theirs = torch.fake_quantize_per_channel_affine(x2, sc, zc, 1, 0, 255)
        (gt,) = torch.autograd.grad(theirs, x2, dy)
    except (RuntimeError, NotImplementedError) as e:  # the contract checks above ran
        pytest.skip("PyTorch's fake_quantize_per_channel_affine refuses %s: %s" % (fname, str(e).splitlines()[0]))
    s3 = sc.view(1, 40, 1).cpu()
    q_ours = torch.round(ours.detach().cpu().double() / s3.double()).long()
    q_theirs = torch.round(theirs.detach().cpu().double() / s3.double()).long()
    explain_q("fake_quantize_per_channel %s forward vs torch" % fname, q_ours, q_theirs, x.detach(),
              s3.expand(x.shape))
    eq = q_ours == q_theirs
    assert same(ours.detach().cpu()[eq], theirs.detach().cpu()[eq])
    explain_q("fake_quantize_per_channel %s backward vs torch" % fname, (gx != 0).long(), (gt != 0).long(),
              x.detach(), s3.expand(x.shape))


# ---- dynamic quantize (vLLM's scaled_int8_quant) ----------------------------------------------
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("symmetric", [True, False])
def test_dynamic_per_token(fname, symmetric):
    T = dt(fname)
    x = gen((33, 200), T, seed=16, specials=False)
    x[3] = 0  # an all-zero row: scale 1
    x[5, 7] = float("nan")  # ignored by the scale
    q, s, z = bqo.dynamic_per_token_quant(x.to(DEV), symmetric=symmetric)
    assert q.shape == x.shape and s.shape == (33, 1) and s.dtype == torch.float32
    c = C(T)
    xv = x.to(c)
    fin = torch.where(torch.isnan(xv), torch.zeros_like(xv), xv)
    if symmetric:
        assert z is None
        rs = (fin.abs().amax(1) / 127).float()
        rs = torch.where(rs == 0, torch.ones_like(rs), rs)
        rz = torch.zeros(33, dtype=torch.int32)
    else:
        hi, lo = fin.amax(1).clamp(min=0), fin.amin(1).clamp(max=0)
        rs = ((hi - lo) / 255).float()
        rs = torch.where(rs == 0, torch.ones_like(rs), rs)
        rz = (-128 - torch.round(lo / rs.to(c))).clamp(-128, 127).to(torch.int32)
        assert same(z.view(-1), rz)
    assert same(s.view(-1), rs)
    assert same(q, ref_quantize(x, rs.view(33, 1), rz.view(33, 1), -128, 127, torch.int8))


def test_dynamic_static_scale_and_strides():
    base = gen((20, 160), torch.bfloat16, seed=17, specials=False).to(DEV)
    x = base[:, :128]
    sc = torch.tensor([0.03], device=DEV)
    q, s, z = bqo.dynamic_per_token_quant(x, scale=sc)
    assert s is sc and z is None
    assert same(q, ref_quantize(x.cpu(), torch.tensor(0.03, dtype=torch.float32), 0, -128, 127, torch.int8))
    azp = torch.tensor([5], dtype=torch.int32, device=DEV)
    q, _, z = bqo.dynamic_per_token_quant(x, symmetric=False, scale=sc, azp=azp)
    assert z is azp
    assert same(q, ref_quantize(x.cpu(), torch.tensor(0.03, dtype=torch.float32), 5, -128, 127, torch.int8))
    q1, s1, _ = bqo.dynamic_per_token_quant(x)
    q2, s2, _ = bqo.dynamic_per_token_quant(x.contiguous())
    assert same(q1, q2) and same(s1, s2)


# ---- linear layers -------------------------------------------------------------------------------
def ref_epilogue(acc, sa, sw, bias, out_dtype):
    c = C(out_dtype)
    y = (acc.cpu().to(c) * sa.cpu().to(c).view(-1, 1)) * sw.cpu().to(c).view(1, -1)
    if bias is not None:
        y = y + bias.cpu().to(c).view(1, -1)
    return y.to(out_dtype)


@pytest.mark.parametrize("m", [1, 24, 300])
def test_int8_linear_against_int_mm(m):
    g = torch.Generator().manual_seed(18)
    k, n = 512, 384
    a = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int8).to(DEV)
    w = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8).to(DEV)
    sa = (torch.rand(m, generator=g) * 0.01 + 1e-3).to(DEV)
    sw = (torch.rand(n, generator=g) * 0.01 + 1e-3).to(DEV)
    bias = torch.randn(n, generator=g).half().to(DEV)
    y = bqo.int8_linear(a, w, sa, sw, bias, out_dtype=torch.float16)
    if m > 16:
        acc = torch._int_mm(a, w.t())
    else:
        acc = a.cpu().long() @ w.cpu().long().t()
    assert same(y, ref_epilogue(acc, sa, sw, bias, torch.float16))
    # per tensor: a one-element a_scales
    y1 = bqo.int8_linear(a, w, sa[:1].clone(), sw, None, out_dtype=torch.float16)
    assert same(y1, ref_epilogue(acc, sa[:1].expand(m), sw, None, torch.float16))


def test_quantized_linear_and_module():
    g = torch.Generator().manual_seed(19)
    lin = torch.nn.Linear(256, 192, bias=True).to(DEV).half()
    x = torch.randn(3, 40, 256, generator=g).half().to(DEV)
    mod = bqo.QuantizedLinear.from_float(lin)
    qw, sw, _ = bqo.dynamic_per_token_quant(lin.weight.detach())
    assert same(mod.weight, qw) and same(mod.w_scales, sw.view(-1))
    y = mod(x)
    assert y.shape == (3, 40, 192) and y.dtype == torch.float16
    # the same as quantizing the activations per token, then the int8 GEMM
    qa, sa, _ = bqo.dynamic_per_token_quant(x)
    acc = torch._int_mm(qa.view(120, 256), mod.weight.t())
    assert same(y.view(120, 192), ref_epilogue(acc, sa.view(-1), mod.w_scales, lin.bias.detach(), torch.float16))
    assert same(bqo.quantized_linear(x, mod.weight, mod.w_scales, lin.bias.detach()), y)


# ---- the eager fast path: direct calls and validated calls kept per geometry ------------------------
def test_direct_path_and_prepared_calls():
    """Eager calls skip torch.ops and reuse the validated call of their geometry with new
    pointers (and a new per-tensor scale): inputs of one geometry, all alive at once so
    every pointer differs, each give their own reference; torch.ops gives the same bits; only
    a new geometry adds a kept call; a gradient to record takes torch.ops."""
    x1, x2 = gen((33, 96), torch.float32, seed=30), gen((33, 96), torch.float32, seed=31)
    x1d, x2d = x1.to(DEV), x2.to(DEV)
    assert x1d.data_ptr() != x2d.data_ptr()
    assert bqo._ops(x1d) is bqo._IMPL
    assert bqo._ops(x1d.clone().requires_grad_()) is torch.ops.baracuda_quant
    with torch.no_grad():
        assert bqo._ops(x1d.clone().requires_grad_()) is bqo._IMPL
    q1 = bqo.quantize_per_tensor(x1d, 0.05, 2)
    n = bqo.prepared_count()
    q2 = bqo.quantize_per_tensor(x2d, 0.05, 2)
    q3 = bqo.quantize_per_tensor(x2d, 0.07, -1)  # another scale and zero point: the same kept call
    assert bqo.prepared_count() == n
    for q, x, s, z in ((q1, x1, 0.05, 2), (q2, x2, 0.05, 2), (q3, x2, 0.07, -1)):
        assert same(q, ref_quantize(x, torch.tensor(s, dtype=torch.float64), z, -128, 127, torch.int8))
    assert same(torch.ops.baracuda_quant.quantize_per_tensor(x2d, 0.05, 2, torch.int8, -128, 127), q2)
    with pytest.raises(bqo._lib.InvalidArgumentError, match="scale"):
        bqo.quantize_per_tensor(x2d, float("nan"), 0)  # the library checks the scale on every run
    q4 = bqo.quantize_per_tensor(x2d[:20], 0.05, 2)
    assert bqo.prepared_count() == n + 1
    assert same(q4, ref_quantize(x2[:20], torch.tensor(0.05, dtype=torch.float64), 2, -128, 127, torch.int8))
    # per token with zero points, dynamic and the GEMM: inputs of one geometry, kept alive
    keep = []
    for seed in (32, 33):
        g = torch.Generator().manual_seed(seed)
        x = gen((24, 64), torch.float16, seed=seed)
        sc = torch.rand(24, generator=g) * 0.05 + 0.01
        zp = torch.randint(-4, 4, (24,), generator=g, dtype=torch.int32)
        a = torch.randint(-128, 128, (24, 64), generator=g, dtype=torch.int8)
        w = torch.randint(-128, 128, (40, 64), generator=g, dtype=torch.int8)
        sw = torch.rand(40, generator=g) * 0.05 + 0.01
        dev = [t.to(DEV) for t in (x, sc, zp, a, w, sw)]
        keep.append(dev)
        xd, scd, zpd, ad, wd, swd = dev
        q = bqo.quantize_per_token(xd, scd, zpd)
        assert same(q, ref_quantize(x, sc.view(-1, 1), zp.view(-1, 1), -128, 127, torch.int8))
        qd, sd, _ = bqo.dynamic_per_token_quant(xd)
        qo, so, _ = torch.ops.baracuda_quant.dynamic_per_token_quant(xd, True, torch.int8, -128, 127)
        assert same(qd, qo) and same(sd, so)
        y = bqo.int8_linear(ad, wd, scd, swd)
        assert same(y, ref_epilogue(a.long() @ w.long().t(), sc, sw, None, torch.float16))
    for i in range(6):
        assert keep[0][i].data_ptr() != keep[1][i].data_ptr()


def test_fast_path_kept_calls():
    """The small ops' fast path: the first call of a geometry fills bqo._fast, later calls of
    that geometry take it with their own pointers, scales and zero points, and give the
    general path's bits; what it does not take (an int scale, a zero point past int32, a
    gradient to record, a strided input) still works through the general path."""
    bqo._fast.clear()
    xs = [gen((16, 256), torch.bfloat16, seed=40 + i).to(DEV) for i in range(3)]
    scs = [(torch.rand(16, generator=torch.Generator().manual_seed(50 + i)) * 0.05 + 0.01).to(DEV)
           for i in range(3)]
    outs = []
    for i, (x, sc) in enumerate(zip(xs, scs)):
        s, z = 0.03 + 0.01 * i, i - 1
        q = bqo.quantize_per_tensor(x, s, z)
        d = bqo.dequantize(q, s, z, out_dtype=torch.bfloat16)
        qt = bqo.quantize_per_token(x, sc)
        qd, sd, zd = bqo.dynamic_per_token_quant(x)
        outs.append((q, d, qt, qd, sd))
        assert zd is None
        general = (torch.ops.baracuda_quant.quantize_per_tensor(x, s, z, torch.int8, -128, 127),
                   torch.ops.baracuda_quant.dequantize_per_tensor(q, s, z, torch.bfloat16),
                   torch.ops.baracuda_quant.quantize_per_token(x, sc, None, torch.int8, -128, 127),
                   *torch.ops.baracuda_quant.dynamic_per_token_quant(x, True, torch.int8, -128, 127)[:2])
        for got, want in zip(outs[-1], general):
            assert same(got, want)
        assert same(q, ref_quantize(x.cpu(), torch.tensor(s, dtype=torch.float64), z, -128, 127, torch.int8))
    assert {k[0] for k in bqo._fast} == {"qpt", "dqpt", "qtok", "dtok"}
    # one geometry each; with the C extension quantize_per_tensor's also under the op's own
    # arguments (the torch.ops calls), which only the extension's builtin looks up
    assert len(bqo._fast) == (5 if bqo._fastc is not None else 4)
    n = len(bqo._fast)
    x = xs[0]
    q_int = bqo.quantize_per_tensor(x, 1, 0)  # an int scale: the general path, the same bits as 1.0
    assert same(q_int, bqo.quantize_per_tensor(x, 1.0, 0))
    with pytest.raises(bqo._lib.InvalidArgumentError, match="zero_point"):
        bqo.quantize_per_tensor(x, 0.05, 2**31)
    with pytest.raises(bqo._lib.InvalidArgumentError, match="scale"):
        bqo.quantize_per_tensor(x, float("inf"), 0)  # checked by the library on the fast path too
    xt = gen((256, 16), torch.bfloat16, seed=60).to(DEV).t()  # strided: never kept
    assert same(bqo.quantize_per_tensor(xt, 0.05, 0), bqo.quantize_per_tensor(xt.contiguous(), 0.05, 0))
    assert len(bqo._fast) == n  # the strided input is never kept (its contiguous copy's geometry was)
    xg = xs[1].float().requires_grad_()
    assert same(bqo.quantize_per_tensor(xg, 0.05, 0), bqo.quantize_per_tensor(xs[1].float(), 0.05, 0))
    # the fused producers' per-token form (the residual updated in place on both paths)
    w = gen((256,), torch.bfloat16, seed=70, specials=False).to(DEV)
    for i in range(3):
        x = xs[i]
        r1 = gen((16, 256), torch.bfloat16, seed=80 + i, specials=False).to(DEV)
        r2 = r1.clone()
        q, s, z = bqo.rms_norm_quant(x, w, 1e-6, residual=r1)
        qo, so, _, _ = torch.ops.baracuda_quant.rms_norm_quant(x, w, r2, 1e-6, True, 0, None, 0, torch.int8, -128,
                                                              127, False)
        assert z is None and same(q, qo) and same(s, so) and same(r1, r2)
        xg = torch.cat([x, xs[(i + 1) % 3]], -1)
        q, s, _ = bqo.silu_and_mul_quant(xg, out_dtype=torch.float8_e4m3fn)
        qo, so, _, _ = torch.ops.baracuda_quant.gated_quant(xg, 1, True, 0, None, 0, torch.float8_e4m3fn, 0, 0, False)
        assert same(q.view(torch.uint8), qo.view(torch.uint8)) and same(s, so)
    assert {"rms", "gated"} <= {k[0] for k in bqo._fast}


def test_fast_path_in_c():
    """The per-tensor fast path in C (baracuda_quant._fast, where the package was built with
    it) serves a kept geometry with the Python fast path's and the general path's bits, and
    returns None (the Python path then decides) for everything it does not take."""
    if bqo._fastc is None:
        pytest.skip("the package was built without its extension (no Python C headers)")
    fc = bqo._fastc
    for i, (fname, itype) in enumerate([("float32", torch.int8), ("bfloat16", torch.uint8),
                                        ("float16", torch.float8_e4m3fn)]):
        x = gen((8, 512), dt(fname), seed=90 + i).to(DEV)
        s, z = 0.02 + 0.01 * i, (0 if itype == torch.float8_e4m3fn else 3 - 2 * i)
        bqo.quantize_per_tensor(x, s, z, dtype=itype)  # the general path keeps the geometry
        y_c = fc.quantize_per_tensor(x, s, z, itype, None, None)
        assert isinstance(y_c, torch.Tensor)
        y_py = bqo._quantize_per_tensor_py(x, s, z, dtype=itype)  # the Python fast path
        y_g = torch.ops.baracuda_quant.quantize_per_tensor(x, s, z, itype, *(bqo._qargs(itype, None, None)))
        assert same(y_c.view(torch.uint8), y_py.view(torch.uint8)) and same(y_c.view(torch.uint8),
                                                                             y_g.view(torch.uint8))
        bqo.dequantize(y_c, s, z, out_dtype=dt(fname))
        d_c = fc.dequantize_per_tensor(y_c, s, z, dt(fname))
        assert isinstance(d_c, torch.Tensor)
        assert same(d_c, torch.ops.baracuda_quant.dequantize_per_tensor(y_c, s, z, dt(fname)))
    x = gen((8, 512), torch.float32, seed=99).to(DEV)
    bqo.quantize_per_tensor(x, 0.05, 0)
    assert fc.quantize_per_tensor(x, 0.05, 0, torch.int8, None, None) is not None
    assert fc.quantize_per_tensor(x, 1, 0, torch.int8, None, None) is None  # an int scale
    assert fc.quantize_per_tensor(x, 0.05, 2**31, torch.int8, None, None) is None  # past int32
    assert fc.quantize_per_tensor(x, float("inf"), 0, torch.int8, None, None) is None  # the library refuses
    assert fc.quantize_per_tensor(x, 0.05, 0, torch.int8, -100, None) is None  # another geometry
    xg = x.clone().requires_grad_()
    assert fc.quantize_per_tensor(xg, 0.05, 0, torch.int8, None, None) is None  # a gradient to record
    with torch.no_grad():
        assert fc.quantize_per_tensor(xg, 0.05, 0, torch.int8, None, None) is not None


def _fast_only(fn, *args):
    """fn(*args) with the general path refused: the call must take a fast path."""
    general = bqo._affine

    def refuse(*a, **k):
        raise AssertionError("the general path ran")
    bqo._affine = refuse
    try:
        return fn(*args)
    finally:
        bqo._affine = general


def test_torch_ops_fast_path():
    """torch.ops.baracuda_quant.quantize_per_tensor keeps its geometry under the op's own
    arguments, and a repeat (another scale and zero point) takes the C fast path, with the
    general path's bits."""
    if bqo._fastc is None:
        pytest.skip("the package was built without its extension (no Python C headers)")
    qmin, qmax = bqo._qargs(torch.int8, None, None)
    x = gen((16, 4096), torch.bfloat16, seed=123).to(DEV)
    key = ("qpt", x.shape, x.stride(), x.dtype, x.get_device(), torch.int8, qmin, qmax)
    bqo._fast.pop(key, None)
    op = torch.ops.baracuda_quant.quantize_per_tensor
    y1 = op(x, 0.03, 1, torch.int8, qmin, qmax)
    assert key in bqo._fast
    y2 = _fast_only(op, x, 0.05, -2, torch.int8, qmin, qmax)
    r = []
    for s, z in ((0.03, 1), (0.05, -2)):  # the general path: the geometry forgotten first
        bqo._fast.pop(key, None)
        r.append(op(x, s, z, torch.int8, qmin, qmax))
    assert same(y1, r[0]) and same(y2, r[1]) and not same(y1, y2)


def test_public_builtin():
    """Where torch.compile can trace a stand-in (substitute_in_graph), quantize_per_tensor is
    _fast.c's builtin, in baracuda_quant.ops and at the package's top level, and the op's
    kernel is one too: each gives the Python function's bits and errors, and hands it every
    call C does not serve (keywords, a new geometry, a bad argument)."""
    if bqo._fastc is None or getattr(torch.compiler, "substitute_in_graph", None) is None:
        pytest.skip("no extension, or a torch without torch.compiler.substitute_in_graph")
    import types
    assert isinstance(bqo.quantize_per_tensor, types.BuiltinFunctionType)
    assert bqo.quantize_per_tensor.__self__ is bqo._quantize_per_tensor_py
    assert isinstance(bq.quantize_per_tensor, types.BuiltinFunctionType)
    assert isinstance(bq.quantize_per_tensor.__self__, types.FunctionType)  # the package's dispatcher
    x = gen((4, 1000), torch.bfloat16, seed=77).to(DEV)
    for fn in (bqo.quantize_per_tensor, bq.quantize_per_tensor):
        for kw in ({}, {"dtype": torch.uint8, "zero_point": 7}, {"quant_min": -100, "quant_max": 90}):
            want = bqo._quantize_per_tensor_py(x, 0.04, **kw)
            got = [fn(x, 0.04, **kw), fn(x, 0.04, **kw), fn(x, scale=0.04, **kw)]  # first, repeat, keyword
            assert all(same(g, want) for g in got)
        with pytest.raises(Exception, match="scale"):
            fn(x, "abc")
        with pytest.raises(TypeError):
            fn(x)
    y = torch.compile(lambda t: bq.quantize_per_tensor(t, 0.04, 2), fullgraph=True)(x)
    assert same(y, bqo._quantize_per_tensor_py(x, 0.04, 2))


def test_fast_path_after_torch_ops():
    """A torch.ops call first keeps the geometry under the resolved q-range; a public call
    with the default q-range after it still keeps its own key (the general path, not the
    op's C fast path, serves its first call), so its repeats take the fast path."""
    if bqo._fastc is None:
        pytest.skip("the package was built without its extension (no Python C headers)")
    qmin, qmax = bqo._qargs(torch.int8, None, None)
    x = gen((8, 1024), torch.float32, seed=321).to(DEV)
    op_key = bqo._qpt_key(x, torch.int8, qmin, qmax)
    pub_key = bqo._qpt_key(x, torch.int8, None, None)
    bqo._fast.pop(op_key, None)
    bqo._fast.pop(pub_key, None)
    y0 = torch.ops.baracuda_quant.quantize_per_tensor(x, 0.02, 0, torch.int8, qmin, qmax)
    assert op_key in bqo._fast and pub_key not in bqo._fast
    y1 = bqo.quantize_per_tensor(x, 0.02, 0)
    assert pub_key in bqo._fast
    y2 = _fast_only(bqo.quantize_per_tensor, x, 0.04, 3)
    bqo._fast.pop(op_key, None)
    bqo._fast.pop(pub_key, None)
    r2 = bqo.quantize_per_tensor(x, 0.04, 3)  # the general path
    assert same(y0, y1) and same(y2, r2) and not same(y1, y2)


# ---- torch.compile and CUDA graphs ------------------------------------------------------------
def _block(x, w, sw, bias):
    q, s, _ = bqo.dynamic_per_token_quant(x)
    y = bqo.int8_linear(q, w, s.view(-1), sw, bias, out_dtype=torch.float16)
    q2 = bqo.quantize_per_tensor(y, 0.05, 3)
    return bqo.dequantize(q2, 0.05, 3, out_dtype=torch.float16), y


def _block_inputs():
    g = torch.Generator().manual_seed(20)
    x = torch.randn(64, 256, generator=g).half().to(DEV)
    w = torch.randint(-128, 128, (128, 256), generator=g, dtype=torch.int8).to(DEV)
    sw = (torch.rand(128, generator=g) * 0.01 + 1e-3).to(DEV)
    bias = torch.randn(128, generator=g).half().to(DEV)
    return x, w, sw, bias


def test_torch_compile_fullgraph():
    import torch._dynamo
    torch._dynamo.reset()
    args = _block_inputs()
    eager = _block(*args)
    compiled = torch.compile(_block, fullgraph=True)
    got = compiled(*args)
    for e, c in zip(eager, got):
        assert same(e, c)
    # the fake quantize autograd path compiles too
    x = args[0].float().requires_grad_()
    f = torch.compile(lambda t: bqo.fake_quantize_per_tensor_affine(t, 0.05, 0, -128, 127).sum(), fullgraph=True)
    f(x).backward()
    assert x.grad is not None and x.grad.shape == x.shape
    xe = x.detach().clone().requires_grad_()
    bqo.fake_quantize_per_tensor_affine(xe, 0.05, 0, -128, 127).sum().backward()
    assert same(x.grad, xe.grad)


def test_cuda_graph_replay():
    args = _block_inputs()
    eager = _block(*args)
    static = [a.clone() for a in args]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _block(*static)  # warm-up: plans selected outside capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _block(*static)
    static[0].copy_(args[0] * 0)  # change the input, then restore it: replay recomputes
    graph.replay()
    torch.cuda.synchronize()
    assert not same(out[1], eager[1]) or bool((eager[1] == 0).all())
    static[0].copy_(args[0])
    graph.replay()
    torch.cuda.synchronize()
    for e, c in zip(eager, out):
        assert same(e, c)


# ---- devices and DLPack ----------------------------------------------------------------------------
@pytest.mark.skipif(not cuda_available() or torch.cuda.device_count() < 2, reason="needs 2 or more GPUs")
def test_each_device():
    x = gen((50, 64), torch.float32, seed=21)
    r = ref_quantize(x, torch.tensor(0.05, dtype=torch.float64), 1, -128, 127, torch.int8)
    for i in range(torch.cuda.device_count()):
        with torch.cuda.device(0):  # another device current: the op uses the tensor's
            q = bqo.quantize_per_tensor(x.to("cuda:%d" % i), 0.05, 1)
        assert q.device.index == i and same(q, r)
        a = torch.randint(-128, 128, (32, 64), dtype=torch.int8, device="cuda:%d" % i)
        w = torch.randint(-128, 128, (48, 64), dtype=torch.int8, device="cuda:%d" % i)
        sa, sw = torch.full((32,), 0.01, device=a.device), torch.full((48,), 0.02, device=a.device)
        y = bqo.int8_linear(a, w, sa, sw)
        assert same(y, ref_epilogue(a.cpu().long() @ w.cpu().long().t(), sa, sw, None, torch.float16))


def test_dlpack_front_end():
    from baracuda_quant import dlpack
    x = gen((16, 64), torch.float32, seed=22)
    xd = x.to(DEV)
    torch.cuda.synchronize()
    q = dlpack.quantize_per_tensor(TensorProducer(xd), 0.05, 2)
    qt = torch.from_dlpack(q)
    assert qt.device == xd.device and qt.dtype == torch.int8
    assert same(qt, ref_quantize(x, torch.tensor(0.05, dtype=torch.float64), 2, -128, 127, torch.int8))
    del qt, q
    qd, s, z = dlpack.dynamic_per_token_quant(TensorProducer(xd))
    assert same(torch.from_dlpack(s).view(-1), bqo.dynamic_per_token_quant(xd)[1].view(-1))



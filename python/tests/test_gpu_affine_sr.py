"""GPU tests of stochastic rounding in the affine ops (docs/numerics.md, "Stochastic
rounding"): quantize and fake quantize at every granularity, each float type, integer and
FP8 storage, bit for bit against the Python reference sr_reference.py (Philox4x32-10's
draws and the rounding written in torch on the CPU; test_sr_reference.py checks it against
the C reference). Also: rows or slices computed alone with the offset advanced give the
whole call's bits, a new seed or offset reuses the validated call, the nearest paths kept
for the same geometry stay nearest, the gradient is the straight-through estimator, the
DLPack front end gives the same bits, and the mean rounding error is zero within its
confidence bound."""
import pytest

from conftest import TensorProducer, cuda_available
import sr_reference as R

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant as bq
    import baracuda_quant.ops as bqo

DEV = "cuda"
FLOATS = ["float32", "float64", "float16", "bfloat16"]
STORAGE = {"int8": (-100, 117), "uint8": (3, 250), "float8_e4m3fn": (None, None), "float8_e5m2": (None, None)}
SEED, OFF = 0x0123456789ABCDEF, (1 << 64) - 300  # (the element index wraps past 2^64 inside the tensors)
# granularity: x's shape and its parameter (the axis, G or B)
CASES = {"tensor": ((7, 130), 0), "channel": ((4, 6, 40), 1), "channel0": ((6, 2048), 0), "token": ((3, 5, 72), 0),
         "group": ((12, 96), 16), "block": ((10, 36), 4)}


def _params(gran, shape, p, T, fp8, seed=3):
    """(public scale argument, zero point argument, the keyword of the granularity, and the
    reference's gran name): scales f32 (x's type for half data per group), zero points int32"""
    g = torch.Generator().manual_seed(seed)
    k = shape[-1]
    rows = 1
    for n in shape[:-1]:
        rows *= n
    if gran == "tensor":
        return 0.37, (0 if fp8 else 9), {}, "tensor"
    if gran.startswith("channel"):
        ps, kw, rg = (shape[p],), {"axis": p}, "channel"
    elif gran == "token":
        ps, kw, rg = (rows,), {}, "token"
    elif gran == "group":
        ps, kw, rg = (rows, k // p), {"group_size": p}, "group"
    else:
        ps, kw, rg = (-(-rows // p), -(-k // p)), {"block_size": p}, "block"
    s = torch.rand(ps, generator=g) * 0.9 + 0.05
    if gran == "group" and T in (torch.float16, torch.bfloat16):
        s = s.to(T)  # (scales of x's own type)
    z = None if fp8 else torch.randint(-20, 160, ps, generator=g, dtype=torch.int32)
    return s.to(DEV), (None if z is None else z.to(DEV)), kw, rg


def _quantize(gran, x, s, z, Q, qmin, qmax, kw, **sr):
    """the public quantize op of this granularity"""
    if gran == "tensor":
        return bq.quantize_per_tensor(x, s, z, Q, qmin, qmax, **sr)
    if gran.startswith("channel"):
        return bq.quantize_per_channel(x, s, z, kw["axis"], Q, qmin, qmax, **sr)
    if gran == "token":
        return bq.quantize_per_token(x, s, z, Q, qmin, qmax, **sr)
    if gran == "group":
        return bq.quantize_per_group(x, s, z, kw["group_size"], Q, qmin, qmax, **sr)
    return bq.quantize_per_block(x, s, z, kw["block_size"], Q, qmin, qmax, **sr)


def _expected(gran, rg, x, s, z, p, Q, qmin, qmax, seed=SEED, offset=OFF):
    S, Z = R.full_params(rg, tuple(x.shape), s if gran == "tensor" else s.cpu(),
                         z if gran == "tensor" or z is None else z.cpu(), p)
    q = R.quantize_sr(x.cpu(), S, Z, R.draws(seed, offset, tuple(x.shape)), Q, qmin, qmax)
    return q, R.dequantize_ref(q, S, Z, x.dtype)


@pytest.mark.parametrize("qname", list(STORAGE))
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("gran", list(CASES))
def test_against_the_reference(gran, fname, qname):
    """quantize and fake quantize (generic, and the drop-in per tensor / per channel ones)
    with rounding="stochastic" give the reference's bits; fake quantize is dequantize of the
    quantized codes; a second seed and offset reuse the validated call"""
    T, Q = getattr(torch, fname), getattr(torch, qname)
    qmin, qmax = STORAGE[qname]
    fp8 = qmin is None
    shape, p = CASES[gran]
    x = R.sr_data(shape, T, 17).to(DEV)
    s, z, kw, rg = _params(gran, shape, p, T, fp8)
    sr = dict(rounding="stochastic", seed=SEED, offset=OFF)
    q = _quantize(gran, x, s, z, Q, qmin, qmax, kw, **sr)
    want_q, want_y = _expected(gran, rg, x, s, z, p, Q, qmin, qmax)
    assert q.dtype == Q and R.mismatches(q, want_q) == 0, "quantize"
    zp = z if z is not None else 0
    y = bq.fake_quantize(x, s, zp, qmin, qmax, dtype=Q, **kw, **sr)
    assert R.mismatches(y, want_y) == 0, "fake quantize"
    dq = bq.dequantize(q, s, zp, out_dtype=T, **kw)
    assert R.mismatches(y, dq) == 0, "fake quantize is dequantize(quantize)"
    if not fp8 and gran in ("tensor", "channel"):  # the drop-in ones (int8 / uint8 by the q-range)
        f = (bq.fake_quantize_per_tensor_affine(x, s, zp, qmin, qmax, **sr) if gran == "tensor" else
             bq.fake_quantize_per_channel_affine(x, s, z, p, qmin, qmax, **sr))
        assert R.mismatches(f, want_y) == 0, "drop-in fake quantize"
    # another seed and offset: the same validated call, fresh bits
    n = bqo.prepared_count()
    q2 = _quantize(gran, x, s, z, Q, qmin, qmax, kw, rounding="stochastic", seed=SEED + 1, offset=5)
    assert bqo.prepared_count() == n, "a new seed or offset needs no new call"
    assert R.mismatches(q2, _expected(gran, rg, x, s, z, p, Q, qmin, qmax, SEED + 1, 5)[0]) == 0, "second seed"
    assert R.mismatches(q2, q) > 0


@pytest.mark.parametrize("qname", ["int8", "float8_e4m3fn"])
@pytest.mark.parametrize("gran", ["tensor", "channel", "channel0", "token", "group", "block"])
def test_parts_alone_give_the_whole(gran, qname):
    """slices (per tensor: flat ranges; per channel: outer slices; the row granularities:
    rows, per block whole blocks of rows) with the offset advanced by their first element's
    index give the whole call's bits"""
    T, Q = torch.bfloat16, getattr(torch, qname)
    qmin, qmax = STORAGE[qname]
    shape, p = CASES[gran]
    x = R.sr_data(shape, T, 23).to(DEV)
    s, z, kw, _ = _params(gran, shape, p, T, qmin is None)
    whole = _quantize(gran, x, s, z, Q, qmin, qmax, kw, rounding="stochastic", seed=SEED, offset=OFF)
    k = shape[-1]
    if gran == "tensor":
        flat, out = x.reshape(-1), whole.reshape(-1)
        for a, b in ((0, 1), (1, 7), (7, 300), (300, flat.numel())):  # (unaligned to the draws' 8)
            part = _quantize(gran, flat[a:b], s, z, Q, qmin, qmax, kw, rounding="stochastic", seed=SEED,
                             offset=OFF + a)
            assert R.mismatches(part, out[a:b]) == 0, (a, b)
        return
    if gran.startswith("channel"):
        inner = x[0].numel()
        for i in range(shape[0]):
            sl = slice(i, i + 1)
            if kw["axis"] == 0:
                part = _quantize(gran, x[sl], s[sl], None if z is None else z[sl], Q, qmin, qmax, kw,
                                 rounding="stochastic", seed=SEED, offset=OFF + i * inner)
            else:
                part = _quantize(gran, x[sl], s, z, Q, qmin, qmax, kw, rounding="stochastic", seed=SEED,
                                 offset=OFF + i * inner)
            assert R.mismatches(part, whole[sl]) == 0, i
        return
    x2, w2 = x.reshape(-1, k), whole.reshape(-1, k)
    step = p if gran == "block" else 1
    for r in range(0, x2.shape[0], step):
        rs = slice(r, r + step)
        ss = slice(r // step, r // step + 1) if gran == "block" else rs
        part = _quantize(gran, x2[rs], s.reshape(-1, *s.shape[1:])[ss] if gran != "token" else s[rs],
                         None if z is None else (z[ss] if gran != "token" else z[rs]), Q, qmin, qmax, kw,
                         rounding="stochastic", seed=SEED, offset=OFF + r * k)
        assert R.mismatches(part, w2[rs]) == 0, r


@pytest.mark.parametrize("gran", ["tensor", "token"])
def test_nearest_paths_stay_nearest(gran):
    """the eager fast paths keep nearest calls by geometry: stochastic calls of the same
    geometry neither take them nor are kept by them"""
    x = R.sr_data((64, 256), torch.float16, 5, specials=False).to(DEV)
    s = 0.05 if gran == "tensor" else torch.full((64,), 0.05, device=DEV)
    f = bq.quantize_per_tensor if gran == "tensor" else bq.quantize_per_token
    near = [f(x, s) for _ in range(3)]  # (the second and third: the fast path)
    st = [f(x, s, rounding="stochastic", seed=11, offset=n) for n in range(2)]
    after = f(x, s)
    assert R.mismatches(near[1], near[0]) == 0 and R.mismatches(near[2], near[0]) == 0
    assert R.mismatches(after, near[0]) == 0, "nearest after stochastic"
    for n, q in enumerate(st):
        assert R.mismatches(q, near[0]) > 0
        want = R.quantize_sr(x.cpu(), torch.full(x.shape, 0.05, dtype=torch.float64), torch.zeros(x.shape),
                             R.draws(11, n, x.shape), torch.int8, -128, 127)
        assert R.mismatches(q, want) == 0, n


@pytest.mark.parametrize("fn", ["tensor", "channel", "generic", "group_fp8"])
def test_gradient_is_the_straight_through_estimator(fn):
    """fake quantize with stochastic rounding records the same gradient as rounding to
    nearest (the mask is the in-range test on x / s), and its forward value is the
    no-gradient call's"""
    T = torch.float32
    x = R.sr_data((8, 64), T, 31).to(DEV)
    sc = (torch.rand(64, generator=torch.Generator().manual_seed(2)) * 0.2 + 0.02).to(DEV)
    zp = torch.randint(-5, 5, (64,), generator=torch.Generator().manual_seed(3), dtype=torch.int32).to(DEV)
    gs = (torch.rand(8, 4, generator=torch.Generator().manual_seed(4)) * 0.2 + 0.02).to(DEV)
    call = {"tensor": lambda v, **kw: bq.fake_quantize_per_tensor_affine(v, 0.1, 3, -128, 127, **kw),
            "channel": lambda v, **kw: bq.fake_quantize_per_channel_affine(v, sc, zp, 1, -128, 127, **kw),
            "generic": lambda v, **kw: bq.fake_quantize(v, sc, zp, 0, 255, axis=1, **kw),
            "group_fp8": lambda v, **kw: bq.fake_quantize(v, gs, dtype=torch.float8_e5m2, group_size=16, **kw)}[fn]
    sr = dict(rounding="stochastic", seed=77, offset=1000)
    dy = torch.randn(8, 64, device=DEV)
    grads = []
    for opts in (sr, {}):
        xr = x.clone().requires_grad_(True)
        y = call(xr, **opts)
        assert R.mismatches(y.detach(), call(x, **opts)) == 0, "the value with and without a gradient"
        y.backward(dy)
        grads.append(xr.grad)
    assert R.mismatches(grads[0], grads[1]) == 0, "the gradient does not depend on the rounding"
    assert bool((grads[0] == 0).any()) and bool((grads[0] == dy).any())  # (both sides of the mask)




def test_dlpack_front_end_gives_the_same_bits():
    from baracuda_quant import dlpack
    x = R.sr_data((9, 80), torch.bfloat16, 41).to(DEV)
    s = (torch.rand(9, 5, generator=torch.Generator().manual_seed(8)) * 0.5 + 0.01).to(DEV)
    sr = dict(rounding="stochastic", seed=-3, offset=12)
    torch.cuda.synchronize()
    q = torch.from_dlpack(dlpack.quantize_per_group(TensorProducer(x), TensorProducer(s), None, 16, "int8", **sr))
    assert R.mismatches(q, bq.quantize_per_group(x, s, None, 16, torch.int8, **sr)) == 0
    y = torch.from_dlpack(dlpack.fake_quantize(TensorProducer(x), 0.25, 4, 0, 255, **sr))
    assert R.mismatches(y, bq.fake_quantize(x, 0.25, 4, 0, 255, **sr)) == 0
    y = torch.from_dlpack(dlpack.fake_quantize_per_tensor_affine(TensorProducer(x), 0.25, 4, 0, 255, **sr))
    assert R.mismatches(y, bq.fake_quantize(x, 0.25, 4, 0, 255, **sr)) == 0


def test_torch_compile_fullgraph():
    """compiled quantize and fake quantize (with its backward) with stochastic rounding give
    the eager bits"""
    import torch._dynamo
    torch._dynamo.reset()
    x = R.sr_data((16, 256), torch.float16, 43).to(DEV)
    s = (torch.rand(16, generator=torch.Generator().manual_seed(9)) * 0.1 + 0.01).to(DEV)
    sr = dict(rounding="stochastic", seed=(1 << 64) - 9, offset=33)

    def step(t):
        q = bq.quantize_per_token(t.detach(), s, **sr)
        return q, bq.fake_quantize_per_tensor_affine(t, 0.05, 1, -128, 127, **sr)
    xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    eager, got = step(xe), torch.compile(step, fullgraph=True)(xc)
    assert R.mismatches(got[0], eager[0]) == 0 and R.mismatches(got[1].detach(), eager[1].detach()) == 0
    eager[1].float().sum().backward()
    got[1].float().sum().backward()
    assert R.mismatches(xc.grad, xe.grad) == 0


@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("qname", list(STORAGE))
def test_mean_rounding_error_is_zero(fname, qname):
    """one value off the grid, many elements: the codes take its two neighbours, and their
    mean is the value within five standard deviations plus the draws' resolution (2^-17 of a
    step); a value on the grid never moves"""
    T, Q = getattr(torch, fname), getattr(torch, qname)
    qmin, qmax = STORAGE[qname]
    fp8 = qmin is None
    n, zp = 1 << 18, (0 if fp8 else 40)
    for v0, seed in ((0.3, 1), (-2.7, 2), (1.1, 3)):
        x = torch.full((n // 1024, 1024), v0, dtype=T, device=DEV)
        y = bq.fake_quantize(x, 1.0, zp, qmin, qmax, dtype=Q, rounding="stochastic", seed=seed, offset=seed << 40)
        vals = y.double().cpu()
        exact = float(x[0, 0].double())
        lo, hi = vals.min().item(), vals.max().item()
        assert lo < exact < hi and bool(((vals == lo) | (vals == hi)).all()), (v0, lo, hi)
        step = hi - lo
        sd = step * 0.5 / n ** 0.5
        assert abs(vals.mean().item() - exact) <= 5 * sd + step * 2.0 ** -17, (v0, vals.mean().item(), exact)
    g = torch.full((256, 256), 2.0, dtype=T, device=DEV)  # (on both grids)
    y = bq.fake_quantize(g, 1.0, zp, qmin, qmax, dtype=Q, rounding="stochastic", seed=9)
    assert bool((y == 2.0).all())

"""GPU tests of stochastic rounding in dynamic quantize (docs/numerics.md, "Stochastic
rounding"): dynamic_quant per tensor, token, group and block and dynamic_per_token_quant,
integer (int8 symmetric and asymmetric, uint8 asymmetric) and FP8 storage, float32 and
bfloat16 input, bit for bit against the Python reference sr_reference.py. The reference is
the contract's two steps: the scales (and zero points) are the ones rounding to nearest
computes (checked against the nearest call's), then x is quantized with them by the affine
stochastic-rounding reference at the same granularity, element (r, c) of x.view(-1, K)
drawing at index offset + r * K + c (per tensor: the flat index). Also: rows computed alone
with the offset advanced by r0 * K give the whole call's codes and scales (per block, whole
blocks of rows), a new seed or offset reuses the validated call, the scale formats (x's
type, UE8M0, UE8M0X4 words, MN-major), the nearest fast path of dynamic_per_token_quant
stays nearest, its static scale rounds as quantize_per_token does, the DLPack front end
gives the same bits, and torch.compile gives the eager bits."""
import pytest

from conftest import TensorProducer, cuda_available
import sr_reference as R

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant as bq
    import baracuda_quant.ops as bqo

DEV = "cuda"
FLOATS = ["float32", "bfloat16"]
# storage: (dtype name, symmetric, quant_min, quant_max)
STORAGE = {"int8_sym": ("int8", True, -128, 127), "int8_asym": ("int8", False, -128, 127),
           "uint8_asym": ("uint8", False, 0, 255), "e4m3": ("float8_e4m3fn", True, None, None),
           "e5m2": ("float8_e5m2", True, None, None)}
SEED, OFF = 0x0123456789ABCDEF, (1 << 64) - 300  # (the element index wraps past 2^64 inside the tensors)
# granularity: x's shape and the group or block size (K = 96 or 36 or 72: unaligned to the draws' 8 or 16)
CASES = {"tensor": ((7, 130), None), "token": ((3, 5, 72), None), "group": ((12, 96), 16), "block": ((10, 36), 4)}


def _size_kw(gran, size):
    return {"group_size": size} if gran == "group" else {"block_size": size} if gran == "block" else {}


def _data(shape, T, seed):
    """sr_data without the infinities (a scale must stay finite), with one NaN (ignored by the
    reductions; it quantizes to 0 or the NaN code) and an all-zero row (scale 1)"""
    x = R.sr_data(shape, T, seed, specials=False)
    x2 = x.view(-1, shape[-1])
    x2[1, 3] = float("nan")
    x2[2] = 0
    return x


def _scale_floats(s, rows_groups=None):
    """the scales as float32 values on the CPU (exact): float32 or x's type as they are,
    UE8M0 bytes 2^(b - 127), UE8M0X4 int32 words unpacked to rows_groups = (rows, groups)"""
    s = s.cpu()
    if s.dtype == torch.int32:
        rows, ng = rows_groups
        s = s.contiguous().view(torch.uint8).view(rows, -1)[:, :ng]
    elif s.dtype == getattr(torch, "float8_e8m0fnu", None):
        s = s.view(torch.uint8)
    else:
        return s.float()
    return torch.ldexp(torch.ones(s.shape), s.long() - 127)


def _reference(gran, x, s, z, size, Q, qmin, qmax, seed, offset):
    """the stochastic codes of x with the scales s and zero points z (None: symmetric) the
    call returned, on the CPU: the affine reference at the same granularity"""
    shape = tuple(x.shape)
    k = shape[-1]
    rows = x.numel() // k
    if gran == "tensor":
        S, Z = R.full_params("tensor", shape, float(_scale_floats(s).item()), 0 if z is None else int(z.item()))
    else:
        ng = k // size if gran == "group" else None
        S, Z = R.full_params(gran, shape, _scale_floats(s, (rows, ng)), None if z is None else z.cpu(), size or 0)
    return R.quantize_sr(x.cpu(), S, Z, R.draws(seed, offset, shape), Q, qmin, qmax)


def _call(gran, x, Q, sym, qmin, qmax, size, **kw):
    return bq.dynamic_quant(x, gran, dtype=Q, symmetric=sym, quant_min=qmin, quant_max=qmax, **_size_kw(gran, size),
                            **kw)


@pytest.mark.parametrize("store", list(STORAGE))
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("gran", list(CASES))
def test_against_the_reference(gran, fname, store):
    """dynamic_quant with rounding="stochastic": the scales and zero points of rounding to
    nearest, and codes bit for bit the affine reference's with them; a second seed and
    offset reuse the validated call and give that seed's bits"""
    T = getattr(torch, fname)
    qname, sym, qmin, qmax = STORAGE[store]
    Q = getattr(torch, qname)
    shape, size = CASES[gran]
    x = _data(shape, T, 17).to(DEV)
    near_q, near_s, near_z = _call(gran, x, Q, sym, qmin, qmax, size)
    q, s, z = _call(gran, x, Q, sym, qmin, qmax, size, rounding="stochastic", seed=SEED, offset=OFF)
    assert q.dtype == Q and q.shape == x.shape
    assert R.mismatches(s, near_s) == 0, "the scales are rounding to nearest's"
    assert (z is None) == sym and (sym or R.mismatches(z, near_z) == 0), "the zero points are rounding to nearest's"
    want = _reference(gran, x, s, z, size, Q, qmin, qmax, SEED, OFF)
    assert R.mismatches(q, want) == 0, "dynamic quantize with stochastic rounding"
    assert R.mismatches(q, near_q) > 0
    n = bqo.prepared_count()
    q2, s2, _ = _call(gran, x, Q, sym, qmin, qmax, size, rounding="stochastic", seed=SEED + 1, offset=5)
    assert bqo.prepared_count() == n, "a new seed or offset needs no new call"
    assert R.mismatches(s2, s) == 0
    assert R.mismatches(q2, _reference(gran, x, s, z, size, Q, qmin, qmax, SEED + 1, 5)) == 0, "second seed"
    assert R.mismatches(q2, q) > 0


@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("store", ["int8_sym", "int8_asym", "e4m3"])
def test_dynamic_per_token_quant(fname, store):
    """dynamic_per_token_quant with stochastic rounding: dynamic_quant per token's bits and
    the reference's; with a static scale (and azp) the per-tensor scale's reference, as
    quantize_per_token rounds it"""
    T = getattr(torch, fname)
    qname, sym, qmin, qmax = STORAGE[store]
    Q = getattr(torch, qname)
    x = _data((6, 4, 88), T, 19).to(DEV)
    sr = dict(rounding="stochastic", seed=-7, offset=1 << 40)
    q, s, z = bqo.dynamic_per_token_quant(x, symmetric=sym, dtype=Q, **sr)
    q2, s2, z2 = _call("token", x, Q, sym, qmin, qmax, None, **sr)
    assert R.mismatches(q, q2) == 0 and R.mismatches(s, s2) == 0 and (sym or R.mismatches(z, z2) == 0)
    assert R.mismatches(q, _reference("token", x, s, z, None, Q, qmin, qmax, (1 << 64) - 7, 1 << 40)) == 0
    sc = torch.tensor([0.0625], device=DEV)
    azp = None if sym else torch.tensor([-3], dtype=torch.int32, device=DEV)
    q3, s3, z3 = bqo.dynamic_per_token_quant(x, symmetric=sym, scale=sc, azp=azp, dtype=Q, **sr)
    assert s3 is sc and z3 is azp
    want = R.quantize_sr(x.cpu(), torch.full(x.shape, 0.0625, dtype=torch.float64),
                         torch.full(x.shape, 0 if sym else -3, dtype=torch.int64),
                         R.draws((1 << 64) - 7, 1 << 40, tuple(x.shape)), Q, qmin, qmax)
    assert R.mismatches(q3, want) == 0, "the static scale's stochastic rounding"


@pytest.mark.parametrize("qname", ["int8", "float8_e4m3fn"])
@pytest.mark.parametrize("gran", ["token", "group", "block"])
def test_rows_alone_give_the_whole(gran, qname):
    """rows r0 .. r1 of x.view(-1, K) quantized alone with offset + r0 * K give the whole
    call's codes, scales and zero points there (per block: whole blocks of rows)"""
    T, Q = torch.bfloat16, getattr(torch, qname)
    sym = qname != "int8"
    qmin, qmax = (None, None) if sym else (-128, 127)
    shape, size = {"token": ((37, 200), None), "group": ((29, 96), 32), "block": ((22, 52), 4)}[gran]
    x = _data(shape, T, 23).to(DEV)
    k = shape[-1]
    q, s, z = _call(gran, x, Q, sym, qmin, qmax, size, rounding="stochastic", seed=SEED, offset=OFF)
    step = size if gran == "block" else 1
    spans = [(0, step), (step, 3 * step), (3 * step, shape[0]), (0, shape[0])]
    if gran != "block":
        spans += [(5, 6), (7, 20)]  # (rows that start anywhere)
    for r0, r1 in spans:
        pq, ps, pz = _call(gran, x[r0:r1], Q, sym, qmin, qmax, size, rounding="stochastic", seed=SEED,
                           offset=OFF + r0 * k)
        b0, b1 = (r0 // step, -(-r1 // step)) if gran == "block" else (r0, r1)
        assert R.mismatches(pq, q[r0:r1]) == 0, (r0, r1)
        assert R.mismatches(ps, s[b0:b1]) == 0, (r0, r1)
        assert sym or R.mismatches(pz, z[b0:b1]) == 0, (r0, r1)
    ptq, pts, _ = bqo.dynamic_per_token_quant(x[4:9], dtype=Q, symmetric=True, rounding="stochastic", seed=SEED,
                                              offset=OFF + 4 * k)
    wq, ws, _ = bqo.dynamic_per_token_quant(x, dtype=Q, symmetric=True, rounding="stochastic", seed=SEED, offset=OFF)
    assert R.mismatches(ptq, wq[4:9]) == 0 and R.mismatches(pts, ws[4:9]) == 0


E8M0 = getattr(torch, "float8_e8m0fnu", None) if cuda_available() else None


@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("fmt", ["xtype", "ue8m0", "ue8m0x4", "mn", "pow2"])
def test_scale_formats(fname, fmt):
    """the scale formats and layouts: the stored scales are rounding to nearest's, and the
    codes the reference's with their values"""
    T = getattr(torch, fname)
    if fmt.startswith("ue8m0") and E8M0 is None:
        pytest.skip("torch has no float8_e8m0fnu")
    kw = {"xtype": dict(scale_dtype=T), "ue8m0": dict(scale_dtype=E8M0), "ue8m0x4": dict(scale_dtype=torch.int32),
          "mn": dict(scale_layout="mn"), "pow2": dict(pow2_scales=True)}[fmt]
    Q = torch.float8_e4m3fn if fmt.startswith("ue8m0") else torch.int8
    qmin, qmax = (None, None) if Q != torch.int8 else (-128, 127)
    gran, size = ("block", 8) if fmt == "ue8m0" else ("group", 16)
    x = _data((18, 160), T, 29).to(DEV)
    near_q, near_s, _ = _call(gran, x, Q, True, qmin, qmax, size, **kw)
    q, s, _ = _call(gran, x, Q, True, qmin, qmax, size, rounding="stochastic", seed=SEED, offset=OFF, **kw)
    assert s.dtype == near_s.dtype and s.stride() == near_s.stride()
    assert R.mismatches(s, near_s) == 0
    assert R.mismatches(q, _reference(gran, x, s, None, size, Q, qmin, qmax, SEED, OFF)) == 0, fmt


def test_nearest_fast_path_stays_nearest():
    """dynamic_per_token_quant keeps nearest calls by geometry for its fast path: stochastic
    calls of the same geometry neither take it nor are kept by it"""
    x = R.sr_data((64, 256), torch.float16, 5, specials=False).to(DEV)
    near = [bqo.dynamic_per_token_quant(x) for _ in range(3)]  # (the second and third: the fast path)
    st = [bqo.dynamic_per_token_quant(x, rounding="stochastic", seed=11, offset=n) for n in range(2)]
    after = bqo.dynamic_per_token_quant(x)
    for q, s, _ in near[1:] + [after]:
        assert R.mismatches(q, near[0][0]) == 0 and R.mismatches(s, near[0][1]) == 0
    for n, (q, s, _) in enumerate(st):
        assert R.mismatches(s, near[0][1]) == 0
        assert R.mismatches(q, near[0][0]) > 0
        assert R.mismatches(q, _reference("token", x, s, None, None, torch.int8, -128, 127, 11, n)) == 0, n


def test_dlpack_front_end_gives_the_same_bits():
    from baracuda_quant import dlpack
    x = _data((9, 80), torch.bfloat16, 41).to(DEV)
    sr = dict(rounding="stochastic", seed=-3, offset=12)
    torch.cuda.synchronize()
    for gran, kw in (("tensor", {}), ("token", {}), ("group", {"group_size": 16}), ("block", {"block_size": 4})):
        q, s, z = dlpack.dynamic_quant(TensorProducer(x), gran, dtype="int8", symmetric=False, **kw, **sr)
        tq, ts, tz = bq.dynamic_quant(x, gran, dtype=torch.int8, symmetric=False, **kw, **sr)
        assert R.mismatches(torch.from_dlpack(q), tq) == 0, gran
        assert R.mismatches(torch.from_dlpack(s), ts) == 0 and R.mismatches(torch.from_dlpack(z), tz) == 0, gran
    q, s, z = dlpack.dynamic_per_token_quant(TensorProducer(x), symmetric=False, **sr)
    tq, ts, tz = bqo.dynamic_per_token_quant(x, symmetric=False, **sr)
    assert R.mismatches(torch.from_dlpack(q), tq) == 0 and R.mismatches(torch.from_dlpack(s), ts) == 0
    assert R.mismatches(torch.from_dlpack(z), tz) == 0
    sc = torch.tensor([0.125], device=DEV)
    q, _, _ = dlpack.dynamic_per_token_quant(TensorProducer(x), scale=TensorProducer(sc), **sr)
    tq, _, _ = bqo.dynamic_per_token_quant(x, scale=sc, **sr)
    assert R.mismatches(torch.from_dlpack(q), tq) == 0, "static scale"


def test_torch_compile_fullgraph():
    """compiled dynamic quantize with stochastic rounding gives the eager bits"""
    import torch._dynamo
    torch._dynamo.reset()
    x = _data((16, 256), torch.float16, 43).to(DEV)
    sr = dict(rounding="stochastic", seed=(1 << 64) - 9, offset=33)

    def step(t):
        return (bq.dynamic_quant(t, "group", group_size=64, dtype=torch.float8_e4m3fn, **sr)[:2] +
                bqo.dynamic_per_token_quant(t, symmetric=False, **sr))
    eager, got = step(x), torch.compile(step, fullgraph=True)(x)
    for a, b in zip(eager, got):
        assert R.mismatches(a, b) == 0

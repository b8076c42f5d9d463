"""GPU tests of stochastic rounding in the fused producers (rms_norm_quant with and without a
residual, silu_and_mul_quant, gelu_tanh_and_mul_quant; docs/numerics.md, "Fused producers"
and "Stochastic rounding"): the fused call is, exactly (torch.equal on the bits), the
package's unfused composition: the producer's values (the fused call's own values output,
return_normed / return_act) quantized by the package's stochastic quantize with the scales
the fused call wrote (per token quantize_per_token, per group quantize_per_group, per tensor
quantize_per_tensor with the static scale), the same seed and offset, element (r, c) of
the values viewed as [rows, D] drawing at index offset + r * D + c. float32, bfloat16 and
float16 input; int8 (symmetric and not), uint8 and E4M3 storage; with the values (args.out)
and without them (the library's workspace). Also: the values and dynamic scales are
rounding to nearest's (the values the contract's, test_gpu_fused.py's reference), the
residual is updated as before, a new seed or offset reuses the validated call, rows
computed alone with the offset advanced give the same bits, strided and long rows, scales
in x's type, the nearest fast path stays nearest, the DLPack front end and torch.compile
give the same bits."""
import pytest

from conftest import TensorProducer, cuda_available
from fused_gpu_util import DEV, EPS, STORAGE, equal, fused as _fused, make_inputs, quant_kw

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant as bq
    import baracuda_quant.ops as bqo
    from test_gpu import gen

FLOATS = ["float32", "bfloat16", "float16"]
PRODUCERS = ["rms", "rms_residual", "silu", "gelu_tanh"]
GRANS = ["tensor", "token", "group"]
G = 32
SEED, OFF = 0x0123456789ABCDEF, (1 << 64) - 700  # (the element index wraps past 2^64 inside the tensors)


def _inputs(producer, T, shape=(3, 4, 160), seed=1):
    """make_inputs with this file's default shape, (3, 4, 160): (x, weight or None, residual or None) on the device"""
    return make_inputs(producer, T, shape, seed)


def _quant_kw(gran, store):
    """the fused call's quantization arguments (quant_kw, groups of G) and the storage dtype"""
    kw, quant = quant_kw(gran, store, G)
    return kw, quant[0]


def _unfused(gran, v, s, z, Q, seed, offset):
    """the package's stochastic quantize of the values v with the scales (and zero points)
    the fused call returned (per tensor: its static scale and zero point)"""
    sr = dict(rounding="stochastic", seed=seed, offset=offset)
    if gran == "tensor":
        return bqo.quantize_per_tensor(v, s, z, Q, **sr)
    if gran == "token":
        return bqo.quantize_per_token(v, s, z, Q, **sr)
    return bqo.quantize_per_group(v, s, z, G, Q, **sr)


@pytest.mark.parametrize("store", list(STORAGE))
@pytest.mark.parametrize("gran", GRANS)
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_fused_sr_is_the_unfused_composition(producer, fname, gran, store):
    T = getattr(torch, fname)
    kw, Q = _quant_kw(gran, store)
    inputs = _inputs(producer, T)
    sr = dict(rounding="stochastic", seed=SEED, offset=OFF)
    (nq, ns, nz, nv), nres = _fused(producer, inputs, True, **kw)  # rounding to nearest
    (q, s, z, v), res = _fused(producer, inputs, True, **kw, **sr)
    assert q.dtype == Q and q.shape == nq.shape and v.dtype == T
    assert equal(v, nv), "the values do not depend on the rounding"
    if res is not None:
        assert equal(res, nres), "the residual receives x + residual as before"
    if gran == "tensor":
        assert (s, z) == (kw["scale"], kw["zero_point"])
    else:
        assert equal(s, ns), "the dynamic scales are rounding to nearest's"
        assert (z is None) == (nz is None) and (z is None or equal(z, nz)), "the zero points are nearest's"
    want = _unfused(gran, v, s, z, Q, SEED, OFF)
    assert equal(q, want), "fused stochastic rounding == the producer's values, then quantize stochastically"
    assert not equal(q, nq), "stochastic rounding changed nothing"
    # without the values: the library's workspace holds them; the same bits
    out, res2 = _fused(producer, inputs, False, **kw, **sr)
    q2 = out[0]
    assert len(out) == 3 and equal(q2, q)
    if gran != "tensor":
        assert equal(out[1], s) and (z is None or equal(out[2], z))
    if res is not None:
        assert equal(res2, res)


@pytest.mark.parametrize("producer", PRODUCERS)
def test_values_are_the_contract(producer):
    """the values a stochastic call returns are the contract's (test_gpu_fused.py's reference)"""
    from test_gpu_fused import ref_gated, ref_rmsnorm
    T = torch.bfloat16
    x, w, r = _inputs(producer, T, shape=(9, 512), seed=5)
    (q, s, z, v), res = _fused(producer, (x, w, r), True, rounding="stochastic", seed=3, offset=1)
    if producer.startswith("rms"):
        h, n = ref_rmsnorm(x, w, EPS, r)
        assert equal(v.cpu(), n)
        if r is not None:
            assert equal(res.cpu(), h)
    else:
        assert equal(v.cpu(), ref_gated(x, producer))


@pytest.mark.parametrize("gran", GRANS)
def test_new_seed_reuses_the_call(gran):
    """a new seed or offset needs no new validated call, and gives that seed's bits"""
    kw, Q = _quant_kw(gran, "int8_asym")
    inputs = _inputs("silu", torch.float16, seed=7)
    (q, s, z, v), _ = _fused("silu", inputs, True, rounding="stochastic", seed=SEED, offset=OFF, **kw)
    assert equal(q, _unfused(gran, v, s, z, Q, SEED, OFF))  # (the unfused quantize's call made too)
    n = bqo.prepared_count()
    for seed, offset in ((SEED + 1, 5), (-1, (1 << 64) - 1), (SEED, OFF + 1)):
        (q2, s2, z2, v2), _ = _fused("silu", inputs, True, rounding="stochastic", seed=seed, offset=offset, **kw)
        assert bqo.prepared_count() == n, "a new seed or offset needs no new call"
        assert equal(v2, v) and (gran == "tensor" or equal(s2, s))
        assert equal(q2, _unfused(gran, v2, s2, z2, Q, seed, offset)), (seed, offset)
        assert not equal(q2, q)
    assert bqo.prepared_count() == n


@pytest.mark.parametrize("gran", ["token", "group", "tensor"])
def test_rows_alone_with_the_offset_advanced(gran):
    """rows r0 .. r1 computed alone with offset + r0 * D give the whole call's codes (and
    scales) there: each row's result depends on that row alone"""
    kw, Q = _quant_kw(gran, "int8")
    x, w, _ = _inputs("rms", torch.bfloat16, shape=(29, 256), seed=9)
    d = 256
    q, s, _ = bqo.rms_norm_quant(x, w, EPS, rounding="stochastic", seed=SEED, offset=OFF, **kw)
    for r0, r1 in ((0, 1), (1, 4), (5, 6), (7, 29)):
        pq, ps, _ = bqo.rms_norm_quant(x[r0:r1], w, EPS, rounding="stochastic", seed=SEED, offset=OFF + r0 * d, **kw)
        assert equal(pq, q[r0:r1]), (r0, r1)
        if gran != "tensor":
            assert equal(ps, s[r0:r1]), (r0, r1)


@pytest.mark.parametrize("producer", ["rms_residual", "gelu_tanh"])
@pytest.mark.parametrize("d", [4096, 14336])
def test_strided_long_rows_and_scales_in_x_type(producer, d):
    """x with a row stride past its row, long rows (the staged kernels), the scales in x's
    type: the composition still, with and without the values"""
    T = torch.bfloat16
    rows = 6
    width = d if producer.startswith("rms") else 2 * d
    base = gen((rows, width + 64), T, seed=d, specials=False, scale=0.5).to(DEV)
    x = base[:, :width]
    w = gen((d,), T, seed=d + 1, specials=False, scale=0.3).to(DEV) if producer.startswith("rms") else None
    r = gen((rows, d), T, seed=d + 2, specials=False).to(DEV) if producer == "rms_residual" else None
    sr = dict(rounding="stochastic", seed=-12345, offset=(1 << 64) - 3 * d)
    for gran, extra in (("token", dict(scale_dtype=T)), ("group", dict(group_size=128, symmetric=False)),
                        ("tensor", dict(scale=1 / 32))):
        kw = dict(extra)
        (q, s, z, v), res = _fused(producer, (x, w, r), True, **kw, **sr)
        if gran == "token":
            assert s.dtype == T
        gkw = dict(rounding="stochastic", seed=-12345, offset=(1 << 64) - 3 * d)
        if gran == "tensor":
            want = bqo.quantize_per_tensor(v, s, z, torch.int8, **gkw)
        elif gran == "token":
            want = bqo.quantize_per_token(v, s, z, torch.int8, **gkw)
        else:
            want = bqo.quantize_per_group(v, s, z, 128, torch.int8, **gkw)
        assert equal(q, want), gran
        out, _ = _fused(producer, (x, w, r), False, **kw, **sr)
        assert equal(out[0], q), gran


def test_nearest_fast_path_stays_nearest():
    """the fused producers keep nearest calls by geometry for their eager fast path: stochastic
    calls of the same geometry neither take it nor disturb it"""
    x, w, _ = _inputs("rms", torch.float16, shape=(64, 512), seed=11)
    g, _, _ = _inputs("silu", torch.float16, shape=(64, 512), seed=12)
    near = [bqo.rms_norm_quant(x, w, EPS) for _ in range(3)]  # (the second and third: the fast path)
    gnear = [bqo.silu_and_mul_quant(g) for _ in range(3)]
    (sq, ss, _, sv), _ = _fused("rms", (x, w, None), True, rounding="stochastic", seed=11, offset=0)
    (gq, gs, _, gv), _ = _fused("silu", (g, None, None), True, rounding="stochastic", seed=11, offset=0)
    after, gafter = bqo.rms_norm_quant(x, w, EPS), bqo.silu_and_mul_quant(g)
    for q, s, _ in near[1:] + [after]:
        assert equal(q, near[0][0]) and equal(s, near[0][1])
    for q, s, _ in gnear[1:] + [gafter]:
        assert equal(q, gnear[0][0]) and equal(s, gnear[0][1])
    assert equal(ss, near[0][1]) and not equal(sq, near[0][0])
    assert equal(sq, _unfused("token", sv, ss, None, torch.int8, 11, 0))
    assert equal(gs, gnear[0][1]) and equal(gq, _unfused("token", gv, gs, None, torch.int8, 11, 0))


def test_dlpack_front_end_gives_the_same_bits():
    from baracuda_quant import dlpack
    x, w, r = _inputs("rms_residual", torch.bfloat16, shape=(9, 256), seed=13)
    g, _, _ = _inputs("gelu_tanh", torch.float32, shape=(9, 256), seed=14)
    sr = dict(rounding="stochastic", seed=-3, offset=12)
    r1, r2 = r.clone(), r.clone()
    torch.cuda.synchronize()
    q, s, z, n = dlpack.rms_norm_quant(TensorProducer(x), TensorProducer(w), EPS, residual=TensorProducer(r1),
                                       symmetric=False, group_size=64, out_dtype="uint8", return_normed=True, **sr)
    gq, gs, _ = dlpack.gelu_tanh_and_mul_quant(TensorProducer(g), group_size=32, **sr)
    sq, _, _ = dlpack.silu_and_mul_quant(TensorProducer(g), scale=0.25, **sr)
    torch.cuda.synchronize()
    tq, ts, tz, tn = bqo.rms_norm_quant(x, w, EPS, residual=r2, symmetric=False, group_size=64, out_dtype=torch.uint8,
                                        return_normed=True, **sr)
    tgq, tgs, _ = bqo.gelu_tanh_and_mul_quant(g, group_size=32, **sr)
    tsq, _, _ = bqo.silu_and_mul_quant(g, scale=0.25, **sr)
    for a, b in ((q, tq), (s, ts), (z, tz), (n, tn), (gq, tgq), (gs, tgs), (sq, tsq)):
        assert equal(torch.from_dlpack(a), b)
    assert equal(r1, r2)


def test_torch_compile_fullgraph():
    """compiled fused producers with stochastic rounding give the eager bits"""
    import torch._dynamo
    torch._dynamo.reset()
    x, w, _ = _inputs("rms", torch.float16, shape=(16, 512), seed=15)
    g, _, _ = _inputs("silu", torch.float16, shape=(16, 512), seed=16)
    sr = dict(rounding="stochastic", seed=(1 << 64) - 9, offset=33)

    def step(x, w, g):
        return (bq.rms_norm_quant(x, w, EPS, group_size=64, **sr)[:2] +
                bq.silu_and_mul_quant(g, out_dtype=torch.float8_e4m3fn, **sr)[:2] +
                bq.gelu_tanh_and_mul_quant(g, scale=0.125, **sr)[:1])
    eager, got = step(x, w, g), torch.compile(step, fullgraph=True)(x, w, g)
    for a, b in zip(eager, got):
        assert equal(a, b)

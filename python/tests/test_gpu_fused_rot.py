"""GPU tests of the fused rotation in the fused producers (rms_norm_quant with and without a
residual, silu_and_mul_quant, gelu_tanh_and_mul_quant; docs/numerics.md, "Fused producers"
and "Rotation") and of stochastic rounding and the rotation in the microscaling ones
(rms_norm_mx_quant, silu_and_mul_mx_quant, gelu_tanh_and_mul_mx_quant). Each fused call is,
exactly (torch.equal on the bits), the package's unfused composition:
- integer and FP8 storage, per token and per tensor: the producer's values (the fused call's
  own values output, return_normed / return_act, which are not rotated) rotated by
  bq.hadamard(values, n, seed=...) (the signs' seed, else none), then dynamic_quant per
  token (the scales and zero points too) or quantize_per_tensor with the static scale and
  zero point, with the same rounding, seed and offset;
- MXFP8, MXFP4 and NVFP4 (the tensor scale computed or given): mx_quant of the values with
  the same rounding, rotation, seed and offset (codes, scales and tensor scale).
float32, float16 and bfloat16 input; int8 (symmetric and not), uint8 and E4M3 storage;
blocks of 2, 16 and 128; with and without the random signs; with the values (args.out) and
without them (the library's workspace). Also: the values are the contract's, a new seed
reuses the validated call, rows computed alone with the offset advanced give the same bits,
strided long rows, the refusals (per group in Python, a block past the kernels' reach in the
library), the DLPack front end and torch.compile give the eager bits. The cases are picked
so that every float type, storage, producer, block, sign and rounding setting appears
without their full product (each new SKU is an NVRTC compile)."""
import pytest

from conftest import TensorProducer, cuda_available
from fused_gpu_util import DEV, EPS, equal, fused as _fused, make_inputs, quant_kw as _quant_kw

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant as bq
    import baracuda_quant.ops as bqo
    from test_gpu import gen

# (producer, float type, storage): each float, storage and producer at least once
CASES = [("rms_residual", "float32", "int8"), ("silu", "float16", "int8_asym"), ("gelu_tanh", "bfloat16", "uint8"),
         ("rms", "bfloat16", "e4m3"), ("silu", "float32", "uint8"), ("rms_residual", "bfloat16", "int8")]
# (granularity, block, random signs, stochastic rounding): both roundings at both granularities
CYCLE = [("token", 2, False, False), ("token", 128, True, True), ("tensor", 16, True, False),
         ("tensor", 128, False, True), ("token", 16, False, True)]
SEED, OFF = 0x0123456789ABCDEF, (1 << 64) - 700  # (the element index wraps past 2^64 inside the tensors)


def _inputs(producer, T, shape=(3, 5, 256), seed=1):
    """make_inputs with this file's default shape, (3, 5, 256): (x, weight or None, residual or None) on the device"""
    return make_inputs(producer, T, shape, seed)


def _fused_mx(producer, inputs, values, **kw):
    x, w, r = inputs
    if producer.startswith("rms"):
        rr = None if r is None else r.clone()
        return bqo.rms_norm_mx_quant(x, w, EPS, rr, return_normed=values, **kw), rr
    f = bqo.silu_and_mul_mx_quant if producer == "silu" else bqo.gelu_tanh_and_mul_mx_quant
    return f(x, return_act=values, **kw), None


def _options(n, signs, sr, seed=SEED, offset=OFF):
    """(the fused call's rotation and rounding keywords, hadamard's seed, the unfused op's
    rounding keywords): one seed keys the signs and the draws"""
    rot = dict(rotation_block=n)
    if signs:
        rot.update(random_signs=True, seed=seed)
    rnd = dict(rounding="stochastic", seed=seed, offset=offset) if sr else {}
    return dict(rot, **rnd), (seed if signs else None), rnd


def _unfused(gran, v, n, hseed, quant, rnd):
    """hadamard, then the package's quantize of the rotated values: (q, scales, zero points)
    per token, (q, scale, zero point) per tensor; n None: no rotation"""
    Q, sym, scale, zp = quant
    vr = v if n is None else bq.hadamard(v, n, seed=hseed)
    if gran == "tensor":
        return bqo.quantize_per_tensor(vr, scale, zp, Q, **rnd), scale, zp
    return bq.dynamic_quant(vr, "token", dtype=Q, symmetric=sym, **rnd)


def _check(gran, got, want):
    q, s, z = got
    wq, ws, wz = want
    assert equal(q, wq), "the codes"
    if gran == "tensor":
        assert (s, z) == (ws, wz)
    else:
        assert equal(s.reshape(-1), ws.reshape(-1)), "the scales (the rotated rows')"
        assert (z is None) == (wz is None) and (z is None or equal(z.reshape(-1), wz.reshape(-1))), "zero points"


@pytest.mark.parametrize("producer,fname,store", CASES)
def test_fused_rotation_is_the_unfused_composition(producer, fname, store):
    T = getattr(torch, fname)
    inputs = _inputs(producer, T)
    v0 = res0 = None
    for gran, n, signs, sr in CYCLE:
        kw, quant = _quant_kw(gran, store)
        opts, hseed, rnd = _options(n, signs, sr)
        (q, s, z, v), res = _fused(producer, inputs, True, **kw, **opts)
        what = (gran, n, signs, sr)
        assert q.dtype == quant[0] and q.shape == v.shape and v.dtype == T, what
        if v0 is None:
            v0, res0 = v, res
        assert equal(v, v0), ("the values are the producer's, unrotated, whatever the options", what)
        assert res is None or equal(res, res0), ("the residual receives x + residual", what)
        _check(gran, (q, s, z), _unfused(gran, v, n, hseed, quant, rnd))
        assert not equal(q, _unfused(gran, v, None, None, quant, rnd)[0]), ("the rotation changed nothing", what)
        # without the values: the library's workspace holds them; the same bits
        out, res2 = _fused(producer, inputs, False, **kw, **opts)
        assert len(out) == 3, what
        _check(gran, out, (q, s, z))
        assert res is None or equal(res2, res), what


def test_dynamic_per_token_quant_is_the_same_composition():
    """the unfused op may as well be dynamic_per_token_quant (int8, symmetric and not)"""
    x, w, r = _inputs("rms_residual", torch.float32)
    for sym in (True, False):
        opts, hseed, rnd = _options(128, True, True)
        (q, s, z, v), _ = _fused("rms_residual", (x, w, r), True, symmetric=sym, **opts)
        tq, ts, tz = bqo.dynamic_per_token_quant(bq.hadamard(v, 128, seed=hseed), symmetric=sym, **rnd)
        assert equal(q, tq) and equal(s.reshape(-1), ts.reshape(-1))
        assert (z is None) == sym and (sym or equal(z.reshape(-1), tz.reshape(-1)))


@pytest.mark.parametrize("producer", ["rms", "rms_residual", "silu", "gelu_tanh"])
def test_values_are_the_contract(producer):
    """the values a rotating call returns are the contract's (test_gpu_fused.py's reference),
    not rotated"""
    from test_gpu_fused import ref_gated, ref_rmsnorm
    T = torch.bfloat16
    x, w, r = _inputs(producer, T, shape=(9, 256), seed=5)
    opts, _, _ = _options(16, True, True)
    (q, s, z, v), res = _fused(producer, (x, w, r), True, **opts)
    if producer.startswith("rms"):
        h, n = ref_rmsnorm(x, w, EPS, r)
        assert equal(v.cpu(), n)
        if r is not None:
            assert equal(res.cpu(), h)
    else:
        assert equal(v.cpu(), ref_gated(x, producer))


def test_new_seed_reuses_the_call():
    """a new seed or offset needs no new validated call, and gives that seed's signs and draws"""
    inputs = _inputs("rms_residual", torch.bfloat16, seed=7)
    opts, hseed, rnd = _options(128, True, True)
    kw, quant = _quant_kw("token", "int8")
    (q, s, z, v), _ = _fused("rms_residual", inputs, True, **kw, **opts)
    _check("token", (q, s, z), _unfused("token", v, 128, hseed, quant, rnd))  # (the unfused calls made too)
    n = bqo.prepared_count()
    for seed, offset in ((SEED + 1, 5), ((1 << 64) - 1, OFF), (SEED, OFF + 1)):
        opts2, hseed2, rnd2 = _options(128, True, True, seed, offset)
        (q2, s2, z2, v2), _ = _fused("rms_residual", inputs, True, **kw, **opts2)
        assert equal(v2, v)
        _check("token", (q2, s2, z2), _unfused("token", v2, 128, hseed2, quant, rnd2))
        assert not equal(q2, q), (seed, offset)
    assert bqo.prepared_count() == n, "a new seed or offset needs no new call"


@pytest.mark.parametrize("gran", ["token", "tensor"])
def test_rows_alone_with_the_offset_advanced(gran):
    """rows r0 .. r1 computed alone with offset + r0 * D give the whole call's codes (and
    scales) there: each row's result depends on that row alone, the rotation too"""
    x, w, _ = _inputs("rms", torch.bfloat16, shape=(29, 256), seed=9)
    kw, _ = _quant_kw(gran, "int8")
    q, s, _ = bqo.rms_norm_quant(x, w, EPS, **kw, **_options(128, True, True)[0])
    for r0, r1 in ((0, 1), (1, 4), (7, 29)):
        opts = _options(128, True, True, offset=OFF + r0 * 256)[0]
        pq, ps, _ = bqo.rms_norm_quant(x[r0:r1], w, EPS, **kw, **opts)
        assert equal(pq, q[r0:r1]), (r0, r1)
        if gran == "token":
            assert equal(ps, s[r0:r1]), (r0, r1)


def test_strided_long_rows():
    """x with a row stride past its row, rows of 4096 (the staged kernels): the composition
    still, with and without the values"""
    T, d, rows = torch.bfloat16, 4096, 6
    base = gen((rows, d + 64), T, seed=d, specials=False, scale=0.5).to(DEV)
    x = base[:, :d]
    w = gen((d,), T, seed=d + 1, specials=False, scale=0.3).to(DEV)
    r = gen((rows, d), T, seed=d + 2, specials=False).to(DEV)
    opts, hseed, rnd = _options(128, True, True)
    for gran in ("token", "tensor"):
        kw, quant = _quant_kw(gran, "int8")
        (q, s, z, v), res = _fused("rms_residual", (x, w, r), True, **kw, **opts)
        _check(gran, (q, s, z), _unfused(gran, v, 128, hseed, quant, rnd))
        out, _ = _fused("rms_residual", (x, w, r), False, **kw, **opts)
        _check(gran, out, (q, s, z))


def test_refusals():
    """per group is refused by the package (before any launch), naming rotation_block; a
    block past a per-token kernel's reach (256 float32 elements: 1 KiB, past a warp's 32
    accesses of 16 bytes) by the library, NotSupportedError; per tensor takes it"""
    x, w, _ = _inputs("rms", torch.float32, shape=(4, 512))
    g, _, _ = _inputs("silu", torch.float32, shape=(4, 512))
    before = bqo.prepared_count()
    with pytest.raises(bq.InvalidArgumentError, match="rotation_block.*per token or per tensor"):
        bqo.rms_norm_quant(x, w, EPS, group_size=32, rotation_block=16)
    with pytest.raises(bq.InvalidArgumentError, match="rotation_block.*per token or per tensor"):
        bqo.silu_and_mul_quant(g, group_size=64, rotation_block=64, random_signs=True, seed=1)
    assert bqo.prepared_count() == before
    with pytest.raises(bq.NotSupportedError, match="rotation"):
        bqo.rms_norm_quant(x, w, EPS, rotation_block=256)
    (q, _, _, v), _ = _fused("rms", (x, w, None), True, scale=1 / 64, rotation_block=256)
    assert equal(q, bqo.quantize_per_tensor(bq.hadamard(v, 256), 1 / 64, 0, torch.int8))


# ---- the microscaling fused producers: stochastic rounding and the rotation ---------------------------
# (format, float type, producer, NVFP4's tensor scale given)
MX_CASES = [("mxfp8", "bfloat16", "rms_residual", False), ("mxfp8", "float32", "silu", False),
            ("mxfp4", "float16", "gelu_tanh", False), ("nvfp4", "float32", "rms", False),
            ("nvfp4", "bfloat16", "silu", True)]
MX_OPTS = [dict(rounding="stochastic", seed=SEED, offset=OFF), dict(rotation_block=2),
           dict(rotation_block=16, random_signs=True, seed=SEED),
           dict(rotation_block=128, random_signs=True, rounding="stochastic", seed=SEED, offset=OFF),
           dict(rotation_block=16, rounding="stochastic", seed=SEED, offset=3)]


def _mx_kw(fmt, given=False):
    if fmt == "nvfp4":
        ts = torch.tensor([0.0375], dtype=torch.float32, device=DEV) if given else None
        return dict(group_size=16, dtype="e2m1", scale_dtype=torch.float8_e4m3fn, tensor_scale=ts)
    return dict(group_size=32, dtype=torch.float8_e4m3fn if fmt == "mxfp8" else "e2m1")


def _mx_check(got, want, what):
    q, s, t = got
    wq, ws, wt = want
    assert equal(q, wq), ("the codes", what)
    assert equal(s, ws), ("the scales", what)
    assert (t is None) == (wt is None) and (t is None or equal(t, wt)), ("the tensor scale", what)


@pytest.mark.parametrize("fmt,fname,producer,given", MX_CASES)
def test_fused_mx_is_mx_quant_of_the_values(fmt, fname, producer, given):
    """the fused call with stochastic rounding and/or the rotation is mx_quant of its values
    (dynamic: the scales, and NVFP4's tensor scale where computed) with the same options;
    without the values, the same bits"""
    T = getattr(torch, fname)
    inputs = _inputs(producer, T, seed=21)
    kw = _mx_kw(fmt, given)
    v0 = res0 = None
    for opts in MX_OPTS:
        (q, s, t, v), res = _fused_mx(producer, inputs, True, **kw, **opts)
        what = tuple(sorted(opts.items()))
        if v0 is None:
            v0, res0 = v, res
        assert equal(v, v0), ("the values do not depend on the options", what)
        assert res is None or equal(res, res0), what
        assert (t is None) == (fmt != "nvfp4" or given), what
        _mx_check((q, s, t), bq.mx_quant(v, **kw, **opts), what)
        assert not equal(q, bq.mx_quant(v, **kw)[0]), ("the options changed nothing", what)
        out, res2 = _fused_mx(producer, inputs, False, **kw, **opts)
        assert len(out) == 3, what
        _mx_check(out, (q, s, t), what)
        assert res is None or equal(res2, res), what


def test_fused_mx_rows_alone():
    """rows computed alone with the offset advanced give the whole call's codes and scales"""
    x, w, _ = _inputs("rms", torch.bfloat16, shape=(29, 256), seed=23)
    kw = _mx_kw("mxfp8")
    opts = dict(rotation_block=128, random_signs=True, rounding="stochastic", seed=SEED)
    q, s, _ = bqo.rms_norm_mx_quant(x, w, EPS, **kw, **opts, offset=OFF)
    for r0, r1 in ((0, 1), (3, 10), (10, 29)):
        pq, ps, _ = bqo.rms_norm_mx_quant(x[r0:r1], w, EPS, **kw, **opts, offset=OFF + r0 * 256)
        assert equal(pq, q[r0:r1]) and equal(ps, s[r0:r1]), (r0, r1)


def test_fused_mx_block_past_the_kernels_reach():
    """a float32 block of 256 (1 KiB) is past the microscaling kernels' 32 accesses: the
    library refuses it, NotSupportedError"""
    g, _, _ = _inputs("silu", torch.float32, shape=(4, 512))
    with pytest.raises(bq.NotSupportedError, match="rotation"):
        bqo.silu_and_mul_mx_quant(g, dtype=torch.float8_e4m3fn, rotation_block=256)


# ---- the other front ends -------------------------------------------------------------------------
def _bytes(a):
    """a DLPack front end's array as a torch uint8 tensor of its bytes (FP8 and E2M1 codes,
    one-byte scales: whatever DLPack type codes this torch takes)"""
    from baracuda_quant import dlpack
    from baracuda_quant._enums import DType
    return torch.from_dlpack(dlpack.DeviceArray(a.ptr, a.shape, DType.U8, a.device, owner=a, strides=a.strides))


def test_dlpack_front_end_gives_the_same_bits():
    from baracuda_quant import dlpack
    x, w, r = _inputs("rms_residual", torch.bfloat16, seed=13)
    g, _, _ = _inputs("silu", torch.bfloat16, seed=14)
    opts = _options(128, True, True, seed=-3, offset=12)[0]
    ts = torch.tensor([0.0375], dtype=torch.float32, device=DEV)
    r1, r2 = r.clone(), r.clone()
    torch.cuda.synchronize()
    q, s, z, n = dlpack.rms_norm_quant(TensorProducer(x), TensorProducer(w), EPS, residual=TensorProducer(r1),
                                       out_dtype="int8", return_normed=True, **opts)
    sq, _, _ = dlpack.gelu_tanh_and_mul_quant(TensorProducer(g), scale=1 / 64, **opts)
    mq, ms, _ = dlpack.rms_norm_mx_quant(TensorProducer(x), TensorProducer(w), EPS, dtype="float8_e4m3fn", **opts)
    fq, fs, ft = dlpack.silu_and_mul_mx_quant(TensorProducer(g), group_size=16, dtype="e2m1",
                                              scale_dtype="float8_e4m3fn", tensor_scale=TensorProducer(ts), **opts)
    torch.cuda.synchronize()
    tq, ts_, tz, tn = bqo.rms_norm_quant(x, w, EPS, residual=r2, return_normed=True, **opts)
    tsq, _, _ = bqo.gelu_tanh_and_mul_quant(g, scale=1 / 64, **opts)
    tmq, tms, _ = bqo.rms_norm_mx_quant(x, w, EPS, **_mx_kw("mxfp8"), **opts)
    tfq, tfs, tft = bqo.silu_and_mul_mx_quant(g, **dict(_mx_kw("nvfp4"), tensor_scale=ts), **opts)
    assert z is None and tz is None and ft is None and tft is None
    for a, b in ((q, tq), (s, ts_), (n, tn), (sq, tsq)):
        assert equal(torch.from_dlpack(a), b)
    for a, b in ((mq, tmq), (ms, tms), (fq, tfq), (fs, tfs)):
        assert equal(_bytes(a), b.view(torch.uint8))
    assert equal(r1, r2)


def test_torch_compile_fullgraph():
    """compiled fused producers with the rotation (and microscaling ones with stochastic
    rounding) give the eager bits (aot_eager: the fake kernels and the traced arguments,
    without code generation's compile time)"""
    import torch._dynamo
    torch._dynamo.reset()
    x, w, _ = _inputs("rms", torch.bfloat16, seed=15)
    g, _, _ = _inputs("silu", torch.bfloat16, seed=16)
    rot = dict(rotation_block=128, random_signs=True, seed=(1 << 64) - 9)
    nv = _mx_kw("nvfp4", True)

    def step(x, w, g):
        return (bq.rms_norm_quant(x, w, EPS, rounding="stochastic", offset=33, **rot)[:2] +
                bq.gelu_tanh_and_mul_quant(g, out_dtype=torch.uint8, symmetric=False, rotation_block=16)[:3] +
                bq.gelu_tanh_and_mul_quant(g, scale=0.125, **rot)[:1] +
                bq.rms_norm_mx_quant(x, w, EPS, dtype=torch.float8_e4m3fn, rounding="stochastic", seed=5,
                                     offset=1)[:2] +
                bq.silu_and_mul_mx_quant(g, **nv, **rot)[:2])
    eager, got = step(x, w, g), torch.compile(step, fullgraph=True, backend="aot_eager")(x, w, g)
    assert len(eager) == len(got) == 10
    for a, b in zip(eager, got):
        assert equal(a, b)

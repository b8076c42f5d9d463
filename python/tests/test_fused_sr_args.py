"""Stochastic rounding in the fused producers (rms_norm_quant, silu_and_mul_quant,
gelu_tanh_and_mul_quant) with no device and no torch: _core.fused hands desc.rounding (a
".sr" SKU), args.seed and args.offset (modulo 2^64) to the library, whose own validation
takes them at every granularity, storage type and with or without args.out; the options'
errors name the option before anything is imported, allocated or launched; the microscaling
fused producers hand rounding="stochastic" to the library too (test_fused_rot_args.py has
their rotation); and a call without out allocates the workspace the plan reports and hands
it to the run."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib, dlpack
from baracuda_quant._enums import Activation, DType, Direction, Granularity, Op
from conftest import count_buffers
from dlpack_fakes import Producer
from test_fused_args import KNOWS_FUSED, arr, gated, rms

F, S8, U8, S32, BF16 = DType.F32, DType.S8, DType.U8, DType.S32, DType.BF16
M64 = 1 << 64
ROUNDING = 15  # desc_key's index of desc.rounding


@pytest.fixture
def validated(monkeypatch):
    """_core._launch replaced by the library's own validation (where it knows the fused ops);
    records (key, args)"""
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        if KNOWS_FUSED:
            _lib.validate(key, device, args)
        seen.append((key, _lib.Args.from_buffer_copy(args)))
    monkeypatch.setattr(_core, "_launch", launch)
    return seen


@pytest.fixture
def allocs(monkeypatch):
    """the DLPack front end's buffers, counted (host memory in place of bq_malloc's)"""
    monkeypatch.setattr(dlpack, "_set_device", lambda index: None)
    return count_buffers(monkeypatch)


def _sku(key):
    return _lib.sku(_lib.make_desc(key, 0))


# ---- _core.fused --------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [DType.F32, DType.F64, DType.F16, BF16])
def test_core_fused_carries_the_rounding(validated, t):
    """per tensor (static), per token and per group (dynamic, symmetric or not), int8, uint8,
    E4M3 and E5M2, with and without args.out, RMSNorm (with a residual) and both gated
    activations: desc.rounding 1 and the seed and offset modulo 2^64"""
    sr = dict(rounding="stochastic", seed=-1, offset=M64 + 7)
    rms(t=t, **sr)
    rms(t=t, residual=arr((4, 64), t), out=arr((4, 64), t), **sr)
    rms(t=t, y=arr((4, 64), U8), qmin=0, qmax=255, out_scales=arr((4, 2), F), out_zero_points=arr((4, 2), S32),
        group_size=32, **sr)
    rms(t=t, y=arr((4, 64), DType.E4M3), scale=0.05, **sr)
    rms(t=t, y=arr((4, 64), DType.E5M2), out_scales=arr((4, 4), F), group_size=16, out=arr((4, 64), t), **sr)
    rms(t=t, scale=0.05, zero_point=-3, out=arr((4, 64), t), **sr)
    gated(t=t, **sr)
    gated(t=t, activation=Activation.GELU_TANH, y=arr((4, 64), DType.E4M3), out=arr((4, 64), t),
          out_scales=arr((4, 4), F), group_size=16, **sr)
    gated(t=t, y=arr((4, 64), U8), qmin=0, qmax=255, out_scales=arr((4, 1), F), out_zero_points=arr((4, 1), S32),
          **sr)
    gated(t=t, activation=Activation.GELU_TANH, scale=0.25, **sr)
    assert len(validated) == 10
    for key, a in validated:
        assert key[ROUNDING] == 1 and (a.seed, a.offset) == (M64 - 1, 7)
        assert ".sr" in _sku(key), _sku(key)
    grans = [key[2] for key, _ in validated]
    assert grans == [Granularity.PER_TOKEN, Granularity.PER_TOKEN, Granularity.PER_GROUP, Granularity.PER_TENSOR,
                     Granularity.PER_GROUP, Granularity.PER_TENSOR, Granularity.PER_TOKEN, Granularity.PER_GROUP,
                     Granularity.PER_TOKEN, Granularity.PER_TENSOR]


def test_core_fused_rounds_to_nearest_by_default(validated):
    """without the options (and with rounding="nearest"): desc.rounding 0, no seed, no offset,
    and the SKU of before"""
    rms()
    gated(rounding="nearest")
    rms(rounding="stochastic", seed=3)
    (k0, a0), (k1, a1), (k2, a2) = validated
    assert (k0[ROUNDING], a0.seed, a0.offset) == (0, 0, 0) and (k1[ROUNDING], a1.seed, a1.offset) == (0, 0, 0)
    assert ".sr" not in _sku(k0) and ".sr" not in _sku(k1)
    assert (k2[ROUNDING], a2.seed, a2.offset) == (1, 3, 0)
    assert k2[:ROUNDING] == k0[:ROUNDING]  # the same descriptor otherwise


@pytest.mark.parametrize("kw,word", [
    (dict(rounding="bogus", seed=1), "rounding"),
    (dict(rounding="stochastic"), "seed"),
    (dict(rounding="stochastic", seed=1.5), "seed"),
    (dict(seed=2), "seed and offset"),
    (dict(offset=2), "seed and offset"),
    (dict(rounding="stochastic", seed=1, offset=0.5), "offset"),
])
def test_core_fused_refuses_bad_options(validated, kw, word):
    for call in (lambda: rms(**kw), lambda: gated(**kw), lambda: rms(scale=0.5, **kw)):
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert validated == []


def test_library_takes_stochastic_rounding_for_microscaling():
    """the library's own answer: a fused microscaling descriptor with desc.rounding set (once
    NOT_SUPPORTED) passes its validation, and compiles to a ".sr" SKU"""
    if not KNOWS_FUSED:
        pytest.skip("this library does not offer the fused producers yet")
    a = _lib.Args(rows=4, cols=64, x=0x100000, y=0x200000, x_row_stride=64, y_row_stride=64, out_scales=0x300000,
                  norm_weight=0x400000, group_size=32, group_row_stride=2, eps=1e-6, seed=1)
    key = _lib.desc_key(Op.RMSNORM_QUANTIZE, Direction.FORWARD, Granularity.PER_GROUP, BF16, DType.E4M3, 0, 0,
                        DType.UE8M0, rounding=1)
    _lib.validate(key, 0, a)
    assert ".sr" in _sku(key) and ".sr" not in _sku(key[:ROUNDING] + (0,) + key[ROUNDING + 1:])


def test_core_fused_mx_carries_the_rounding(validated):
    """_core.fused_mx hands rounding="stochastic" (desc.rounding 1, the seed and offset modulo
    2^64) to the library, whose validation takes it; the options' errors as sr_fields's,
    before anything is launched"""
    x, w = arr((4, 64), BF16), arr((64,), BF16)
    codes, scales = arr((4, 64), DType.E4M3), arr((4, 2), DType.UE8M0)
    kw = dict(x=x, codes=codes, scales=scales, elem=DType.E4M3, group_size=32, norm_weight=w, eps=1e-6)
    with pytest.raises(bq.InvalidArgumentError, match="seed"):
        _core.fused_mx(Op.RMSNORM_QUANTIZE, rounding="stochastic", **kw)
    with pytest.raises(bq.InvalidArgumentError, match="seed and offset"):
        _core.fused_mx(Op.RMSNORM_QUANTIZE, seed=1, **kw)
    with pytest.raises(bq.InvalidArgumentError, match="rounding"):
        _core.fused_mx(Op.RMSNORM_QUANTIZE, rounding="up", **kw)
    assert validated == []
    _core.fused_mx(Op.RMSNORM_QUANTIZE, rounding="nearest", **kw)
    _core.fused_mx(Op.RMSNORM_QUANTIZE, rounding="stochastic", seed=-1, offset=M64 + 7, **kw)
    e2 = dict(kw, codes=arr((4, 32), U8), elem=DType.E2M1, scales=arr((4, 4), DType.E4M3), group_size=16,
              tensor_scale=arr((1,), F))
    _core.fused_mx(Op.GATED_QUANTIZE, rounding="stochastic", seed=3, **dict(e2, x=arr((4, 128), BF16),
                                                                             norm_weight=None, eps=0.0))
    got = [(key[ROUNDING], a.seed, a.offset) for key, a in validated]
    assert got == [(0, 0, 0), (1, M64 - 1, 7), (1, 3, 0)], got
    assert ".sr" in _sku(validated[1][0]) and ".sr" in _sku(validated[2][0]) and ".sr" not in _sku(validated[0][0])


# ---- the DLPack front end ------------------------------------------------------------------------
@pytest.fixture
def launches(validated, allocs):
    return validated


def test_dlpack_fused_ops_carry_the_rounding(launches):
    """rms_norm_quant (with a residual, per token, per group, per tensor), silu_and_mul_quant
    and gelu_tanh_and_mul_quant hand desc.rounding, the seed and the offset to the library;
    rounding to nearest neither"""
    x, w, r = Producer((2, 3, 256), BF16), Producer((256,), BF16), Producer((2, 3, 256), BF16)
    g = Producer((6, 2 * 128), DType.F16)
    sr = dict(rounding="stochastic")
    bq.rms_norm_quant(x, w, 1e-6, **sr, seed=-1, offset=9)
    bq.rms_norm_quant(x, w, 1e-6, residual=r, symmetric=False, group_size=64, out_dtype="uint8", return_normed=True,
                      **sr, seed=2, offset=M64)
    bq.rms_norm_quant(x, w, 1e-6, scale=0.25, zero_point=4, **sr, seed=3, offset=-1)
    bq.silu_and_mul_quant(g, out_dtype="float8_e4m3fn", return_act=True, **sr, seed=4)
    bq.gelu_tanh_and_mul_quant(g, group_size=32, out_dtype="float8_e5m2", **sr, seed=5, offset=6)
    bq.gelu_tanh_and_mul_quant(g, scale=0.5, out_dtype="int8", **sr, seed=7)
    bq.rms_norm_quant(x, w, 1e-6)
    bq.silu_and_mul_quant(g, rounding="nearest")
    got = [(key[ROUNDING], a.seed, a.offset) for key, a in launches]
    assert got == [(1, M64 - 1, 9), (1, 2, 0), (1, 3, M64 - 1), (1, 4, 0), (1, 5, 6), (1, 7, 0), (0, 0, 0),
                   (0, 0, 0)], got
    skus = [_sku(key) for key, _ in launches]
    assert all(".sr" in s for s in skus[:6]) and not any(".sr" in s for s in skus[6:]), skus
    assert [key[2] for key, _ in launches[:6]] == [Granularity.PER_TOKEN, Granularity.PER_GROUP,
                                                   Granularity.PER_TENSOR, Granularity.PER_TOKEN,
                                                   Granularity.PER_GROUP, Granularity.PER_TENSOR]
    assert launches[1][1].out and not launches[0][1].out and launches[3][1].out  # (return_normed / return_act)


def test_dlpack_fused_refusals_name_the_option(launches, allocs):
    """bad rounding options raise naming the option, the microscaling fused producers' too,
    before anything is imported, allocated or launched"""
    x, w, g = Producer((4, 64), DType.F32), Producer((64,), DType.F32), Producer((4, 128), DType.F32)
    cases = [
        (bq.InvalidArgumentError, "rounding", lambda: dlpack.rms_norm_quant(x, w, 1e-6, rounding="up", seed=1)),
        (bq.InvalidArgumentError, "seed", lambda: dlpack.rms_norm_quant(x, w, 1e-6, rounding="stochastic")),
        (bq.InvalidArgumentError, "seed", lambda: dlpack.silu_and_mul_quant(g, scale=0.5, rounding="stochastic")),
        (bq.InvalidArgumentError, "seed and offset", lambda: dlpack.gelu_tanh_and_mul_quant(g, seed=1)),
        (bq.InvalidArgumentError, "seed and offset", lambda: dlpack.rms_norm_quant(x, w, 1e-6, offset=3)),
        (bq.InvalidArgumentError, "offset",
         lambda: dlpack.silu_and_mul_quant(g, rounding="stochastic", seed=1, offset="2")),
        (bq.InvalidArgumentError, "seed", lambda: dlpack.rms_norm_mx_quant(x, w, 1e-6, rounding="stochastic")),
        (bq.InvalidArgumentError, "rounding", lambda: dlpack.silu_and_mul_mx_quant(g, dtype="float8_e4m3fn",
                                                                                   rounding="up", seed=1)),
        (bq.InvalidArgumentError, "offset", lambda: bq.gelu_tanh_and_mul_mx_quant(g, scale_dtype="float8_e4m3fn",
                                                                                  rounding="stochastic", seed=1,
                                                                                  offset=0.5)),
        (bq.InvalidArgumentError, "seed and offset", lambda: dlpack.rms_norm_mx_quant(x, w, 1e-6, seed=1)),
    ]
    for cls, word, call in cases:
        with pytest.raises(cls, match=word):
            call()
    assert launches == [] and allocs == []
    assert x.streams == [] and w.streams == [] and g.streams == []  # (no input was imported)


def test_dlpack_rounding_is_keyword_only():
    x, w = Producer((4, 64), DType.F32), Producer((64,), DType.F32)
    with pytest.raises(TypeError):
        dlpack.rms_norm_quant(x, w, 1e-6, None, True, None, "int8", False, None, 0, None, None, None, None,
                              "stochastic")


def test_dlpack_fused_mx_rounds_to_nearest(launches):
    """the microscaling fused producers take rounding="nearest" (the default) as before"""
    x, w = Producer((4, 64), BF16), Producer((64,), BF16)
    dlpack.rms_norm_mx_quant(x, w, 1e-6, dtype="float8_e4m3fn", rounding="nearest")
    dlpack.silu_and_mul_mx_quant(Producer((4, 128), BF16))
    assert [key[ROUNDING] for key, _ in launches] == [0, 0]


# ---- the workspace: allocated when the plan reports one, handed to the run -----------------------------
def test_dlpack_fused_sr_allocates_the_workspace(runs, allocs):
    """without the values (return_normed / return_act False) a stochastic call gets a
    workspace of the size the plan reports, kept with q until the launch has run; with them,
    or rounding to nearest, none"""
    x, w = Producer((3, 2, 96), DType.F16), Producer((96,), DType.F16)
    g = Producer((5, 2 * 64), DType.F32)
    sr = dict(rounding="stochastic", seed=11, offset=2)
    q, s, z = dlpack.rms_norm_quant(x, w, 1e-6, **sr)
    q2, s2, z2 = dlpack.silu_and_mul_quant(g, scale=0.5, **sr)
    dlpack.rms_norm_quant(x, w, 1e-6, return_normed=True, **sr)
    dlpack.gelu_tanh_and_mul_quant(g)
    assert [(n, ws is not None, out is not None) for _, out, ws, n in runs] == [
        (6 * 96 * 2, True, False), (5 * 64 * 4, True, False), (0, False, True), (0, False, False)]
    assert 6 * 96 * 2 in allocs and 5 * 64 * 4 in allocs
    kept = [b for b in q._keep if getattr(b, "nbytes", None) == 6 * 96 * 2]
    assert kept and kept[0].ptr == runs[0][2]  # the workspace run 0 read, alive with q
    assert any(getattr(b, "nbytes", None) == 5 * 64 * 4 for b in q2._keep)

"""The fused rotation in the fused producers (rms_norm_quant, silu_and_mul_quant,
gelu_tanh_and_mul_quant: per tensor and per token; and the microscaling ones, with stochastic
rounding too) with no device and no torch: _core.fused and _core.fused_mx hand desc.rotation,
desc.random_signs (a ".rot" SKU), args.rotation_block and the seed keying the signs to the
library, whose own validation takes them; the options' errors name the option before anything
is imported, allocated or launched (per group refused by name: the library offers no
per-group rotation into integer or FP8 storage); and a call without the values allocates the
workspace the plan reports. test_gpu_fused_rot.py runs them on a GPU."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib, dlpack
from baracuda_quant._enums import Activation, DType, Direction, Granularity, Op
from conftest import count_buffers
from dlpack_fakes import Producer
from test_fused_args import KNOWS_FUSED, arr, gated, rms

F, S8, U8, S32, BF16, F16, E4M3 = DType.F32, DType.S8, DType.U8, DType.S32, DType.BF16, DType.F16, DType.E4M3
M64 = 1 << 64
SIGNS, ROUNDING, ROTATION = 14, 15, 16  # desc_key's indices of desc.random_signs, .rounding, .rotation


@pytest.fixture
def validated(monkeypatch):
    """_core._launch replaced by the library's own validation; records (key, args)"""
    if not KNOWS_FUSED:
        pytest.skip("this library does not offer the fused producers yet")
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        _lib.validate(key, device, args)
        seen.append((key, _lib.Args.from_buffer_copy(args)))
    monkeypatch.setattr(_core, "_launch", launch)
    return seen


def _sku(key):
    return _lib.sku(_lib.make_desc(key, 0))


def _rot(key, a):
    """(rotation, signs, rounding, rotation_block, seed, offset) of a launch"""
    return key[ROTATION], key[SIGNS], key[ROUNDING], a.rotation_block, a.seed, a.offset


# ---- _core.fused ------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [DType.F32, DType.F64, F16, BF16])
def test_core_fused_carries_the_rotation(validated, t):
    """per tensor (static) and per token (dynamic, symmetric or not), int8, uint8, E4M3 and
    E5M2, with and without args.out, RMSNorm (with a residual) and both gated activations,
    with and without the signs and stochastic rounding: desc.rotation 1, desc.random_signs,
    args.rotation_block, the seed modulo 2^64 (keying the signs and the draws alike)"""
    rms(t=t, rotation_block=32)
    rms(t=t, residual=arr((4, 64), t), out=arr((4, 64), t), rotation_block=64, random_signs=True, seed=-1)
    rms(t=t, y=arr((4, 64), U8), qmin=0, qmax=255, out_zero_points=arr((4, 1), S32), rotation_block=2,
        rounding="stochastic", seed=5, offset=M64 + 3)
    rms(t=t, y=arr((4, 64), E4M3), scale=0.05, rotation_block=16, random_signs=True, seed=7)
    rms(t=t, scale=0.05, zero_point=-3, out=arr((4, 64), t), rotation_block=8, rounding="stochastic", seed=2,
        random_signs=True)
    gated(t=t, rotation_block=4)
    gated(t=t, activation=Activation.GELU_TANH, y=arr((4, 64), DType.E5M2), out=arr((4, 64), t), rotation_block=32,
          random_signs=True, seed=M64 + 9)
    gated(t=t, activation=Activation.GELU_TANH, scale=0.25, y=arr((4, 64), U8), qmin=0, qmax=255, zero_point=128,
          rotation_block=64)
    got = [_rot(key, a) for key, a in validated]
    assert got == [(1, 0, 0, 32, 0, 0), (1, 1, 0, 64, M64 - 1, 0), (1, 0, 1, 2, 5, 3), (1, 1, 0, 16, 7, 0),
                   (1, 1, 1, 8, 2, 0), (1, 0, 0, 4, 0, 0), (1, 1, 0, 32, 9, 0), (1, 0, 0, 64, 0, 0)], got
    for key, _ in validated:
        assert ".rot" in _sku(key), _sku(key)
    assert [".sr" in _sku(key) for key, _ in validated] == [False, False, True, False, True, False, False, False]
    assert [key[2] for key, _ in validated] == [Granularity.PER_TOKEN] * 3 + [Granularity.PER_TENSOR] * 2 + \
        [Granularity.PER_TOKEN] * 2 + [Granularity.PER_TENSOR]


def test_core_fused_is_unrotated_by_default(validated):
    """without the options: desc.rotation 0, no block, and the descriptor and SKU of before"""
    rms()
    rms(rotation_block=None, random_signs=False)
    rms(rotation_block=16)
    (k0, a0), (k1, a1), (k2, a2) = validated
    assert _rot(k0, a0) == _rot(k1, a1) == (0, 0, 0, 0, 0, 0) and ".rot" not in _sku(k0)
    assert _rot(k2, a2) == (1, 0, 0, 16, 0, 0)
    assert k2[:ROTATION] == k0[:ROTATION]  # the same descriptor otherwise


@pytest.mark.parametrize("kw,word", [
    (dict(random_signs=True), "random_signs"),
    (dict(random_signs=True, seed=1), "random_signs"),
    (dict(rotation_block=16, random_signs=True), "seed: the random signs"),
    (dict(rotation_block=16, seed=1), "seed and offset"),
    (dict(rotation_block="16"), "rotation_block"),
    (dict(rotation_block=16.5), "rotation_block"),
    (dict(rotation_block=1), r"rotation_block \(1\) must be a power of two"),
    (dict(rotation_block=24), r"rotation_block \(24\) must be a power of two"),
    (dict(rotation_block=512), r"rotation_block \(512\) must be a power of two"),
    (dict(rotation_block=128), r"rotation_block \(128\) must be .*dividing the last dimension \(64\)"),
    (dict(rotation_block=16, rounding="stochastic"), "seed"),
])
def test_core_fused_refuses_bad_options(validated, kw, word):
    for call in (lambda: rms(**kw), lambda: gated(**kw), lambda: rms(scale=0.5, **kw)):
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert validated == []


def test_core_fused_refuses_the_rotation_per_group(validated):
    """per group (group_size with computed scales) the rotation is refused by name, before the
    library (which answers NOT_SUPPORTED) is called; the same call unrotated goes through"""
    grouped = dict(out_scales=arr((4, 2), F), group_size=32)
    for call in (lambda: rms(rotation_block=16, **grouped),
                 lambda: gated(rotation_block=32, random_signs=True, seed=1, **grouped),
                 lambda: rms(rotation_block=16, rounding="stochastic", seed=1, y=arr((4, 64), E4M3), **grouped)):
        with pytest.raises(bq.InvalidArgumentError, match="rotation_block.*per token or per tensor"):
            call()
    assert validated == []
    rms(**grouped)
    assert len(validated) == 1 and validated[0][0][2] == Granularity.PER_GROUP


def test_library_refuses_the_rotation_per_group():
    """the library's own answer, which the package's check anticipates: a fused per-group
    integer descriptor with desc.rotation is NOT_SUPPORTED; per token it validates"""
    if not KNOWS_FUSED:
        pytest.skip("this library does not offer the fused producers yet")
    a = _lib.Args(rows=4, cols=64, x=0x100000, y=0x200000, x_row_stride=64, y_row_stride=64, out_scales=0x300000,
                  norm_weight=0x400000, group_size=32, eps=1e-6, rotation_block=32)
    key = _lib.desc_key(Op.RMSNORM_QUANTIZE, Direction.FORWARD, Granularity.PER_GROUP, BF16, S8, -128, 127, F,
                        rotation=1)
    with pytest.raises(bq.Error) as e:
        _lib.validate(key, 0, a)
    assert e.value.status == bq.Status.ERROR_NOT_SUPPORTED
    a.group_size = 0
    _lib.validate(key[:2] + (int(Granularity.PER_TOKEN),) + key[3:], 0, a)


# ---- _core.fused_mx -----------------------------------------------------------------------------
def _mx(op=Op.RMSNORM_QUANTIZE, t=BF16, fmt="mxfp8", **kw):
    """a microscaling fused call on [4, 64] output: MXFP8 (E4M3, groups of 32), MXFP4 (E2M1,
    32) or NVFP4 (E2M1, 16, E4M3 scales, the tensor scale computed)"""
    x = arr((4, 128 if op == Op.GATED_QUANTIZE else 64), t)
    g = 16 if fmt == "nvfp4" else 32
    f = dict(x=x, group_size=g, scales=arr((4, 64 // g), E4M3 if fmt == "nvfp4" else DType.UE8M0),
             codes=arr((4, 64), E4M3) if fmt == "mxfp8" else arr((4, 32), U8),
             elem=E4M3 if fmt == "mxfp8" else DType.E2M1)
    if fmt == "nvfp4":
        f["out_tensor_scale"] = arr((1,), F)
    if op == Op.RMSNORM_QUANTIZE:
        f.update(norm_weight=arr((64,), t), eps=1e-6)
    else:
        f["activation"] = Activation.SILU
    f.update(kw)
    return _core.fused_mx(op, **f)


@pytest.mark.parametrize("t", [DType.F32, F16, BF16])
def test_core_fused_mx_carries_rounding_and_rotation(validated, t):
    """MXFP8, MXFP4 and NVFP4 (the tensor scale computed or given), RMSNorm and gated, with
    and without args.out: stochastic rounding, the rotation (with and without the signs)
    and both, as the descriptor, SKU and bq_args say"""
    _mx(t=t, rotation_block=32)
    _mx(t=t, fmt="mxfp4", rounding="stochastic", seed=-2, offset=5)
    _mx(t=t, fmt="nvfp4", rotation_block=16, random_signs=True, seed=3, rounding="stochastic", offset=M64 + 1,
        out=arr((4, 64), t))
    _mx(Op.GATED_QUANTIZE, t=t, fmt="nvfp4", rotation_block=8, tensor_scale=arr((1,), F), out_tensor_scale=None)
    _mx(Op.GATED_QUANTIZE, t=t, rotation_block=2, random_signs=True, seed=M64 + 4)
    _mx(t=t)
    got = [_rot(key, a) for key, a in validated]
    assert got == [(1, 0, 0, 32, 0, 0), (0, 0, 1, 0, M64 - 2, 5), (1, 1, 1, 16, 3, 1), (1, 0, 0, 8, 0, 0),
                   (1, 1, 0, 2, 4, 0), (0, 0, 0, 0, 0, 0)], got
    skus = [_sku(key) for key, _ in validated]
    assert [(".sr" in s, ".rot" in s) for s in skus] == [(False, True), (True, False), (True, True), (False, True),
                                                        (False, True), (False, False)], skus


@pytest.mark.parametrize("kw,word", [
    (dict(random_signs=True, seed=1), "random_signs"),
    (dict(rotation_block=32, random_signs=True), "seed: the random signs"),
    (dict(rotation_block=32, seed=1), "seed and offset"),
    (dict(rotation_block=3), r"rotation_block \(3\) must be a power of two"),
    (dict(rotation_block=128), r"rotation_block \(128\) must be .*dividing the last dimension \(64\)"),
    (dict(rounding="stochastic"), "seed"),
    (dict(rounding="stochastic", seed=1, offset="1"), "offset"),
])
def test_core_fused_mx_refuses_bad_options(validated, kw, word):
    for call in (lambda: _mx(**kw), lambda: _mx(Op.GATED_QUANTIZE, fmt="mxfp4", **kw)):
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert validated == []


# ---- the DLPack front end ------------------------------------------------------------------------
@pytest.fixture
def allocs(monkeypatch):
    """the DLPack front end's buffers, counted (host memory in place of bq_malloc's)"""
    monkeypatch.setattr(dlpack, "_set_device", lambda index: None)
    return count_buffers(monkeypatch)


@pytest.fixture
def launches(validated, allocs):
    return validated


def test_dlpack_fused_ops_carry_the_rotation(launches):
    """rms_norm_quant (with a residual; per token and per tensor), silu_and_mul_quant and
    gelu_tanh_and_mul_quant, and the microscaling ones, hand the rotation (and stochastic
    rounding) to the library; without the options, neither"""
    x, w, r = Producer((2, 3, 256), BF16), Producer((256,), BF16), Producer((2, 3, 256), BF16)
    g = Producer((6, 2 * 128), F16)
    bq.rms_norm_quant(x, w, 1e-6, rotation_block=64)
    bq.rms_norm_quant(x, w, 1e-6, residual=r, symmetric=False, out_dtype="uint8", return_normed=True,
                      rotation_block=128, random_signs=True, seed=-1)
    dlpack.rms_norm_quant(x, w, 1e-6, scale=0.25, zero_point=4, out_dtype="uint8", rotation_block=2,
                          rounding="stochastic", seed=3, offset=-1)
    bq.silu_and_mul_quant(g, out_dtype="float8_e4m3fn", return_act=True, rotation_block=16, random_signs=True,
                          seed=4)
    dlpack.gelu_tanh_and_mul_quant(g, scale=0.5, rotation_block=128, rounding="stochastic", seed=5, offset=6)
    bq.rms_norm_mx_quant(x, w, 1e-6, dtype="float8_e4m3fn", rotation_block=32, random_signs=True, seed=7)
    dlpack.silu_and_mul_mx_quant(g, rounding="stochastic", seed=8, offset=9)
    bq.gelu_tanh_and_mul_mx_quant(g, group_size=16, scale_dtype="float8_e4m3fn", rotation_block=16,
                                  rounding="stochastic", seed=10)
    bq.rms_norm_quant(x, w, 1e-6)
    bq.rms_norm_mx_quant(x, w, 1e-6)
    got = [_rot(key, a) for key, a in launches]
    assert got == [(1, 0, 0, 64, 0, 0), (1, 1, 0, 128, M64 - 1, 0), (1, 0, 1, 2, 3, M64 - 1), (1, 1, 0, 16, 4, 0),
                   (1, 0, 1, 128, 5, 6), (1, 1, 0, 32, 7, 0), (0, 0, 1, 0, 8, 9), (1, 0, 1, 16, 10, 0),
                   (0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 0)], got
    assert [key[2] for key, _ in launches[:5]] == [Granularity.PER_TOKEN, Granularity.PER_TOKEN,
                                                   Granularity.PER_TENSOR, Granularity.PER_TOKEN,
                                                   Granularity.PER_TENSOR]
    assert launches[1][1].out and launches[3][1].out and not launches[0][1].out  # (return_normed / return_act)


def test_dlpack_fused_refusals_name_the_option(launches, allocs):
    """bad rotation options, and the rotation per group, raise naming the option before
    anything is imported, allocated or launched"""
    x, w, g = Producer((4, 64), F), Producer((64,), F), Producer((4, 128), F)
    cases = [
        ("rotation_block.*per token or per tensor", lambda: dlpack.rms_norm_quant(x, w, 1e-6, group_size=32,
                                                                                 rotation_block=16)),
        ("rotation_block.*per token or per tensor", lambda: bq.silu_and_mul_quant(g, group_size=16, rotation_block=8,
                                                                                  random_signs=True, seed=1)),
        ("rotation_block.*per token or per tensor",
         lambda: dlpack.gelu_tanh_and_mul_quant(g, group_size=64, out_dtype="float8_e4m3fn", rotation_block=64,
                                                rounding="stochastic", seed=1)),
        ("random_signs", lambda: dlpack.rms_norm_quant(x, w, 1e-6, random_signs=True, seed=1)),
        ("seed: the random signs", lambda: dlpack.silu_and_mul_quant(g, rotation_block=8, random_signs=True)),
        ("seed and offset", lambda: dlpack.rms_norm_quant(x, w, 1e-6, rotation_block=8, seed=1)),
        (r"rotation_block \(6\)", lambda: dlpack.gelu_tanh_and_mul_quant(g, rotation_block=6)),
        (r"rotation_block \(1024\)", lambda: dlpack.rms_norm_quant(x, w, 1e-6, scale=0.5, rotation_block=1024)),
        ("rotation_block", lambda: dlpack.rms_norm_quant(x, w, 1e-6, rotation_block="x")),
        ("random_signs", lambda: dlpack.rms_norm_mx_quant(x, w, 1e-6, random_signs=True, seed=1)),
        ("seed: the random signs", lambda: bq.silu_and_mul_mx_quant(g, rotation_block=8, random_signs=True)),
        (r"rotation_block \(12\)", lambda: dlpack.gelu_tanh_and_mul_mx_quant(g, rotation_block=12)),
        ("seed", lambda: dlpack.gelu_tanh_and_mul_mx_quant(g, rotation_block=16, rounding="stochastic")),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert launches == [] and allocs == []
    assert x.streams == [] and w.streams == [] and g.streams == []  # (no input was imported)


def test_dlpack_block_must_divide_the_output_row(launches):
    """the block divides the output's last dimension (D, half the gated input's), checked
    before the launch"""
    w, g = Producer((96,), F), Producer((4, 2 * 96), F)
    with pytest.raises(bq.InvalidArgumentError, match=r"rotation_block \(64\).*dividing the last dimension \(96\)"):
        dlpack.rms_norm_quant(Producer((4, 96), F), w, 1e-6, rotation_block=64)
    with pytest.raises(bq.InvalidArgumentError, match=r"rotation_block \(64\).*dividing the last dimension \(96\)"):
        dlpack.silu_and_mul_quant(g, rotation_block=64)
    with pytest.raises(bq.InvalidArgumentError, match=r"rotation_block \(64\).*dividing the last dimension \(96\)"):
        dlpack.silu_and_mul_mx_quant(g, dtype="float8_e4m3fn", rotation_block=64)
    assert launches == []
    dlpack.silu_and_mul_quant(g, rotation_block=32)
    assert len(launches) == 1 and launches[0][1].rotation_block == 32


def test_dlpack_rotation_is_keyword_only():
    x, w = Producer((4, 64), F), Producer((64,), F)
    with pytest.raises(TypeError):
        dlpack.rms_norm_quant(x, w, 1e-6, None, True, None, "int8", False, None, 0, None, None, None, None,
                              "nearest", None, 0, 16)


# ---- the workspace: allocated when the plan reports one, handed to the run -----------------------------
def test_dlpack_fused_rotation_allocates_the_workspace(runs, allocs):
    """without the values a rotating call gets a workspace of the size the plan reports, kept
    with q until the launch has run; with them, or unrotated, none"""
    x, w = Producer((3, 2, 96), F16), Producer((96,), F16)
    g = Producer((5, 2 * 64), F)
    q, _, _ = dlpack.rms_norm_quant(x, w, 1e-6, rotation_block=32)
    q2, _, _ = dlpack.silu_and_mul_mx_quant(g, dtype="float8_e4m3fn", rotation_block=16, random_signs=True, seed=1)
    dlpack.rms_norm_quant(x, w, 1e-6, return_normed=True, rotation_block=32)
    dlpack.gelu_tanh_and_mul_quant(g)
    assert [(n, ws is not None, out is not None) for _, out, ws, n in runs] == [
        (6 * 96 * 2, True, False), (5 * 64 * 4, True, False), (0, False, True), (0, False, False)]
    kept = [b for b in q._keep if getattr(b, "nbytes", None) == 6 * 96 * 2]
    assert kept and kept[0].ptr == runs[0][2]  # the workspace run 0 read, alive with q
    assert any(getattr(b, "nbytes", None) == 5 * 64 * 4 for b in q2._keep)

"""The fused rotation in the fused producers' torch front end without a GPU, and the
microscaling fused producers' stochastic rounding and rotation: the ops' schemas end with
(sr, seed, offset, rot, signs) defaulted to 0 (the calls and recorded graphs of before keep
working), the fake kernels take them, which op and arguments each public function records
(no tail without the options, (sr, seed, offset) with stochastic rounding alone, all five
with the rotation), the descriptor and bq_args the implementations hand to C (host tensors
viewed as device ones), the options' errors (before the device check; per group refused by
name), the eager fast path left to plain calls, and torch.compile tracing the options.
test_gpu_fused_rot.py runs them on a GPU."""
import pytest

from conftest import HAS_TORCH, graph_calls, record_ops

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import _lib, ops
    from baracuda_quant._enums import DType, Granularity, Op

    E2M1 = int(DType.E2M1)

M = "meta"
# the arguments before the tail (sr, seed, offset, rot, signs)
FIXED = {"rms_norm_quant": 13, "gated_quant": 11, "rms_norm_mx_quant": 11, "gated_mx_quant": 9}
SIGNS, ROUNDING, ROTATION = 14, 15, 16  # desc_key's indices
M64 = 1 << 64


def _tail(name, args):
    """(sr, seed, offset, rot, signs) of a recorded call, the trailing defaults (0) the call
    left off filled in"""
    a = tuple(args) + (0,) * (FIXED[name] + 5 - len(args))
    return a[FIXED[name]:FIXED[name] + 5]


def test_schemas_end_with_the_rotation_arguments():
    for name, last in (("rms_norm_quant", "scale_dtype"), ("gated_quant", "scale_dtype"),
                       ("rms_norm_mx_quant", "return_normed"), ("gated_mx_quant", "return_act")):
        args = getattr(torch.ops.baracuda_quant, name).default._schema.arguments
        assert len(args) == FIXED[name] + 5, name
        assert args[FIXED[name] - 1].name == last  # (the arguments of before, unchanged)
        assert [(a.name, str(a.type), a.default_value) for a in args[-5:]] == [
            ("sr", "int", 0), ("seed", "int", 0), ("offset", "int", 0), ("rot", "int", 0), ("signs", "int", 0)], name


def test_fakes_take_the_arguments_and_old_calls_still_work():
    """the fake kernels' shapes do not depend on the rounding or the rotation; calls without
    the tail (or with part of it) still go through the schemas"""
    d = torch.ops.baracuda_quant
    x = torch.empty(2, 3, 256, dtype=torch.bfloat16, device=M)
    w = torch.empty(256, dtype=torch.bfloat16, device=M)
    g = torch.empty(5, 2 * 128, dtype=torch.float16, device=M)
    for tail in ((), (1, -5, 3), (0, 7, 0, 64, 1), (1, -5, 3, 2, 0)):
        q, s, z, n = d.rms_norm_quant(x, w, None, 1e-6, True, 0, None, 0, torch.int8, -128, 127, False,
                                      torch.float32, *tail)
        assert (q.shape, q.dtype, s.shape, z.shape, n.shape) == (x.shape, torch.int8, (6, 1), (0,), (0,))
        q, s, z, n = d.rms_norm_quant(x, w, None, 1e-6, True, 0, 0.05, 0, torch.float8_e4m3fn, 0, 0, True,
                                      torch.float32, *tail)
        assert q.dtype == torch.float8_e4m3fn and s.shape == (0,) and n.shape == x.shape
        q, s, z, a = d.gated_quant(g, 1, False, 0, None, 0, torch.uint8, 0, 255, True, torch.float32, *tail)
        assert (q.shape, s.shape, z.shape, a.shape) == ((5, 128), (5, 1), (5, 1), (5, 128))
        q, s, t, n = d.rms_norm_mx_quant(x, w, None, 1e-6, 32, E2M1, False, None, 0, 0, True, *tail)
        assert (q.shape, s.shape, t.shape, n.shape) == ((2, 3, 128), (6, 8), (0,), x.shape)
        q, s, t, a = d.gated_mx_quant(g, 2, 16, E2M1, True, None, 0, 0, False, *tail)
        assert (q.shape, s.shape, t.shape, a.shape) == ((5, 64), (5, 8), (1,), (0,))
        q, s, t, a = d.gated_mx_quant(g, 1, 32, int(DType.E4M3), False, None, 0, 0, True, *tail)
        assert (q.shape, q.dtype, s.shape, t.shape, a.shape) == ((5, 128), torch.float8_e4m3fn, (5, 4), (0,),
                                                                 (5, 128))
    q, s, t, a = d.gated_mx_quant(g, 1, 32, E2M1, False, None, 0, 0, False, sr=1, seed=2, offset=3, rot=32, signs=1)
    assert q.shape == (5, 64)


def test_fused_ops_record_the_rotation(meta_ok):
    """rotation_block and random_signs reach the ops as (rot, signs) after (sr, seed, offset),
    the seed a signed 64-bit int; stochastic rounding alone records (sr, seed, offset) as
    before, and neither option no tail at all"""
    x = torch.empty(4, 64, dtype=torch.float16, device=M)
    w = torch.empty(64, dtype=torch.float16, device=M)
    g = torch.empty(4, 128, dtype=torch.bfloat16, device=M)
    with record_ops() as rec:
        ops.rms_norm_quant(x, w, 1e-6, rotation_block=32)
        ops.rms_norm_quant(x, w, 1e-6, residual=torch.empty_like(x), symmetric=False, out_dtype=torch.uint8,
                           return_normed=True, rotation_block=64, random_signs=True, seed=(1 << 64) - 2)
        ops.rms_norm_quant(x, w, 1e-6, scale=0.5, zero_point=2, rotation_block=2, rounding="stochastic", seed=3,
                           offset=-1)
        ops.silu_and_mul_quant(g, out_dtype=torch.float8_e4m3fn, rotation_block=16, random_signs=True, seed=4)
        bq.gelu_tanh_and_mul_quant(g, scale=0.25, rotation_block=64)  # (the top-level function)
        ops.rms_norm_mx_quant(x, w, 1e-6, dtype="float8_e4m3fn", rotation_block=32, random_signs=True, seed=5)
        ops.silu_and_mul_mx_quant(g, rounding="stochastic", seed=6, offset=7)
        bq.gelu_tanh_and_mul_mx_quant(g, group_size=16, scale_dtype="float8_e4m3fn", rotation_block=8,
                                      rounding="stochastic", seed=-8)
        ops.silu_and_mul_quant(g, rounding="stochastic", seed=9)
        ops.rms_norm_quant(x, w, 1e-6)
        ops.rms_norm_mx_quant(x, w, 1e-6)
        ops.gelu_tanh_and_mul_mx_quant(g, rotation_block=None, random_signs=False)
    names = [name for name, _ in rec.calls]
    assert names == ["rms_norm_quant"] * 3 + ["gated_quant"] * 2 + ["rms_norm_mx_quant"] + ["gated_mx_quant"] * 2 + \
        ["gated_quant", "rms_norm_quant", "rms_norm_mx_quant", "gated_mx_quant"], names
    got = [_tail(name, args) for name, args in rec.calls]
    assert got == [(0, 0, 0, 32, 0), (0, -2, 0, 64, 1), (1, 3, -1, 2, 0), (0, 4, 0, 16, 1), (0, 0, 0, 64, 0),
                   (0, 5, 0, 32, 1), (1, 6, 7, 0, 0), (1, -8, 0, 8, 0), (1, 9, 0, 0, 0)] + [(0,) * 5] * 3, got
    # stochastic rounding alone: (sr, seed, offset) at most (the dispatcher leaves trailing defaults off)
    assert len(rec.calls[6][1]) == FIXED["gated_mx_quant"] + 3 and len(rec.calls[8][1]) <= FIXED["gated_quant"] + 3
    assert [len(args) for name, args in rec.calls[9:]] == [FIXED["rms_norm_quant"], FIXED["rms_norm_mx_quant"],
                                                          FIXED["gated_mx_quant"]]


def test_fused_ops_hand_the_rotation_to_c(to_c):
    """desc.rotation, desc.random_signs, args.rotation_block and the seed modulo 2^64 reach the
    library; the seed and offset are launch pointers (a fresh seed reuses the validated call),
    the block and the signs part of the call's key"""
    x, w = torch.randn(3, 64, dtype=torch.bfloat16), torch.randn(64, dtype=torch.bfloat16)
    g = torch.randn(3, 128, dtype=torch.float32)
    ops.rms_norm_quant(x, w, 1e-6, rotation_block=32, random_signs=True, seed=-1)
    ops.rms_norm_quant(x, w, 1e-6, rotation_block=32, random_signs=True, seed=9)
    ops.rms_norm_quant(x, w, 1e-6, rotation_block=16, random_signs=True, seed=9)
    ops.rms_norm_quant(x, w, 1e-6, rotation_block=16)
    ops.silu_and_mul_quant(g, scale=0.5, out_dtype=torch.float8_e4m3fn, rotation_block=8, rounding="stochastic",
                           seed=2, offset=3)
    ops.gelu_tanh_and_mul_quant(g, symmetric=False, out_dtype=torch.uint8, return_act=True, rotation_block=64)
    ops.rms_norm_mx_quant(x, w, 1e-6, dtype="float8_e4m3fn", rounding="stochastic", seed=4, offset=M64 + 5)
    ops.silu_and_mul_mx_quant(g, group_size=16, scale_dtype="float8_e4m3fn", rotation_block=16, random_signs=True,
                              seed=6, rounding="stochastic")
    ops.rms_norm_quant(x, w, 1e-6)
    got = [(key[2], key[ROTATION], key[SIGNS], key[ROUNDING], a.rotation_block, a.seed, a.offset, ptrs.get("seed"),
            ptrs.get("offset")) for _, ptrs, (key, a) in to_c]
    T, K, G = Granularity.PER_TENSOR, Granularity.PER_TOKEN, Granularity.PER_GROUP
    assert got == [(K, 1, 1, 0, 32, M64 - 1, 0, M64 - 1, None), (K, 1, 1, 0, 32, 9, 0, 9, None),
                   (K, 1, 1, 0, 16, 9, 0, 9, None), (K, 1, 0, 0, 16, 0, 0, None, None),
                   (T, 1, 0, 1, 8, 2, 3, 2, 3), (K, 1, 0, 0, 64, 0, 0, None, None),
                   (G, 0, 0, 1, 0, 4, 5, 4, 5), (G, 1, 1, 1, 16, 6, 0, 6, 0),
                   (K, 0, 0, 0, 0, 0, 0, None, None)], got
    keys = [k for k, _, _ in to_c]
    assert keys[0] == keys[1]  # one validated call for both seeds
    assert len({keys[1], keys[2], keys[3], keys[8]}) == 4  # the block, the signs, the rotation: calls of their own
    assert [k[2][0][0] for k in to_c] == [Op.RMSNORM_QUANTIZE] * 4 + [Op.GATED_QUANTIZE] * 2 + \
        [Op.RMSNORM_QUANTIZE, Op.GATED_QUANTIZE, Op.RMSNORM_QUANTIZE]
    assert to_c[5][2][1].out and not to_c[0][2][1].out  # (the values, when asked for)
    skus = [_lib.sku(_lib.make_desc(k, 0)) for _, _, (k, _) in to_c]
    assert [(".sr" in s, ".rot" in s) for s in skus] == [(False, True)] * 4 + [(True, True), (False, True),
                                                                             (True, False), (True, True),
                                                                             (False, False)], skus


def test_errors_name_the_option_before_the_device_check():
    """host tensors: the rotation options are checked first (the block against the output's
    last dimension, per group refused by name); valid ones reach the CUDA check. No plan is
    made."""
    before = _lib.cached_plan_keys()
    x, w, g = torch.randn(4, 64), torch.ones(64), torch.randn(4, 128)
    per = "rotation_block.*per token or per tensor"
    cases = [
        (per, lambda: ops.rms_norm_quant(x, w, 1e-6, group_size=32, rotation_block=16)),
        (per, lambda: bq.silu_and_mul_quant(g, group_size=16, rotation_block=8, random_signs=True, seed=1)),
        (per, lambda: ops.gelu_tanh_and_mul_quant(g, group_size=64, rotation_block=64, rounding="stochastic",
                                                  seed=1)),
        ("random_signs", lambda: ops.rms_norm_quant(x, w, 1e-6, random_signs=True, seed=1)),
        ("seed: the random signs", lambda: ops.silu_and_mul_quant(g, rotation_block=8, random_signs=True)),
        ("seed and offset", lambda: bq.rms_norm_quant(x, w, 1e-6, rotation_block=8, seed=1)),
        (r"rotation_block \(6\) must be a power of two", lambda: ops.gelu_tanh_and_mul_quant(g, rotation_block=6)),
        (r"rotation_block \(128\) must be .*dividing the last dimension \(64\)",
         lambda: ops.silu_and_mul_quant(g, scale=0.5, rotation_block=128)),
        (r"rotation_block \(128\) must be .*dividing the last dimension \(64\)",
         lambda: ops.rms_norm_quant(x, w, 1e-6, rotation_block=128)),
        ("rotation_block", lambda: ops.rms_norm_quant(x, w, 1e-6, rotation_block="x")),
        ("random_signs", lambda: ops.rms_norm_mx_quant(x, w, 1e-6, random_signs=True, seed=1)),
        ("seed: the random signs", lambda: bq.silu_and_mul_mx_quant(g, rotation_block=8, random_signs=True)),
        (r"rotation_block \(128\) must be .*dividing the last dimension \(64\)",
         lambda: ops.gelu_tanh_and_mul_mx_quant(g, rotation_block=128)),
        ("seed", lambda: ops.rms_norm_mx_quant(x, w, 1e-6, rotation_block=16, rounding="stochastic")),
        ("CUDA tensor", lambda: ops.rms_norm_quant(x, w, 1e-6, rotation_block=64, random_signs=True, seed=1)),
        ("CUDA tensor", lambda: bq.silu_and_mul_quant(g, scale=0.5, rotation_block=2, rounding="stochastic", seed=1)),
        ("CUDA tensor", lambda: ops.rms_norm_mx_quant(x, w, 1e-6, group_size=32, rotation_block=16)),
        ("CUDA tensor", lambda: bq.gelu_tanh_and_mul_mx_quant(g, rounding="stochastic", seed=-1, rotation_block=64,
                                                              random_signs=True)),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert _lib.cached_plan_keys() == before


def test_rotation_is_keyword_only():
    x, w, g = torch.randn(4, 64), torch.ones(64), torch.randn(4, 128)
    with pytest.raises(TypeError):
        ops.rms_norm_quant(x, w, 1e-6, None, True, None, torch.int8, False, None, 0, None, None, None, "nearest",
                           None, 0, 16)
    with pytest.raises(TypeError):
        ops.silu_and_mul_quant(g, True, None, torch.int8, False, None, 0, None, None, None, "nearest", None, 0, 16)


def test_rotation_skips_the_fast_path(fast_path):
    """a geometry the eager fast path keeps is not taken by a rotating call of the same
    arguments: that goes the general way (here: to the device check)"""
    x, w, g, ran = fast_path
    ops.rms_norm_quant(x, w, 1e-6)
    ops.silu_and_mul_quant(g)
    assert len(ran) == 2  # (the kept geometries: the fast path)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        ops.rms_norm_quant(x, w, 1e-6, rotation_block=16)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        ops.silu_and_mul_quant(g, rotation_block=32, random_signs=True, seed=4)
    assert len(ran) == 2


def test_public_functions_trace_fullgraph(meta_ok):
    """torch.compile(fullgraph=True) traces the wrappers' rotation (and the microscaling
    ones' rounding) options into the ops' trailing arguments (the compiled run then stops at
    the device check: host tensors)"""
    pytest.importorskip("torch._dynamo")
    x, w, g = torch.randn(4, 64), torch.ones(64), torch.randn(4, 128)
    cases = [(lambda t: bq.rms_norm_quant(t, w, 1e-6, rotation_block=32, random_signs=True, seed=(1 << 64) - 5),
              x, 5, ("rms_norm_quant", (0, -5, 0, 32, 1))),
             (lambda t: ops.silu_and_mul_quant(t, scale=0.5, rotation_block=64, rounding="stochastic", seed=3,
                                               offset=4), g, 5, ("gated_quant", (1, 3, 4, 64, 0))),
             (lambda t: bq.rms_norm_mx_quant(t, w, 1e-6, rounding="stochastic", seed=7, offset=1), x, 3,
              ("rms_norm_mx_quant", (1, 7, 1))),
             (lambda t: ops.gelu_tanh_and_mul_mx_quant(t, dtype="float8_e4m3fn", rotation_block=16), g, 5,
              ("gated_mx_quant", (0, 0, 0, 16, 0))),
             # neither: the calls of before (return_act, scale_dtype end the call)
             (lambda t: ops.gelu_tanh_and_mul_quant(t), g, 2, ("gated_quant", (False, torch.float32)))]
    for f, inp, tail, want in cases:
        assert graph_calls(f, inp, tail, bq.InvalidArgumentError) == [want]

"""Stochastic rounding in the fused producers' torch front end without a GPU: the ops'
schemas end with (sr, seed, offset) defaulted to 0 (the calls and recorded graphs of before
keep working), the fake kernels take them, which op and arguments each public function
records, the descriptor and bq_args the implementations hand to C (host tensors viewed as
device ones), the options' errors (before the device check), the eager fast path left to
rounding to nearest, and torch.compile tracing the options. test_gpu_fused_sr.py runs them
on a GPU; test_fused_rot_torch_cpu.py has the rotation's (rot, signs) after them and the
microscaling fused producers' options."""
import pytest

from conftest import HAS_TORCH, graph_recorder, record_ops

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import _lib, ops
    from baracuda_quant._enums import Granularity, Op

M = "meta"
FUSED_OPS = ("rms_norm_quant", "gated_quant")
FIXED = {"rms_norm_quant": 13, "gated_quant": 11}  # the arguments before sr (scale_dtype the last)
ROUNDING = 15  # desc_key's index of desc.rounding
M64 = 1 << 64


def _tail(name, args):
    """(sr, seed, offset) of a recorded call: the dispatcher leaves trailing arguments that
    equal their defaults (0) off"""
    a = tuple(args) + (0,) * (FIXED[name] + 3 - len(args))
    return a[FIXED[name]:FIXED[name] + 3]


def test_schemas_end_with_the_rounding_arguments():
    for name in FUSED_OPS:
        args = getattr(torch.ops.baracuda_quant, name).default._schema.arguments
        assert len(args) >= FIXED[name] + 3, name
        assert args[FIXED[name] - 1].name == "scale_dtype"  # (the tail of before, unchanged)
        assert [(a.name, str(a.type), a.default_value) for a in args[FIXED[name]:FIXED[name] + 3]] == [
            ("sr", "int", 0), ("seed", "int", 0), ("offset", "int", 0)], name


def test_fakes_take_the_rounding_arguments_and_old_calls_still_work():
    """the fake kernels' shapes do not depend on the rounding; calls without the three
    arguments (with or without scale_dtype) still go through the schema"""
    d = torch.ops.baracuda_quant
    x = torch.empty(2, 3, 256, dtype=torch.bfloat16, device=M)
    w = torch.empty(256, dtype=torch.bfloat16, device=M)
    g = torch.empty(5, 2 * 128, dtype=torch.float16, device=M)
    sr = (1, -5, (1 << 63) - 1)
    for tail in ((), (torch.float32,), (torch.float32,) + sr):
        q, s, z, n = d.rms_norm_quant(x, w, None, 1e-6, True, 0, None, 0, torch.int8, -128, 127, False, *tail)
        assert (q.shape, q.dtype, s.shape, s.dtype, z.shape, n.shape) == \
            (x.shape, torch.int8, (6, 1), torch.float32, (0,), (0,))
        q, s, z, n = d.rms_norm_quant(x, w, torch.empty_like(x), 1e-6, False, 64, None, 0, torch.uint8, 0, 255, True,
                                      *tail)
        assert (q.dtype, s.shape, z.shape, n.shape) == (torch.uint8, (6, 4), (6, 4), x.shape)
        q, s, z, n = d.rms_norm_quant(x, w, None, 1e-6, True, 0, 0.05, 0, torch.float8_e4m3fn, 0, 0, False, *tail)
        assert q.dtype == torch.float8_e4m3fn and s.shape == (0,) and z.shape == (0,)
        q, s, z, a = d.gated_quant(g, 1, True, 0, None, 0, torch.int8, -128, 127, True, *tail)
        assert (q.shape, s.shape, z.shape, a.shape, a.dtype) == ((5, 128), (5, 1), (0,), (5, 128), torch.float16)
        q, s, z, a = d.gated_quant(g, 2, True, 32, None, 0, torch.float8_e5m2, 0, 0, False, *tail)
        assert (q.dtype, s.shape, z.shape, a.shape) == (torch.float8_e5m2, (5, 4), (0,), (0,))
    q, s, z, n = d.rms_norm_quant(x, w, None, 1e-6, True, 0, None, 0, torch.int8, -128, 127, False, sr=1, seed=2,
                                  offset=3)
    assert q.shape == x.shape


def test_fused_ops_record_the_rounding(meta_ok):
    """stochastic rounding reaches the ops as (1, seed, offset), seed and offset as signed
    64-bit ints (the same bits modulo 2^64), per token, per group and per tensor, integer and
    FP8, with and without the values; rounding to nearest records the calls of before (no
    tail)"""
    x = torch.empty(4, 64, dtype=torch.float16, device=M)
    w = torch.empty(64, dtype=torch.float16, device=M)
    g = torch.empty(4, 128, dtype=torch.bfloat16, device=M)
    sr = dict(rounding="stochastic", seed=(1 << 64) - 2, offset=(1 << 64) + 5)
    with record_ops() as rec:
        ops.rms_norm_quant(x, w, 1e-6, **sr)
        ops.rms_norm_quant(x, w, 1e-6, residual=torch.empty_like(x), symmetric=False, group_size=16,
                           out_dtype=torch.uint8, return_normed=True, **sr)
        ops.rms_norm_quant(x, w, 1e-6, scale=0.5, zero_point=2, **sr)
        ops.silu_and_mul_quant(g, out_dtype=torch.float8_e4m3fn, **sr)
        ops.gelu_tanh_and_mul_quant(g, group_size=32, return_act=True, **sr)
        bq.silu_and_mul_quant(g, scale=0.25, **sr)  # (the top-level function)
        ops.rms_norm_quant(x, w, 1e-6)
        ops.silu_and_mul_quant(g, rounding="nearest")
    names = [name for name, _ in rec.calls]
    assert names == ["rms_norm_quant"] * 3 + ["gated_quant"] * 3 + ["rms_norm_quant", "gated_quant"], names
    assert [_tail(name, args) for name, args in rec.calls[:6]] == [(1, -2, 5)] * 6
    assert [len(args) for _, args in rec.calls[6:]] == [FIXED["rms_norm_quant"], FIXED["gated_quant"]]
    assert rec.calls[2][1][6:8] == (0.5, 2)  # (the static scale, per tensor)


def test_fused_ops_hand_the_rounding_to_c(to_c):
    """the implementations' bq calls (host tensors standing in for device ones, the library's
    own validation in place of the launch): desc.rounding, the seed and the offset modulo
    2^64 in bq_args; seed and offset are launch pointers (a fresh seed reuses the validated
    call), stochastic rounding a call of its own"""
    calls = to_c
    x, w = torch.randn(3, 64, dtype=torch.bfloat16), torch.randn(64, dtype=torch.bfloat16)
    g = torch.randn(3, 128, dtype=torch.float32)
    ops.rms_norm_quant(x, w, 1e-6, rounding="stochastic", seed=-1, offset=7)
    ops.rms_norm_quant(x, w, 1e-6, rounding="stochastic", seed=9, offset=M64 + 1)
    ops.rms_norm_quant(x, w, 1e-6, residual=torch.randn(3, 64, dtype=torch.bfloat16), symmetric=False,
                       group_size=32, out_dtype=torch.uint8, return_normed=True, rounding="stochastic", seed=1)
    ops.silu_and_mul_quant(g, scale=0.5, out_dtype=torch.float8_e4m3fn, rounding="stochastic", seed=2, offset=3)
    ops.gelu_tanh_and_mul_quant(g, group_size=16, return_act=True, rounding="stochastic", seed=4)
    ops.rms_norm_quant(x, w, 1e-6)
    got = [(pkey[-3], key[2], key[ROUNDING], a.seed, a.offset, ptrs.get("seed"), ptrs.get("offset"))
           for pkey, ptrs, (key, a) in calls]
    assert got == [(1, Granularity.PER_TOKEN, 1, M64 - 1, 7, M64 - 1, 7),
                   (1, Granularity.PER_TOKEN, 1, 9, 1, 9, 1),
                   (1, Granularity.PER_GROUP, 1, 1, 0, 1, 0),
                   (1, Granularity.PER_TENSOR, 1, 2, 3, 2, 3),
                   (1, Granularity.PER_GROUP, 1, 4, 0, 4, 0),
                   (0, Granularity.PER_TOKEN, 0, 0, 0, None, None)], got
    assert calls[0][0] == calls[1][0]  # one validated call for both seeds
    assert calls[0][0] != calls[5][0]  # rounding to nearest: another
    assert [k[2][0][0] for k in calls] == [Op.RMSNORM_QUANTIZE] * 3 + [Op.GATED_QUANTIZE] * 2 + [Op.RMSNORM_QUANTIZE]
    assert calls[2][2][1].out and calls[4][2][1].out and not calls[0][2][1].out  # (the values, when asked for)
    assert ".sr" in _lib.sku(_lib.make_desc(calls[0][2][0], 0))


def test_errors_name_the_option_before_the_device_check():
    """host tensors: the rounding options are checked first; valid ones reach the CUDA check.
    No plan is made."""
    before = _lib.cached_plan_keys()
    x, w, g = torch.randn(4, 64), torch.ones(64), torch.randn(4, 128)
    cases = [
        (bq.InvalidArgumentError, "rounding", lambda: bq.rms_norm_quant(x, w, 1e-6, rounding="bogus", seed=1)),
        (bq.InvalidArgumentError, "rounding", lambda: ops.silu_and_mul_quant(g, rounding="up")),
        (bq.InvalidArgumentError, "seed", lambda: ops.rms_norm_quant(x, w, 1e-6, rounding="stochastic")),
        (bq.InvalidArgumentError, "seed", lambda: ops.gelu_tanh_and_mul_quant(g, scale=0.5, rounding="stochastic")),
        (bq.InvalidArgumentError, "seed", lambda: ops.silu_and_mul_quant(g, rounding="stochastic", seed=1.5)),
        (bq.InvalidArgumentError, "seed and offset", lambda: ops.rms_norm_quant(x, w, 1e-6, seed=3)),
        (bq.InvalidArgumentError, "seed and offset", lambda: bq.silu_and_mul_quant(g, rounding="nearest", offset=2)),
        (bq.InvalidArgumentError, "offset",
         lambda: ops.rms_norm_quant(x, w, 1e-6, rounding="stochastic", seed=1, offset="2")),
        (bq.InvalidArgumentError, "seed",
         lambda: ops.gelu_tanh_and_mul_mx_quant(g, scale_dtype="float8_e4m3fn", rounding="stochastic")),
        (bq.InvalidArgumentError, "seed and offset", lambda: ops.rms_norm_mx_quant(x, w, 1e-6, seed=1)),
        (bq.InvalidArgumentError, "CUDA tensor",
         lambda: ops.rms_norm_mx_quant(x, w, 1e-6, rounding="stochastic", seed=1)),
        (bq.InvalidArgumentError, "CUDA tensor",
         lambda: bq.silu_and_mul_mx_quant(g, dtype="float8_e4m3fn", rounding="stochastic", seed=1)),
        (bq.InvalidArgumentError, "CUDA tensor",
         lambda: ops.rms_norm_quant(x, w, 1e-6, rounding="stochastic", seed=1, offset=3)),
        (bq.InvalidArgumentError, "CUDA tensor",
         lambda: bq.gelu_tanh_and_mul_quant(g, group_size=32, rounding="stochastic", seed=-1)),
        (bq.InvalidArgumentError, "CUDA tensor", lambda: ops.silu_and_mul_mx_quant(g, rounding="nearest")),
    ]
    for cls, word, call in cases:
        with pytest.raises(cls, match=word):
            call()
    assert _lib.cached_plan_keys() == before


def test_rounding_is_keyword_only():
    x, w, g = torch.randn(4, 64), torch.ones(64), torch.randn(4, 128)
    with pytest.raises(TypeError):
        ops.rms_norm_quant(x, w, 1e-6, None, True, None, torch.int8, False, None, 0, None, None, None, "stochastic")
    with pytest.raises(TypeError):
        ops.silu_and_mul_quant(g, True, None, torch.int8, False, None, 0, None, None, None, "stochastic")


def test_stochastic_rounding_skips_the_fast_path(fast_path):
    """a geometry the eager fast path keeps (rounding to nearest) is not taken by a stochastic
    call of the same arguments: that goes the general way (here: to the device check)"""
    x, w, g, ran = fast_path
    ops.rms_norm_quant(x, w, 1e-6)
    ops.silu_and_mul_quant(g)
    assert len(ran) == 2  # (the kept geometries: the fast path)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        ops.rms_norm_quant(x, w, 1e-6, rounding="stochastic", seed=1)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        ops.silu_and_mul_quant(g, rounding="stochastic", seed=1, offset=4)
    assert len(ran) == 2


def test_public_functions_trace_fullgraph(meta_ok):
    """torch.compile(fullgraph=True) traces the wrappers' rounding options into the ops'
    trailing arguments (the compiled run then stops at the device check: host tensors);
    rounding to nearest traces the calls of before"""
    dynamo = pytest.importorskip("torch._dynamo")
    backend, seen = graph_recorder(3)
    x, w, g = torch.randn(4, 64), torch.ones(64), torch.randn(4, 128)
    sr = dict(rounding="stochastic", seed=(1 << 64) - 5, offset=3)
    cases = [(lambda t: bq.rms_norm_quant(t, w, 1e-6, **sr), x, "rms_norm_quant", (1, -5, 3)),
             (lambda t: ops.rms_norm_quant(t, w, 1e-6, scale=0.5, **sr), x, "rms_norm_quant", (1, -5, 3)),
             (lambda t: bq.silu_and_mul_quant(t, group_size=32, **sr), g, "gated_quant", (1, -5, 3)),
             (lambda t: ops.gelu_tanh_and_mul_quant(t, return_act=True, **sr), g, "gated_quant", (1, -5, 3)),
             # rounding to nearest: no trailing rounding arguments (return_act, scale_dtype end the call)
             (lambda t: ops.silu_and_mul_quant(t), g, "gated_quant", (127, False, torch.float32))]
    for f, t, name, tail in cases:
        dynamo.reset()
        del seen[:]
        with pytest.raises(bq.InvalidArgumentError, match="CUDA"):
            torch.compile(f, fullgraph=True, backend=backend)(t.clone())
        assert seen == [(name, tail)], seen

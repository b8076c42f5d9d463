"""The dynamic quantize torch ops' stochastic rounding without a GPU: the schemas' new
arguments (with defaults, so older calls keep working), the fake kernels, which op and
arguments each public function records (dynamic_per_token_quant with a static scale goes
through quantize_per_token's stochastic rounding, the same seed and offset), the options'
errors, raised before any device check, and torch.compile tracing them.
test_gpu_dynamic_sr.py runs them on a GPU."""
import pytest

from conftest import HAS_TORCH, graph_recorder, record_ops

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import ops, _lib
    from baracuda_quant._enums import Granularity

M = "meta"
DYN_OPS = ("dynamic_quant", "dynamic_per_token_quant")
FIXED = {"dynamic_quant": 11, "dynamic_per_token_quant": 5}  # the arguments before sr


def _tail(name, args):
    """(sr, seed, offset, rot, signs) of a recorded call: the dispatcher leaves trailing
    arguments that equal their defaults (0) off"""
    a = tuple(args) + (0,) * (FIXED[name] + 5 - len(args))
    return a[FIXED[name]:FIXED[name] + 5]


def test_schemas_end_with_the_rounding_and_rotation_arguments():
    for name in DYN_OPS:
        args = getattr(torch.ops.baracuda_quant, name).default._schema.arguments
        assert [(a.name, str(a.type), a.default_value) for a in args[-5:]] == [
            ("sr", "int", 0), ("seed", "int", 0), ("offset", "int", 0), ("rot", "int", 0), ("signs", "int", 0)], name


def test_fakes_take_the_rounding_arguments_and_old_calls_still_work():
    """the fake kernels' shapes do not depend on the rounding; calls without the three
    arguments (the defaults) still go through the schema"""
    d = torch.ops.baracuda_quant
    x = torch.empty(3, 5, 64, dtype=torch.bfloat16, device=M)
    sr = (1, -5, (1 << 63) - 1)
    for args in ((), sr):
        q, s, z = d.dynamic_per_token_quant(x, False, torch.int8, -128, 127, *args)
        assert (q.shape, q.dtype, s.shape, s.dtype, z.shape) == (x.shape, torch.int8, (15, 1), torch.float32, (15, 1))
        q, s, z = d.dynamic_per_token_quant(x, True, torch.float8_e4m3fn, 0, 0, *args)
        assert q.dtype == torch.float8_e4m3fn and s.shape == (15, 1) and z.shape == (0,)
        q, s, z = d.dynamic_quant(x, int(Granularity.PER_GROUP), 16, torch.int8, False, -128, 127, torch.float32,
                                  False, False, 0.0, *args)
        assert (q.shape, s.shape, z.shape, z.dtype) == (x.shape, (15, 4), (15, 4), torch.int32)
        q, s, z = d.dynamic_quant(x, int(Granularity.PER_BLOCK), 4, torch.float8_e4m3fn, True, 0, 0, torch.float32,
                                  False, False, 0.0, *args)
        assert (q.shape, q.dtype, s.shape, z.shape) == (x.shape, torch.float8_e4m3fn, (4, 16), (0,))
        q, s, z = d.dynamic_quant(x, int(Granularity.PER_TENSOR), 0, torch.uint8, False, 0, 255, torch.float32,
                                  False, False, 0.0, *args)
        assert (q.shape, s.shape, z.shape) == (x.shape, (1,), (1,))


def test_dynamic_ops_record_the_rounding(meta_ok):
    """stochastic rounding reaches the ops as (1, seed, offset), seed and offset as signed
    64-bit ints (the same bits modulo 2^64); dynamic_per_token_quant with a static scale
    records quantize_per_token with them; rounding to nearest records the defaults"""
    x = torch.empty(4, 32, dtype=torch.float16, device=M)
    sr = dict(rounding="stochastic", seed=(1 << 64) - 2, offset=(1 << 64) + 5)
    with record_ops() as rec:
        ops.dynamic_quant(x, "group", group_size=16, **sr)
        ops.dynamic_quant(x, "block", block_size=16, dtype=torch.float8_e4m3fn, **sr)
        ops.dynamic_quant(x, "tensor", symmetric=False, dtype=torch.uint8, **sr)
        ops.dynamic_per_token_quant(x, **sr)
        ops.dynamic_per_token_quant(x, False, **sr)
        ops.dynamic_per_token_quant(x, scale=torch.empty(1, device=M), **sr)
        ops.dynamic_quant(x, "token")
        ops.dynamic_per_token_quant(x)
        ops.dynamic_per_token_quant(x, scale=torch.empty(1, device=M))
    got = [(name, _tail(name, args) if name in FIXED else tuple(args[-3:])) for name, args in rec.calls]
    want = (1, -2, 5)
    assert got[:6] == [("dynamic_quant", want + (0, 0))] * 3 + [("dynamic_per_token_quant", want + (0, 0))] * 2 + [
        ("quantize_per_token", want)], got
    assert got[6] == ("dynamic_quant", (0, 0, 0, 0, 0))
    assert rec.calls[7][0] == "dynamic_per_token_quant" and len(rec.calls[7][1]) == 5  # (the defaults left off)
    assert rec.calls[8][0] == "quantize_per_token" and len(rec.calls[8][1]) == 6


def test_errors_name_the_option_before_the_device_check():
    """host tensors: the rounding options are checked first (rounding="bogus", stochastic
    without a seed, a seed or offset with "nearest"); valid ones reach the CUDA check. No plan
    is made."""
    before = _lib.cached_plan_keys()
    x = torch.randn(4, 64)
    one = torch.ones(1)
    cases = [
        ("rounding", lambda: bq.dynamic_quant(x, rounding="bogus", seed=1)),
        ("rounding", lambda: bq.dynamic_quant(x, "group", group_size=16, rounding="bogus")),
        ("rounding", lambda: bq.dynamic_per_token_quant(x, rounding="bogus", seed=1)),
        ("seed", lambda: bq.dynamic_quant(x, "block", block_size=16, rounding="stochastic")),
        ("seed", lambda: bq.dynamic_quant(x, "tensor", rounding="stochastic", seed=None)),
        ("seed", lambda: bq.dynamic_per_token_quant(x, rounding="stochastic")),
        ("seed", lambda: bq.dynamic_per_token_quant(x, scale=one, rounding="stochastic")),
        ("seed", lambda: bq.dynamic_quant(x, rounding="stochastic", seed=1.5)),
        ("seed and offset", lambda: bq.dynamic_quant(x, seed=3)),
        ("seed and offset", lambda: bq.dynamic_quant(x, "group", group_size=16, rounding="nearest", offset=2)),
        ("seed and offset", lambda: bq.dynamic_per_token_quant(x, seed=3)),
        ("seed and offset", lambda: bq.dynamic_per_token_quant(x, scale=one, rounding="nearest", seed=3)),
        ("offset", lambda: bq.dynamic_per_token_quant(x, rounding="stochastic", seed=1, offset="2")),
        ("CUDA tensor", lambda: bq.dynamic_quant(x, "group", group_size=16, rounding="stochastic", seed=-1)),
        ("CUDA tensor", lambda: bq.dynamic_per_token_quant(x, rounding="stochastic", seed=1, offset=3)),
        ("CUDA tensor", lambda: bq.dynamic_per_token_quant(x, scale=one, rounding="stochastic", seed=1)),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert _lib.cached_plan_keys() == before


def test_rounding_is_keyword_only():
    x = torch.randn(4, 64)
    with pytest.raises(TypeError):
        ops.dynamic_per_token_quant(x, True, None, None, torch.int8, "stochastic")


def test_public_functions_trace_fullgraph(meta_ok):
    """torch.compile(fullgraph=True) traces the wrappers' rounding options into the ops'
    arguments (the compiled run then stops at the device check: host tensors)"""
    dynamo = pytest.importorskip("torch._dynamo")
    backend, seen = graph_recorder(5)
    x = torch.randn(4, 64)
    sr = dict(rounding="stochastic", seed=(1 << 64) - 5, offset=3)
    cases = [(lambda t: bq.dynamic_quant(t, "group", group_size=16, **sr), "dynamic_quant"),
             (lambda t: bq.dynamic_per_token_quant(t, symmetric=False, **sr), "dynamic_per_token_quant")]
    for f, name in cases:
        dynamo.reset()
        del seen[:]
        with pytest.raises(bq.InvalidArgumentError, match="CUDA"):
            torch.compile(f, fullgraph=True, backend=backend)(x.clone())
        assert seen == [(name, (1, -5, 3, 0, 0))], seen


def test_dynamic_ops_record_the_rotation(meta_ok):
    """rotation_block and random_signs reach the ops as (rot, signs) after (sr, seed, offset),
    the seed keying the signs; dynamic_per_token_quant leaves its fast path for them; the
    options' errors come first"""
    x = torch.empty(4, 64, dtype=torch.bfloat16, device=M)
    with record_ops() as rec:
        ops.dynamic_quant(x, "token", rotation_block=32)
        ops.dynamic_quant(x, "token", dtype=torch.float8_e4m3fn, rotation_block=128, random_signs=True,
                          seed=(1 << 64) - 1)
        ops.dynamic_per_token_quant(x, False, rotation_block=16, random_signs=True, seed=9)
    got = [(name, _tail(name, args)) for name, args in rec.calls]
    assert got == [("dynamic_quant", (0, 0, 0, 32, 0)), ("dynamic_quant", (0, -1, 0, 128, 1)),
                   ("dynamic_per_token_quant", (0, 9, 0, 16, 1))], got
    for word, call in (("seed", lambda: ops.dynamic_quant(x, "token", rotation_block=32, random_signs=True)),
                       ("rotation_block", lambda: ops.dynamic_per_token_quant(x, random_signs=True, seed=1)),
                       ("rotation_block", lambda: ops.dynamic_per_token_quant(x, scale=torch.empty(1, device=M),
                                                                              rotation_block=32))):
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()

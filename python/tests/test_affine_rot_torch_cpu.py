"""The affine torch ops' fused rotation without a GPU (docs/numerics.md, "Rotation"): the
schemas' new trailing arguments (quantize: rot and signs after sr, seed, offset; dequantize:
seed, rot, signs; all defaulting to 0, so older calls keep working), the fake kernels, which
arguments each public function records, the options' errors, raised before any device
check, torch.compile tracing them, and no gradient formula on dequantize (with the rotation
or without). test_gpu_affine_rot.py runs them on a GPU."""
import inspect

import pytest

from conftest import HAS_TORCH, graph_calls, record_ops

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import ops, _lib

M = "meta"
Q_OPS = ("quantize_per_tensor", "quantize_per_channel", "quantize_per_token", "quantize_per_group",
         "quantize_per_block")
DQ_OPS = ("dequantize_per_tensor", "dequantize_per_channel", "dequantize_per_token", "dequantize_per_group",
          "dequantize_per_block")
# the arguments before the tail: quantize's (sr, seed, offset, rot, signs), dequantize's (seed, rot, signs)
FIXED = {"quantize_per_tensor": 6, "quantize_per_channel": 7, "quantize_per_token": 6, "quantize_per_group": 7,
         "quantize_per_block": 7, "dequantize_per_tensor": 4, "dequantize_per_channel": 5, "dequantize_per_token": 4,
         "dequantize_per_group": 5, "dequantize_per_block": 5}


def _tail(name, args):
    """the tail of a recorded call, its trailing defaults (0) filled in where the call left
    them off"""
    n, k = FIXED[name], 5 if name.startswith("quantize") else 3
    a = tuple(args) + (0,) * (n + k - len(args))
    return a[n:n + k]


def test_schemas_end_with_the_rotation_arguments():
    for name in Q_OPS:
        args = getattr(torch.ops.baracuda_quant, name).default._schema.arguments
        assert len(args) == FIXED[name] + 5, name
        assert [(a.name, str(a.type), a.default_value) for a in args[-5:]] == [
            ("sr", "int", 0), ("seed", "int", 0), ("offset", "int", 0), ("rot", "int", 0), ("signs", "int", 0)], name
    for name in DQ_OPS:
        args = getattr(torch.ops.baracuda_quant, name).default._schema.arguments
        assert len(args) == FIXED[name] + 3, name
        assert [(a.name, str(a.type), a.default_value) for a in args[-3:]] == [
            ("seed", "int", 0), ("rot", "int", 0), ("signs", "int", 0)], name
    # (fake quantize's: test_fake_rot_torch_cpu.py; its mask ops keep no rotation)
    for name in ("fake_quantize_per_tensor_mask", "fake_quantize_per_channel_mask",
                 "fake_quantize_per_tensor_mask_backward"):
        assert "rot" not in [a.name for a in getattr(torch.ops.baracuda_quant, name).default._schema.arguments]


def test_fakes_take_the_rotation_arguments_and_old_calls_still_work():
    """the output shapes do not depend on the rotation; calls without the new arguments (the
    defaults) still go through the schemas"""
    d = torch.ops.baracuda_quant
    x = torch.empty(3, 5, 64, dtype=torch.bfloat16, device=M)
    q = torch.empty(3, 5, 64, dtype=torch.int8, device=M)
    s = lambda *shape: torch.empty(shape, device=M)  # noqa: E731
    for tail in ((), (1, -5, 3), (0, 7, 0, 32, 1), (1, -5, 3, 256, 0)):
        for y in (d.quantize_per_tensor(x, 0.1, 2, torch.uint8, 0, 255, *tail),
                  d.quantize_per_channel(x, s(5), None, 1, torch.uint8, 0, 255, *tail),
                  d.quantize_per_token(x, s(15), None, torch.float8_e4m3fn, 0, 0, *tail),
                  d.quantize_per_group(x, s(15, 2), None, 32, torch.int8, -128, 127, *tail),
                  d.quantize_per_block(x, s(4, 4), None, 16, torch.float8_e5m2, 0, 0, *tail)):
            assert y.shape == x.shape and y.device.type == M
    for tail in ((), (7,), (-1, 16, 1)):
        for y in (d.dequantize_per_tensor(q, 0.1, 2, torch.float16, *tail),
                  d.dequantize_per_channel(q, s(5), None, 1, torch.bfloat16, *tail),
                  d.dequantize_per_token(q, s(15), None, torch.float32, *tail),
                  d.dequantize_per_group(q, s(15, 2), None, 32, torch.float32, *tail),
                  d.dequantize_per_block(q, s(4, 4), None, 16, torch.float16, *tail)):
            assert y.shape == q.shape and y.device.type == M and y.dtype.is_floating_point


def test_quantize_ops_record_the_rotation(meta_ok):
    """rotation_block and random_signs reach the quantize ops as (rot, signs) after (sr, seed,
    offset), the seed keying the signs (and the draws with stochastic rounding) as a signed
    64-bit int; without them the ops get the tail they got before"""
    x = torch.empty(4, 64, dtype=torch.float16, device=M)
    s = lambda *shape: torch.empty(shape, device=M)  # noqa: E731
    with record_ops() as rec:
        bq.quantize_per_tensor(x, 0.5, rotation_block=32)  # (the C builtin's fallback)
        ops.quantize_per_tensor(x, 0.5, 3, torch.uint8, rotation_block=64, random_signs=True, seed=(1 << 64) - 1)
        ops.quantize_per_channel(x, s(64), None, 1, rotation_block=16, rounding="stochastic", seed=7, offset=-1)
        ops.quantize_per_token(x, s(4), rotation_block=2, random_signs=True, seed=9, rounding="stochastic")
        ops.quantize_per_group(x, s(4, 2), None, 32, torch.float8_e4m3fn, rotation_block=8)
        ops.quantize_per_block(x, s(1, 4), None, 16, rotation_block=4, random_signs=True, seed=3)
        ops.quantize_per_token(x, s(4), rounding="stochastic", seed=7, offset=-1)
        ops.quantize_per_token(x, s(4))
    got = [(name, _tail(name, args)) for name, args in rec.calls]
    assert got == [("quantize_per_tensor", (0, 0, 0, 32, 0)), ("quantize_per_tensor", (0, -1, 0, 64, 1)),
                   ("quantize_per_channel", (1, 7, -1, 16, 0)), ("quantize_per_token", (1, 9, 0, 2, 1)),
                   ("quantize_per_group", (0, 0, 0, 8, 0)), ("quantize_per_block", (0, 3, 0, 4, 1)),
                   ("quantize_per_token", (1, 7, -1, 0, 0)), ("quantize_per_token", (0, 0, 0, 0, 0))], got
    assert len(rec.calls[6][1]) <= FIXED["quantize_per_token"] + 3  # (no rotation: the tail of before)
    assert len(rec.calls[7][1]) == FIXED["quantize_per_token"]


def test_dequantize_records_the_rotation(meta_ok):
    """dequantize at every granularity with rotation_block hands (seed, rot, signs) to its op;
    without it the op gets the arguments it got before"""
    q = torch.empty(4, 64, dtype=torch.int8, device=M)
    s = lambda *shape: torch.empty(shape, device=M)  # noqa: E731
    with record_ops() as rec:
        bq.dequantize(q, 0.5, 3, rotation_block=32)
        ops.dequantize(q, s(64), axis=1, rotation_block=64, random_signs=True, seed=(1 << 64) - 2,
                       out_dtype=torch.bfloat16)
        ops.dequantize(q, s(4), rotation_block=16, random_signs=True, seed=5)
        ops.dequantize(q, s(4, 2), group_size=32, rotation_block=8)
        ops.dequantize(q, s(1, 4), block_size=16, rotation_block=256)
        ops.dequantize(q, s(4))
        ops.dequantize(q, 0.5)
    got = [(name, _tail(name, args)) for name, args in rec.calls]
    assert got == [("dequantize_per_tensor", (0, 32, 0)), ("dequantize_per_channel", (-2, 64, 1)),
                   ("dequantize_per_token", (5, 16, 1)), ("dequantize_per_group", (0, 8, 0)),
                   ("dequantize_per_block", (0, 256, 0)), ("dequantize_per_token", (0, 0, 0)),
                   ("dequantize_per_tensor", (0, 0, 0))], got
    assert len(rec.calls[5][1]) == FIXED["dequantize_per_token"]
    assert len(rec.calls[6][1]) == FIXED["dequantize_per_tensor"]


def test_errors_name_the_option_before_the_device_check():
    """host tensors: the rotation options are checked first; valid ones reach the CUDA check"""
    before = _lib.cached_plan_keys()
    x, q, s = torch.randn(4, 64), torch.zeros(4, 64, dtype=torch.int8), torch.ones(4)
    cases = [
        ("seed: the random signs", lambda: bq.quantize_per_tensor(x, 0.1, rotation_block=8, random_signs=True)),
        ("seed: the random signs", lambda: ops.quantize_per_channel(x, s, None, 0, rotation_block=8,
                                                                    random_signs=True)),
        ("random_signs", lambda: ops.quantize_per_token(x, s, random_signs=True, seed=1)),
        ("seed and offset", lambda: ops.quantize_per_group(x, s, None, 4, rotation_block=8, seed=2)),
        ("rotation_block", lambda: ops.quantize_per_block(x, s, None, 4, rotation_block="8")),
        ("seed and offset", lambda: bq.dequantize(q, 0.1, seed=3)),
        ("seed: the random signs", lambda: ops.dequantize(q, s, rotation_block=8, random_signs=True)),
        ("random_signs", lambda: ops.dequantize(q, s, axis=0, random_signs=True, seed=1)),
        ("rounding", lambda: ops.dequantize(q, 0.1, rotation_block=8, rounding="stochastic")),
        ("CUDA tensor", lambda: bq.quantize_per_tensor(x, 0.1, rotation_block=8)),
        ("CUDA tensor", lambda: ops.quantize_per_token(x, s, rotation_block=8, random_signs=True, seed=-1,
                                                       rounding="stochastic")),
        ("CUDA tensor", lambda: bq.dequantize(q, s, rotation_block=8, random_signs=True, seed=1)),
        ("CUDA tensor", lambda: ops.dequantize(q, 0.1, rotation_block=8)),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert _lib.cached_plan_keys() == before


def test_public_functions_trace_fullgraph(meta_ok):
    """torch.compile(fullgraph=True) traces the wrappers' rotation options into the ops'
    arguments (the compiled run then stops at the device check: host tensors)"""
    pytest.importorskip("torch._dynamo")
    x, q, s = torch.randn(4, 64), torch.zeros(4, 64, dtype=torch.int8), torch.ones(4)
    cases = [(lambda t: bq.quantize_per_tensor(t, 0.1, rotation_block=32, random_signs=True, seed=(1 << 64) - 5),
              x, 5, ("quantize_per_tensor", (0, -5, 0, 32, 1))),
             (lambda t: ops.quantize_per_token(t, s, rounding="stochastic", seed=3, offset=4, rotation_block=64),
              x, 5, ("quantize_per_token", (1, 3, 4, 64, 0))),
             (lambda t: bq.dequantize(t, s, rotation_block=16, random_signs=True, seed=7), q, 3,
              ("dequantize_per_token", (7, 16, 1)))]
    for f, inp, tail, want in cases:
        assert graph_calls(f, inp, tail, bq.InvalidArgumentError) == [want]


def test_dequantize_has_no_gradient_formula_with_the_rotation(meta_ok):
    """the codes carry no gradient; dequantize has no autograd formula for its scales, with the
    rotation as without: a backward through it raises rather than giving a wrong gradient"""
    q = torch.empty(4, 64, dtype=torch.int8, device=M)
    for kw in ({}, {"rotation_block": 32, "random_signs": True, "seed": 1}):
        s = torch.ones(4, device=M, requires_grad=True)
        y = ops.dequantize(q, s, **kw)
        assert y.requires_grad
        with pytest.raises(RuntimeError):
            y.sum().backward()


def test_quantize_and_dequantize_backward_functions_take_no_rotation():
    for name in ("quantize_backward", "dequantize_backward"):
        params = inspect.signature(getattr(ops, name)).parameters
        assert "rotation_block" not in params and "random_signs" not in params, name
    for name in ("quantize_per_channel", "quantize_per_token", "quantize_per_group", "quantize_per_block",
                 "dequantize", "_quantize_per_tensor_py", "fake_quantize", "fake_quantize_per_tensor_affine",
                 "fake_quantize_per_channel_affine", "fake_quantize_backward"):
        params = inspect.signature(getattr(ops, name)).parameters
        assert params["rotation_block"].default is None and params["random_signs"].default is False, name

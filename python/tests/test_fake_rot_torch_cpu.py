"""Fake quantize's fused rotation on the torch ops without a GPU (docs/numerics.md,
"Rotation"): the schemas' new trailing arguments (forward: rot, signs after sr, seed, offset;
the backward ops: seed, rot, signs; all defaulting to 0, so older calls and recorded graphs
keep their arguments), the fake kernels, what each public function records forward and
backward (with the rotation no mask op: the backward op reads x and takes the forward's
seed, block and signs), the options' errors, raised before any device check, and
torch.compile tracing them. test_gpu_fake_rot.py runs them on a GPU."""
import inspect

import pytest

from conftest import HAS_TORCH, graph_recorder, record_ops

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import ops, _lib

M = "meta"
# the arguments before the tails: forward (sr, seed, offset, rot, signs), backward (seed, rot, signs)
FWD = {"fake_quantize_per_tensor": 5, "fake_quantize_per_channel": 6, "fake_quantize_affine": 10}
BWD = {"fake_quantize_per_tensor_backward": 6, "fake_quantize_per_channel_backward": 7, "affine_backward": 12}


def _tail(name, args):
    """a recorded call's tail, its trailing defaults (0) filled in where the call left them off"""
    n, k = (FWD[name], 5) if name in FWD else (BWD[name], 3)
    a = tuple(args) + (0,) * (n + k - len(args))
    return a[n:n + k]


def test_schemas_end_with_the_rotation_arguments():
    for name, n in FWD.items():
        args = getattr(torch.ops.baracuda_quant, name).default._schema.arguments
        assert len(args) == n + 5, name
        assert [(a.name, str(a.type), a.default_value) for a in args[-5:]] == [
            ("sr", "int", 0), ("seed", "int", 0), ("offset", "int", 0), ("rot", "int", 0), ("signs", "int", 0)], name
    for name, n in BWD.items():
        args = getattr(torch.ops.baracuda_quant, name).default._schema.arguments
        assert len(args) == n + 3, name
        assert [(a.name, str(a.type), a.default_value) for a in args[-3:]] == [
            ("seed", "int", 0), ("rot", "int", 0), ("signs", "int", 0)], name


def test_fakes_take_the_rotation_arguments_and_old_calls_still_work():
    d = torch.ops.baracuda_quant
    x = torch.empty(3, 5, 64, dtype=torch.bfloat16, device=M)
    s = lambda *shape: torch.empty(shape, device=M)  # noqa: E731
    z = torch.zeros(5, dtype=torch.int32, device=M)
    for tail in ((), (1, -5, 3), (0, 7, 0, 32, 1), (1, -5, 3, 256, 0)):
        for y in (d.fake_quantize_per_tensor(x, 0.1, 0, -128, 127, *tail),
                  d.fake_quantize_per_channel(x, s(5), z, 1, -128, 127, *tail),
                  d.fake_quantize_affine(x, 0.0, s(15, 2), 0, None, 3, 32, torch.int8, -128, 127, *tail)):
            assert y.shape == x.shape and y.dtype == x.dtype and y.device.type == M
    for tail in ((), (7,), (-1, 16, 1)):
        for y in (d.fake_quantize_per_tensor_backward(x, x, 0.1, 0, -128, 127, *tail),
                  d.fake_quantize_per_channel_backward(x, x, s(5), z, 1, -128, 127, *tail),
                  d.affine_backward(3, x, x, 0.0, s(15), 0, None, 2, 0, torch.float8_e4m3fn, 0, 0, *tail)):
            assert y.shape == x.shape and y.dtype == x.dtype and y.device.type == M


CALLS = {
    "tensor": (lambda x, **kw: ops.fake_quantize_per_tensor_affine(x, 0.1, 2, -128, 127, **kw),
               "fake_quantize_per_tensor", "fake_quantize_per_tensor_backward", "fake_quantize_per_tensor_mask"),
    "tensor1": (lambda x, **kw: ops.fake_quantize_per_tensor_affine(x, torch.ones(1, device=M),
                                                                    torch.zeros(1, device=M), 0, 255, **kw),
                "fake_quantize_per_channel", "fake_quantize_per_channel_backward", "fake_quantize_per_channel_mask"),
    "channel": (lambda x, **kw: ops.fake_quantize_per_channel_affine(
        x, torch.ones(64, device=M), torch.zeros(64, dtype=torch.int32, device=M), 1, -128, 127, **kw),
        "fake_quantize_per_channel", "fake_quantize_per_channel_backward", "fake_quantize_per_channel_mask"),
    "generic": (lambda x, **kw: bq.fake_quantize(x, torch.ones(4, 2, device=M), None, dtype=torch.float8_e4m3fn,
                                                 group_size=32, **kw),
                "fake_quantize_affine", "affine_backward", "fake_quantize_affine"),
    "generic_tensor": (lambda x, **kw: bq.fake_quantize(x, 0.5, 1, 0, 255, **kw),
                       "fake_quantize_affine", "affine_backward", "fake_quantize_affine"),
}


@pytest.mark.parametrize("fn", list(CALLS))
def test_a_gradient_with_the_rotation_reads_x_and_keeps_no_mask(meta_ok, fn):
    """with a gradient to record and the rotation: the op without a mask, its tail (sr, seed,
    offset, rot, signs), the seed as a signed 64-bit int; the backward op reads x and gets
    (seed, rot, signs). Without the rotation the calls of before: the mask ops (per tensor
    and per channel, rounding to nearest), the backward op's arguments with no tail."""
    call, fwd, bwd, plain = CALLS[fn]
    cases = [(dict(rotation_block=64, random_signs=True, seed=(1 << 64) - 2), (0, -2, 0, 64, 1), (-2, 64, 1)),
             (dict(rotation_block=16), (0, 0, 0, 16, 0), (0, 16, 0)),
             (dict(rotation_block=32, random_signs=True, seed=5, rounding="stochastic", offset=(1 << 64) + 3),
              (1, 5, 3, 32, 1), (5, 32, 1))]
    for kw, ftail, btail in cases:
        x = torch.empty(4, 64, dtype=torch.float16, device=M, requires_grad=True)
        with record_ops() as rec:
            y = call(x, **kw)
            y.sum().backward()
        names = [name for name, _ in rec.calls]
        assert names == [fwd, bwd], names
        (_, f_args), (_, b_args) = rec.calls
        assert _tail(fwd, f_args) == ftail and _tail(bwd, b_args) == btail, (kw, f_args, b_args)
        assert any(a is x or (isinstance(a, torch.Tensor) and a._base is x) for a in b_args), "the backward reads x"
        assert x.grad is not None and x.grad.shape == x.shape and y.shape == x.shape
    # no rotation: the tails (and ops) of before
    x = torch.empty(4, 64, dtype=torch.float16, device=M, requires_grad=True)
    with record_ops() as rec:
        call(x).sum().backward()
    names = [name for name, _ in rec.calls]
    assert names[0] == plain, names
    if plain == "fake_quantize_affine":
        assert len(rec.calls[0][1]) <= FWD[plain] + 3 and len(rec.calls[1][1]) == BWD[names[1]]
    # no gradient to record: the same forward op and tail, no backward
    with record_ops() as rec:
        call(x.detach(), **cases[0][0])
    assert [(name, _tail(name, args)) for name, args in rec.calls] == [(fwd, cases[0][1])]


def test_fake_quantize_backward_records_the_rotation(meta_ok):
    """fake_quantize_backward with the forward's options hands (seed, rot, signs) to
    affine_backward; without them the op gets the arguments it got before"""
    x = torch.empty(4, 64, dtype=torch.bfloat16, device=M)
    s = lambda *shape: torch.empty(shape, device=M)  # noqa: E731
    with record_ops() as rec:
        bq.fake_quantize_backward(x, x, 0.5, 0, -128, 127, rotation_block=64, random_signs=True, seed=(1 << 64) - 1)
        ops.fake_quantize_backward(x, x, s(64), None, dtype=torch.float8_e5m2, axis=1, rotation_block=8)
        ops.fake_quantize_backward(x, x, s(4), None, 0, 255, rotation_block=2, random_signs=True, seed=3)
        ops.fake_quantize_backward(x, x, s(4, 4), None, -128, 127, group_size=16, rotation_block=16)
        ops.fake_quantize_backward(x, x, s(1, 4), None, -128, 127, block_size=16, rotation_block=256 // 8)
        ops.fake_quantize_backward(x, x, s(4), None, -128, 127)
        ops.quantize_backward(x, x, s(4))
    got = [(name, _tail(name, args)) for name, args in rec.calls]
    assert got == [("affine_backward", (-1, 64, 1)), ("affine_backward", (0, 8, 0)), ("affine_backward", (3, 2, 1)),
                   ("affine_backward", (0, 16, 0)), ("affine_backward", (0, 32, 0)), ("affine_backward", (0, 0, 0)),
                   ("affine_backward", (0, 0, 0))], got
    assert len(rec.calls[5][1]) == BWD["affine_backward"] and len(rec.calls[6][1]) == BWD["affine_backward"]


def test_errors_name_the_option_before_the_device_check():
    """host tensors: the options are checked first; valid ones reach the CUDA check"""
    before = _lib.cached_plan_keys()
    x, s = torch.randn(4, 64), torch.ones(4)
    z = torch.zeros(64, dtype=torch.int32)
    cases = [
        ("seed: the random signs", lambda: bq.fake_quantize(x, 0.1, 0, -128, 127, rotation_block=8,
                                                            random_signs=True)),
        ("random_signs", lambda: bq.fake_quantize(x, s, None, -128, 127, random_signs=True, seed=1)),
        ("seed and offset", lambda: ops.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127, rotation_block=8,
                                                                        seed=2)),
        ("rotation_block", lambda: ops.fake_quantize_per_channel_affine(x, torch.ones(64), z, 1, -128, 127,
                                                                        rotation_block="8")),
        ("seed: the random signs", lambda: bq.fake_quantize_backward(x, x, 0.1, 0, -128, 127, rotation_block=8,
                                                                     random_signs=True)),
        ("seed and offset", lambda: bq.fake_quantize_backward(x, x, 0.1, 0, -128, 127, rotation_block=8, seed=4)),
        ("rounding", lambda: bq.fake_quantize_backward(x, x, 0.1, 0, -128, 127, rotation_block=8,
                                                       rounding="stochastic", seed=4)),
        ("random_signs", lambda: bq.fake_quantize_backward(x, x, s, None, -128, 127, random_signs=True, seed=4)),
        # (the one-element scale tensor's per-channel view as [1, numel]: the block still divides input's last dim)
        ("dividing the last dimension \\(64\\)", lambda: ops.fake_quantize_per_tensor_affine(
            x, torch.ones(1), torch.zeros(1), -128, 127, rotation_block=128)),
        ("CUDA tensor", lambda: bq.fake_quantize(x, 0.1, 0, -128, 127, rotation_block=8)),
        ("CUDA tensor", lambda: ops.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127, rotation_block=8,
                                                                    random_signs=True, seed=-1)),
        ("CUDA tensor", lambda: bq.fake_quantize_backward(x, x, s, None, -128, 127, rotation_block=8,
                                                          random_signs=True, seed=1)),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert _lib.cached_plan_keys() == before
    with pytest.raises(TypeError):
        bq.quantize_backward(x, x, 0.1, rotation_block=8)


def test_public_functions_trace_fullgraph(meta_ok):
    """torch.compile(fullgraph=True) traces the rotation options into the ops' arguments (the
    compiled run then stops at the device check: host tensors)"""
    dynamo = pytest.importorskip("torch._dynamo")
    x, s = torch.randn(4, 64), torch.ones(4)
    z = torch.zeros(64, dtype=torch.int32)
    cases = [(lambda t: bq.fake_quantize(t, s, None, -128, 127, rotation_block=32, random_signs=True,
                                         seed=(1 << 64) - 5), 5, ("fake_quantize_affine", (0, -5, 0, 32, 1))),
             (lambda t: ops.fake_quantize_per_channel_affine(t, torch.ones(64), z, 1, -128, 127, rounding="stochastic",
                                                             seed=3, offset=4, rotation_block=64),
              5, ("fake_quantize_per_channel", (1, 3, 4, 64, 0))),
             (lambda t: bq.fake_quantize_backward(t, t, 0.5, 0, -128, 127, rotation_block=16, random_signs=True,
                                                  seed=7), 3, ("affine_backward", (7, 16, 1)))]
    for f, tail, want in cases:
        backend, seen = graph_recorder(tail)
        dynamo.reset()
        with pytest.raises(bq.InvalidArgumentError, match="CUDA"):
            torch.compile(f, fullgraph=True, backend=backend)(x.clone())
        assert seen == [want], seen


def test_signatures():
    for name in ("fake_quantize", "fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine",
                 "fake_quantize_backward"):
        params = inspect.signature(getattr(ops, name)).parameters
        assert params["rotation_block"].default is None and params["random_signs"].default is False, name
        assert params["rotation_block"].kind == inspect.Parameter.KEYWORD_ONLY, name
    assert inspect.signature(ops.fake_quantize_backward).parameters["seed"].default is None

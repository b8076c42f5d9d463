"""The affine torch ops' stochastic rounding without a GPU: the schemas' new arguments (with
defaults, so older calls keep working), the fake kernels, which op each public function
records (fake quantize with stochastic rounding saves no mask: its backward op reads x),
the straight-through gradient, and the options' errors, raised before any device check.
test_gpu_affine_sr.py runs them on a GPU."""
import pytest

from conftest import HAS_TORCH, graph_recorder, record_ops

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import ops, _lib

M = "meta"
SR_OPS = ("quantize_per_tensor", "quantize_per_channel", "quantize_per_token", "quantize_per_group",
          "quantize_per_block", "fake_quantize_per_tensor", "fake_quantize_per_channel", "fake_quantize_affine")


def test_schemas_end_with_the_rounding_arguments():
    """(sr, seed, offset), then the fused rotation's (rot, signs) (test_affine_rot_torch_cpu.py,
    test_fake_rot_torch_cpu.py)"""
    for name in SR_OPS:
        args = getattr(torch.ops.baracuda_quant, name).default._schema.arguments
        tail = args[-5:-2]
        assert [(a.name, str(a.type), a.default_value) for a in tail] == [
            ("sr", "int", 0), ("seed", "int", 0), ("offset", "int", 0)], name
    for name in ("dequantize_per_tensor", "affine_backward", "fake_quantize_per_tensor_mask",
                 "fake_quantize_per_tensor_backward"):
        assert "sr" not in [a.name for a in getattr(torch.ops.baracuda_quant, name).default._schema.arguments]


def test_fakes_take_the_rounding_arguments():
    d = torch.ops.baracuda_quant
    x = torch.empty(3, 5, 8, dtype=torch.bfloat16, device=M)
    s = lambda *shape: torch.empty(shape, device=M)  # noqa: E731
    sr = (1, -5, (1 << 63) - 1)
    for y in (d.quantize_per_tensor(x, 0.1, 2, torch.uint8, 0, 255, *sr),
              d.quantize_per_channel(x, s(5), None, 1, torch.uint8, 0, 255, *sr),
              d.quantize_per_token(x, s(15), None, torch.uint8, 0, 255, *sr),
              d.quantize_per_group(x, s(15, 2), None, 4, torch.uint8, 0, 255, *sr),
              d.quantize_per_block(x, s(4, 2), None, 4, torch.float8_e4m3fn, 0, 0, *sr)):
        assert y.shape == x.shape and y.device.type == M
    for y in (d.fake_quantize_per_tensor(x, 0.1, 0, -128, 127, *sr),
              d.fake_quantize_per_channel(x, s(5), torch.empty(5, dtype=torch.int32, device=M), 1, -128, 127, *sr),
              d.fake_quantize_affine(x, 0.0, s(15, 2), 0, None, 3, 4, torch.int8, -128, 127, *sr)):
        assert y.shape == x.shape and y.dtype == x.dtype


@pytest.mark.parametrize("fn", ["tensor", "channel", "generic"])
def test_fake_quantize_records_the_rounding_and_its_gradient_reads_x(meta_ok, fn):
    """with a gradient to record: stochastic rounding runs the op without a mask, its seed and
    offset as signed 64-bit ints (the same bits), and the backward op reads x; round to
    nearest keeps the mask ops (per tensor and per channel)"""
    x = torch.empty(4, 8, dtype=torch.float32, device=M, requires_grad=True)
    sc, zp = torch.empty(8, device=M), torch.zeros(8, dtype=torch.int32, device=M)
    call = {"tensor": lambda **kw: ops.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127, **kw),
            "channel": lambda **kw: ops.fake_quantize_per_channel_affine(x, sc, zp, 1, -128, 127, **kw),
            "generic": lambda **kw: ops.fake_quantize(x, sc, zp, -128, 127, axis=1, **kw)}[fn]
    fwd = {"tensor": "fake_quantize_per_tensor", "channel": "fake_quantize_per_channel",
           "generic": "fake_quantize_affine"}[fn]
    bwd = {"tensor": "fake_quantize_per_tensor_backward", "channel": "fake_quantize_per_channel_backward",
           "generic": "affine_backward"}[fn]
    with record_ops() as rec:
        y = call(rounding="stochastic", seed=(1 << 64) - 2, offset=(1 << 64) + 5)
        y.sum().backward()
    (f_name, f_args), (b_name, b_args) = rec.calls
    assert (f_name, tuple(f_args[-3:])) == (fwd, (1, -2, 5))
    assert b_name == bwd and any(a is x for a in b_args), "the STE backward reads x"
    assert x.grad is not None and x.grad.shape == x.shape
    with record_ops() as rec:
        call()
    want = {"tensor": "fake_quantize_per_tensor_mask", "channel": "fake_quantize_per_channel_mask",
            "generic": "fake_quantize_affine"}[fn]
    assert rec.calls[0][0] == want and (fn != "generic" or tuple(rec.calls[0][1][-3:]) != (1, -2, 5))


def test_quantize_ops_record_the_rounding(meta_ok):
    x = torch.empty(4, 32, dtype=torch.float16, device=M)
    s = lambda *shape: torch.empty(shape, device=M)  # noqa: E731
    sr = dict(rounding="stochastic", seed=7, offset=-1)
    with record_ops() as rec:
        ops.quantize_per_tensor(x, 0.5, **sr)
        ops.quantize_per_channel(x, s(32), None, 1, **sr)
        ops.quantize_per_token(x, s(4), **sr)
        ops.quantize_per_group(x, s(4, 2), None, 16, torch.float8_e5m2, **sr)
        ops.quantize_per_block(x, s(1, 2), None, 16, **sr)
        ops.quantize_per_token(x, s(4))
    got = [(name, tuple(args[-3:])) for name, args in rec.calls]
    assert got[:5] == [(n, (1, 7, -1)) for n in SR_OPS[:5]]
    assert got[5][0] == "quantize_per_token" and len(rec.calls[5][1]) == 6  # (nearest: the defaults left off)


def test_errors_name_the_option_before_the_device_check():
    """host tensors: the rounding options are checked first; valid ones reach the CUDA check"""
    before = _lib.cached_plan_keys()
    x, q = torch.randn(4, 8), torch.zeros(4, 8, dtype=torch.int8)
    s = torch.ones(4)
    cases = [
        ("seed", lambda: bq.quantize_per_tensor(x, 0.1, rounding="stochastic")),  # (the C builtin's fallback)
        ("seed", lambda: ops.quantize_per_tensor(x, 0.1, 0, torch.int8, rounding="stochastic", seed=None)),
        ("rounding", lambda: ops.quantize_per_token(x, s, rounding="up", seed=1)),
        ("seed and offset", lambda: ops.quantize_per_token(x, s, offset=4)),
        ("seed and offset", lambda: ops.quantize_per_group(x, s, None, 4, seed=4)),
        ("offset", lambda: ops.quantize_per_channel(x, s, None, 0, rounding="stochastic", seed=1, offset="2")),
        ("seed", lambda: ops.quantize_per_block(x, s, None, 4, rounding="stochastic", seed=1.5)),
        ("seed", lambda: ops.fake_quantize(x, 0.1, 0, -128, 127, rounding="stochastic")),
        ("seed", lambda: ops.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127, rounding="stochastic")),
        ("seed", lambda: ops.fake_quantize_per_channel_affine(x, s, s.int(), 0, -128, 127, rounding="stochastic")),
        ("rounding", lambda: bq.dequantize(q, 0.1, rounding="stochastic")),
        ("rounding", lambda: ops.dequantize(q, s, rounding="nearby")),
        ("rounding", lambda: ops.fake_quantize_backward(x, x, 0.1, 0, -128, 127, rounding="stochastic")),
        ("rounding", lambda: ops.quantize_backward(x, x, 0.1, rounding="stochastic")),
        ("rounding", lambda: ops.dequantize_backward(x, 0.1, rounding="stochastic")),
        ("CUDA tensor", lambda: bq.quantize_per_tensor(x, 0.1, rounding="stochastic", seed=1, offset=2)),
        ("CUDA tensor", lambda: ops.quantize_per_token(x, s, rounding="stochastic", seed=-1)),
        ("CUDA tensor", lambda: ops.fake_quantize(x, 0.1, 0, -128, 127, rounding="stochastic", seed=3)),
        ("CUDA tensor", lambda: ops.dequantize(q, 0.1, rounding="nearest")),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert _lib.cached_plan_keys() == before


def test_public_functions_trace_fullgraph(meta_ok):
    """torch.compile(fullgraph=True) traces the wrappers' rounding options into the ops'
    arguments (the compiled run then stops at the device check: host tensors)"""
    dynamo = pytest.importorskip("torch._dynamo")
    backend, seen = graph_recorder(3)
    x, s = torch.randn(4, 64), torch.ones(4)
    sr = dict(rounding="stochastic", seed=(1 << 64) - 5, offset=3)
    cases = [(lambda t: bq.quantize_per_tensor(t, 0.1, **sr), "quantize_per_tensor"),
             (lambda t: ops.quantize_per_token(t, s, **sr), "quantize_per_token"),
             (lambda t: ops.fake_quantize(t, 0.1, 0, -128, 127, **sr), "fake_quantize_affine"),
             (lambda t: ops.fake_quantize_per_channel_affine(t, s, s.int(), 0, -128, 127, **sr).sum(),
              "fake_quantize_per_channel")]
    for f, name in cases:
        dynamo.reset()
        del seen[:]
        with pytest.raises(bq.InvalidArgumentError, match="CUDA"):
            torch.compile(f, fullgraph=True, backend=backend)(x.clone().requires_grad_(name.startswith("fake")))
        assert seen == [(name, (1, -5, 3))], seen

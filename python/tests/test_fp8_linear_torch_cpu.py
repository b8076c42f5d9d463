"""fp8_linear and FP8QuantizedLinear on torch without a GPU: the fake kernel's shapes (meta
and fake tensors, torch.compile(fullgraph=True)), the wrapper's checks (which name the
argument before anything reaches the library), and the bq calls the implementation builds
(host tensors standing in for device ones, the library's own validation in place of the
launch)."""
import pytest

from conftest import HAS_TORCH, graph_calls, record_ops

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import _lib, ops
    from baracuda_quant._enums import DType, Granularity, Op

    E4, E5 = getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)
    if E4 is None:
        pytestmark = pytest.mark.skip(reason="this torch has no float8 types")

M = "meta"


def meta(*shape, dtype=None):
    return torch.empty(shape, dtype=dtype or torch.float32, device=M)


def host_fp8(*shape, dtype=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 4).to(dtype or E4)


def test_fake_shapes():
    d = torch.ops.baracuda_quant
    x, w = meta(2, 7, 64, dtype=E4), meta(32, 64, dtype=E4)
    for out in (torch.float32, torch.float16, torch.bfloat16):
        y = d.fp8_linear(x, w, meta(14, 1), meta(1, 32), meta(32, dtype=out), out, True)
        assert y.shape == (2, 7, 32) and y.dtype == out and y.device.type == M
    y = d.fp8_linear(meta(64, dtype=E5), w, meta(), meta(), None, torch.bfloat16, False)
    assert y.shape == (32,) and y.dtype == torch.bfloat16
    y = d.fp8_linear(meta(0, 64, dtype=E4), w, meta(0), meta(32), None, torch.float16, True)
    assert y.shape == (0, 32)


def test_under_fake_tensor_mode():
    """the op traces with fake tensors (what torch.compile(fullgraph=True) does first)"""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x, w = torch.empty(8, 4096, dtype=E4), torch.empty(1024, 4096, dtype=E4)
        y = torch.ops.baracuda_quant.fp8_linear(x, w, torch.empty(8, 1), torch.empty(1, 1024), None,
                                                torch.bfloat16, True)
        assert y.shape == (8, 1024) and y.dtype == torch.bfloat16


def test_wrapper_records_the_mode(meta_ok):
    """the public function reaches the op with the mode its scales' shapes give"""
    x, w, b = meta(2, 7, 64, dtype=E4), meta(32, 64, dtype=E4), meta(32, dtype=torch.float16)
    with record_ops() as rec:
        y1 = bq.fp8_linear(x, w, meta(), meta(1))  # tensorwise, bfloat16 by default
        y2 = ops.fp8_linear(x, w, meta(14, 1), meta(1, 32), b, torch.float16)
        y3 = ops.fp8_linear(meta(5, 64, dtype=E5), w, meta(5), meta(32), out_dtype=torch.float32)
        y4 = ops.fp8_linear(meta(64, dtype=E4), w, meta(1, 1), meta(32))  # one row: rowwise
    assert [(name, args[5:]) for name, args in rec.calls] == [
        ("fp8_linear", (torch.bfloat16, False)), ("fp8_linear", (torch.float16, True)),
        ("fp8_linear", (torch.float32, True)), ("fp8_linear", (torch.bfloat16, True))]
    assert [(tuple(y.shape), y.dtype) for y in (y1, y2, y3, y4)] == [
        ((2, 7, 32), torch.bfloat16), ((2, 7, 32), torch.float16), ((5, 32), torch.float32), ((32,), torch.bfloat16)]


def test_wrapper_checks_name_the_argument(meta_ok):
    before = _lib.cached_plan_keys()
    x, w, one = meta(20, 64, dtype=E4), meta(32, 64, dtype=E4), meta()
    sa, sb = meta(20, 1), meta(1, 32)
    cases = [
        ("x: dtype torch.float16", lambda: ops.fp8_linear(meta(20, 64, dtype=torch.float16), w, one, one)),
        ("x: dtype torch.int8", lambda: ops.fp8_linear(meta(20, 64, dtype=torch.int8), w, one, one)),
        ("w: dtype torch.float8_e5m2", lambda: ops.fp8_linear(x, meta(32, 64, dtype=E5), one, one)),
        (r"w: shape \(64, 32\), expected \(N, 64\)", lambda: ops.fp8_linear(x, meta(64, 32, dtype=E4), one, one)),
        (r"w: shape \(32, 64, 1\)", lambda: ops.fp8_linear(x, meta(32, 64, 1, dtype=E4), one, one)),
        (r"w: strides \(1, 64\)", lambda: ops.fp8_linear(x, meta(64, 64, dtype=E4).t(), one, one)),
        (r"w: strides \(128, 1\)", lambda: ops.fp8_linear(x, meta(32, 128, dtype=E4)[:, :64], one, one)),
        ("x: expected at least 1 dimension", lambda: ops.fp8_linear(meta(dtype=E4), w, one, one)),
        ("out_dtype torch.float64", lambda: ops.fp8_linear(x, w, one, one, out_dtype=torch.float64)),
        ("out_dtype torch.int32", lambda: ops.fp8_linear(x, w, one, one, out_dtype=torch.int32)),
        ("scale_a: dtype torch.float16", lambda: ops.fp8_linear(x, w, meta(dtype=torch.float16), one)),
        ("scale_b: dtype torch.bfloat16", lambda: ops.fp8_linear(x, w, sa, meta(32, dtype=torch.bfloat16))),
        (r"scale_a \(shape \(\), tensorwise\) and scale_b \(shape \(1, 32\), rowwise\) differ",
         lambda: ops.fp8_linear(x, w, one, sb)),
        (r"scale_a \(shape \(20, 1\), rowwise\) and scale_b \(shape \(1,\), tensorwise\) differ",
         lambda: bq.fp8_linear(x, w, sa, meta(1))),
        (r"scale_a: shape \(1, 20\)", lambda: ops.fp8_linear(x, w, meta(1, 20), sb)),
        (r"scale_b: shape \(32, 1\)", lambda: ops.fp8_linear(x, w, sa, meta(32, 1))),
        (r"scale_a: shape \(2, 10\)", lambda: ops.fp8_linear(x, w, meta(2, 10), sb)),
        (r"bias: shape \(32,\) dtype torch.float32, expected \(32,\) of out_dtype torch.bfloat16",
         lambda: ops.fp8_linear(x, w, one, one, meta(32))),
        (r"bias: shape \(31,\)", lambda: ops.fp8_linear(x, w, one, one, meta(31, dtype=torch.bfloat16))),
        ("scale_b is on cpu", lambda: ops.fp8_linear(x, w, one, torch.ones(()))),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert _lib.cached_plan_keys() == before


def test_host_tensors_are_refused():
    """without the meta stand-in the device is checked first, naming the argument"""
    x, w, s = host_fp8(4, 64), host_fp8(32, 64), torch.ones(())
    for call in (lambda: ops.fp8_linear(x, w, s, s), lambda: bq.fp8_linear(x, w, s, s),
                 lambda: torch.ops.baracuda_quant.fp8_linear(x, w, s, s, None, torch.bfloat16, False)):
        with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
            call()
    with pytest.raises(bq.InvalidArgumentError, match="x: must be a CUDA tensor"):
        ops.FP8QuantizedLinear(64, 32)(torch.randn(4, 64))
    with pytest.raises(bq.InvalidArgumentError, match="linear.weight: must be a CUDA tensor"):
        ops.FP8QuantizedLinear.from_float(torch.nn.Linear(64, 32))


def test_bq_calls(to_c):
    """what the implementation hands the library: x read in place with its row stride, the
    [M, 1] and [1, N] scales as vectors without a copy, the mode in the descriptor's
    granularity; a repeated geometry keeps its validated call"""
    base, w = host_fp8(6, 80, dtype=E5), host_fp8(32, 64)
    x = base[:, :64]
    sa, sb, b = torch.rand(6, 1), torch.rand(1, 32), torch.randn(32).half()
    ops.fp8_linear(x, w, sa, sb, b, torch.float16)
    ops.fp8_linear(base.view(2, 3, 80)[:, :, :64], w, sa, sb, b, torch.float16)
    x5, x6 = host_fp8(5, 64, seed=1), host_fp8(5, 64, seed=2)  # (both alive: two addresses)
    ops.fp8_linear(x5, w, torch.tensor(0.5), torch.tensor([0.25]))
    ops.fp8_linear(x6, w, torch.tensor(0.5), torch.tensor([0.25]))
    (k1, p1, (c1, a1)), (k2, p2, (c2, a2)), (k3, p3, (c3, a3)), (k4, p4, (c4, a4)) = to_c
    assert (a1.rows, a1.cols, a1.n, a1.x_row_stride, a1.y_row_stride) == (6, 64, 32, 80, 32)
    assert (p1["x"], p1["scales"], p1["w_scales"], p1["bias"], p1["w"]) == (
        base.data_ptr(), sa.data_ptr(), sb.data_ptr(), b.data_ptr(), w.data_ptr())
    assert (a2.rows, a2.x_row_stride) == (6, 80) and k2 == k1  # [2, 3, K] rows with one stride: the same geometry
    assert (Op(c1[0]), Granularity(c1[2]), DType(c1[3]), DType(c1[4]), DType(c1[9])) == (
        Op.FP8_LINEAR, Granularity.PER_TOKEN, DType.F16, DType.E5M2, DType.F16)
    assert (Granularity(c3[2]), DType(c3[3]), DType(c3[4]), a3.bias) == (
        Granularity.PER_TENSOR, DType.BF16, DType.E4M3, None)
    assert k3 == k4 and (p3["x"], p4["x"]) == (x5.data_ptr(), x6.data_ptr())
    assert _lib.sku(_lib.make_desc(c1, 0)) == "fp8_linear.a_e5m2.w_e4m3.out_f16.scale_f32.mma_m16n8k32.sm_80"


def test_module_calls(to_c):
    """FP8QuantizedLinear: the weight quantized per output channel to E4M3 by dynamic quantize
    per token, then each forward pass is one FP8 QuantizedLinear call (x quantized per token to
    E4M3 in it) into x's dtype"""
    lin = torch.nn.Linear(64, 32).to(torch.bfloat16)
    mod = ops.FP8QuantizedLinear.from_float(lin)
    assert (mod.weight.dtype, mod.weight.shape, mod.w_scales.dtype, mod.w_scales.shape, mod.bias.dtype) == (
        E4, (32, 64), torch.float32, (32,), torch.bfloat16)
    assert torch.equal(mod.bias, lin.bias.detach())
    assert repr(mod) == "FP8QuantizedLinear(in_features=64, out_features=32, bias=True)"
    assert bq.FP8QuantizedLinear is ops.FP8QuantizedLinear
    y = mod(torch.randn(3, 5, 64, dtype=torch.bfloat16))
    assert y.shape == (3, 5, 32) and y.dtype == torch.bfloat16
    mod(torch.randn(7, 64, dtype=torch.float16))  # (the bias converted to x's dtype)
    got = [(Op(c[0]), Granularity(c[2]), DType(c[3]), DType(c[4]), a.rows) for _, _, (c, a) in to_c]
    assert got == [(Op.DYNAMIC_QUANTIZE, Granularity.PER_TOKEN, DType.BF16, DType.E4M3, 32),
                   (Op.FP8_QUANTIZED_LINEAR, Granularity.PER_TOKEN, DType.BF16, DType.E4M3, 15),
                   (Op.FP8_QUANTIZED_LINEAR, Granularity.PER_TOKEN, DType.F16, DType.E4M3, 7)], got
    assert to_c[1][1]["w"] == mod.weight.data_ptr() and to_c[1][1]["w_scales"] == mod.w_scales.data_ptr()
    assert to_c[2][1]["bias"] != mod.bias.data_ptr()  # a float16 copy of the bfloat16 bias
    blk = ops.FP8QuantizedLinear.from_float(torch.nn.Linear(256, 200).to(torch.bfloat16), blockwise=True)
    assert blk.w_scales.shape == (2, 2) and "blockwise" in repr(blk)
    blk(torch.randn(4, 256, dtype=torch.bfloat16))
    (c, a) = to_c[-1][2]
    assert (Op(c[0]), Granularity(c[2]), a.rows, a.cols, a.n) == (
        Op.FP8_QUANTIZED_LINEAR, Granularity.PER_BLOCK, 4, 256, 200)
    assert (Op(to_c[-2][2][0][0]), Granularity(to_c[-2][2][0][2])) == (Op.DYNAMIC_QUANTIZE, Granularity.PER_BLOCK)
    with pytest.raises(bq.InvalidArgumentError, match="blockwise needs a multiple of 128"):
        ops.FP8QuantizedLinear(64, 32, blockwise=True)
    nobias = ops.FP8QuantizedLinear.from_float(torch.nn.Linear(64, 32, bias=False))
    assert nobias.bias is None and "bias=False" in repr(nobias)
    with pytest.raises(bq.InvalidArgumentError, match="x: dtype torch.float64"):
        mod(torch.randn(2, 64, dtype=torch.float64))


def test_module_on_meta(meta_ok):
    lin = torch.nn.Linear(64, 32, device=M, dtype=torch.float16)
    with record_ops() as rec:
        mod = ops.FP8QuantizedLinear.from_float(lin)
        y = mod(meta(2, 9, 64, dtype=torch.float16))
    assert y.shape == (2, 9, 32) and y.dtype == torch.float16
    assert [name for name, _ in rec.calls] == ["dynamic_per_token_quant", "fp8_quantized_linear"]
    assert rec.calls[1][1][4:] == (E4, False)


def test_traces_fullgraph(meta_ok):
    """torch.compile(fullgraph=True) traces the wrapper and the module into the ops (the
    compiled run then stops at the device check: host tensors)"""
    pytest.importorskip("torch._dynamo")
    w, sa, sb = host_fp8(32, 64), torch.ones(4, 1), torch.ones(32)
    b = torch.zeros(32, dtype=torch.float16)
    got = graph_calls(lambda t: bq.fp8_linear(t, w, sa, sb, b, torch.float16), host_fp8(4, 64), 2,
                      bq.InvalidArgumentError)
    assert got == [("fp8_linear", (torch.float16, True))]
    got = graph_calls(lambda t: ops.fp8_linear(t, w, torch.ones(()), torch.ones(1)), host_fp8(4, 64), 2,
                      bq.InvalidArgumentError)
    assert got == [("fp8_linear", (torch.bfloat16, False))]
    lin = torch.nn.Linear(64, 32, dtype=torch.bfloat16)
    mod = ops.FP8QuantizedLinear(64, 32)
    mod.bias.copy_(lin.bias.detach())
    got = graph_calls(mod, torch.randn(4, 64, dtype=torch.bfloat16), 2, bq.InvalidArgumentError)
    assert [name for name, _ in got] == ["fp8_quantized_linear"]
    assert got[0][1] == (E4, False)


def test_no_gradient_formula(meta_ok):
    """FP8 codes carry no gradient and the op has no autograd formula for its scales: a
    backward through it raises rather than giving a wrong gradient"""
    s = meta(4, 1).requires_grad_()
    y = ops.fp8_linear(meta(4, 64, dtype=E4), meta(32, 64, dtype=E4), s, meta(32))
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="autograd"):
        y.sum().backward()

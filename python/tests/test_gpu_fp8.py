"""GPU tests of FP8 storage (torch.float8_e4m3fn, torch.float8_e5m2) in the torch ops, bit
for bit against the contract written in torch on the CPU: q = fp8(C(x) / s), rounded to
nearest even and saturating (docs/numerics.md, "FP8 storage"). torch's own cast gives that
after a clamp to the format's largest value, for C = f32 (f32, f16 and bf16 data); f64 data
is left to the C suites, since torch casts f64 to FP8 through f32 (two roundings)."""
import pytest

from conftest import cuda_available

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant.ops as bqo

FP8 = ["float8_e4m3fn", "float8_e5m2"]
FLOATS = ["float32", "float16", "bfloat16"]
DEV = "cuda"


def fmax(t):
    return 448.0 if t == torch.float8_e4m3fn else 57344.0


def data(shape, T, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 40
    f = x.view(-1)
    f[0], f[1], f[2] = float("inf"), -float("inf"), -0.0
    f[3], f[4] = 1e30 if T != torch.float16 else 6e4, -1e30 if T != torch.float16 else -6e4
    return x.to(T)


def ref(x, s, Q):
    """fp8(C(x) / s): the quotient in f32, clamped to the format's range, cast (RNE)."""
    v = x.cpu().float() / s.cpu().float()
    return v.clamp(-fmax(Q), fmax(Q)).to(Q)


def bits(t):
    return t.cpu().view(torch.uint8)


def f32(v):
    return float(torch.tensor(v, dtype=torch.float32))


@pytest.mark.parametrize("qname", FP8)
@pytest.mark.parametrize("fname", FLOATS)
def test_quantize_dequantize_fp8(qname, fname):
    Q, T = getattr(torch, qname), getattr(torch, fname)
    x = data((37, 300), T, seed=1)
    xd = x.to(DEV)
    s = f32(0.0371)
    q = bqo.quantize_per_tensor(xd, s, 0, Q)
    assert q.dtype == Q and q.shape == x.shape
    assert torch.equal(bits(q), bits(ref(x, torch.tensor(s), Q)))
    # per token: a scale a row; per group of 100; per channel along axis 1
    st = torch.rand(37, generator=torch.Generator().manual_seed(2), dtype=torch.float32) * 0.1 + 0.001
    q = bqo.quantize_per_token(xd, st.to(DEV), None, Q)
    assert torch.equal(bits(q), bits(ref(x, st.view(37, 1), Q)))
    sg = torch.rand(37, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float32) * 0.1 + 0.001
    q = bqo.quantize_per_group(xd, sg.to(DEV), None, 100, Q)
    assert torch.equal(bits(q), bits(ref(x, sg.repeat_interleave(100, dim=1), Q)))
    sc = torch.rand(300, generator=torch.Generator().manual_seed(4), dtype=torch.float32) * 0.1 + 0.001
    q = bqo.quantize_per_channel(xd, sc.to(DEV), None, 1, Q)
    assert torch.equal(bits(q), bits(ref(x, sc.view(1, 300), Q)))
    # dequantize: C(q) * s, in f32 then the output type
    for out in (torch.float32, torch.bfloat16):
        y = bqo.dequantize(q, s, out_dtype=out)
        assert y.dtype == out
        assert torch.equal(y.cpu(), (q.cpu().float() * s).to(out))
        y = bqo.dequantize(q, st.to(DEV), out_dtype=out)
        assert torch.equal(y.cpu(), (q.cpu().float() * st.view(37, 1)).to(out))


@pytest.mark.parametrize("qname", FP8)
@pytest.mark.parametrize("fname", FLOATS)
def test_dynamic_per_token_fp8(qname, fname):
    Q, T = getattr(torch, qname), getattr(torch, fname)
    x = (torch.randn(33, 500, generator=torch.Generator().manual_seed(5)) * 7).to(T)
    x[3] = 0  # an all-zero row: scale 1
    x[5, 7] = float("nan")  # not part of the scale
    q, s, z = bqo.dynamic_per_token_quant(x.to(DEV), dtype=Q)
    assert z is None and q.dtype == Q and s.shape == (33, 1) and s.dtype == torch.float32
    xf = x.float()
    amax = torch.where(torch.isnan(xf), torch.zeros_like(xf), xf).abs().amax(1)
    rs = amax / fmax(Q)
    rs = torch.where(rs == 0, torch.ones_like(rs), rs)
    assert torch.equal(s.cpu().view(-1), rs)
    r = ref(x, rs.view(33, 1), Q)
    nan = torch.isnan(r.float())
    assert torch.equal(torch.isnan(q.cpu().float()), nan)
    assert torch.equal(bits(q)[~nan], bits(r)[~nan])
    with pytest.raises(ValueError):
        bqo.dynamic_per_token_quant(x.to(DEV), symmetric=False, dtype=Q)


def test_fp8_refusals():
    x = torch.randn(4, 64, device=DEV)
    Q = torch.float8_e4m3fn
    with pytest.raises(ValueError, match="q-range"):
        bqo.quantize_per_tensor(x, 0.1, 0, Q, quant_min=-100, quant_max=100)
    with pytest.raises(ValueError):
        bqo.quantize_per_tensor(x, 0.1, 3, Q)  # no zero points
    with pytest.raises(ValueError, match="symmetric"):
        bqo.rms_norm_quant(x.bfloat16(), torch.ones(64, device=DEV, dtype=torch.bfloat16), 1e-6, out_dtype=Q,
                           symmetric=False)


def test_fp8_compile_and_graph():
    import torch._dynamo
    torch._dynamo.reset()
    Q = torch.float8_e4m3fn
    x = torch.randn(64, 256, device=DEV, dtype=torch.bfloat16) * 30

    def block(t):
        q, s, _ = bqo.dynamic_per_token_quant(t, dtype=Q)
        return q, s, bqo.quantize_per_tensor(t, 0.25, 0, Q), bqo.dequantize(q, s.view(-1), out_dtype=torch.bfloat16)

    eager = block(x)
    got = torch.compile(block, fullgraph=True)(x)
    for e, c in zip(eager, got):
        assert e.dtype == c.dtype and torch.equal(e.view(torch.uint8) if e.dtype == Q else e,
                                                  c.view(torch.uint8) if c.dtype == Q else c)
    g = torch.cuda.CUDAGraph()
    block(x)  # warm: plans selected outside the capture
    with torch.cuda.graph(g):
        outs = block(x)
    g.replay()
    torch.cuda.synchronize()
    for e, c in zip(eager, outs):
        assert torch.equal(e.view(torch.uint8) if e.dtype == Q else e, c.view(torch.uint8) if c.dtype == Q else c)

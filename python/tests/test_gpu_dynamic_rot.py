"""GPU tests of the fused rotation in dynamic quantize per token (docs/numerics.md,
"Rotation"): dynamic_quant(x, "token", rotation_block=n) and dynamic_per_token_quant with it
give, bit for bit, hadamard(x, n) (the rotation alone, checked against the CPU reference by
the C suites) followed by the same call without the rotation, for float32, float16 and
bfloat16 input, int8 (symmetric, asymmetric), uint8 and FP8 storage, every block size from 2
to a warp's 16-byte accesses, with and without the random signs; rows computed alone give the
whole call's; the DLPack front end and torch.compile give the eager bits; rounding stochastically,
the same bits as the rotation then the op."""
import pytest

from conftest import TensorProducer, cuda_available
import sr_reference as R

pytestmark = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")

if cuda_available():
    import torch
    import baracuda_quant as bq
    import baracuda_quant.ops as bqo

DEV = "cuda"
FLOATS = ["float32", "float16", "bfloat16"]
STORAGE = {"int8_sym": ("int8", True), "int8_asym": ("int8", False), "uint8_asym": ("uint8", False),
           "e4m3": ("float8_e4m3fn", True)}


def _data(shape, T, seed):
    x = R.sr_data(shape, T, seed, specials=False)
    x2 = x.view(-1, shape[-1])
    x2[1, 3] = float("nan")
    x2[2] = 0
    return x


def _blocks(T):
    top = 32 * 16 // torch.tensor([], dtype=T).element_size()
    return [n for n in (2, 4, 8, 16, 32, 64, 128, 256) if n <= top]


@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("store", list(STORAGE))
def test_fused_equals_the_rotation_then_the_op(fname, store):
    T = getattr(torch, fname)
    dt, sym = STORAGE[store]
    D = getattr(torch, dt)
    x = _data((3, 5, 512), T, 7).to(DEV)
    for n in _blocks(T):
        for signs in (False, True):
            seed = 0x0123456789ABCDEF + n if signs else None
            xr = bq.hadamard(x, n, seed=seed)
            want = bq.dynamic_quant(xr, "token", dtype=D, symmetric=sym)
            got = bq.dynamic_quant(x, "token", dtype=D, symmetric=sym, rotation_block=n, random_signs=signs,
                                   seed=seed)
            for a, b in zip(want, got):
                if a is not None:
                    assert R.mismatches(a, b) == 0, (n, signs)
            if not dt.startswith("float8"):
                tq, ts, tz = bqo.dynamic_per_token_quant(x, symmetric=sym, dtype=D, rotation_block=n,
                                                         random_signs=signs, seed=seed)
                assert R.mismatches(tq, got[0]) == 0 and R.mismatches(ts, got[1]) == 0, (n, signs)


def test_rows_alone_give_the_whole():
    x = _data((300, 4096), torch.bfloat16, 11).to(DEV)
    kw = dict(dtype=torch.int8, rotation_block=128, random_signs=True, seed=5)
    q, s, _ = bq.dynamic_quant(x, "token", **kw)
    q2, s2, _ = bq.dynamic_quant(x[117:171], "token", **kw)
    assert R.mismatches(q[117:171], q2) == 0 and R.mismatches(s[117:171], s2) == 0


def test_dlpack_front_end_gives_the_same_bits():
    from baracuda_quant import dlpack
    x = _data((9, 256), torch.bfloat16, 41).to(DEV)
    kw = dict(rotation_block=64, random_signs=True, seed=-3)
    torch.cuda.synchronize()
    q, s, z = dlpack.dynamic_quant(TensorProducer(x), "token", dtype="int8", symmetric=False, **kw)
    tq, ts, tz = bq.dynamic_quant(x, "token", dtype=torch.int8, symmetric=False, **kw)
    assert R.mismatches(torch.from_dlpack(q), tq) == 0 and R.mismatches(torch.from_dlpack(s), ts) == 0
    assert R.mismatches(torch.from_dlpack(z), tz) == 0
    q, s, _ = dlpack.dynamic_per_token_quant(TensorProducer(x), **kw)
    tq, ts, _ = bqo.dynamic_per_token_quant(x, **kw)
    assert R.mismatches(torch.from_dlpack(q), tq) == 0 and R.mismatches(torch.from_dlpack(s), ts) == 0


def test_torch_compile_fullgraph():
    import torch._dynamo
    torch._dynamo.reset()
    x = _data((16, 256), torch.float16, 43).to(DEV)

    def step(t):
        return (bq.dynamic_quant(t, "token", dtype=torch.float8_e4m3fn, rotation_block=32)[:2] +
                bqo.dynamic_per_token_quant(t, symmetric=False, rotation_block=256, random_signs=True, seed=3))
    eager, got = step(x), torch.compile(step, fullgraph=True)(x)
    for a, b in zip(eager, got):
        assert R.mismatches(a, b) == 0


@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("store", ["int8_sym", "uint8_asym", "e4m3"])
def test_stochastic_rounding_with_the_rotation_is_the_rotation_then_the_op(fname, store):
    """rounding="stochastic" with the rotation: the same bits as hadamard then dynamic_quant
    rounding stochastically, one seed keying both the signs and the draws"""
    T = getattr(torch, fname)
    dt, sym = STORAGE[store]
    D = getattr(torch, dt)
    x = _data((4, 3, 256), T, 23).to(DEV)
    for n in (2, 16, 128):
        for signs in (False, True):
            seed, offset = 0x5EED0000 + n, -700 if signs else 12345
            xr = bq.hadamard(x, n, seed=seed if signs else None)
            want = bq.dynamic_quant(xr, "token", dtype=D, symmetric=sym, rounding="stochastic", seed=seed,
                                    offset=offset)
            got = bq.dynamic_quant(x, "token", dtype=D, symmetric=sym, rotation_block=n, random_signs=signs,
                                   rounding="stochastic", seed=seed, offset=offset)
            for a, b in zip(want, got):
                if a is not None:
                    assert R.mismatches(a, b) == 0, (n, signs)
            rn = bq.dynamic_quant(x, "token", dtype=D, symmetric=sym, rotation_block=n, random_signs=signs,
                                  seed=seed if signs else None)
            assert R.mismatches(rn[1], got[1]) == 0, "the scales are those rounding to nearest computes"

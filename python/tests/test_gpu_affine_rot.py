"""GPU tests of the fused rotation in the static-scale affine ops (docs/numerics.md,
"Rotation"): quantize per tensor, per channel (inner and outer axis), per token, per group
and per block with rotation_block=n give, bit for bit, hadamard(x, n) (the rotation alone,
checked against the CPU reference by the C suites) followed by the same quantize without
the rotation, rounding to nearest or stochastically (the seed keying the signs and the
draws, the offset the draws); dequantize with it gives the plain dequantize followed by
hadamard(y, n, inverse=True). For float32, float16 and bfloat16, int8 (a q-range and zero
points) and FP8 storage, every block size from 2 to 256 that divides the last dimension,
with and without the random signs. Also: the eager fast paths stay unrotated, a new seed
reuses the validated call, rows computed alone give the whole call's, a block that does not
divide the last dimension is refused, and the DLPack front end and torch.compile give the
eager bits."""
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
STORAGE = {"int8": (-100, 117), "float8_e4m3fn": (None, None), "float8_e5m2": (None, None)}
SEED, OFF = 0x0123456789ABCDEF, (1 << 64) - 300  # (the element index wraps past 2^64 inside the tensors)
# granularity: x's shape (the last dimension a multiple of the blocks) and its parameter (the axis, G or B)
CASES = {"tensor": ((7, 256), 0), "channel": ((4, 6, 256), 1), "channel0": ((6, 2048), 0),
         "token": ((3, 5, 512), 0), "token96": ((9, 96), 0), "group": ((12, 512), 32), "block": ((10, 512), 16)}
BLOCKS = (2, 4, 8, 16, 32, 64, 128, 256)


def _blocks(k):
    return [n for n in BLOCKS if k % n == 0]


def _bits(t):
    """t's bits as integers of its size (bit for bit comparisons, -0 and NaN included)"""
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(ints[t.element_size()])


def _same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(_bits(a), _bits(b))


def _data(shape, T, seed, specials=True):
    """x of type T on the GPU; with specials a NaN and a row of zeros"""
    x = R.sr_data(shape, T, seed, specials=False)
    if specials:
        x2 = x.view(-1, shape[-1])
        x2[1, 3] = float("nan")
        x2[2] = 0
    return x.to(DEV)


def _params(gran, shape, p, T, fp8, seed=3):
    """(public scale argument, zero point argument, the granularity's keyword): scales f32
    (x's type for half data per group), zero points int32 (None for FP8)"""
    g = torch.Generator().manual_seed(seed)
    k = shape[-1]
    rows = 1
    for n in shape[:-1]:
        rows *= n
    if gran == "tensor":
        return 0.37, (0 if fp8 else 9), {}
    if gran.startswith("channel"):
        ps, kw = (shape[p],), {"axis": p}
    elif gran.startswith("token"):
        ps, kw = (rows,), {}
    elif gran == "group":
        ps, kw = (rows, k // p), {"group_size": p}
    else:
        ps, kw = (-(-rows // p), -(-k // p)), {"block_size": p}
    s = torch.rand(ps, generator=g) * 0.9 + 0.05
    if gran == "group" and T in (torch.float16, torch.bfloat16):
        s = s.to(T)  # (scales of x's own type)
    z = None if fp8 else torch.randint(-20, 21, ps, generator=g, dtype=torch.int32)
    return s.to(DEV), (None if z is None else z.to(DEV)), kw


def _quantize(gran, x, s, z, Q, qmin, qmax, kw, **opts):
    """the public quantize op of this granularity"""
    if gran == "tensor":
        return bq.quantize_per_tensor(x, s, z, Q, qmin, qmax, **opts)
    if gran.startswith("channel"):
        return bq.quantize_per_channel(x, s, z, kw["axis"], Q, qmin, qmax, **opts)
    if gran.startswith("token"):
        return bq.quantize_per_token(x, s, z, Q, qmin, qmax, **opts)
    if gran == "group":
        return bq.quantize_per_group(x, s, z, kw["group_size"], Q, qmin, qmax, **opts)
    return bq.quantize_per_block(x, s, z, kw["block_size"], Q, qmin, qmax, **opts)


def _dequantize(q, s, z, T, kw, **opts):
    return bq.dequantize(q, s, 0 if z is None else z, out_dtype=T, **kw, **opts)


@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
@pytest.mark.parametrize("qname", list(STORAGE))
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("gran", list(CASES))
def test_quantize_fused_equals_the_rotation_then_the_op(gran, fname, qname, rounding):
    T, Q = getattr(torch, fname), getattr(torch, qname)
    qmin, qmax = STORAGE[qname]
    shape, p = CASES[gran]
    x = _data(shape, T, 17)
    s, z, kw = _params(gran, shape, p, T, qmin is None)
    sr = rounding == "stochastic"
    for n in _blocks(shape[-1]):
        for signs in (False, True):
            seed = SEED ^ n if signs or sr else None  # (with both, one seed keys the signs and the draws)
            draws = dict(rounding=rounding, seed=seed, offset=OFF) if sr else {}
            want = _quantize(gran, bq.hadamard(x, n, seed=seed if signs else None), s, z, Q, qmin, qmax, kw, **draws)
            got = _quantize(gran, x, s, z, Q, qmin, qmax, kw, rounding=rounding, seed=seed, offset=OFF if sr else 0,
                            rotation_block=n, random_signs=signs)
            assert got.dtype == Q and _same(got, want), (n, signs)
            if n == 32:
                plain = _quantize(gran, x, s, z, Q, qmin, qmax, kw, **draws)
                assert not _same(got, plain), "the rotation is applied"


@pytest.mark.parametrize("qname", list(STORAGE)[:2])
@pytest.mark.parametrize("fname", FLOATS)
@pytest.mark.parametrize("gran", list(CASES))
def test_dequantize_fused_equals_the_op_then_the_inverse_rotation(gran, fname, qname):
    T, Q = getattr(torch, fname), getattr(torch, qname)
    qmin, qmax = STORAGE[qname]
    shape, p = CASES[gran]
    x = _data(shape, T, 19, specials=False)
    s, z, kw = _params(gran, shape, p, T, qmin is None, seed=5)
    q = _quantize(gran, x, s, z, Q, qmin, qmax, kw)
    y = _dequantize(q, s, z, T, kw)
    for n in _blocks(shape[-1]):
        for signs in (False, True):
            seed = (1 << 64) - 1 - n if signs else None
            want = bq.hadamard(y, n, inverse=True, seed=seed)
            got = _dequantize(q, s, z, T, kw, rotation_block=n, random_signs=signs, seed=seed)
            assert got.dtype == T and _same(got, want), (n, signs)
            if n == 16:  # the round trip: quantize rotated, dequantize rotated back
                qr = _quantize(gran, x, s, z, Q, qmin, qmax, kw, rotation_block=n, random_signs=signs, seed=seed)
                back = _dequantize(qr, s, z, T, kw, rotation_block=n, random_signs=signs, seed=seed)
                want = bq.hadamard(_dequantize(qr, s, z, T, kw), n, inverse=True, seed=seed)
                assert _same(back, want), (n, signs)
    assert not _same(got, y), "the rotation is applied"


@pytest.mark.parametrize("gran", ["tensor", "token"])
def test_fast_paths_stay_unrotated(gran):
    """the eager fast paths keep the plain calls by geometry: calls with the rotation of the
    same geometry neither take them nor are kept by them"""
    x = _data((64, 256), torch.float16, 5, specials=False)
    s = 0.05 if gran == "tensor" else torch.full((64,), 0.05, device=DEV)
    f = bq.quantize_per_tensor if gran == "tensor" else bq.quantize_per_token
    plain = [f(x, s) for _ in range(3)]  # (the second and third: the fast path)
    rot = f(x, s, rotation_block=64)
    after = f(x, s)
    assert _same(plain[1], plain[0]) and _same(plain[2], plain[0]) and _same(after, plain[0])
    assert _same(rot, f(bq.hadamard(x, 64), s)) and not _same(rot, plain[0])
    deq = [bq.dequantize(plain[0], s, out_dtype=torch.float16) for _ in range(3)]
    drot = bq.dequantize(plain[0], s, out_dtype=torch.float16, rotation_block=64, random_signs=True, seed=4)
    dafter = bq.dequantize(plain[0], s, out_dtype=torch.float16)
    assert _same(deq[1], deq[0]) and _same(deq[2], deq[0]) and _same(dafter, deq[0])
    assert _same(drot, bq.hadamard(deq[0], 64, inverse=True, seed=4)) and not _same(drot, deq[0])


def test_a_new_seed_reuses_the_validated_call():
    """the signs' seed is set at each launch, as stochastic rounding's: a new one needs no new
    validated call, and gives its own signs"""
    x = _data((32, 512), torch.bfloat16, 7, specials=False)
    s = (torch.rand(32, 16, generator=torch.Generator().manual_seed(1)) * 0.2 + 0.02).to(DEV)
    q = bq.quantize_per_group(x, s, None, 32, torch.int8, rotation_block=128, random_signs=True, seed=1)
    bq.dequantize(q, s, group_size=32, out_dtype=torch.bfloat16, rotation_block=128, random_signs=True, seed=1)
    seen = []
    for seed in (2, 3, (1 << 64) - 1):
        n = bqo.prepared_count()
        got = bq.quantize_per_group(x, s, None, 32, torch.int8, rotation_block=128, random_signs=True, seed=seed)
        y = bq.dequantize(got, s, group_size=32, out_dtype=torch.bfloat16, rotation_block=128, random_signs=True,
                          seed=seed)
        assert bqo.prepared_count() == n, "a new seed needs no new call"
        assert _same(got, bq.quantize_per_group(bq.hadamard(x, 128, seed=seed), s, None, 32, torch.int8)), seed
        plain = bq.dequantize(got, s, group_size=32, out_dtype=torch.bfloat16)
        assert _same(y, bq.hadamard(plain, 128, inverse=True, seed=seed)), seed
        seen.append(got)
    assert not _same(seen[0], seen[1]) and not _same(seen[1], seen[2])


def test_rows_alone_give_the_whole():
    x = _data((300, 1024), torch.bfloat16, 11, specials=False)
    s = (torch.rand(300, generator=torch.Generator().manual_seed(2)) * 0.1 + 0.01).to(DEV)
    kw = dict(rotation_block=256, random_signs=True, seed=5)
    q = bq.quantize_per_token(x, s, **kw)
    assert _same(q[117:171], bq.quantize_per_token(x[117:171], s[117:171], **kw))
    y = bq.dequantize(q, s, out_dtype=torch.float32, **kw)
    assert _same(y[117:171], bq.dequantize(q[117:171], s[117:171], out_dtype=torch.float32, **kw))


def test_a_block_must_divide_the_last_dimension():
    """per tensor and per channel the library's blocks run along the flat array: a block
    dividing the element count but not the last dimension is refused as for the others"""
    x = _data((8, 24), torch.float32, 3, specials=False)
    q = torch.zeros(8, 24, dtype=torch.int8, device=DEV)
    sc = torch.ones(8, device=DEV)
    for call in (lambda: bq.quantize_per_tensor(x, 0.5, rotation_block=16),
                 lambda: bq.quantize_per_channel(x, sc, None, 0, rotation_block=16),
                 lambda: bq.quantize_per_token(x, sc, rotation_block=16),
                 lambda: bq.dequantize(q, 0.5, rotation_block=16),
                 lambda: bq.dequantize(q, sc, rotation_block=32)):
        with pytest.raises(bq.InvalidArgumentError, match="rotation_block"):
            call()
    with pytest.raises(bq.InvalidArgumentError, match="power of two"):
        bq.quantize_per_token(x, sc, rotation_block=12)
    assert _same(bq.quantize_per_tensor(x, 0.5, rotation_block=8), bq.quantize_per_tensor(bq.hadamard(x, 8), 0.5))


def test_dlpack_front_end_gives_the_same_bits():
    from baracuda_quant import dlpack
    x = _data((9, 256), torch.bfloat16, 41, specials=False)
    s = (torch.rand(9, 4, generator=torch.Generator().manual_seed(8)) * 0.5 + 0.01).to(DEV)
    sc = (torch.rand(256, generator=torch.Generator().manual_seed(9)) * 0.5 + 0.01).to(DEV)
    kw = dict(rotation_block=64, random_signs=True, seed=12345)
    sr = dict(rounding="stochastic", offset=12, **kw)
    torch.cuda.synchronize()
    q = torch.from_dlpack(dlpack.quantize_per_group(TensorProducer(x), TensorProducer(s), None, 64, "int8", **sr))
    assert _same(q, bq.quantize_per_group(x, s, None, 64, torch.int8, **sr))
    q2 = torch.from_dlpack(dlpack.quantize_per_tensor(TensorProducer(x), 0.25, 0, "float8_e4m3fn", **kw))
    assert _same(q2, bq.quantize_per_tensor(x, 0.25, 0, torch.float8_e4m3fn, **kw))
    y = torch.from_dlpack(dlpack.dequantize(TensorProducer(q), TensorProducer(s), group_size=64,
                                            out_dtype="bfloat16", **kw))
    assert _same(y, bq.dequantize(q, s, group_size=64, out_dtype=torch.bfloat16, **kw))
    qc = bq.quantize_per_channel(x, sc, None, 1, torch.int8)
    y = torch.from_dlpack(dlpack.dequantize(TensorProducer(qc), TensorProducer(sc), axis=1, out_dtype="float32",
                                            rotation_block=256))
    assert _same(y, bq.dequantize(qc, sc, axis=1, out_dtype=torch.float32, rotation_block=256))


def test_torch_compile_fullgraph():
    """compiled quantize and dequantize with the rotation give the eager bits"""
    import torch._dynamo
    torch._dynamo.reset()
    x = _data((16, 256), torch.float16, 43, specials=False)
    s = (torch.rand(16, generator=torch.Generator().manual_seed(9)) * 0.1 + 0.01).to(DEV)
    kw = dict(rotation_block=32, random_signs=True, seed=(1 << 64) - 9)

    def step(t):
        q = bq.quantize_per_token(t, s, rounding="stochastic", offset=33, **kw)
        q8 = bq.quantize_per_tensor(t, 0.05, 0, torch.float8_e4m3fn, rotation_block=128)
        return q, q8, bq.dequantize(q, s, out_dtype=torch.float16, **kw)
    eager, got = step(x), torch.compile(step, fullgraph=True)(x)
    for a, b in zip(eager, got):
        assert _same(a, b)

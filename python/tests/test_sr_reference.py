"""The stochastic rounding reference of the GPU tests (sr_reference.py) on the CPU: its
Philox4x32-10 against Random123's known answers, numpy's draws against the pure Python
ones, and the affine ops' rounding written in torch against the C reference
tests/reference_sr.h (ref_run_sr, compiled here) run on the very bq_args the package's
_core.affine builds: every granularity, float type and storage, quantize and fake quantize.
No GPU; each part skips without what it needs (numpy, torch, a C compiler, tests/)."""
import ctypes
import os
import shutil
import subprocess

import pytest

from conftest import HAS_NUMPY, HAS_TORCH
import sr_reference as R

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF = os.path.join(ROOT, "tests", "reference_sr.h")
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")

# (Random123's kat_vectors: counter, key, result)
KAT = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
       ((M := 0xffffffff, M, M, M), (M, M), (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
       ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
        (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
# (seed, first index) pairs: the index wrapping past 2^64, a counter's high word, seeds' high bits
SPANS = [(0, 0), (1, 5), ((1 << 64) - 1, (1 << 64) - 21), (0x0123456789ABCDEF, (1 << 35) - 9),
         (0xFEDCBA9876543210, 0x1234567800000000 - 3)]


def test_philox_known_answers():
    for ctr, key, want in KAT:
        assert R.philox(ctr, key[0] | key[1] << 32) == want


def test_draws_pick_the_contract_bits():
    """element i: bits 16 (i % 2) .. of word (i / 2) % 4 at counter (i / 8, 1, 0)"""
    seed, first = 0x0123456789ABCDEF, (1 << 40) + 3
    got = R.sr_draws(seed, first, 16)
    for j, u in enumerate(got):
        i = first + j
        w = R.philox(((i >> 3) & R.M32, i >> 35, 1, 0), seed)
        assert u == (w[(i >> 1) & 3] >> (16 * (i & 1))) & 0xFFFF
    assert R.sr_draws(seed, (1 << 64) + 5, 4) == R.sr_draws(seed, 5, 4)  # (indices modulo 2^64)


@pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed")
def test_numpy_draws_are_the_python_ones():
    for seed, first in SPANS:
        assert [int(u) for u in R.sr_draws_np(seed, first, 45)] == R.sr_draws(seed, first, 45), (seed, first)


# ---- the torch-written rounding against the C reference ------------------------------------------
_HARNESS = r"""
#include <stdlib.h>
#include "reference_sr.h"
int sr_run(const bq_desc *d, const bq_args *a) { return ref_run_sr(d, a); }
unsigned sr_draw(unsigned long long seed, unsigned long long i) { return refmx_sr_draw(seed, i); }
"""
needs_ref = pytest.mark.skipif(not (HAS_TORCH and CC and os.path.exists(REF)),
                               reason="needs torch, a C compiler and the repository's tests/reference_sr.h")

if HAS_TORCH:
    import torch
    from baracuda_quant import _core, _lib
    from baracuda_quant._enums import DType, Direction, Granularity, Op

    _DT = {torch.float32: DType.F32, torch.float64: DType.F64, torch.float16: DType.F16, torch.bfloat16: DType.BF16,
           torch.int8: DType.S8, torch.uint8: DType.U8, torch.float8_e4m3fn: DType.E4M3,
           torch.float8_e5m2: DType.E5M2, torch.int32: DType.S32}

SEED, OFF = 0x9E3779B97F4A7C15, (1 << 64) - 37  # (the index wraps inside the tensor)
# granularity: (x's shape, the parameter: the axis, G or B)
CASES = {"tensor": ((5, 37), 0), "channel": ((3, 5, 8), 1), "token": ((3, 4, 24), 0), "group": ((6, 48), 8),
         "block": ((10, 30), 4)}
GRANS = {"tensor": "PER_TENSOR", "channel": "PER_CHANNEL", "token": "PER_TOKEN", "group": "PER_GROUP",
         "block": "PER_BLOCK"}
STORAGE = {"int8": (-100, 117), "uint8": (3, 250), "float8_e4m3fn": (None, None), "float8_e5m2": (None, None)}


@pytest.fixture(scope="module")
def clib(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sr_ref")
    src, so = tmp / "harness.c", tmp / "libsrref.so"
    src.write_text(_HARNESS)
    subprocess.run([CC, "-std=c11", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-I", os.path.join(ROOT, "tests"),
                    "-I", ROOT, str(src), "-o", str(so), "-lm"], check=True, capture_output=True)
    lib = ctypes.CDLL(str(so))
    lib.sr_run.restype, lib.sr_run.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]
    lib.sr_draw.restype, lib.sr_draw.argtypes = ctypes.c_uint, [ctypes.c_ulonglong, ctypes.c_ulonglong]
    return lib


def _view(t):
    return _core.View(t.data_ptr(), t.shape, t.stride(), _DT[t.dtype], 0)


def _c_run(clib, monkeypatch, op, gran, x, y, Q, qmin, qmax, **kw):
    """ref_run_sr on the bq_args _core.affine builds for this call (host buffers)"""
    seen = []
    monkeypatch.setattr(_core, "_launch", lambda key, device, args, stream, alloc, prepare=False:
                        seen.append((key, _lib.Args.from_buffer_copy(args))))
    _core.affine(op, Direction.FORWARD, getattr(Granularity, GRANS[gran]), fl=_view(x), x=_view(x), y=_view(y),
                 int_type=_DT[Q], qmin=qmin, qmax=qmax, rounding="stochastic", seed=SEED, offset=OFF, **kw)
    (key, args), = seen
    assert key[-2] == 1 and (args.seed, args.offset) == (SEED, OFF)
    assert clib.sr_run(ctypes.addressof(_lib.make_desc(key, 0)), ctypes.addressof(args)) == 0


@needs_ref
def test_c_draws_are_the_python_ones(clib):
    for seed, first in SPANS:
        assert [clib.sr_draw(seed, (first + j) % (1 << 64)) for j in range(40)] == R.sr_draws(seed, first, 40)


@needs_ref
@pytest.mark.parametrize("qname", list(STORAGE))
@pytest.mark.parametrize("gran", list(CASES))
def test_torch_reference_is_the_c_one(clib, monkeypatch, gran, qname):
    """quantize_sr and dequantize_ref over full_params and draws (what test_gpu_affine_sr.py
    compares the GPU with) give ref_run_sr's bits, quantize and fake quantize, each float type"""
    Q = getattr(torch, qname)
    qmin, qmax = STORAGE[qname]
    fp8 = qmin is None
    shape, p = CASES[gran]
    for n, T in enumerate((torch.float32, torch.float64, torch.float16, torch.bfloat16)):
        x = R.sr_data(shape, T, 11 + n)
        g = torch.Generator().manual_seed(5 + n)
        k = shape[-1]
        rows = x.numel() // k
        if gran == "tensor":
            s, z = 0.37, (0 if fp8 else 7)
            kw2 = dict(scale=s, zero_point=z)
        else:
            ps = ((shape[p],) if gran == "channel" else (rows,) if gran == "token" else (rows, k // p)
                  if gran == "group" else (-(-rows // p), -(-k // p)))
            s = torch.rand(ps, generator=g) * 0.9 + 0.05
            z = None if fp8 else torch.randint(-20, 160, ps, generator=g, dtype=torch.int32)
            kw2 = dict(scales=_view(s), zero_points=None if z is None else _view(z))
            if gran == "channel":
                kw2["axis"] = p
            elif gran in ("group", "block"):
                kw2["group_size"] = p
        S, Z = R.full_params(gran, shape, s, z, p)
        U = R.draws(SEED, OFF, shape)
        want = R.quantize_sr(x, S, Z, U, Q, qmin, qmax)
        xk = x if gran in ("tensor", "channel") else x.view(rows, k)
        q = torch.zeros(xk.shape, dtype=Q)
        _c_run(clib, monkeypatch, Op.QUANTIZE, gran, xk, q, Q, qmin, qmax, **kw2)
        assert R.mismatches(q.view(shape), want) == 0, ("quantize", T)
        y = torch.zeros(xk.shape, dtype=T)
        _c_run(clib, monkeypatch, Op.FAKE_QUANTIZE, gran, xk, y, Q, qmin, qmax, **kw2)
        assert R.mismatches(y.view(shape), R.dequantize_ref(want, S, Z, T)) == 0, ("fake quantize", T)

"""The torch-written contract of test_gpu_fused.py (what the GPU results are compared with)
against the C reference tests/reference_fused.h, on the CPU: the RMSNorm values and their
residual, SiLU and GELU-tanh (exp_c, tanh_c) over a sweep that reaches every branch, and the
quantize half (dynamic per token and per group, symmetric or not, q-ranges, static). Needs
torch, a C compiler and the repository's tests/ (skipped otherwise); no GPU."""
import os
import shutil
import subprocess

import pytest

from conftest import HAS_TORCH, HAS_NUMPY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF = os.path.join(ROOT, "tests", "reference_fused.h")
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
pytestmark = pytest.mark.skipif(not (HAS_TORCH and HAS_NUMPY and CC and os.path.exists(REF)),
                                reason="needs torch, numpy, a C compiler and the repository's tests/")

if HAS_TORCH and HAS_NUMPY:
    import numpy as np
    import torch
    import test_gpu
    import test_gpu_fused as tf

TN = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """(run, tmp): run(*args) runs the compiled harness; tmp: its scratch folder. The GPU
    tests' module imports torch only with a GPU: its globals are set here instead."""
    tmp = tmp_path_factory.mktemp("fused_ref")
    exe = str(tmp / "harness")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fused_reference_harness.c")
    subprocess.run([CC, "-std=c11", "-O1", "-ffp-contract=off", "-I", os.path.join(ROOT, "tests"), "-I", ROOT, src,
                    "-o", exe, "-lm"], check=True)
    for mod in (test_gpu, tf):
        mod.torch = torch
    c = (lambda t: torch.float64 if t == torch.float64 else torch.float32)
    test_gpu.C = tf.C = c
    tf.gen, tf.same, tf.ref_quantize = test_gpu.gen, test_gpu.same, test_gpu.ref_quantize

    def run(*args):
        subprocess.run([exe] + [str(a) for a in args], check=True)
    return run, tmp


def raw(t, path):
    t.contiguous().view(torch.uint8).numpy().tofile(str(path))
    return path


def load(path, dtype, shape):
    return torch.from_numpy(np.fromfile(str(path), dtype=np.uint8)).view(dtype).view(shape)


@pytest.mark.parametrize("fname", list(TN))
@pytest.mark.parametrize("d", [200, 2048, 4095, 4096, 14336, 20000])
def test_rmsnorm_values(ref, fname, d):
    run, tmp = ref
    T = getattr(torch, fname)
    x = test_gpu.gen((5, d), T, seed=d, specials=False)
    x[2] = 0
    w = test_gpu.gen((d,), T, seed=d + 1, specials=False, scale=0.3)
    r = test_gpu.gen((5, d), T, seed=d + 2, specials=False)
    run("rms", TN[fname], 5, d, "1e-6", raw(x, tmp / "x"), raw(w, tmp / "w"), tmp / "n")
    assert test_gpu.same(tf.ref_rmsnorm(x, w, 1e-6)[1], load(tmp / "n", T, (5, d)))
    run("rms", TN[fname], 5, d, "1e-5", raw(x, tmp / "x"), raw(w, tmp / "w"), raw(r, tmp / "r"), tmp / "n",
        tmp / "h")
    h, n = tf.ref_rmsnorm(x, w, 1e-5, r)
    assert test_gpu.same(n, load(tmp / "n", T, (5, d))) and test_gpu.same(h, load(tmp / "h", T, (5, d)))


@pytest.mark.parametrize("fname", list(TN))
@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
def test_activation_sweep(ref, fname, act):
    run, tmp = ref
    T = getattr(torch, fname)
    vals = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 5e-324 if T == torch.float64 else 1e-45, -1e-40]
    g = torch.Generator().manual_seed(1)
    for scale in (1e-3, 0.1, 0.3, 0.5, 0.6, 1, 3, 10, 30, 88, 100, 200, 700, 750):
        vals += (torch.randn(300, generator=g, dtype=torch.float64) * scale).tolist()
    # around exp_c's clamps, tanh_c's branch points (9/16 after K0, 10, 20) and the overflows
    for b in (88.72, 89.0, -87.3, -103.9, -104.0, 0.5625 / 0.7978845608028654, 10.0, 20.0, 709.7, 710.0, -746.0):
        vals += [s * b * (1 + k * 1e-7) for k in range(-20, 21) for s in (1, -1)]
    n = len(vals)
    x = torch.cat([torch.tensor(vals, dtype=torch.float64).to(T).view(1, n), torch.ones(1, n, dtype=T)], 1)
    run(act[:4], TN[fname], 1, n, raw(x, tmp / "g"), tmp / "a")
    assert test_gpu.same(tf.ref_gated(x, act), load(tmp / "a", T, (1, n)))


CASES = [(g, a, lo, hi, it) for g in (0, 128, 96) for a in (0, 1) for lo, hi, it in [(-128, 127, "int8")]] + \
    [(0, 0, -7, 7, "int8"), (0, 1, 0, 255, "uint8"), (64, 1, 3, 200, "uint8"), (-1, 0, -128, 127, "int8")]


@pytest.mark.parametrize("fname", list(TN))
@pytest.mark.parametrize("group,asym,qmin,qmax,itype", CASES)
def test_quantize_half(ref, fname, group, asym, qmin, qmax, itype):
    run, tmp = ref
    T, I, D = getattr(torch, fname), getattr(torch, itype), 4608
    x = test_gpu.gen((6, D), T, seed=group + 7, specials=False)
    x[2] = 0
    w = test_gpu.gen((D,), T, seed=8, specials=False, scale=0.3)
    run("rmsq", TN[fname], 6, D, "1e-6", group, asym, qmin, qmax, "u8" if itype == "uint8" else "s8", "0.05", 3,
        raw(x, tmp / "x"), raw(w, tmp / "w"), tmp / "q", tmp / "s", tmp / "z")
    ng = D // group if group > 0 else 1
    q, s, z = load(tmp / "q", I, (6, D)), load(tmp / "s", torch.float32, (6, ng)), load(tmp / "z", torch.int32, (6, ng))
    n = tf.ref_rmsnorm(x, w, 1e-6)[1]
    if group < 0:
        assert test_gpu.same(test_gpu.ref_quantize(n, torch.tensor(0.05, dtype=torch.float64), 3, qmin, qmax, I), q)
        return
    rq, rs, rz = tf.ref_dynamic(n, not asym, group or None, qmin, qmax, I)
    assert test_gpu.same(rq, q) and test_gpu.same(rs, s)
    if asym:
        assert test_gpu.same(rz, z)

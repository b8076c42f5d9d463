#!/usr/bin/env python3
"""baracuda_quant's torch ops against PyTorch: eager, torch.compile and (for the GEMM)
torch._int_mm, in one process on one GPU.

All contenders of a row (ours, PyTorch eager, torch.compile, the unfused pair where there is
one, and a device copy of the same bytes, read plus written, as the memory-bound reference)
are first warmed up (torch.compile's compiled), then timed interleaved: the contenders take
turns, each turn starting one contender further on, at most 10 calls each (BLOCK; fewer
where that makes the turns a whole multiple of the contenders, so that each takes each place
in a turn equally often: 5 calls for a row of four), each call between CUDA events after a
256 MiB write that flushes L2, each block of calls behind a spin kernel that lets the host
queue them first. Each timing is
the median of its 60 calls: GPU time, measured under the same conditions for every
contender (timing one after another favoured whichever ran after an idle GPU, such as
torch.compile after its compile). A contender that PyTorch refuses is recorded as its error.
The host overhead of a small op (4096 elements) is host time per call without
synchronization: the fastest of 11 rounds of 1000 calls (and the median), the contenders
alternated, beside the floors a Python package's call stands on (an allocation, a torch.ops
op of the same schema that only allocates, one PyTorch launch).

    python bench.py [--json out.json] [--no-compile] [--quick] [--commit REV]
                    [--fused-only | --no-fused | --host-only]

The fused producers (rms_norm_quant with and without a residual, silu_and_mul_quant; bf16
[8192, 4096] and [8192, 14336], per token) are timed against the unfused pair (PyTorch's
F.rms_norm or F.silu(g) * u in eager, then this package's dynamic_per_token_quant), PyTorch
eager of the whole composition and torch.compile of it, and the copy of the same bytes;
the ratios are printed against their targets (--fused-only: just these rows).

The JSON's provenance names the GPU, driver, torch, the commit (--commit, else
$BQ_BENCH_COMMIT, else the first line of .bench_commit at the repository root) and the
sha256 of baracuda_quant.h and of the package's modules, and "timing": "interleaved, balanced"
(older files: "interleaved, rotating", turns of 10 calls each starting one contender further
on, which for four contenders is not a whole number of rotations; "interleaved", each turn in
the same order; absent, one contender after another). A row's
"host_time_may_show" names the contenders whose blocks the GPU caught up with.
tools/bench_table.py --python turns the JSON into the README's "From PyTorch" table and a
section of docs/performance.md.
"""
import argparse
import glob
import hashlib
import json
import os
import sys
import time

import torch

# The installed package, not the source folder beside this script (which has no compiled
# library): Python puts the script's folder first on sys.path, so it goes last here, where
# only bench_sched and l2_scrub are found. PYTHONPATH=python (with BARACUDA_QUANT_PYLIB) still
# runs the source tree on purpose.
_here = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _here:
    sys.path.append(sys.path.pop(0))

import baracuda_quant as bq  # noqa: E402
import baracuda_quant.ops as bqo  # noqa: E402
import bench_sched  # noqa: E402  beside this file: the order the contenders of a row are timed in
import l2_scrub  # noqa: E402  beside this file: L2's evict-last lines out before each flush

DEV = "cuda"
REPS = 60
BLOCK = 10  # timed calls a contender queues behind one spin before the next takes its turn
_flush = None
_scrub = None  # l2_scrub.make()'s: run before each flush


def flush_l2():
    if _scrub is not None:
        _scrub()
    _flush.fill_(1)


_cycles_per_us = None


def _calibrate_sleep():
    """GPU clock cycles per microsecond of torch.cuda._sleep, measured once."""
    global _cycles_per_us
    if _cycles_per_us is None:
        torch.cuda._sleep(1000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(20_000_000)
        e.record()
        torch.cuda.synchronize()
        _cycles_per_us = 20_000_000 / (s.elapsed_time(e) * 1000.0)
    return _cycles_per_us


def time_gpu_multi(fns, reps=REPS, warmup=10, errors=None, late=None):
    """Median GPU time (us) of each contender of fns (a dict: key -> callable), all timed under the
    same conditions: each warmed up (a torch.compile one compiled), then the contenders take
    turns of at most BLOCK calls each (bench_sched.queue_blocks: each turn starts one contender
    further on; bench_sched.balanced_per: every contender takes every place equally often),
    each call between two events after an L2 flush. A spin kernel
    enqueued ahead of each block holds the GPU until the host has queued the block, so host
    overhead (ours or PyTorch's) never shows up as GPU time; host cost is measured apart. A contender that
    raises in its warm-up is left out: its error goes into errors[key], or propagates when errors
    is None. A contender whose block the GPU caught up with (its spin ended before the host had
    queued the block, so host time may show in its time) is named in a warning and added to
    the set late."""
    ok = bench_sched.warm_up(fns, warmup, torch.cuda.synchronize, errors)
    if not ok:
        return {}
    new_event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    host = bench_sched.host_us(ok, flush_l2, new_event, time.perf_counter)
    torch.cuda.synchronize()
    marks = bench_sched.make_marks(ok, reps, new_event)
    # the contenders take turns, up to BLOCK calls each behind a spin of their own: every block
    # starts on a busy GPU, and the queue stays short (a long one fills the driver's launch
    # queue, and the host then waits for a GPU that waits for it)
    cpu = _calibrate_sleep()
    slept, caught = torch.cuda.Event(), []

    def spin(key, n):
        torch.cuda._sleep(int(bench_sched.spin_us({key: host[key]}, n) * cpu))
        slept.record()

    def wait(key):
        if slept.query() and key not in caught:  # the spin ended before the host had queued the block
            caught.append(key)
        torch.cuda.synchronize()
    bench_sched.queue_blocks(ok, marks, flush_l2, bench_sched.balanced_per(reps, len(ok), BLOCK), spin, wait)
    if caught:
        print("  warning: the GPU caught up with the host in blocks of %s; host time may show in their times"
              % ", ".join(caught), file=sys.stderr)
        if late is not None:
            late.update(caught)
    return bench_sched.medians(marks, lambda s, e: s.elapsed_time(e) * 1000.0)  # us


def time_gpu(fn, reps=REPS, warmup=10):
    """time_gpu_multi of one callable: its median GPU time (us); an error propagates."""
    return time_gpu_multi({"fn": fn}, reps, warmup)["fn"]


def copy_fn(nbytes_moved):
    """A device copy that reads and writes nbytes_moved in all: the memory-bound reference."""
    n = max(nbytes_moved // 2, 1)
    src = torch.empty(n, dtype=torch.uint8, device=DEV)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def nbytes(*ts):
    return sum(t.numel() * t.element_size() for t in ts)


def time_row(row, fns, required=("copy",)):
    """Times a row's contenders together (time_gpu_multi): row[key + "_us"] for each, or
    row[key + "_error"] when PyTorch refuses the case (reported); a required one must run.
    row["host_time_may_show"] lists the contenders whose blocks the GPU caught up with."""
    errors, late = {}, set()
    us = time_gpu_multi(fns, errors=errors, late=late)
    if late:
        row["host_time_may_show"] = [key for key in fns if key in late]
    for key in fns:  # in fns' order, as the JSON always listed them
        if key in us:
            row[key + "_us"] = us[key]
        elif key in required:
            raise RuntimeError("%s: %s failed: %s" % (row["op"], key, errors[key]))
        else:
            row[key + "_error"] = errors[key]


def maybe_compile(fn, enabled):
    return torch.compile(fn, fullgraph=True) if enabled else None


def cases(quick):
    M, K, N = (1024, 2048, 2048) if quick else (4096, 4096, 4096)
    g = torch.Generator(device=DEV).manual_seed(0)
    x16 = torch.randn(M, K, device=DEV, generator=g, dtype=torch.float16)
    x32 = x16.float()
    s, zp = 0.02, 3
    q8 = bqo.quantize_per_tensor(x16, s, zp)
    sc = torch.rand(M, device=DEV, generator=g) * 0.01 + 0.01
    zc = torch.randint(-5, 5, (M,), device=DEV, generator=g, dtype=torch.int32)

    def t_quant(x):
        return torch.clamp(torch.round(x.float() / s) + zp, -128, 127).to(torch.int8)

    def t_dequant(q):
        return ((q.float() - zp) * s).half()

    def t_quant_ch(x, sc, zc):
        return torch.clamp(torch.round(x / sc[:, None]) + zc[:, None], -128, 127).to(torch.int8)

    def t_fq(x):
        return torch.fake_quantize_per_tensor_affine(x, s, zp, -128, 127)

    def t_dyn(x):
        amax = x.abs().amax(-1, keepdim=True).float()
        sc = torch.where(amax == 0, torch.ones_like(amax), amax / 127)
        return torch.clamp(torch.round(x.float() / sc), -128, 127).to(torch.int8), sc

    a8 = torch.randint(-128, 128, (M, K), device=DEV, generator=g, dtype=torch.int8)
    w8 = torch.randint(-128, 128, (N, K), device=DEV, generator=g, dtype=torch.int8)
    sa = torch.rand(M, device=DEV, generator=g) * 0.01 + 1e-3
    sw = torch.rand(N, device=DEV, generator=g) * 0.01 + 1e-3
    bias = torch.randn(N, device=DEV, generator=g, dtype=torch.float16)

    def t_sq(a, w, sa, sw, bias):
        return (torch._int_mm(a, w.t()).float() * sa[:, None] * sw[None, :] + bias.float()).half()

    def t_ql(x, w, sw, bias):
        q, sa = t_dyn(x)
        return (torch._int_mm(q, w.t()).float() * sa * sw[None, :] + bias.float()).half()

    y16 = torch.empty(M, N, device=DEV, dtype=torch.float16)
    xb = x16.bfloat16()
    sb = sc.float()
    G = 128
    sg = torch.rand(M, K // G, device=DEV, generator=g) * 0.01 + 0.01

    def t_quant_tok(x, s):
        return torch.clamp(torch.round(x.float() / s[:, None]), -128, 127).to(torch.int8)

    def t_quant_grp(x, s):
        xg = x.float().view(M, K // G, G)
        return torch.clamp(torch.round(xg / s[:, :, None]), -128, 127).to(torch.int8).view(M, K)

    def t_fq_ch(x, s, z):
        return torch.fake_quantize_per_channel_affine(x, s, z, 0, -128, 127)

    E4M3 = torch.float8_e4m3fn
    q8e = torch.empty(M, K, device=DEV, dtype=E4M3)
    B = 128
    sblk = torch.rand(M // B, K // B, device=DEV, generator=g) * 0.01 + 0.01

    def t_dyn_block(x):  # FP8 per 128 x 128 block (DeepSeek-V3's weights)
        xb_ = x.float().view(M // B, B, K // B, B)
        amax = xb_.abs().amax(dim=(1, 3), keepdim=True)
        sc = torch.where(amax == 0, torch.ones_like(amax), amax / 448.0)
        return (xb_ / sc).clamp(-448.0, 448.0).to(E4M3).view(M, K), sc.view(M // B, K // B)

    def t_dyn_group(x):  # FP8 per 1 x 128 group (the activations)
        xg = x.float().view(M, K // B, B)
        amax = xg.abs().amax(-1, keepdim=True)
        sc = torch.where(amax == 0, torch.ones_like(amax), amax / 448.0)
        return (xg / sc).clamp(-448.0, 448.0).to(E4M3).view(M, K), sc.view(M, K // B)

    def t_quant_block(x, s):
        xb_ = x.float().view(M // B, B, K // B, B)
        return (xb_ / s.view(M // B, 1, K // B, 1)).clamp(-448.0, 448.0).to(E4M3).view(M, K)

    xr = x32.clone().requires_grad_()
    dy = torch.randn_like(x32)

    def fq_bwd(f):
        def run():
            y = f(xr)
            return torch.autograd.grad(y, xr, dy)
        return run
    t_fq_c = torch.compile(t_fq, fullgraph=True)
    t_fq_ch_c = torch.compile(lambda t: t_fq_ch(t, sc, zc), fullgraph=True)
    return [
        # name, ours, torch eager, torch function to compile (args), bytes moved
        ("quantize_per_tensor f16->s8 %dx%d" % (M, K), lambda: bqo.quantize_per_tensor(x16, s, zp),
         lambda: t_quant(x16), (t_quant, (x16,)), nbytes(x16, q8)),
        ("dequantize per tensor s8->f16 %dx%d" % (M, K), lambda: bqo.dequantize(q8, s, zp, out_dtype=torch.float16),
         lambda: t_dequant(q8), (t_dequant, (q8,)), nbytes(q8, x16)),
        ("quantize_per_channel f32->s8 %dx%d axis 0" % (M, K),
         lambda: bqo.quantize_per_channel(x32, sc, zc, 0, torch.int8),
         lambda: torch.quantize_per_channel(x32, sc.double(), zc.long(), 0, torch.qint8),
         (t_quant_ch, (x32, sc, zc)), nbytes(x32, q8)),
        ("fake_quantize_per_tensor f32 %dx%d" % (M, K), lambda: bqo.fake_quantize_per_tensor_affine(
            x32, s, zp, -128, 127), lambda: t_fq(x32), (t_fq, (x32,)), 2 * nbytes(x32)),
        ("quantize_per_token bf16->s8 %dx%d" % (M, K), lambda: bqo.quantize_per_token(xb, sb),
         lambda: t_quant_tok(xb, sb), (t_quant_tok, (xb, sb)), nbytes(xb, q8)),
        ("quantize_per_group bf16->s8 %dx%d g=%d" % (M, K, G), lambda: bqo.quantize_per_group(xb, sg, None, G),
         lambda: t_quant_grp(xb, sg), (t_quant_grp, (xb, sg)), nbytes(xb, q8)),
        ("fake_quantize_per_channel f32 %dx%d axis 0" % (M, K),
         lambda: bqo.fake_quantize_per_channel_affine(x32, sc, zc, 0, -128, 127),
         lambda: t_fq_ch(x32, sc, zc), (t_fq_ch, (x32, sc, zc)), 2 * nbytes(x32)),
        ("fake_quantize_per_tensor f32 %dx%d fwd+bwd" % (M, K),
         fq_bwd(lambda t: bqo.fake_quantize_per_tensor_affine(t, s, zp, -128, 127)), fq_bwd(t_fq),
         (fq_bwd(t_fq_c), ()), 5 * nbytes(x32)),
        ("fake_quantize_per_channel f32 %dx%d axis 0 fwd+bwd" % (M, K),
         fq_bwd(lambda t: bqo.fake_quantize_per_channel_affine(t, sc, zc, 0, -128, 127)),
         fq_bwd(lambda t: t_fq_ch(t, sc, zc)), (fq_bwd(t_fq_ch_c), ()), 5 * nbytes(x32)),
        ("dynamic_per_token_quant f16 %dx%d" % (M, K), lambda: bqo.dynamic_per_token_quant(x16),
         lambda: t_dyn(x16), (t_dyn, (x16,)), nbytes(x16, q8)),
        ("dynamic_quant per block bf16->e4m3 %dx%d B=%d" % (M, K, B),
         lambda: bqo.dynamic_quant(xb, "block", block_size=B, dtype=E4M3), lambda: t_dyn_block(xb),
         (t_dyn_block, (xb,)), nbytes(xb, q8e)),
        ("dynamic_quant per group bf16->e4m3 %dx%d g=%d" % (M, K, B),
         lambda: bqo.dynamic_quant(xb, "group", group_size=B, dtype=E4M3), lambda: t_dyn_group(xb),
         (t_dyn_group, (xb,)), nbytes(xb, q8e)),
        ("quantize_per_block bf16->e4m3 %dx%d B=%d" % (M, K, B),
         lambda: bqo.quantize_per_block(xb, sblk, None, B, E4M3), lambda: t_quant_block(xb, sblk),
         (t_quant_block, (xb, sblk)), nbytes(xb, q8e)),
        ("int8_linear %dx%dx%d -> f16" % (M, N, K), lambda: bqo.int8_linear(a8, w8, sa, sw, bias),
         lambda: t_sq(a8, w8, sa, sw, bias), (t_sq, (a8, w8, sa, sw, bias)), nbytes(a8, w8, y16)),
        ("int8_linear decode 32x%dx%d -> f16" % (N, K), lambda: bqo.int8_linear(a8[:32], w8, sa[:32], sw, bias),
         lambda: t_sq(a8[:32], w8, sa[:32], sw, bias), (t_sq, (a8[:32], w8, sa[:32], sw, bias)),
         nbytes(a8[:32], w8, y16[:32])),
        ("quantized_linear f16 %dx%dx%d" % (M, N, K), lambda: bqo.quantized_linear(x16, w8, sw, bias),
         lambda: t_ql(x16, w8, sw, bias), (t_ql, (x16, w8, sw, bias)), nbytes(x16, w8, y16)),
    ], (a8, w8)


def fused_cases(quick):
    """The fused producers (bf16, per-token int8, f32 scales) against what a PyTorch user runs
    instead: the unfused pair (PyTorch's own RMSNorm or SiLU-mul in eager, then this library's
    dynamic quantize through the package), PyTorch eager of the whole composition, and
    torch.compile of it. Bytes counted once each: x read (gated: [M, 2 D]), the residual read
    and written, the weight, q and the scales written."""
    import torch.nn.functional as F
    rows = 1024 if quick else 8192
    g = torch.Generator(device=DEV).manual_seed(1)
    eps = 1e-6

    def quant(v):
        amax = v.abs().amax(-1, keepdim=True).float()
        s = torch.where(amax == 0, torch.ones_like(amax), amax / 127)
        return torch.clamp(torch.round(v.float() / s), -128, 127).to(torch.int8), s

    def t_rms(x, w):
        return quant(F.rms_norm(x, (x.shape[-1],), w, eps))

    def t_add_rms(x, r, w):
        h = x + r
        q, s = quant(F.rms_norm(h, (h.shape[-1],), w, eps))
        return q, s, h

    def t_silu(x):
        d = x.shape[-1] // 2
        return quant(F.silu(x[:, :d]) * x[:, d:])

    def quant_e4m3(v):
        amax = v.abs().amax(-1, keepdim=True).float()
        s = torch.where(amax == 0, torch.ones_like(amax), amax / 448.0)
        return (v.float() / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), s

    def t_rms_e4m3(x, w):
        return quant_e4m3(F.rms_norm(x, (x.shape[-1],), w, eps))

    out = []
    for d in (4096, 14336):
        x = torch.randn(rows, d, device=DEV, generator=g, dtype=torch.bfloat16) * 3
        r = torch.randn(rows, d, device=DEV, generator=g, dtype=torch.bfloat16) * 3
        w = torch.rand(d, device=DEV, generator=g, dtype=torch.bfloat16) + 0.5
        xg = torch.randn(rows, 2 * d, device=DEV, generator=g, dtype=torch.bfloat16) * 3
        qb, sb = rows * d, rows * 4  # q and the scales, written
        shape = "%dx%d" % (rows, d)
        out += [
            # name, ours, unfused pair, eager composition, (function to compile, args), bytes moved
            ("rms_norm_quant bf16 %s per token" % shape,
             lambda x=x, w=w: bqo.rms_norm_quant(x, w, eps),
             lambda x=x, w=w: bqo.dynamic_per_token_quant(F.rms_norm(x, (x.shape[-1],), w, eps)),
             lambda x=x, w=w: t_rms(x, w), (t_rms, (x, w)), nbytes(x, w) + qb + sb),
            ("rms_norm_quant bf16 %s per token, residual" % shape,
             lambda x=x, r=r, w=w: bqo.rms_norm_quant(x, w, eps, residual=r),
             lambda x=x, r=r, w=w: bqo.dynamic_per_token_quant(F.rms_norm(x + r, (x.shape[-1],), w, eps)),
             lambda x=x, r=r, w=w: t_add_rms(x, r, w), (t_add_rms, (x, r, w)), nbytes(x, r, r, w) + qb + sb),
            ("silu_and_mul_quant bf16 %s per token (x %dx%d)" % (shape, rows, 2 * d),
             lambda xg=xg: bqo.silu_and_mul_quant(xg),
             lambda xg=xg, d=d: bqo.dynamic_per_token_quant(F.silu(xg[:, :d]) * xg[:, d:]),
             lambda xg=xg: t_silu(xg), (t_silu, (xg,)), nbytes(xg) + qb + sb),
            ("rms_norm_quant bf16 %s per token -> e4m3" % shape,
             lambda x=x, w=w: bqo.rms_norm_quant(x, w, eps, out_dtype=torch.float8_e4m3fn),
             lambda x=x, w=w: bqo.dynamic_quant(F.rms_norm(x, (x.shape[-1],), w, eps), dtype=torch.float8_e4m3fn),
             lambda x=x, w=w: t_rms_e4m3(x, w), (t_rms_e4m3, (x, w)), nbytes(x, w) + qb + sb),
        ]
    return out


def run_fused(args):
    """Times fused_cases; each alternative's failure is recorded as its "<key>_error"."""
    rows = []
    for name, ours, pair, eager, (tfn, targs), moved in fused_cases(args.quick):
        row = {"op": name, "bytes": moved}
        fns = {"ours": ours, "unfused_pair": pair, "torch_eager": eager}
        if not args.no_compile:
            # static shapes: each shape gets its own specialized kernels (as tools/compare_torch.py)
            c = torch.compile(tfn, fullgraph=True, dynamic=False)
            fns["torch_compile"] = lambda c=c, targs=targs: c(*targs)
        fns["copy"] = copy_fn(moved)
        time_row(row, fns)
        o = row.get("ours_us")
        if o:
            row["copy_over_ours"] = row["copy_us"] / o  # the share of copy bandwidth (bytes counted once)
            for k in ("unfused_pair", "torch_eager", "torch_compile"):
                if row.get(k + "_us") is not None:
                    row[k + "_over_ours"] = row[k + "_us"] / o  # above 1: the fused op is faster
        rows.append(row)
        print("  %-60s done" % name, file=sys.stderr)
    return rows


FUSED_TARGETS = (("copy_over_ours", 0.90, "fused vs copy (share of copy bandwidth)"),
                 ("unfused_pair_over_ours", 1.5, "fused vs unfused pair (speed-up)"),
                 ("torch_compile_over_ours", 1.0, "fused vs torch.compile (speed-up)"))


def print_fused(rows):
    hdr = "%-58s %9s %9s %9s %9s %9s %8s %8s %8s" % ("fused producer (median us, L2 flushed)", "fused", "pair",
                                                     "eager", "compile", "copy", "copy/f", "pair/f", "comp/f")
    print("\n" + hdr)
    print("-" * len(hdr))

    def cell(r, k, fmt):
        v = r.get(k)
        return fmt % v if v is not None else ("err" if r.get(k.replace("_us", "_error")) else "-")
    for r in rows:
        print("%-58s %9s %9s %9s %9s %9.1f %8s %8s %8s" % (
            r["op"], cell(r, "ours_us", "%.1f"), cell(r, "unfused_pair_us", "%.1f"), cell(r, "torch_eager_us", "%.1f"),
            cell(r, "torch_compile_us", "%.1f"), r["copy_us"], cell(r, "copy_over_ours", "%.2f"),
            cell(r, "unfused_pair_over_ours", "%.2f"), cell(r, "torch_compile_over_ours", "%.2f")))
        for k in ("ours", "unfused_pair", "torch_eager", "torch_compile"):
            if k + "_error" in r:
                print("    %s: %s" % (k, r[k + "_error"]))
    print("targets: " + "; ".join("%s >= %.2f" % (what, t) for _, t, what in FUSED_TARGETS))
    for r in rows:
        verdict = []
        for k, t, what in FUSED_TARGETS:
            v = r.get(k)
            verdict.append("%s %s" % (k.replace("_over_ours", ""), "-" if v is None else
                                      ("%.2f ok" % v if v >= t else "%.2f MISSED" % v)))
        print("  %-58s %s" % (r["op"], ", ".join(verdict)))


HOST_ROUNDS, HOST_CALLS = 11, 1000
HOST_METHOD = ("the fastest of %d rounds of %d calls without synchronizing, the contenders alternated (each round "
               "starting one contender further on)" % (HOST_ROUNDS, HOST_CALLS))
_floor_lib = None


def _floor_op():
    """A torch.library op with quantize_per_tensor's schema whose Python kernel only allocates
    the output: the least a Python-implemented op that allocates can cost through torch.ops."""
    global _floor_lib
    if _floor_lib is None:
        _floor_lib = torch.library.Library("bq_bench_floor", "DEF")
        _floor_lib.define("alloc_only(Tensor x, float scale, int zero_point, ScalarType dtype, int quant_min, "
                          "int quant_max) -> Tensor")

        def alloc_only(x, scale, zero_point, dtype, quant_min, quant_max):
            return torch.empty_like(x, dtype=dtype)
        _floor_lib.impl("alloc_only", alloc_only, "CompositeExplicitAutograd")
    return torch.ops.bq_bench_floor.alloc_only


def host_overhead(rounds=HOST_ROUNDS, calls=HOST_CALLS):
    """Host time per call (us) of a small call of each contender, and the floors a Python
    package's call stands on (an allocation, a torch.ops op that only allocates, one PyTorch
    launch): the fastest round (the host's other work only ever adds time, as timeit's
    minimum) and the median, the contenders alternated so that a slow stretch of the host
    falls on all of them."""
    import statistics
    import torch.nn.functional as F
    x = torch.randn(4096, device=DEV)
    y8 = torch.empty(4096, device=DEV, dtype=torch.int8)
    xt = torch.randn(16, 4096, device=DEV, dtype=torch.bfloat16)
    w = torch.rand(4096, device=DEV, dtype=torch.bfloat16) + 0.5
    floor = _floor_op()
    fns = {
        "baracuda_quant.ops.dynamic_per_token_quant [16, 4096] bf16": lambda: bqo.dynamic_per_token_quant(xt),
        "baracuda_quant.ops.rms_norm_quant [16, 4096] bf16": lambda: bqo.rms_norm_quant(xt, w, 1e-6),
        "torch F.rms_norm [16, 4096] bf16 (no quantize)": lambda: F.rms_norm(xt, (4096,), w, 1e-6),
        "baracuda_quant.quantize_per_tensor": lambda: bq.quantize_per_tensor(x, 0.05, 0),
        "baracuda_quant.ops.quantize_per_tensor": lambda: bqo.quantize_per_tensor(x, 0.05, 0),
        "torch.ops.baracuda_quant.quantize_per_tensor (no wrapper)":
            lambda: torch.ops.baracuda_quant.quantize_per_tensor(x, 0.05, 0, torch.int8, -128, 127),
        "torch.quantize_per_tensor": lambda: torch.quantize_per_tensor(x, 0.05, 0, torch.qint8),
        "torch eager round/clamp/to": lambda: torch.clamp(torch.round(x / 0.05), -128, 127).to(torch.int8),
        "floor: torch.empty_like (the allocation alone)": lambda: torch.empty_like(x, dtype=torch.int8),
        "floor: a torch.ops op of the same schema that only allocates":
            lambda: floor(x, 0.05, 0, torch.int8, -128, 127),
        "floor: one PyTorch launch, no allocation (y.zero_())": lambda: y8.zero_(),
    }
    names = list(fns)
    times = {k: [] for k in names}
    for fn in fns.values():
        for _ in range(200):
            fn()
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[k]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            times[k].append((t1 - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return ({k: min(v) for k, v in times.items()}, {k: statistics.median(v) for k, v in times.items()})


def provenance(commit):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def sha(path):
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    if not commit:
        commit = os.environ.get("BQ_BENCH_COMMIT")
    if not commit and os.path.exists(os.path.join(root, ".bench_commit")):
        with open(os.path.join(root, ".bench_commit")) as f:
            commit = f.readline().strip() or None
    pkg = os.path.join(root, "python", "baracuda_quant")
    h = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(pkg, "*.py")) + glob.glob(os.path.join(pkg, "*.c"))):
        h.update(os.path.basename(path).encode() + b"\0" + open(path, "rb").read())
    props = torch.cuda.get_device_properties(0)
    return {"gpu": torch.cuda.get_device_name(), "compute_capability": "%d.%d" % (props.major, props.minor),
            "torch": torch.__version__, "cuda_runtime": torch.version.cuda, "commit": commit,
            "header_sha256": sha(os.path.join(root, "baracuda_quant.h")),
            "package_sha256": h.hexdigest(), "argv": sys.argv[1:],
            # older files: "interleaved, rotating" (turns of 10), "interleaved" (a fixed order)
            # or absent (each contender alone)
            "timing": "interleaved, balanced",
            # absent in older files: a write alone, which left L2's evict-last lines in place
            "l2_flush": l2_scrub.flush_name(_scrub),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def main():
    global _flush, _scrub
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--quick", action="store_true", help="smaller shapes")
    ap.add_argument("--commit", help="the commit measured (for the provenance)")
    ap.add_argument("--fused-only", action="store_true",
                    help="only the fused producers against the unfused pair, eager and torch.compile")
    ap.add_argument("--no-fused", action="store_true", help="leave the fused producers out")
    ap.add_argument("--host-only", action="store_true", help="only the host time per call")
    args = ap.parse_args()
    _flush = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
    _scrub = l2_scrub.make(DEV)
    t_start = time.time()
    rows = []
    table, _ = cases(args.quick) if not (args.fused_only or args.host_only) else ([], None)
    for name, ours, eager, (tfn, targs), moved in table:
        row = {"op": name, "bytes": moved}
        fns = {"ours": ours, "torch_eager": eager}
        if not args.no_compile:
            c = maybe_compile(tfn, True) if targs else tfn  # no args: tfn runs compiled code itself
            fns["torch_compile"] = lambda c=c, targs=targs: c(*targs)
        fns["copy"] = copy_fn(moved)
        time_row(row, fns, required=("ours", "copy"))
        rows.append(row)
        print("  %-44s done" % name, file=sys.stderr)
    fused = run_fused(args) if not (args.no_fused or args.host_only) else []
    host, host_median = host_overhead() if not args.fused_only else ({}, {})
    res = {"tool": "python/bench.py", "provenance": provenance(args.commit), "reps": REPS,
           "device": torch.cuda.get_device_name(), "torch": torch.__version__, "baracuda_quant": bq.__version__,
           "library": bq.LIBRARY_PATH, "ops": rows, "host_overhead_us_per_call": host,
           "host_overhead_method": HOST_METHOD if host else None, "host_overhead_median_us": host_median,
           "seconds": round(time.time() - t_start, 1)}
    if fused:
        res["fused"] = fused
    print("%s, torch %s, baracuda_quant %s" % (res["device"], res["torch"], res["baracuda_quant"]))
    hdr = "%-44s %10s %10s %10s %10s %8s" % ("op (median us, L2 flushed)", "ours", "eager", "compile", "copy",
                                             "ours/copy")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        cols = []
        for key in ("torch_eager", "torch_compile"):
            v = r.get(key + "_us")
            cols.append("%.1f" % v if v is not None else ("err" if key + "_error" in r else "-"))
        print("%-44s %10.1f %10s %10s %10.1f %8.2f" % (r["op"], r["ours_us"], cols[0], cols[1], r["copy_us"],
                                                      r["ours_us"] / r["copy_us"]))
        for key in ("torch_eager", "torch_compile"):
            if key + "_error" in r:
                print("    %s: %s" % (key, r[key + "_error"]))
    if fused:
        print_fused(fused)
    if host:
        print("\nhost time per call (quantize_per_tensor of 4096 elements, and the decode-size ops), %s:"
              % HOST_METHOD)
    for k, v in host.items():
        print("  %-60s %7.2f us (median %.2f)" % (k, v, host_median[k]))
    print("total %.1f s" % res["seconds"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

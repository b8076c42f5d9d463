#!/usr/bin/env python3
"""docs/performance.md and the README's headline table, from the raw benchmark files.

    python3 tools/bench_table.py --bench docs/bench/h100-0.2.0.json \\
        --torch docs/bench/h100-0.2.0-torch.json --python docs/bench/h100-0.2.0-python.json \\
        --fused docs/bench/h100-0.2.0-fused.json --python-fused docs/bench/h100-0.2.0-python-fused.json \\
        --performance docs/performance.md --readme README.md
    python3 tools/bench_table.py --check        # regenerate in memory, fail where a file differs
    python3 tools/bench_table.py bench.json     # print performance.md for one run to stdout

--bench is the JSON of tools/bench.c --json, --torch that of tools/compare_torch.py --json,
--python that of python/bench.py --json (a section of the page, and the README's "From
PyTorch" table between "<!-- python-table:begin -->" and "<!-- python-table:end -->" where the
README has those markers),
--fused a tools/bench.c JSON of a separate run whose fused/ rows (they replace --bench's own)
feed the "Fused producers" section, with that run's provenance and copy reference, and
--python-fused that of python/bench.py --fused-only (the section's "Fused producers against
PyTorch" table; it replaces the fused rows of --python's JSON). Every fused row is shown
against its target: ratio to copy >= 0.90 (large shapes), at most 1 us above the dynamic
quantize alone (256 rows or fewer), and for the PyTorch table copy / fused >= 0.90, the
unfused pair >= 1.5x and torch.compile >= 1.0x the fused op's time. --sr is a tools/bench.c
JSON of a run of its own with the microscaling, rotation and stochastic-rounding rows and
their counterparts: the "Microscaling, rotation and stochastic rounding" section, each /sr and
/rot<n> row against the same row without it.
docs/performance.md is generated whole. In README.md only the lines between
"<!-- headline-table:begin -->" and "<!-- headline-table:end -->" are replaced; without
both markers nothing is written and the exit status is 1.
--check without --bench finds docs/bench/<gpu>-<version>.json and <gpu>-<version>-torch.json
(and <gpu>-<version>-python.json, and beside the bench file its -fused.json and
-python-fused.json where they exist) for the version in baracuda_quant.h, and exits 77
(skipped) when there are none.
Exit status: 0 done (or --check found everything in sync), 1 a file differs under --check,
or an input or a marker is missing, 77 --check found no raw files, 64 bad command line.
"""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import l2_scrub  # noqa: E402  (python/l2_scrub.py: the names of the flushes; it imports torch only in make())

BEGIN = "<!-- headline-table:begin -->"
END = "<!-- headline-table:end -->"
PY_BEGIN = "<!-- python-table:begin -->"
PY_END = "<!-- python-table:end -->"
SKIP = 77

# The headline rows: the bench row's exact name (an sm_90 run appends "/wgmma" to the
# linear rows' names, matched too), what the table calls it, its shape, and the
# compare_torch row's name where it differs.
HEADLINE = [
    ("per_tensor/quantize/fwd/f32/s8/[8192,4096]", "quantize, per tensor, f32", "8192 × 4096"),
    ("per_channel/quantize/fwd/f32/s8/[8192,4096]/axis=0", "quantize, per channel, f32", "8192 × 4096"),
    ("per_channel/fake_quantize/fwd/f32/s8/[8192,4096]/axis=0", "fake quantize, per channel, f32, forward",
     "8192 × 4096"),
    ("per_channel/fake_quantize/bwd/f32/s8/[8192,4096]/axis=0/mask", "fake quantize, per channel, f32, backward",
     "8192 × 4096", "per_channel/fake_quantize/bwd/f32/s8/[8192,4096]/axis=0"),
    ("per_token/dequantize/fwd/bf16/s8/[8192,4096]/scale=f32", "dequantize, per token, to bf16", "8192 × 4096"),
    ("per_token/dynamic_quantize/fwd/bf16/s8/[8192,4096]/scale=f32", "dynamic quantize, per token, bf16",
     "8192 × 4096"),
    ("per_token/dynamic_quantize/fwd/bf16/s8/[8192,14336]/scale=f32", "dynamic quantize, per token, bf16",
     "8192 × 14336"),
    ("per_group/dynamic_quantize/fwd/bf16/s8/[8192,4096]/g=128/scale=f32",
     "dynamic quantize, per group of 128, bf16", "8192 × 4096"),
    ("linear/smoothquant_per_token/s8_in/out_f16/[4096,4096,4096]", "W8A8 linear (SmoothQuantLinear), f16 out",
     "M = N = K = 4096"),
    ("linear/quantized_linear/bf16_in/out_bf16/[4096,4096,4096]",
     "QuantizedLinear, bf16 in and out (quantization + GEMM)", "M = N = K = 4096"),
    ("linear/quantized_linear/bf16_in/out_bf16/[1,4096,4096]", "QuantizedLinear, decode", "M = 1, N = K = 4096"),
]
COLUMNS = [("eager", "PyTorch eager"), ("compile", "torch.compile"), ("linear16", "16-bit F.linear")]

METHOD = """\
### The benchmark (`tools/bench.c`)

- Each row: select the plan (the JIT compile stays out of the timing), allocate, fill
  inputs with fresh random data (splitmix64 on up to 16 host threads, copied over), poison outputs,
  `bq_plan_can_implement`, warm up (`--warmup`, default 10), then `--reps` (default 100)
  runs, each between two driver events on one stream. Reported time = median.
- L2 (50 MB on an H100) never flatters: each row rotates over buffer sets, as many as it
  takes to span 256 MiB but no more than the number of runs, so no timed run reuses a set.
  Before the timed runs the tool queues one 64 MiB memset per run. This keeps the GPU busy
  long enough that the host gets ahead (so a start event is not stamped while the GPU waits
  for the launch), and it also flushes L2. So every timed run starts with cold data.
- Effective bandwidth = (bytes read once + bytes written once) / time, counting only the
  logical elements (not the padding of strided rows), plus the scale and zero-point arrays
  for the granularities that have them. Quantize backward and fake quantize backward read
  dy and x and write dx; dequantize backward reads dy and writes dx (no x is passed).
- Copy reference: `cuMemcpyDtoDAsync` of the same number of bytes as the row's logical
  float tensor (`numel * sizeof(T)`), timed the same way, GB/s = 2 * bytes / time.
  `ratio` = row GB/s / copy GB/s. At small sizes both are latency-bound (about 5 us on an
  H100), so the ratio there is not an efficiency and can exceed 1: compare the time with
  the copy's time instead.
- W8A8 linear rows: TOPS = 2 M N K / time; weight GB/s = N K / time, and their ratio is
  that against the copy of the weight's bytes (the bound of the decode rows, M <= 16).
  QuantizedLinear rows include the quantization of the bf16 activations.
- Fused producer rows (`fused/...`, `--filter fused/`): bf16 in, s8 out per token or per
  group, f32 scales; bytes counted once each: x read (gated: `[rows, 2 D]`), the residual
  read and written, the weight, y and the scales written; the copy is that of x's bytes.
  Each group of them starts with the library's dynamic quantize of the same `[rows, D]`,
  whose time the fused rows carry (`ref_us`) for the small batches' comparison.
- Row names: `granularity/op/direction/float type/int type/[shape]`, then the layout where
  it is not the plain one (`axis=`, `stride=` row strides, `g=` group size, `asym`,
  `scale=f32` for scale arrays in f32 where the float type is another).
- JIT figures (they run first, in a fresh cache directory made with mkdtemp and set as
  `BARACUDA_QUANT_CACHE_DIR` before the first select; the directory is removed at exit):
  - first select: NVRTC start-up + compile + module load;
  - cold select: N (16, `--quick` 10) SKUs that differ only in their q range, so each is a
    compile + module load; the compile count from `bq_cache_get_stats` is printed so a
    select that was not cold would show;
  - disk select: the tool re-execs itself (`/proc/self/exe --child-disk-select DIR`)
    10 times (`--quick` 3). Each child first creates the context (`bq_malloc` of 1 byte),
    then times a first and a second select of two SKUs that are on disk. It reports them
    with its disk-hit and compile counts over a pipe;
  - memory select: 10000 selects of a cached desc, each timed with CLOCK_MONOTONIC
    (destroy outside the timing); median and mean;
  - run overhead: host time of 10000 `bq_plan_run` calls on numel 256, divided by 10000,
    with and without the final synchronize.

### Against PyTorch (`tools/compare_torch.py`)

Run on the same GPU right after the benchmark. For each headline row, what a user would
run instead: PyTorch eager, and `torch.compile` (mode "default", `dynamic=False`) of the
same computation; for the linear rows also the unquantized 16-bit `F.linear` at the same
shape. Timed in the benchmark's spirit: fresh random data (never zeros), warm-up calls,
then CUDA events around each call with L2 flushed before it (`python/l2_scrub.py`'s
scrub of evict-last lines where the file's "l2_flush" names it, then a 256 MiB write; 30
such writes are queued first so that the host runs ahead of the GPU), median and minimum of
100 calls. The first call of a compiled function (its compile) is reported apart and never
timed. The device-to-device copy of the row's bytes (`dst.copy_(src)`) is timed the same
way in the same run: compare it with the benchmark's copy to see that the two runs saw the
same GPU. A ratio in the tables is PyTorch's median time / ours: above 1, we are faster.
The backward row times `torch.autograd.grad` alone (the forward runs before the timing).
`torch._int_mm` (cuBLASLt's int8 GEMM) takes M > 16 only, so the decode row has no int8
PyTorch alternative.

### How `python/bench.py` times a row

The contenders of a row take turns, each turn starting one contender further on, every
contender in every place of a turn equally often: in an in-process A/B of eight kernels
whose order was reversed every other round, the kernels in a turn's second and sixth places
ran 0.3 to 0.7 µs slower, whichever they were. L2's evict-last lines are scrubbed before each
flush (`python/l2_scrub.py`): Triton loads some inputs with that policy, and such lines
outlive a plain write, so torch.compile's kernels used to find their input in L2 on the next
timed call. torch.compile autotunes at its first call and keeps what it measured, so its
times can differ between machines for one row (per-group quantize on H100s: 21.4 to 25.2 µs
over seven runs on two machines); a row ahead by a few tenths of a percent is a tie.

### Reproducing

On the GPU host, from the repository root, after building `build/tools/bench`:

```sh
tools/bench_run.sh             # writes $OUT/bench.json and $OUT/torch.json (OUT defaults to bench-out)
cp $OUT/bench.json docs/bench/<gpu>-<version>.json
cp $OUT/torch.json docs/bench/<gpu>-<version>-torch.json
python3 python/bench.py --json docs/bench/<gpu>-<version>-python.json
# the fused producers, where they run apart from the rows above:
build/tools/bench --filter fused/ --commit REV --header-sha256 SHA \\
    --json docs/bench/<gpu>-<version>-fused.json
python3 python/bench.py --fused-only --commit REV --json docs/bench/<gpu>-<version>-python-fused.json
python3 tools/bench_table.py --bench docs/bench/<gpu>-<version>.json \\
    --torch docs/bench/<gpu>-<version>-torch.json --python docs/bench/<gpu>-<version>-python.json \\
    --fused docs/bench/<gpu>-<version>-fused.json \\
    --python-fused docs/bench/<gpu>-<version>-python-fused.json \\
    --performance docs/performance.md --readme README.md
```
"""


def fnum(x, fmt):
    return "—" if x is None else fmt % x


def find_bench_row(bench, key):
    for r in bench.get("rows", []):
        if r["name"] == key or r["name"] == key + "/wgmma":
            return r
    return None


def find_torch_row(torch, key):
    if not torch:
        return None
    for r in torch.get("rows", []):
        if r["name"] == key:
            return r
    return None


def is_gemm(name, row):
    """A linear row whose M is above 16: compute-bound, judged in TOPS, not against a copy."""
    m = re.search(r"\[(\d+),(\d+),(\d+)\]", name)
    return name.startswith("linear/") and m is not None and int(m.group(1)) > 16


def prov_line(bench, torch):
    """The README table's provenance: GPU, version, date, PyTorch (performance.md names the header by its sha256)."""
    p = bench.get("provenance") or {}
    gpu = p.get("gpu") or bench.get("device") or "unknown GPU"
    parts = [gpu, "baracuda_quant %s" % (p.get("library_version") or bench.get("library_version"))]
    if p.get("date_utc"):
        parts.append("measured %s" % p["date_utc"][:10])
    if torch:
        tp = torch.get("provenance") or {}
        parts.append("PyTorch %s" % tp.get("torch_version"))
    return ", ".join(parts)


def headline(bench, torch):
    """The README's table (the lines between the markers)."""
    reps = bench.get("reps")
    out = [
        "%s. Median of %s runs, L2 flushed and fresh random data before each; every row and the "
        "method: [docs/performance.md](docs/performance.md)." % (prov_line(bench, torch), reps),
        "",
        "Ours in microseconds; \"vs copy\": our effective bandwidth / that of a device-to-device copy of "
        "the same bytes (the bound of these memory-bound ops; GEMM rows give TOPS instead). The PyTorch "
        "columns: PyTorch's time / ours, above 1 = we are faster.",
        "",
        "| op | shape | ours (us) | vs copy | %s |" % " | ".join(c[1] for c in COLUMNS),
        "|---|---|---:|---:|" + "---:|" * len(COLUMNS),
    ]
    for key, label, shape, *tkey in HEADLINE:
        b = find_bench_row(bench, key)
        t = find_torch_row(torch, tkey[0] if tkey else key)
        if not b or not b.get("ok") or b.get("median_us") is None:
            out.append("| %s | %s | not measured | — |%s" % (label, shape, " — |" * len(COLUMNS)))
            continue
        ours = b["median_us"]
        if is_gemm(key, b):
            vs = "%.0f TOPS" % b["tops"] if b.get("tops") else "—"
        else:
            vs = fnum(b.get("ratio"), "%.2f")
        cells = []
        for col, _ in COLUMNS:
            alts = [a for a in (t or {}).get("alternatives", []) if a.get("column") == col]
            if not alts:
                cells.append("—")
            elif alts[0].get("ok") and alts[0].get("median_us"):
                cells.append("%.2f" % (alts[0]["median_us"] / ours))
            else:
                cells.append("failed")
        out.append("| %s | %s | %.1f | %s | %s |" % (label, shape, ours, vs, " | ".join(cells)))
    out += [
        "",
        "PyTorch eager runs the library call where PyTorch has one (`torch.quantize_per_tensor`, "
        "`torch.quantize_per_channel`, `torch.fake_quantize_per_channel_affine`), else the formula; "
        "torch.compile compiles the same computation. W8A8 row: eager is `torch._int_mm` alone "
        "(cuBLASLt, no scales applied), compiled is `torch._int_mm` + the scale and bias epilogue. "
        "The decode row has no int8 PyTorch path (`torch._int_mm` takes M > 16 only). The fake quantize "
        "backward row reads dy and the mask its forward pass saved (`args.mask`, a bit an element), as "
        "PyTorch's backward reads the mask its forward saved (a byte an element).",
    ]
    return "\n".join(out) + "\n"


def split_name(name):
    """granularity/op/dir/float/int/[shape]/layout... -> its parts, or None."""
    p = name.split("/")
    if len(p) < 6 or not p[5].startswith("["):
        return None
    return {"gran": p[0], "op": p[1], "dir": p[2], "float": p[3], "int": p[4],
            "shape": p[5].replace(",", " × ").strip("[]"), "layout": "/".join(p[6:])}


def table(rows, small=False):
    out = []
    if small:
        out.append("| op | dir | float | shape | layout | time (us) | copy (us) |")
        out.append("|---|---|---|---|---|---:|---:|")
    else:
        out.append("| op | dir | float | shape | layout | time (us) | GB/s | ratio to copy |")
        out.append("|---|---|---|---|---|---:|---:|---:|")
    for r in rows:
        n = split_name(r["name"]) or {"op": r["name"], "dir": "", "float": "", "shape": "", "layout": ""}
        head = "| %s | %s | %s | %s | %s " % (n["op"], n["dir"], n["float"], n["shape"], n["layout"])
        if not r.get("ok"):
            out.append(head + ("| FAILED | — |" if small else "| FAILED | — | — |"))
        elif small:
            out.append(head + "| %.2f | %s |" % (r["median_us"], fnum(r.get("copy_us"), "%.2f")))
        else:
            out.append(head + "| %.1f | %.0f | %s |" % (r["median_us"], r["gbps"], fnum(r.get("ratio"), "%.2f")))
    return out


FUSED_RATIO_MIN = 0.90  # one DRAM pass: effective bandwidth against the copy's, large shapes
FUSED_SMALL_ROWS = 256  # up to this many rows: latency-bound, judged against dynamic quantize
FUSED_SMALL_DIFF_US = 1.0  # ... within this many microseconds of it


def split_fused(name):
    """fused/op/dir/float/int/[rows,D]/gran[/g=G][/residual] -> its parts, or None."""
    p = name.split("/")
    if len(p) < 7 or p[0] != "fused" or not p[5].startswith("["):
        return None
    try:
        rows, d = (int(v) for v in p[5].strip("[]").split(","))
    except ValueError:
        return None
    rest = p[6:]
    gran = rest[0].replace("_", " ") if rest else ""
    if len(rest) > 1 and rest[1].startswith("g="):
        gran += " of %s" % rest[1][2:]
    opt = next((x for x in rest if x == "sr" or x.startswith("rot")), None)  # /sr or /rot<n>
    return {"op": p[1], "float": p[3], "int": p[4], "rows": rows, "d": d,
            "shape": "%d × %d" % (rows, d), "gran": gran, "residual": "residual" in rest, "opt": opt}


def shown_argv(argv, *drop):
    """A run's command as the tables print it: without --commit (the raw file keeps it, the docs
    name the header by its sha256) and the options in drop, each with its value."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--commit" or a in drop:
            skip = True
        else:
            out.append(a)
    return out


def met(ok):
    return "met" if ok else "**not met**"


def fused_prov(fb, path):
    """One line: where the tools/bench.c run of the fused rows comes from (it may be a run of its own)."""
    p = fb.get("provenance") or {}
    parts = ["`tools/bench.c`%s on %s" % (" `--filter %s`" % fb["filter"] if fb.get("filter") else "",
                                          p.get("gpu") or fb.get("device") or "unknown GPU"),
             "baracuda_quant %s" % (p.get("library_version") or fb.get("library_version")),
             "baracuda_quant.h sha256 `%s`" % p["header_sha256"] if p.get("header_sha256")
             else "header sha256 not recorded",
             "measured %s" % p["date_utc"] if p.get("date_utc") else "date not recorded",
             "median of %s runs after %s warm-up" % (fb.get("reps"), fb.get("warmup"))]
    return "From `%s`: %s." % (path, ", ".join(parts))


def fused_copy_table(fb):
    """The copy reference of a separate fused run (its ratios are against these, not the page's)."""
    o = ["Copy reference of this run (`cuMemcpyDtoDAsync`, GB/s = 2 × bytes / time):", "",
         "| bytes | time (us) | GB/s |", "|---:|---:|---:|"]
    for c in sorted(fb.get("copy", []), key=lambda c: c["bytes"]):
        if c.get("ok"):
            o.append("| %d | %.2f | %.0f |" % (c["bytes"], c["median_us"], c["gbps"]))
        else:
            o.append("| %d | FAILED | — |" % c["bytes"])
    return o + [""]


def fused_section(rows, fb=None, fb_path=None, pyf=None, pyf_path=None):
    """The "Fused producers" tables: the large shapes against the copy (target FUSED_RATIO_MIN),
    the small batches against the dynamic quantize of the same shape (each fused row's ref_us,
    target FUSED_SMALL_DIFF_US); fb: the tools/bench.c JSON the rows come from when it is not the
    page's (its provenance and copy reference are printed); pyf: python/bench.py --fused-only's JSON
    (the fused ops against the unfused pair and torch.compile)."""
    o = ["## Fused producers", ""]
    if fb is not None:
        o += [fused_prov(fb, fb_path) + " A run of its own: its ratios are against its own copy reference "
              "(below); its `dynamic_quantize` rows, next to those of \"Dynamic quantization\" above, show the "
              "spread between the two runs.", ""]
    o += ["`BQ_RMSNORM_QUANTIZE` ((residual add +) RMSNorm, then quantize) and `BQ_GATED_QUANTIZE` "
          "(act(gate) × up, then quantize) in one kernel, bf16 in, int8 out, f32 scales; `dynamic_quantize` "
          "rows are the library's dynamic quantize of the same [rows, D] bf16 tensor, measured just before. "
          "Bytes counted once each: x read (gated: [rows, 2 D]), the residual read and written, the weight, "
          "y and the scales written; the copy is that of x's bytes. The targets: ratio to copy at least "
          "%.2f for the large shapes; for %d rows or fewer, at most %.0f µs above the dynamic quantize alone."
          % (FUSED_RATIO_MIN, FUSED_SMALL_ROWS, FUSED_SMALL_DIFF_US), ""]
    big, small, other, opts = [], [], [], []
    for r in rows:
        n = split_fused(r["name"])
        (other if n is None else opts if n["opt"] else small if n["rows"] <= FUSED_SMALL_ROWS else big).append((r, n))
    if big:
        o += ["| op | shape [rows, D] | granularity | residual | time (us) | GB/s | ratio to copy "
              "(target ≥ %.2f) | dynamic quantize (us) | target met |" % FUSED_RATIO_MIN,
              "|---|---|---|---|---:|---:|---:|---:|---|"]
        n_met = n_all = 0
        for r, n in big:
            head = "| %s | %s | %s | %s " % (n["op"], n["shape"], n["gran"], "yes" if n["residual"] else "")
            fused = n["op"] != "dynamic_quantize"
            if not r.get("ok"):
                o.append(head + "| FAILED | — | — | — | %s |" % (met(False) if fused else ""))
                n_all += fused
                continue
            ratio = r.get("ratio")
            if not fused:
                verdict = "reference"
            elif ratio is None:
                verdict = "—"
            else:
                n_all += 1
                n_met += ratio >= FUSED_RATIO_MIN
                verdict = met(ratio >= FUSED_RATIO_MIN)
            o.append(head + "| %.1f | %.0f | %s | %s | %s |" % (
                r["median_us"], r["gbps"], fnum(ratio, "%.2f"), fnum(r.get("ref_us"), "%.1f"), verdict))
        o += ["", "Ratio to copy at least %.2f: %d of %d fused rows." % (FUSED_RATIO_MIN, n_met, n_all), ""]
    if small:
        o += ["Small batches (latency-bound; the copy's time is that of x's bytes; the target: the fused "
              "row at most %.0f µs above the dynamic quantize of the same shape):" % FUSED_SMALL_DIFF_US, "",
              "| op | shape [rows, D] | granularity | residual | time (us) | dynamic quantize (us) | "
              "difference (us, target ≤ +%.2f) | copy (us) | target met |" % FUSED_SMALL_DIFF_US,
              "|---|---|---|---|---:|---:|---:|---:|---|"]
        n_met = n_all = 0
        for r, n in small:
            head = "| %s | %s | %s | %s " % (n["op"], n["shape"], n["gran"], "yes" if n["residual"] else "")
            fused = n["op"] != "dynamic_quantize"
            if not r.get("ok"):
                o.append(head + "| FAILED | — | — | — | %s |" % (met(False) if fused else ""))
                n_all += fused
                continue
            ref = r.get("ref_us")
            diff = r["median_us"] - ref if ref else None
            if not fused:
                verdict = "reference"
            elif diff is None:
                verdict = "—"
            else:
                n_all += 1
                n_met += diff <= FUSED_SMALL_DIFF_US
                verdict = met(diff <= FUSED_SMALL_DIFF_US)
            o.append(head + "| %.2f | %s | %s | %s | %s |" % (
                r["median_us"], fnum(ref, "%.2f"), fnum(diff, "%+.2f"), fnum(r.get("copy_us"), "%.2f"), verdict))
        o += ["", "At most %.0f µs above the dynamic quantize: %d of %d fused rows." % (
            FUSED_SMALL_DIFF_US, n_met, n_all), ""]
    if opts:
        o += ["Stochastic rounding (`sr`, seed 7) and the fused rotation (`rot<n>`: blocks of n, random "
              "signs), a second pass over the producer's values in the plan's workspace, each against the "
              "same row rounding to nearest unrotated (its ref_us):", "",
              "| op | output | shape [rows, D] | granularity | option | time (us) | rounding to nearest (us) | "
              "time ratio |", "|---|---|---|---|---|---:|---:|---:|"]
        for r, n in opts:
            head = "| %s | %s | %s | %s | %s " % (n["op"], n["int"], n["shape"], n["gran"], n["opt"])
            if not r.get("ok"):
                o.append(head + "| FAILED | — | — |")
                continue
            ref = r.get("ref_us")
            o.append(head + "| %.1f | %s | %s |" % (r["median_us"], fnum(ref, "%.1f"),
                                                     fnum(r["median_us"] / ref if ref else None, "%.2f")))
        o.append("")
    if other:
        o += ["| case | time (us) | GB/s | ratio to copy |", "|---|---:|---:|---:|"]
        for r, _ in other:
            if r.get("ok"):
                o.append("| %s | %.1f | %.0f | %s |" % (r["name"], r["median_us"], r["gbps"],
                                                        fnum(r.get("ratio"), "%.2f")))
            else:
                o.append("| %s | FAILED | — | — |" % r["name"])
        o.append("")
    if fb is not None:
        o += fused_copy_table(fb)
    if pyf is not None and pyf.get("fused"):
        o += python_fused_subsection(pyf, pyf_path)
    return o


FP8_RATIO_MIN = 0.90     # static FP8 ops at 256 MiB: time against the copy's
FP8_DYN_SLOWER_MAX = 1.03  # dynamic FP8 against the int8 kernel of the same shape: time ratio
BLOCK_DYN_RATIO_MIN = 0.85  # dynamic per block (it reduces over B rows before it writes): ratio to copy


def is_fp8_row(name):
    return "/e4m3/" in name or "/e5m2/" in name


def is_layout_row(name):
    """Per-block rows and MN-major scale rows, FP8 or int8: the section's too."""
    return name.startswith("per_block/") or "/mn/" in name or name.endswith("/mn")


def rows_on_grid(name):
    """Whether a [rows, cols] row's rows start on the 16-byte grid (dense rows of cols elements)."""
    m = re.search(r"/(f32|f64|f16|bf16)/[^/]+/\[(\d+),(\d+)\]", name)
    return bool(m) and int(m.group(3)) * {"f32": 4, "f64": 8, "f16": 2, "bf16": 2}[m.group(1)] % 16 == 0


def row_major_counterpart(rows, name):
    """An MN-major row's row-major twin in the same run (packed UE8M0 against one byte each)."""
    base = name.replace("/mn", "").replace("/scale=ue8m0x4", "/scale=ue8m0")
    for c in (base, base.replace("/scale=f32", "")):
        r = next((x for x in rows if x["name"] == c and x.get("ok")), None)
        if r:
            return r
    return None


def int8_counterpart(rows, name):
    """The s8 row of the same op and shape in the same run (a UE8M0 row's counterpart has f32 scales)."""
    base = name.replace("/e4m3/", "/s8/").replace("/e5m2/", "/s8/")
    cands = [base, base.replace("/scale=ue8m0", ""), base.replace("/scale=ue8m0", "/scale=f32"), base + "/scale=f32"]
    for c in cands:
        r = next((x for x in rows if x["name"] == c and x.get("ok")), None)
        if r:
            return r
    return None


def fp8_section(fb, fb_path, ft=None, ft_path=None, same_run=False):
    """The "FP8 storage" section: a tools/bench.c run of its own (--fp8) with the FP8 rows and the
    int8 dynamic rows they are held against, and compare_torch.py's FP8 rows (--fp8-torch)."""
    rows = fb.get("rows", [])
    fp8 = [r for r in rows if is_fp8_row(r["name"]) or is_layout_row(r["name"])]
    static = [r for r in fp8 if "/dynamic_quantize/" not in r["name"]]
    dyn = [r for r in fp8 if "/dynamic_quantize/" in r["name"]]
    if same_run:  # the page's own run: its FP8 rows gathered here, against the copy reference above
        o = ["## FP8 storage", "", "The FP8 rows of the run above, gathered, with the targets they are held to.", ""]
    else:
        o = ["## FP8 storage", "", fused_prov(fb, fb_path) + " A run of its own: its ratios are against its own "
             "copy reference, below.", ""] + fused_copy_table(fb)
    o += ["### Quantize, dequantize, fake quantize", "",
          "Target: ratio to copy at least %.2f at 256 MiB." % FP8_RATIO_MIN, "",
          "| case | time (us) | GB/s | ratio to copy | target |", "|---|---:|---:|---:|---|"]
    for r in static:
        if r.get("ok"):
            big = r.get("copy_bytes", 0) >= 256 << 20
            o.append("| %s | %.1f | %.0f | %s | %s |" % (r["name"], r["median_us"], r["gbps"], fnum(r.get("ratio"), "%.3f"),
                                                        met(r.get("ratio", 0) >= FP8_RATIO_MIN) if big else "—"))
        else:
            o.append("| %s | FAILED | — | — | — |" % r["name"])
    o += ["", "### Dynamic quantization", "",
          "Per token and per group, against the int8 (s8) kernel of the same shape in the same run; target: FP8 "
          "time at most %.2f × the int8 time. MN-major scales are shown against the row-major row of the same run "
          "(no target: each group's scale lands in its own column, a sector a write for f32 scales). Per block: "
          "target ratio to copy at least %.2f, for rows on the 16-byte grid (an odd row length is shown too)." % (
              FP8_DYN_SLOWER_MAX, BLOCK_DYN_RATIO_MIN), "",
          "| case | time (us) | ratio to copy | held against (us) | time / that | target |",
          "|---|---:|---:|---:|---:|---|"]
    for r in dyn:
        if not r.get("ok"):
            o.append("| %s | FAILED | — | — | — | — |" % r["name"])
            continue
        if r["name"].startswith("per_block/"):
            aligned = rows_on_grid(r["name"])
            o.append("| %s | %.1f | %s | — | — | %s |" % (r["name"], r["median_us"], fnum(r.get("ratio"), "%.3f"),
                                                        met(r.get("ratio", 0) >= BLOCK_DYN_RATIO_MIN) if aligned
                                                        else "— (shown)"))
            continue
        mn = is_layout_row(r["name"])
        c = row_major_counterpart(rows, r["name"]) if mn else int8_counterpart(rows, r["name"])
        q = r["median_us"] / c["median_us"] if c else None
        o.append("| %s | %.1f | %s | %s | %s | %s |" % (r["name"], r["median_us"], fnum(r.get("ratio"), "%.3f"),
                                                       fnum(c["median_us"] if c else None, "%.1f"), fnum(q, "%.3f"),
                                                       "— (shown)" if mn else met(q <= FP8_DYN_SLOWER_MAX) if q else "—"))
    o.append("")
    if ft:
        tp = ft.get("provenance") or {}
        o += ["### Against PyTorch", "",
              "From `%s`: `tools/compare_torch.py --only e4m3` on %s, PyTorch %s (Triton %s), %s, median of %s "
              "calls (L2 flushed before each). Ratio: PyTorch's time / ours (above 1: we are faster)." % (
                  ft_path, tp.get("gpu"), tp.get("torch_version"), tp.get("triton_version"), tp.get("date_utc"),
                  ft.get("reps")), "",
              "| row | alternative | runs | median (us) | ratio |", "|---|---|---|---:|---:|"]
        for r in ft.get("rows", []):
            if not is_fp8_row(r["name"]):
                continue
            b = find_bench_row(fb, r["name"])
            ours = b["median_us"] if b and b.get("ok") else None
            for a in r.get("alternatives", []):
                if a.get("ok"):
                    o.append("| `%s` | %s | `%s` | %.1f | %s |" % (r["name"], a["label"], a["code"], a["median_us"],
                                                                 "%.2f" % (a["median_us"] / ours) if ours else "—"))
                else:
                    o.append("| `%s` | %s | `%s` | failed: %s | |" % (r["name"], a["label"], a["code"],
                                                                    (a.get("error") or "").replace("|", "\\|")))
        o.append("")
    return o


SR_MAX = 1.05   # stochastic rounding: at most this times its round-to-nearest row's time
ROT_MAX = 1.10  # the fused rotation, blocks of 16 to 128: at most this times the row without it
ROT256_RATIO = 0.85  # blocks of 256: this ratio to copy or more


def sr_counterpart(name):
    """The row a stochastic-rounding or rotation row is measured against, and what it adds:
    (counterpart name, "sr" or "rot<n>"), or (None, None)."""
    parts = name.split("/")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "sr" or re.fullmatch(r"rot\d+", parts[i]):
            return "/".join(parts[:i] + parts[i + 1:]), parts[i]
    return None, None


def sr_bound_of(sr_path, rel):
    """(shown path, text) of tools/dev/sr_bound.cu's output beside an -sr.json, or None."""
    if not sr_path or not sr_path.endswith("-sr.json"):
        return None
    b = sr_path[:-len("-sr.json")] + "-sr-bound.txt"
    if not os.path.exists(b):
        return None
    with open(b) as f:
        return rel(b), f.read()


def sr_section(sb, path, bound=None):
    """"Microscaling, rotation and stochastic rounding": a tools/bench.c run of its own (--sr)
    with the microscaling rows, the rotation's, and each stochastic-rounding or fused-rotation
    row against its counterpart in the same run (the targets SR_MAX, ROT_MAX, ROT256_RATIO)."""
    rows = sb.get("rows", [])
    by = {r["name"]: r for r in rows}
    o = ["## Microscaling, rotation and stochastic rounding", "",
         fused_prov(sb, path) + " A run of its own: its ratios are against its own copy reference (below).", "",
         "Each `/sr` row (stochastic rounding) and `/rot<n>` row (the Hadamard rotation of blocks of n "
         "fused into the quantize) is shown against the same row without it, in this run: the targets are "
         "%.2f times its time or less for stochastic rounding, %.2f for rotation blocks of 16 to 128, and "
         "%.2f of copy or more for blocks of 256." % (SR_MAX, ROT_MAX, ROT256_RATIO), "",
         "| row | time (us) | ratio to copy | against | its time (us) | time / its time | target |",
         "|---|---:|---:|---|---:|---:|---|"]
    for r in rows:
        if r["name"].startswith("copy/") or r.get("copy_bytes", 0) < 32 << 20:  # (the small sizes of --quick)
            continue
        if not r.get("ok"):
            o.append("| `%s` | FAILED | | | | | |" % r["name"])
            continue
        base, what = sr_counterpart(r["name"])
        b = by.get(base) if base else None
        cells = ["", "", "", ""]
        if b and b.get("ok"):
            k = r["median_us"] / b["median_us"]
            if what == "sr":
                target = met(k <= SR_MAX)
            elif what == "rot256":
                target = met((r.get("ratio") or 0) >= ROT256_RATIO)
            else:
                target = met(k <= ROT_MAX)
            cells = ["`%s`" % base, "%.1f" % b["median_us"], "%.2f" % k, target]
        o.append("| `%s` | %.1f | %s | %s |" % (r["name"], r["median_us"], fnum(r.get("ratio"), "%.2f"),
                                                " | ".join(cells)))
    o += [""] + fused_copy_table(sb)
    if bound:
        bound_path, raw = bound
        o += ["What stochastic rounding costs apart from the library, on the same GPU: `tools/dev/sr_bound.cu` "
              "(bf16 to s8 per tensor over 256 MiB, a lean kernel of 16 elements a thread), its output as printed "
              "(`%s`). Stochastic rounding is bound by the instructions an element costs, not by memory. The "
              "Philox-10 16-bit row draws as the contract does but rounds a quotient lighter than the "
              "contract's; its last row takes the contract's own steps (the correctly rounded quotient with "
              "its guards for tiny, huge and non-finite values, the zero point's offset and both saturation "
              "tests) in the same lean kernel: that row is the bound the library's per-tensor `/sr` rows are "
              "read against, and it lies above the %.2f target." % (bound_path, SR_MAX), "", "```",
              raw.rstrip("\n"), "```", ""]
    return o


FP8_BLOCK_MIN = 0.9   # blockwise tiles: at least this much of tensorwise's throughput
FP8_QL_MAX = 1.1      # FP8 QuantizedLinear at M >= 2048: at most this many times the GEMM alone


def fp8_linear_section(lb, path, lt=None, lt_path=None):
    """"FP8 linear layers": a tools/bench.c run of its own (--fp8-linear, its linear/fp8 rows)
    and compare_torch.py's FP8 linear rows (--fp8-linear-torch): each GEMM row against
    torch._scaled_mm in the same mode (and bf16 F.linear for decode), blockwise against
    tensorwise, FP8 QuantizedLinear against the GEMM alone."""
    rows = [r for r in lb.get("rows", []) if r["name"].startswith("linear/fp8")]

    def base(name):  # the row without the path the benchmark appends ("/wgmma"): compare_torch's name
        return name[:name.index("]") + 1] if "]" in name else name
    by = {base(r["name"]): r for r in rows}
    tby = {r["name"]: r for r in (lt or {}).get("rows", [])}

    def alt(name, aid):
        for x in (tby.get(name) or {}).get("alternatives", []):
            if x["id"] == aid and x.get("ok"):
                return x["median_us"]
        return None

    def mnk(name):
        m = re.search(r"\[(\d+),(\d+),(\d+)\]", name)
        return tuple(int(v) for v in m.groups()) if m else (0, 0, 0)
    o = ["## FP8 linear layers", "",
         fused_prov(lb, path) + (" PyTorch's rows: `%s`, the same GPU." % lt_path if lt_path else ""), "",
         "Time per call (median, us), bf16 out. `torch._scaled_mm` is cuBLASLt in the same scale mode (no "
         "bias); its column's ratio is its time over this library's (above 1: this library is faster). Targets: "
         "tensorwise and rowwise tiles at least `torch._scaled_mm`'s speed, blockwise tiles at least %.2f of "
         "tensorwise's, decode (M <= 16) faster than `torch._scaled_mm` and bf16 `F.linear`, FP8 QuantizedLinear "
         "at M >= 2048 at most %.2f times the GEMM alone (its rowwise or blockwise row)." % (FP8_BLOCK_MIN, FP8_QL_MAX),
         "", "| row | time (us) | TFLOPS | torch._scaled_mm (us) | ratio | bf16 F.linear (us) | against | target |",
         "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        name = base(r["name"])
        if not r.get("ok"):
            o.append("| `%s` | FAILED | | | | | | |" % r["name"])
            continue
        t = r["median_us"]
        m, n, k = mnk(name)
        tf = 2.0 * m * n * k / (t * 1e6)
        ts, tl = alt(name, "eager"), alt(name, "linear16")
        against, target = "", ""
        ql = "fp8_quantized_linear_" in name
        if ql:
            mode = "blockwise" if "_blockwise/" in name else "rowwise"
            g = by.get("linear/fp8_%s/e4m3_in/out_bf16/[%d,%d,%d]" % (mode, m, n, k))
            if g and g.get("ok"):
                q = t / g["median_us"]
                against = "GEMM alone %.1f us: %.2fx" % (g["median_us"], q)
                target = met(q <= FP8_QL_MAX) if m >= 2048 else ""
        elif m <= 16:
            target = met((ts is None or t < ts) and (tl is None or t < tl)) if ts or tl else ""
        elif "/fp8_blockwise/" in name:
            g = by.get(name.replace("/fp8_blockwise/", "/fp8_tensorwise/"))
            if g and g.get("ok"):
                q = g["median_us"] / t
                against = "tensorwise %.1f us: %.2f" % (g["median_us"], q)
                target = met(q >= FP8_BLOCK_MIN)
        elif ts is not None:
            target = met(t <= ts)
        o.append("| `%s` | %.1f | %.0f | %s | %s | %s | %s | %s |" % (
            r["name"], t, tf, fnum(ts, "%.1f"), "%.2f" % (ts / t) if ts else "", fnum(tl, "%.1f"), against, target))
    return o + [""]


def performance(bench, torch, bench_path, torch_path, fb=None, fb_path=None, pyf=None, pyf_path=None,
                f8=None, f8_path=None, f8t=None, f8t_path=None, sb=None, sb_path=None, sb_bound=None):
    """The page; fb: a tools/bench.c JSON whose fused/ rows replace the bench's own (--fused), with
    fb_path; pyf: a python/bench.py JSON for "Fused producers against PyTorch" (--python-fused)."""
    p = bench.get("provenance") or {}
    o = ["# Performance", "",
         "Generated by `tools/bench_table.py` from `%s`%s; edit the generator, not this page." %
         (bench_path, " and `%s`" % torch_path if torch_path else ""), ""]

    o += ["## Provenance", "", "| | |", "|---|---|"]

    def kv(k, v):
        if v is not None and v != "":
            o.append("| %s | %s |" % (k, str(v).replace("|", "\\|")))
    kv("GPU", p.get("gpu") or bench.get("device"))
    kv("compute capability", p.get("compute_capability"))
    dv = p.get("driver_version")
    kv("driver", ("CUDA %s" % dv if dv else None) if not p.get("kernel_driver") else
       "CUDA %s; %s" % (dv, " ".join(p["kernel_driver"].split())))
    kv("NVRTC", p.get("nvrtc_version"))
    kv("baracuda_quant", p.get("library_version") or bench.get("library_version"))
    kv("baracuda_quant.h sha256", "`%s`" % p["header_sha256"] if p.get("header_sha256") else "not recorded")
    kv("date (UTC)", p.get("date_utc"))
    kv("command", "`%s`" % " ".join(shown_argv(p["argv"])) if p.get("argv") else None)
    kv("runs per row", "%s timed after %s warm-up%s" % (bench.get("reps"), bench.get("warmup"),
                                                        " (--quick)" if bench.get("quick") else ""))
    if bench.get("filter"):
        kv("filter", "`%s`" % bench["filter"])
    kv("failed calls", bench.get("failures"))
    if torch:
        tp = torch.get("provenance") or {}
        kv("PyTorch", "%s (CUDA %s, Triton %s, Python %s)" % (tp.get("torch_version"), tp.get("cuda_version"),
                                                               tp.get("triton_version"), tp.get("python_version")))
        kv("PyTorch run on", "%s, %s" % (tp.get("gpu"), tp.get("date_utc")))
        kv("PyTorch command", "`%s`" % " ".join(tp["argv"]) if tp.get("argv") else None)
    o.append("")

    o += ["## Against PyTorch", "", headline(bench, torch)]
    if torch:
        o += ["Every alternative, with what it runs (ratio: its time / ours; first call: the compile, "
              "for compiled functions; copy: `dst.copy_(src)` of the row's bytes in the PyTorch run, "
              "against the benchmark's copy of the same bytes):", "",
              "| row | alternative | runs | median (us) | min (us) | first call (s) | ratio |",
              "|---|---|---|---:|---:|---:|---:|"]
        for r in torch.get("rows", []):
            b = find_bench_row(bench, r["name"])
            ours = b["median_us"] if b and b.get("ok") else None
            for a in r.get("alternatives", []):
                if a.get("ok"):
                    o.append("| `%s` | %s | `%s` | %.1f | %.1f | %s | %s |" % (
                        r["name"], a["label"], a["code"], a["median_us"], a["min_us"],
                        fnum(a.get("first_call_s"), "%.2f"),
                        "%.2f" % (a["median_us"] / ours) if ours else "—"))
                else:
                    o.append("| `%s` | %s | `%s` | failed: %s | | | |" % (
                        r["name"], a["label"], a["code"], (a.get("error") or "").replace("|", "\\|")))
            c = r.get("copy") or {}
            bc = next((x for x in bench.get("copy", []) if x.get("bytes") == r.get("copy_bytes")), None)
            o.append("| `%s` | copy of %d bytes (bench: %s us) | `dst.copy_(src)` | %s | %s | | |" % (
                r["name"], r.get("copy_bytes", 0), fnum((bc or {}).get("median_us"), "%.1f"),
                fnum(c.get("median_us"), "%.1f"), fnum(c.get("min_us"), "%.1f")))
        o.append("")

    o += ["## Method", "", METHOD]

    o += ["## Copy reference", "", "`cuMemcpyDtoDAsync`, GB/s = 2 × bytes / time.", "",
          "| bytes | time (us) | GB/s |", "|---:|---:|---:|"]
    for c in sorted(bench.get("copy", []), key=lambda c: c["bytes"]):
        if c.get("ok"):
            o.append("| %d | %.2f | %.0f |" % (c["bytes"], c["median_us"], c["gbps"]))
        else:
            o.append("| %d | FAILED | — |" % c["bytes"])
    o.append("")

    rows = bench.get("rows", [])
    fused = [r for r in rows if r["name"].startswith("fused/")]
    rows = [r for r in rows if r not in fused]
    if fb is not None:
        fused = [r for r in fb.get("rows", []) if r["name"].startswith("fused/")]
    lin = [r for r in rows if r["name"].startswith("linear/")]
    dyn = [r for r in rows if "/dynamic_quantize/" in r["name"]]
    aff = [r for r in rows if r not in lin and r not in dyn]
    big = [r for r in aff if r.get("copy_bytes", 0) >= 64 << 20]
    small = [r for r in aff if r.get("copy_bytes", 0) < 64 << 20]
    grans = []
    for r in big:
        g = r["name"].split("/")[0]
        if g not in grans:
            grans.append(g)
    if big:
        o += ["## Quantize, dequantize, fake quantize: 64 MiB and more", "",
              "Median time, effective bandwidth (bytes read once + written once) and its ratio to the "
              "copy of the float tensor's bytes.", ""]
        for g in grans:
            o += ["### %s" % g.replace("_", " "), ""] + table([r for r in big if r["name"].startswith(g + "/")]) + [""]
    if small:
        o += ["## Small sizes", "", "Latency-bound: the time against the copy's time for the same bytes.", ""]
        o += table(small, small=True) + [""]
    if dyn:
        o += ["## Dynamic quantization", "",
              "Scales (and zero points, `asym`) computed on the GPU; bytes counted: x read, q and the "
              "scales written.", ""] + table(dyn) + [""]
    if lin:
        o += ["## W8A8 linear layers", "",
              "TOPS = 2 M N K / time; weight GB/s = N K / time; ratio = weight GB/s / copy GB/s at the "
              "weight's size (the bound of the decode rows). `/wgmma`: sm_90a tiles.", "",
              "| case | time (us) | TOPS | weight GB/s | ratio to copy |", "|---|---:|---:|---:|---:|"]
        for r in lin:
            if r.get("ok"):
                o.append("| %s | %.1f | %.1f | %.0f | %s |" % (r["name"], r["median_us"], r.get("tops", 0),
                                                             r["gbps"], fnum(r.get("ratio"), "%.2f")))
            else:
                o.append("| %s | FAILED | — | — | — |" % r["name"])
        o.append("")
    if fused or (pyf is not None and pyf.get("fused")):
        o += fused_section(fused, fb, fb_path, pyf, pyf_path)
    if f8 is not None:
        o += fp8_section(f8, f8_path, f8t, f8t_path)
    elif any(is_fp8_row(r["name"]) for r in bench.get("rows", [])):  # the FP8 rows ran with the others
        o += fp8_section(bench, bench_path, torch if torch and any(is_fp8_row(r["name"]) for r in torch.get("rows", []))
                         else None, torch_path, same_run=True)
    if sb is not None:
        o += sr_section(sb, sb_path, sb_bound)
    j = bench.get("jit")
    if j:
        o += ["## JIT", "", "| JIT | value |", "|---|---:|"]
        o.append("| first select in a process (NVRTC start-up + compile + load) | %s ms |" %
                 fnum(j.get("first_select_ms"), "%.1f"))
        for key, what in (("cold_select_ms", "cold select, %d SKUs (compile + load)"),
                          ("cold_compile_nvrtc_ms", "cold compile alone (NVRTC), %d more SKUs")):
            c = j.get(key)
            if c and c.get("n"):
                o.append("| %s: median / min / max | %s / %s / %s ms |" % (
                    what % c["n"], fnum(c["median"], "%.1f"), fnum(c["min"], "%.1f"), fnum(c["max"], "%.1f")))
        c = j.get("disk_first_select_ms") or {}
        o.append("| select from the disk cache, fresh process (median of %s) | %s ms |" %
                 (c.get("n"), fnum(c.get("median"), "%.3f")))
        c = j.get("memory_select_us") or {}
        o.append("| select from memory (median) | %s us |" % fnum(c.get("median"), "%.2f"))
        o.append("| bq_plan_run host overhead | %s us |" % fnum(j.get("run_host_us"), "%.2f"))
        o.append("")
    return "\n".join(o).rstrip("\n") + "\n"


def replace_between_markers(text, block, path, begin=BEGIN, end=END):
    b, e = text.find(begin), text.find(end)
    if b < 0 or e < 0 or e < b:
        raise ValueError("%s: no %s ... %s markers (in that order): nothing written" % (path, begin, end))
    return text[:b + len(begin)] + "\n" + block + text[e:]


LATE_NOTE = ("† The GPU caught up with the host in some of that contender's blocks of calls: host "
             "time may show in its time (and in a ratio made from it).")


def late_mark(r, key):
    """" †" where python/bench.py recorded host time as possibly showing in r's time for key."""
    return " †" if key in (r.get("host_time_may_show") or []) else ""


def time_cell(r, key):
    """A python/bench.py row's time for contender key (late_mark'ed), "error" where PyTorch
    refused the case, "—" where it was not run."""
    if r.get(key + "_us") is not None:
        return "%.1f µs%s" % (r[key + "_us"], late_mark(r, key))
    return "error" if r.get(key + "_error") else "—"


def python_table(py):
    """The table of python/bench.py's JSON: each op's GPU time against PyTorch's in one process."""
    o = ["| op (PyTorch tensors) | baracuda_quant | PyTorch eager | torch.compile | copy of the same bytes |"
         " fastest PyTorch / ours |", "|---|---:|---:|---:|---:|---:|"]
    late_any = False
    for r in py["ops"]:
        theirs = [(r[k], k[:-3]) for k in ("torch_eager_us", "torch_compile_us") if r.get(k) is not None]
        late_any |= bool(r.get("host_time_may_show"))
        ratio = "—"
        if theirs:
            best, key = min(theirs)
            ratio = "%.2f×%s" % (best / r["ours_us"], late_mark(r, "ours") or late_mark(r, key))
        o.append("| %s | %s | %s | %s | %s | %s |" % (
            r["op"], *(time_cell(r, k) for k in ("ours", "torch_eager", "torch_compile", "copy")), ratio))
    if late_any:
        o += ["", LATE_NOTE]
    return o


def host_floor_note(host):
    """How the host table's floors bound the torch.ops path, from its own numbers (files
    without the floors: nothing)."""
    ours = host.get("baracuda_quant.ops.quantize_per_tensor")
    top = host.get("torch.ops.baracuda_quant.quantize_per_tensor (no wrapper)")
    alloc = host.get("floor: torch.empty_like (the allocation alone)")
    op = host.get("floor: a torch.ops op of the same schema that only allocates")
    torch_q = host.get("torch.quantize_per_tensor")
    if None in (ours, top, alloc, op, torch_q):
        return []
    past, floor = round(ours - alloc, 1), round(op, 1)  # (the printed sum adds the printed terms)
    bound = floor + past
    if bound > torch_q:
        versus = ("above `torch.quantize_per_tensor`'s %.1f µs (a C++ op): a Python-implemented op cannot "
                  "reach that" % torch_q)
    else:
        versus = "not above `torch.quantize_per_tensor`'s %.1f µs (a C++ op)" % torch_q
    return ["", "Reading the floors: past its allocation, `baracuda_quant.ops.quantize_per_tensor` spends "
                "%.1f µs (the checks and the launch). Through `torch.ops` the same work follows the dispatcher's "
                "Python kernel, whose cost the allocate-only op of the same schema measures: an estimated floor "
                "of %.1f + %.1f = %.1f µs, %s. The package's op takes %.2f of that floor."
                % (past, floor, past, bound, versus, top / bound)]


def python_block(py, path):
    """docs/performance.md's "From PyTorch" tables: the ops, then the host cost of one small call."""
    p = py.get("provenance") or {}
    o = python_table(py)
    host = py.get("host_overhead_us_per_call") or {}
    if host:
        method = py.get("host_overhead_method") or "10000 calls without synchronizing"
        o += ["", "Host time per call (`python/bench.py`, %s): a 4096-element tensor, and the decode-size ops on "
                  "[16, 4096]:" % method, ""]
        o += ["| call | µs |", "|---|---:|"]
    for k, v in host.items():
        o.append("| `%s` | %.1f |" % (k, v))
    o += host_floor_note(host)
    o += ["", "%s, torch %s; GPU time = %s; raw output: `%s`." % (
        p.get("gpu") or py.get("device"), p.get("torch") or py.get("torch"), python_timing(py), path), ""]
    return "\n".join(o)


def python_readme_block(py):
    """The README's "From PyTorch" table: the ops alone; the host cost of a call, the method and
    the raw file are in docs/performance.md."""
    p = py.get("provenance") or {}
    o = python_table(py)
    o += ["", "%s, torch %s. The method, the host time of a call and the raw output: "
          "[docs/performance.md](docs/performance.md#from-pytorch-pythonbenchpy)." % (
              p.get("gpu") or py.get("device"), p.get("torch") or py.get("torch")), ""]
    return "\n".join(o)


# How a JSON's "l2_flush" (python/l2_scrub.py's flush_name) reads in the method text
FLUSHES = {
    l2_scrub.SCRUBBED: "an L2 flush (evict-last lines scrubbed and reset to normal priority, then a 256 MiB write)",
    l2_scrub.SCRUBBED_EVICT_FIRST: "an L2 flush (evict-last lines scrubbed, then a 256 MiB write)",
}


def python_timing(py):
    """How python/bench.py timed the file's rows: its provenance's "timing" ("interleaved, balanced";
    older, "interleaved, rotating" or "interleaved"), or, absent (older files), each contender
    alone, one after another."""
    prov = py.get("provenance") or {}
    flush = FLUSHES.get(prov.get("l2_flush"), "an L2 flush (a 256 MiB write)")
    turns = {"interleaved": "turns of 10 calls",
             "interleaved, rotating": "turns of 10 calls, each turn starting one contender further on (six "
                                      "turns: with four contenders, the first two of them take the first place "
                                      "twice and the other two once)",
             "interleaved, balanced": "turns of at most 10 calls, each turn starting one contender further "
                                      "on, each contender in each place of a turn equally often"}.get(prov.get("timing"))
    if turns:
        return ("median of %s calls, the contenders of a row timed in %s, each block of calls behind a "
                "spin kernel, with CUDA events after %s" % (py.get("reps", "?"), turns, flush))
    return "median of %s calls, each timed alone with CUDA events after %s" % (py.get("reps", "?"), flush)


PY_FUSED_TARGETS = (("copy_over_ours", 0.90, "copy / fused", "%.2f"),
                    ("unfused_pair_over_ours", 1.5, "pair / fused", "%.2f×"),
                    ("torch_compile_over_ours", 1.0, "compile / fused", "%.2f×"))
PY_FUSED_TEXT = (
    "bf16 in, int8 out per token (e4m3 where the row says so), f32 scales. Unfused pair: PyTorch's "
    "own `F.rms_norm` (after `x + residual` where there is one) or `F.silu(g) * u`, eager, then this "
    "package's `dynamic_per_token_quant` (`dynamic_quant` for e4m3); eager and torch.compile run the "
    "whole composition (amax / 127 per row, x / s, round, clamp, to int8; for e4m3 amax / 448, x / "
    "s, clamp, to float8_e4m3fn). Bytes counted once each: x read (gated: [M, 2 D]), the "
    "residual read and written, the weight, q and the scales written; the copy moves as many bytes "
    "(read plus written), so copy / fused is the share of the copy's bandwidth. Each time is the "
    "%s. Targets: copy / fused ≥ 0.90, fused against the unfused pair (pair / fused) ≥ 1.5×, fused "
    "against torch.compile (compile / fused) ≥ 1.0×.")


def python_fused_table(rows):
    """python/bench.py's "fused" rows: the fused op against the unfused pair, PyTorch eager and
    torch.compile of the composition, and the copy of the same bytes, in one process; each ratio
    with its target (PY_FUSED_TARGETS) and whether it is met."""
    o = ["| fused producer (PyTorch tensors) | fused | unfused pair | PyTorch eager | torch.compile | "
         "copy of the same bytes | %s |" % " | ".join(
             "%s (target ≥ %s) | met" % (label, fmt % t) for _, t, label, fmt in PY_FUSED_TARGETS),
         "|---|---:|---:|---:|---:|---:|" + "---:|---|" * len(PY_FUSED_TARGETS)]
    counts = [[0, 0] for _ in PY_FUSED_TARGETS]

    for r in rows:
        cells = []
        for i, (k, t, _, fmt) in enumerate(PY_FUSED_TARGETS):
            v = r.get(k)
            if v is None:
                cells.append("— | —")
                continue
            counts[i][0] += v >= t
            counts[i][1] += 1
            cells.append("%s | %s" % (fmt % v, met(v >= t)))
        o.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            r["op"], *(time_cell(r, k) for k in ("ours", "unfused_pair", "torch_eager", "torch_compile", "copy")),
            " | ".join(cells)))
    if any(r.get("host_time_may_show") for r in rows):
        o += ["", LATE_NOTE]
    o += ["", "Targets met: %s." % "; ".join(
        "%s ≥ %s in %d of %d rows" % (label, fmt % t, c[0], c[1])
        for (_, t, label, fmt), c in zip(PY_FUSED_TARGETS, counts))]
    return o


def python_fused_subsection(pyf, path):
    """"Fused producers against PyTorch" from a python/bench.py JSON (--fused-only or a full run)."""
    p = pyf.get("provenance") or {}
    argv = shown_argv(p.get("argv") or [], "--json")
    parts = ["`%s` on %s" % (" ".join(["python/bench.py"] + argv), p.get("gpu") or pyf.get("device") or "unknown GPU"),
             "torch %s (CUDA %s)" % (p.get("torch") or pyf.get("torch"), p.get("cuda_runtime")),
             "baracuda_quant %s" % pyf.get("baracuda_quant"),
             "baracuda_quant.h sha256 `%s`" % p["header_sha256"] if p.get("header_sha256")
             else "header sha256 not recorded",
             "package sha256 `%s`" % p["package_sha256"] if p.get("package_sha256") else None,
             "measured %s" % p["date"] if p.get("date") else "date not recorded"]
    o = ["### Fused producers against PyTorch", "",
         "From `%s`: %s." % (path, ", ".join(x for x in parts if x)), "",
         PY_FUSED_TEXT % python_timing(pyf), ""]
    return o + python_fused_table(pyf["fused"]) + [""]


def python_section(py, path, fused=True):
    """The "From PyTorch" section; fused: with its "fused" rows (off where --python-fused gives them)."""
    p = py.get("provenance") or {}
    o = ["", "## From PyTorch (`python/bench.py`)", "",
         "The package's torch ops against PyTorch eager and `torch.compile` of the same formula "
         "(and `torch._int_mm` for the GEMM) in one process, from `%s`." % path, ""]
    o += ["| | |", "|---|---|"]
    for k in ("gpu", "compute_capability", "torch", "cuda_runtime", "header_sha256", "package_sha256", "date"):
        if p.get(k):
            o.append("| %s | %s |" % (k.replace("_", " "), "`%s`" % p[k] if "sha" in k else p[k]))
    o += [""] + python_block(py, path).split("\n")
    if fused and py.get("fused"):
        o += ["", "### Fused producers against PyTorch", "", PY_FUSED_TEXT % python_timing(py), ""]
        o += python_fused_table(py["fused"])
        o.append("")
    return "\n".join(o)


def load(path):
    with open(path) as f:
        return json.load(f)


def header_version(root):
    with open(os.path.join(root, "baracuda_quant.h")) as f:
        m = re.search(r'#define BQ_VERSION_STRING "([^"]+)"', f.read())
    if not m:
        raise ValueError("no BQ_VERSION_STRING in baracuda_quant.h")
    return m.group(1)


def gpu_files(base):
    """One GPU's files beside its bench file base + ".json" (those that exist), by option name."""
    fs = {"bench": base + ".json"}
    for k, suffix in (("torch", "-torch"), ("python", "-python"), ("fused", "-fused"),
                      ("python_fused", "-python-fused"), ("fp8", "-fp8"), ("fp8_torch", "-fp8-torch"), ("sr", "-sr"),
                      ("fp8_linear", "-fp8-linear"), ("fp8_linear_torch", "-fp8-linear-torch")):
        if os.path.exists(base + suffix + ".json"):
            fs[k] = base + suffix + ".json"
    return fs


def gpu_name(fs):
    b = load(fs["bench"])
    return (b.get("provenance") or {}).get("gpu") or b.get("device") or os.path.basename(fs["bench"])


def other_page(fs, rel, main_page):
    """The performance page of another GPU's files, titled and introduced as such."""
    ld = {k: load(v) for k, v in fs.items()}
    page = performance(ld["bench"], ld.get("torch"), rel(fs["bench"]), rel(fs.get("torch")), ld.get("fused"),
                       rel(fs.get("fused")), ld.get("python_fused"), rel(fs.get("python_fused")), ld.get("fp8"),
                       rel(fs.get("fp8")), ld.get("fp8_torch"), rel(fs.get("fp8_torch")), ld.get("sr"),
                       rel(fs.get("sr")), sr_bound_of(fs.get("sr"), rel))
    if ld.get("fp8_linear"):
        page = page.rstrip("\n") + "\n\n" + "\n".join(fp8_linear_section(
            ld["fp8_linear"], rel(fs["fp8_linear"]), ld.get("fp8_linear_torch"), rel(fs.get("fp8_linear_torch"))))
    if ld.get("python"):
        page = page.rstrip("\n") + "\n" + python_section(ld["python"], rel(fs["python"]),
                                                          fused=ld.get("python_fused") is None)
    return page.replace("# Performance\n", "# Performance on another GPU: %s\n\nAn earlier run on another GPU, kept "
                        "as it was measured; [%s](%s) has the GPU the library is measured on now.\n" %
                        (gpu_name(fs), main_page, main_page), 1)


def main():
    ap = argparse.ArgumentParser(description="docs/performance.md and the README's headline table "
                                 "from the raw benchmark files")
    ap.add_argument("legacy", nargs="?", help="a bench JSON: print its performance page to stdout")
    ap.add_argument("--bench", help="tools/bench.c's JSON (docs/bench/<gpu>-<version>.json)")
    ap.add_argument("--torch", help="tools/compare_torch.py's JSON (docs/bench/<gpu>-<version>-torch.json)")
    ap.add_argument("--performance", help="the page to write (docs/performance.md)")
    ap.add_argument("--readme", help="the README whose headline table to replace")
    ap.add_argument("--python", help="python/bench.py's JSON (docs/bench/<gpu>-<version>-python.json)")
    ap.add_argument("--fused", help="a tools/bench.c JSON whose fused/ rows feed the \"Fused producers\" "
                    "tables, with its own provenance (docs/bench/<gpu>-<version>-fused.json)")
    ap.add_argument("--python-fused", help="python/bench.py --fused-only's JSON: the \"Fused producers "
                    "against PyTorch\" table (docs/bench/<gpu>-<version>-python-fused.json)")
    ap.add_argument("--fp8", help="a tools/bench.c JSON with the FP8 rows and their int8 counterparts: the "
                    "\"FP8 storage\" section (docs/bench/<gpu>-<version>-fp8.json)")
    ap.add_argument("--fp8-torch", help="compare_torch.py --only e4m3's JSON (docs/bench/<gpu>-<version>-fp8-torch.json)")
    ap.add_argument("--sr", help="a tools/bench.c JSON with the microscaling, rotation and stochastic-rounding rows "
                    "and their counterparts (docs/bench/<gpu>-<version>-sr.json)")
    ap.add_argument("--fp8-linear", help="a tools/bench.c JSON with the linear/fp8 rows: the \"FP8 linear layers\" "
                    "section (docs/bench/<gpu>-<version>-fp8-linear.json)")
    ap.add_argument("--fp8-linear-torch", help="compare_torch.py --only linear/fp8's JSON "
                    "(docs/bench/<gpu>-<version>-fp8-linear-torch.json)")
    ap.add_argument("--check", action="store_true", help="write nothing; fail where a file differs")
    ap.add_argument("--update", action="store_true", help="as --check finds the files, but write the pages")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository root, for --check's defaults (default: this script's ..)")
    try:
        a = ap.parse_args()
    except SystemExit as e:
        return 64 if e.code else 0

    if a.legacy and not (a.bench or a.check):
        sys.stdout.write(performance(load(a.legacy), None, a.legacy, None))
        return 0
    root = a.root
    others = []  # (page, file set) of the GPUs other than the one the pages are of
    if (a.check or a.update) and not a.bench:
        version = header_version(root)
        found = sorted(p for p in glob.glob(os.path.join(root, "docs", "bench", "*-%s.json" % version)))
        if not found:
            print("bench_table: skipped: no docs/bench/*-%s.json" % version)
            return SKIP
        # the GPU development measures on (the H200) makes the README's tables and
        # docs/performance.md; every other GPU's files a page of their own, labelled as such
        prefixes = [os.path.basename(p)[:-len("-%s.json" % version)] for p in found]
        primary = "h200" if "h200" in prefixes else prefixes[0]
        sets = {g: gpu_files(os.path.join(root, "docs", "bench", "%s-%s" % (g, version))) for g in prefixes}
        for k, v in sets[primary].items():
            if getattr(a, k) is None:
                setattr(a, k, v)
        others = [(os.path.join(root, "docs", "performance-%s.md" % g), sets[g]) for g in prefixes if g != primary]
        a.performance = a.performance or os.path.join(root, "docs", "performance.md")
        a.readme = a.readme or os.path.join(root, "README.md")
    if not a.bench:
        ap.print_usage(sys.stderr)
        print("bench_table: --bench is required (or --check, or a JSON to print)", file=sys.stderr)
        return 64

    try:
        bench = load(a.bench)
        torch = load(a.torch) if a.torch else None
        py = load(a.python) if a.python else None
        fb = load(a.fused) if a.fused else None
        pyf = load(a.python_fused) if a.python_fused else None
        f8 = load(a.fp8) if a.fp8 else None
        f8t = load(a.fp8_torch) if a.fp8_torch else None
        sb = load(a.sr) if a.sr else None
        fl = load(a.fp8_linear) if a.fp8_linear else None
        flt = load(a.fp8_linear_torch) if a.fp8_linear_torch else None
    except (OSError, ValueError) as e:
        print("bench_table: %s" % e, file=sys.stderr)
        return 1

    def rel(path):
        if not path:
            return None
        r = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
        return path if r.startswith("..") else r

    outputs = []
    if a.performance:
        page = performance(bench, torch, rel(a.bench), rel(a.torch), fb, rel(a.fused), pyf, rel(a.python_fused),
                           f8, rel(a.fp8), f8t, rel(a.fp8_torch), sb, rel(a.sr), sr_bound_of(a.sr, rel))
        if fl:
            page = page.rstrip("\n") + "\n\n" + "\n".join(fp8_linear_section(fl, rel(a.fp8_linear), flt,
                                                                             rel(a.fp8_linear_torch)))
        if py:
            page = page.rstrip("\n") + "\n" + python_section(py, rel(a.python), fused=pyf is None)
        if others:
            links = ", ".join("[%s](%s)" % (gpu_name(o[1]), os.path.basename(o[0])) for o in others)
            page = page.replace("\n\n## Provenance\n", "\n\nThe same tables from another GPU, an earlier run: %s.\n\n"
                                "## Provenance\n" % links, 1)
        outputs.append((a.performance, page))
    try:
        for path, fs in others:
            outputs.append((path, other_page(fs, rel, os.path.basename(a.performance or "performance.md"))))
    except (OSError, ValueError) as e:
        print("bench_table: %s" % e, file=sys.stderr)
        return 1
    if a.readme:
        try:
            with open(a.readme) as f:
                text = f.read()
            text = replace_between_markers(text, headline(bench, torch), a.readme)
            if py and PY_BEGIN in text:  # (the README may leave the PyTorch table to docs/performance.md)
                text = replace_between_markers(text, python_readme_block(py), a.readme, PY_BEGIN, PY_END)
            outputs.append((a.readme, text))
        except (OSError, ValueError) as e:
            print("bench_table: %s" % e, file=sys.stderr)
            return 1
    if not outputs:
        sys.stdout.write(performance(bench, torch, rel(a.bench), rel(a.torch), fb, rel(a.fused), pyf,
                                     rel(a.python_fused)))
        return 0

    status = 0
    for path, new in outputs:
        if a.check:
            try:
                with open(path) as f:
                    old = f.read()
            except OSError:
                old = None
            if old != new:
                given = "".join(" %s %s" % (opt, rel(v)) for opt, v in (
                    ("--torch", a.torch), ("--python", a.python), ("--fused", a.fused),
                    ("--python-fused", a.python_fused), ("--fp8", a.fp8), ("--fp8-torch", a.fp8_torch),
                    ("--sr", a.sr), ("--fp8-linear", a.fp8_linear), ("--fp8-linear-torch", a.fp8_linear_torch)) if v)
                print("bench_table: %s is not what %s generates: run tools/bench_table.py --bench %s%s "
                      "--performance ... --readme ..." % (path, os.path.basename(sys.argv[0]), rel(a.bench), given),
                      file=sys.stderr)
                status = 1
        else:
            with open(path, "w") as f:
                f.write(new)
            print("bench_table: wrote %s" % path)
    if a.check and status == 0:
        print("bench_table: %s in sync with %s" % (", ".join(p for p, _ in outputs), ", ".join(
            rel(v) for v in (a.bench, a.torch, a.python, a.fused, a.python_fused, a.fp8, a.fp8_torch) if v)))
    return status


if __name__ == "__main__":
    sys.exit(main())

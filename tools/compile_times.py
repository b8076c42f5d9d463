#!/usr/bin/env python3
"""tools/compile_times.py - the compile time of each kernel by family, from the output of
`baracuda-quant warm --skus FILE -j 1`, where FILE lists modules ("SKU@entry", as `list
--skus` prints them): one NVRTC compile a line, in one process.

  tools/compile_times.py WARM_OUTPUT [WARM_OUTPUT...] [--markdown]

Prints, by family (elementwise: quantize, dequantize and fake quantize, and dynamic
quantize; the fused producers; the GEMMs; the weight sums) and by target, the number of
kernels compiled and the median, 90th percentile and largest time in milliseconds."""
import re
import sys

LINE = re.compile(r'^compiled\s+(\S+) \(([0-9.]+) s, (\d+) kernels?\)')


def family(sku):
    if sku.startswith('linear_gemm.'):
        return 'GEMM (linear layers)'
    if sku.startswith('linear_weight_sums.'):
        return 'weight sums'
    if sku.startswith(('rmsnorm_quantize.', 'silu_mul_quantize.', 'gelu_tanh_mul_quantize.')):
        return 'fused producers'
    if sku.startswith('dynamic_quantize.'):
        return 'dynamic quantize'
    return 'quantize, dequantize, fake quantize'


def target(sku):
    base = sku.split('@')[0]
    return base.rsplit('.', 1)[-1]


def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main(argv):
    md = '--markdown' in argv
    files = [a for a in argv[1:] if a != '--markdown']
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    times = {}
    for f in files:
        for line in open(f):
            m = LINE.match(line)
            if not m or m.group(3) != '1':
                continue
            sku = m.group(1)
            times.setdefault((family(sku), target(sku)), []).append(1e3 * float(m.group(2)))
    if not times:
        print('compile_times: no compiled kernel in the input', file=sys.stderr)
        return 1
    order = ['quantize, dequantize, fake quantize', 'dynamic quantize', 'fused producers',
             'GEMM (linear layers)', 'weight sums']
    rows = sorted(times, key=lambda k: (order.index(k[0]), k[1]))
    if md:
        print('| family | target | kernels | median ms | 90th percentile ms | largest ms |')
        print('|---|---|---:|---:|---:|---:|')
    for k in rows:
        xs = times[k]
        cells = (k[0], k[1], len(xs), pct(xs, 0.5), pct(xs, 0.9), max(xs))
        if md:
            print('| %s | %s | %d | %.0f | %.0f | %.0f |' % cells)
        else:
            print('%-38s %-8s %5d kernels  median %6.0f ms  p90 %6.0f ms  max %6.0f ms' % cells)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

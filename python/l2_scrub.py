"""L2's evict-last lines out of the way of a flush, for python/bench.py and tools/compare_torch.py.

Both benchmarks flush L2 before each timed call by writing a buffer larger than it. A write
evicts lines of normal priority only: lines that a kernel loaded with an L2 evict-last policy
(Triton emits one for some loads, so torch.compile's kernels use it) stay, and the next call
that reads the same input finds it in L2, faster than memory allows. make() returns a
callable to run before the write: it reads a buffer of twice the L2 size or more with the
evict-last policy, whose lines take the place of the others, then puts each of the buffer's
lines back at normal priority (PTX `applypriority`), so that the write evicts them too and
L2 holds no evict-last line at all. (Reading the buffer again with evict-first instead
leaves some of its lines at evict-last: a 32 MiB copy after it measured 1 % slower than
after a plain write on an H100.) It needs Triton (which torch.compile needs); without it
make() returns None.
"""


# The flushes as a benchmark's JSON records them ("l2_flush"): this scrub, then the write;
# the earlier scrub (its buffer read again with evict-first), then the write; the write alone
SCRUBBED = "evict-last scrub, lines reset to normal priority, and write"
SCRUBBED_EVICT_FIRST = "evict-last scrub and write"
WRITE = "write"


def flush_name(scrub):
    """The flush as a benchmark's JSON records it ("l2_flush"), scrub being make()'s result."""
    return SCRUBBED if scrub is not None else WRITE


def make(device="cuda", nbytes=128 << 20):
    import torch
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def touch(p, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(p + offs, mask=offs < n, other=0, eviction_policy="evict_last")
        tl.store(out + tl.program_id(0), tl.max(v, axis=0))  # a use, so that the load stays

    @triton.jit
    def normal(p, out, BLOCK: tl.constexpr):
        # a lane a 128-byte line of p (int32): its L2 priority back to normal, where it is in L2
        lines = p + (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)) * 32
        r = tl.inline_asm_elementwise("applypriority.global.L2::evict_normal [$1], 128;\n\tmov.u32 $0, 0;",
                                      "=r,l", [lines], dtype=tl.int32, is_pure=False, pack=1)
        tl.store(out + tl.program_id(0), tl.max(r, axis=0))

    nbytes = (nbytes + (128 << 10) - 1) // (128 << 10) * (128 << 10)  # whole blocks of 1024 lines
    n, block = nbytes // 4, 4096
    buf = torch.ones(n, dtype=torch.int32, device=device)
    out = torch.empty(triton.cdiv(n, block), dtype=torch.int32, device=device)

    def scrub():
        touch[(triton.cdiv(n, block),)](buf, out, n, BLOCK=block)
        normal[(nbytes // 128 // 1024,)](buf, out, BLOCK=1024)
    return scrub

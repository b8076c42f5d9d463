"""L2's evict-last lines out of the way of a flush, for python/bench.py and tools/compare_torch.py.

Both benchmarks flush L2 before each timed call by writing a buffer larger than it. A write
evicts lines of normal priority only: lines that a kernel loaded with an L2 evict-last policy
(Triton emits one for some loads, so torch.compile's kernels use it) stay, and the next call
that reads the same input finds it in L2, faster than memory allows. make() returns a
callable to run before the write: it reads a buffer of twice the L2 size or more with the
evict-last policy, whose lines take the place of the others, then reads it again with
evict-first, so that the write evicts them too. It needs Triton (which torch.compile needs);
without it make() returns None.
"""


def flush_name(scrub):
    """The flush as a benchmark's JSON records it ("l2_flush"), scrub being make()'s result."""
    return "evict-last scrub and write" if scrub is not None else "write"


def make(device="cuda", nbytes=128 << 20):
    import torch
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def touch(p, out, n, BLOCK: tl.constexpr, LAST: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        if LAST:
            v = tl.load(p + offs, mask=offs < n, other=0, eviction_policy="evict_last")
        else:
            v = tl.load(p + offs, mask=offs < n, other=0, eviction_policy="evict_first")
        tl.store(out + tl.program_id(0), tl.max(v, axis=0))  # a use, so that the load stays

    n, block = nbytes // 4, 4096
    buf = torch.ones(n, dtype=torch.int32, device=device)
    out = torch.empty(triton.cdiv(n, block), dtype=torch.int32, device=device)
    grid = (triton.cdiv(n, block),)

    def scrub():
        touch[grid](buf, out, n, BLOCK=block, LAST=True)
        touch[grid](buf, out, n, BLOCK=block, LAST=False)
    return scrub

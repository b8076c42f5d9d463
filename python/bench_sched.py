"""How python/bench.py times the contenders of one row, with no torch import so that a CPU
test can drive it with fake events: each contender warmed up (a failing one set aside with
its error), then the contenders timed in turns, a short block of calls each, so that all of
them run under the same conditions (GPU clocks, idle gaps, what ran before)."""
import statistics


def error_text(e):
    """The first line of an exception, as a row's "<key>_error" records it."""
    return "%s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0][:200])


def warm_up(fns, warmup, sync, errors=None):
    """Calls each contender warmup times (the first call of a torch.compile contender compiles
    it), then sync(), so that an error is raised by its own contender. Returns the contenders
    that ran, in order; one that raised goes into errors[key], or the error propagates when
    errors is None."""
    ok = {}
    for key, fn in fns.items():
        try:
            for _ in range(warmup):
                fn()
            sync()
        except Exception as e:
            if errors is None:
                raise
            errors[key] = error_text(e)
        else:
            ok[key] = fn
    return ok


def host_us(fns, flush, new_event, clock, calls=3):
    """Host time (us) to queue one timed call of each contender: flush, event, call, event."""
    out = {}
    for key, fn in fns.items():
        t0 = clock()
        for _ in range(calls):
            flush()
            new_event().record()
            fn()
            new_event().record()
        out[key] = (clock() - t0) / calls * 1e6
    return out


def spin_us(host, reps, cap_us=2e6):
    """How long the spin kernel must hold the GPU (us): the host time of queueing every call
    of every contender, twice over, plus 1 ms; capped (the caller warns if the GPU caught up)."""
    return min(2.0 * reps * sum(host.values()) + 1000.0, cap_us)


def make_marks(keys, reps, new_event):
    """A (start, end) event pair per contender and rep, made before anything is queued."""
    return {key: [(new_event(), new_event()) for _ in range(reps)] for key in keys}


def balanced_per(reps, n, block):
    """The calls a contender queues in a turn, so that the turns are a whole multiple of n (the
    contenders): with each turn starting one contender further on, every contender then takes
    every place in the turn equally often. The fewest turns of at most `block` calls each that
    allow it; `block` where none does (reps with no such divisor)."""
    for turns in range(-(-reps // block), reps + 1):
        if n and turns % n == 0 and reps % turns == 0:
            return reps // turns
    return block


def queue_blocks(fns, marks, flush, per, before=None, after=None):
    """The contenders take turns, a block of `per` reps each: before(key, n) ahead of each
    block (the spin that lets the host queue it), then n times flush(); start.record(); fn();
    end.record(), then after(key) (the wait for it). per = 1: rep by rep. Each turn starts one
    contender further on, so that no contender always takes the same place (the GPU's timing
    was seen to depend on a kernel's place in a turn); with balanced_per's `per`, every
    contender takes every place equally often."""
    reps = len(next(iter(marks.values()))) if marks else 0
    keys = list(fns)
    for turn, r0 in enumerate(range(0, reps, per)):
        k = turn % len(keys)  # (no contenders: no marks, no turns)
        for key in keys[k:] + keys[:k]:
            fn = fns[key]
            pairs = marks[key][r0:r0 + per]
            if before:
                before(key, len(pairs))
            for start, end in pairs:
                flush()
                start.record()
                fn()
                end.record()
            if after:
                after(key)


def medians(marks, elapsed_us):
    """The median of elapsed_us(start, end) over each contender's reps."""
    return {key: statistics.median(elapsed_us(s, e) for s, e in pairs) for key, pairs in marks.items()}

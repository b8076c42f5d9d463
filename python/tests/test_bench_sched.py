"""python/bench.py's timing order (python/bench_sched.py), on a fake GPU: a log of what is
queued and a clock that each call advances by its contender's duration."""
import importlib.util
import os

import pytest

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench_sched.py")
_spec = importlib.util.spec_from_file_location("bench_sched", _path)
sched = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sched)


class FakeGpu:
    def __init__(self):
        self.log, self.now = [], 0.0

    def flush(self):
        self.log.append("flush")
        self.now += 1000.0

    def new_event(self):
        gpu = self

        class Event:
            t = None

            def record(self):
                gpu.log.append("record")
                self.t = gpu.now
        return Event()

    def contender(self, key, durations):
        """A callable that runs durations[0], durations[1], ... (cycling) on the fake GPU."""
        calls = [0]

        def fn():
            self.log.append(key)
            self.now += durations[calls[0] % len(durations)]
            calls[0] += 1
        fn.calls = calls
        return fn


def test_blocks_in_turn_and_medians():
    gpu = FakeGpu()
    fns = {"ours": gpu.contender("ours", [20.0, 22.0, 21.0]),
           "eager": gpu.contender("eager", [50.0]),
           "copy": gpu.contender("copy", [30.0, 90.0, 30.0])}
    reps = 5
    marks = sched.make_marks(fns, reps, gpu.new_event)
    assert gpu.log == []  # events made, nothing queued yet
    sched.queue_blocks(fns, marks, gpu.flush, 2, lambda k, n: gpu.log.append("spin %s %d" % (k, n)),
                       lambda k: gpu.log.append("wait %s" % k))
    one = lambda k: ["flush", "record", k, "record"]  # noqa: E731
    block = lambda k, n: ["spin %s %d" % (k, n)] + one(k) * n + ["wait %s" % k]  # noqa: E731
    # each turn starts one contender further on
    assert gpu.log == block("ours", 2) + block("eager", 2) + block("copy", 2) + \
        block("eager", 2) + block("copy", 2) + block("ours", 2) + \
        block("copy", 1) + block("ours", 1) + block("eager", 1)
    got = sched.medians(marks, lambda s, e: e.t - s.t)
    # ours ran 20, 22, 21, 20, 22; copy 30, 90, 30, 30, 90: the flush is outside every pair
    assert got == {"ours": 21.0, "eager": 50.0, "copy": 30.0}
    assert list(got) == ["ours", "eager", "copy"]


@pytest.mark.parametrize("n, per", [(1, 10), (2, 10), (3, 10), (4, 5), (5, 6), (6, 10)])
def test_balanced_turns_put_every_contender_in_every_place_equally_often(n, per):
    reps = 60
    assert sched.balanced_per(reps, n, 10) == per
    gpu = FakeGpu()
    keys = ["c%d" % i for i in range(n)]
    fns = {k: gpu.contender(k, [1.0]) for k in keys}
    marks = sched.make_marks(fns, reps, gpu.new_event)
    sched.queue_blocks(fns, marks, gpu.flush, per)
    order = [x for x in gpu.log if x in fns]
    assert len(order) == n * reps
    blocks = [order[i] for i in range(0, len(order), per)]  # a block's contender, block by block
    places = {k: [0] * n for k in keys}
    for b, k in enumerate(blocks):
        places[k][b % n] += 1
    assert all(c == [reps // per // n] * n for c in places.values()), places
    # four contenders in blocks of 10 (six turns): the unbalanced rotation of "interleaved, rotating"
    gpu = FakeGpu()
    fns = {k: gpu.contender(k, [1.0]) for k in "abcd"}
    sched.queue_blocks(fns, sched.make_marks(fns, reps, gpu.new_event), gpu.flush, 10)
    order = [x for x in gpu.log if x in fns]
    assert [order[i] for i in range(0, 24 * 10, 10)][::4] == ["a", "b", "c", "d", "a", "b"]


def test_balanced_per_falls_back_where_no_whole_rotation_divides_the_reps():
    assert sched.balanced_per(60, 7, 10) == 10
    assert sched.balanced_per(7, 7, 10) == 1
    assert sched.balanced_per(60, 0, 10) == 10


def test_warm_up_sets_a_failing_contender_aside():
    gpu = FakeGpu()
    syncs = []

    def refused():
        raise RuntimeError("not implemented for 'BFloat16'\nsecond line")
    fns = {"ours": gpu.contender("ours", [1.0]), "torch_compile": refused,
           "copy": gpu.contender("copy", [1.0])}
    errors = {}
    ok = sched.warm_up(fns, 4, lambda: syncs.append(1), errors)
    assert list(ok) == ["ours", "copy"]
    assert errors == {"torch_compile": "RuntimeError: not implemented for 'BFloat16'"}
    assert fns["ours"].calls[0] == 4 and fns["copy"].calls[0] == 4 and len(syncs) == 2
    marks = sched.make_marks(ok, 3, gpu.new_event)
    gpu.log.clear()
    sched.queue_blocks(ok, marks, gpu.flush, 1)
    assert [x for x in gpu.log if x not in ("flush", "record")] == ["ours", "copy", "copy", "ours", "ours", "copy"]
    with pytest.raises(RuntimeError, match="BFloat16"):
        sched.warm_up(fns, 1, lambda: None)  # no errors dict: the error propagates


def test_an_error_raised_by_sync_is_its_contenders():
    pending = []

    def launches_bad():
        pending.append("bad")

    def sync():
        if pending:
            pending.clear()
            raise RuntimeError("illegal address")
    errors = {}
    ok = sched.warm_up({"a": lambda: None, "b": launches_bad, "c": lambda: None}, 2, sync, errors)
    assert list(ok) == ["a", "c"] and list(errors) == ["b"]


def test_spin_covers_every_contender_and_is_capped():
    gpu = FakeGpu()
    ticks = iter(range(100))
    clock = lambda: next(ticks) * 1e-5  # noqa: E731  each reading 10 us after the last
    host = sched.host_us({"a": gpu.contender("a", [1.0]), "b": gpu.contender("b", [1.0])},
                         gpu.flush, gpu.new_event, clock, calls=2)
    assert host == pytest.approx({"a": 5.0, "b": 5.0})
    assert gpu.log == ["flush", "record", "a", "record"] * 2 + ["flush", "record", "b", "record"] * 2
    assert sched.spin_us(host, 60) == pytest.approx(2 * 60 * 10.0 + 1000)
    assert sched.spin_us({"a": 1e4, "b": 1e4}, 60) == 2e6


def test_bench_table_names_the_method_the_file_records():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench_table.py")
    spec = importlib.util.spec_from_file_location("bench_table", path)
    bt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bt)
    old = {"reps": 60, "provenance": {"gpu": "G"}}
    new = {"reps": 60, "provenance": {"gpu": "G", "timing": "interleaved"}}
    scrubbed = {"reps": 60, "provenance": {"gpu": "G", "timing": "interleaved",
                                           "l2_flush": "evict-last scrub and write"}}
    assert bt.python_timing(old) == ("median of 60 calls, each timed alone with CUDA events after an L2 "
                                     "flush (a 256 MiB write)")
    assert "timed in turns of 10 calls" in bt.python_timing(new)
    assert "timed alone" not in bt.python_timing(new)
    assert "evict-last" not in bt.python_timing(new)
    assert "evict-last lines scrubbed" in bt.python_timing(scrubbed)
    # what l2_scrub records today reads as that flush, not as a plain write
    reset = {"reps": 60, "provenance": {"gpu": "G", "timing": "interleaved",
                                        "l2_flush": bt.l2_scrub.flush_name(object())}}
    assert "reset to normal priority" in bt.python_timing(reset)
    assert bt.python_timing(new) in bt.PY_FUSED_TEXT % bt.python_timing(new)
    rotating = {"reps": 60, "provenance": {"gpu": "G", "timing": "interleaved, rotating"}}
    assert "each turn starting one contender further on" in bt.python_timing(rotating)
    assert "first place twice" in bt.python_timing(rotating)
    assert "further on" not in bt.python_timing(new)
    balanced = {"reps": 60, "provenance": {"gpu": "G", "timing": "interleaved, balanced"}}
    assert "each contender in each place of a turn equally often" in bt.python_timing(balanced)
    assert "twice" not in bt.python_timing(balanced)


def test_bench_table_marks_times_host_time_may_show_in():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench_table.py")
    spec = importlib.util.spec_from_file_location("bench_table", path)
    bt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bt)
    row = {"op": "q", "ours_us": 20.0, "torch_eager_us": 100.0, "torch_compile_us": 21.0, "copy_us": 22.0}
    clean = bt.python_table({"ops": [dict(row)]})
    assert clean[2] == "| q | 20.0 µs | 100.0 µs | 21.0 µs | 22.0 µs | 1.05× |" and len(clean) == 3
    late = bt.python_table({"ops": [dict(row, host_time_may_show=["torch_eager"])]})
    assert late[2] == "| q | 20.0 µs | 100.0 µs † | 21.0 µs | 22.0 µs | 1.05× |"
    assert late[-1] == bt.LATE_NOTE and late.count(bt.LATE_NOTE) == 1
    # the ratio is marked where it is made from a marked time: ours, or the faster PyTorch contender
    both = bt.python_table({"ops": [dict(row, host_time_may_show=["ours", "torch_compile", "copy"]),
                                    dict(row, op="r", host_time_may_show=["torch_compile"])]})
    assert both[2] == "| q | 20.0 µs † | 100.0 µs | 21.0 µs † | 22.0 µs † | 1.05× † |"
    assert both[3] == "| r | 20.0 µs | 100.0 µs | 21.0 µs † | 22.0 µs | 1.05× † |"
    assert both.count(bt.LATE_NOTE) == 1
    # an error cell stays an error
    err = dict(row, host_time_may_show=["torch_compile"])
    del err["torch_compile_us"]
    err["torch_compile_error"] = "RuntimeError: no"
    assert bt.python_table({"ops": [err]})[2] == "| q | 20.0 µs | 100.0 µs | error | 22.0 µs | 5.00× |"
    # the fused table marks its cells too
    fused = {"op": "f", "ours_us": 40.0, "unfused_pair_us": 90.0, "torch_eager_us": 600.0, "torch_compile_us": 60.0,
             "copy_us": 38.0, "copy_over_ours": 0.95, "unfused_pair_over_ours": 2.25, "torch_compile_over_ours": 1.5}
    rows = bt.python_fused_table([fused, dict(fused, op="g", host_time_may_show=["unfused_pair", "copy"])])
    assert "| f | 40.0 µs | 90.0 µs | 600.0 µs | 60.0 µs | 38.0 µs |" in rows[2]
    assert "| g | 40.0 µs | 90.0 µs † | 600.0 µs | 60.0 µs | 38.0 µs † |" in rows[3]
    assert rows.count(bt.LATE_NOTE) == 1
    assert bt.LATE_NOTE not in bt.python_fused_table([fused])


def test_bench_table_reads_the_host_floors():
    """The host table's note: the torch.ops bound (the allocate-only op plus the plain call's
    time past its allocation) and the package's op against it, from the file's numbers; a
    file without the floors gets no note."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench_table.py")
    spec = importlib.util.spec_from_file_location("bench_table", path)
    bt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bt)
    host = {"baracuda_quant.ops.quantize_per_tensor": 8.0,
            "torch.ops.baracuda_quant.quantize_per_tensor (no wrapper)": 13.0,
            "floor: torch.empty_like (the allocation alone)": 2.0,
            "floor: a torch.ops op of the same schema that only allocates": 7.0, "torch.quantize_per_tensor": 8.5}
    note = " ".join(bt.host_floor_note(host))
    assert "spends 6.0 µs" in note and "7.0 + 6.0 = 13.0 µs, above" in note and "takes 1.00 of that floor" in note
    host["torch.quantize_per_tensor"] = 14.0
    assert "13.0 µs, not above" in " ".join(bt.host_floor_note(host))
    del host["torch.quantize_per_tensor"]
    assert bt.host_floor_note(host) == []
    assert "Reading the floors" not in bt.python_block({"host_overhead_us_per_call": host, "ops": []}, "x.json")

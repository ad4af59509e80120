"""PyTorch's newer schedules without torch: their rules and messages, and
that every order is a valid schedule (each pass once; in time, every
operation after what it needs). tests/test_pytorch_orders.py compares the
orders with PyTorch's own."""

from collections import Counter

import pytest

import actmem
from actmem.run.schedule.schedule_timing import virtual_stage

NEW = ("interleaved-zb", "zbv", "dualpipev", "looped-bfs")


def cases():
    for schedule in NEW:
        for p in (1, 2, 3, 4, 6):
            for v in (1, 2, 3):
                for m in range(1, 4 * p + 1):
                    try:
                        yield actmem.simulate_schedule(schedule, p, m, v)
                    except ValueError:
                        pass


def test_every_order_is_valid():
    seen = Counter()
    for s in cases():
        seen[s.schedule] += 1
        ends = {}
        for i, stage in enumerate(s.timeline):
            kinds = Counter((t.op.microbatch, t.op.chunk, t.op.kind) for t in stage)
            for j in range(s.m):
                for c in range(s.v):
                    got = {k for (jj, cc, k), n in kinds.items() if (jj, cc) == (j, c) and n == 1}
                    assert got in ({"F", "B"}, {"F", "I", "W"}), (s.schedule, i, j, c, got)
            assert all(a.end <= b.start for a, b in zip(stage, stage[1:]))
            for t in stage:
                k = virtual_stage(i, t.op.chunk, s.p, s.v_shaped)
                ends[t.op.kind, t.op.microbatch, k] = (t.start, t.end)
        last = s.p * s.v - 1
        for (kind, j, k), (start, _) in ends.items():
            if kind == "F" and k > 0:
                assert start >= ends["F", j, k - 1][1]
            if kind in "BI" and k < last:
                upstream = ends.get(("B", j, k + 1)) or ends[("I", j, k + 1)]
                assert start >= upstream[1] and start >= ends["F", j, k][1]
            if kind == "W":
                assert start >= ends["I", j, k][1]
        for i in range(s.p):
            assert s.in_flight(i)[-1] == 0 and min(s.in_flight(i)) >= 0
            assert s.awaiting_weight_grad(i)[-1] == 0
    assert set(seen) == set(NEW) and min(seen.values()) > 10


@pytest.mark.parametrize("args, kwargs, message", [
    (("zbv", 4, 8, 3), {}, r"v=3: schedule 'zbv' needs exactly v=2 model chunks per GPU"),
    (("dualpipev", 4, 8, 1), {}, r"v=1: schedule 'dualpipev' needs exactly v=2"),
    (("dualpipev", 4, 7, 2), {}, r"m=7: PyTorch's ScheduleDualPipeV needs m >= 2p = 8"),
    (("interleaved-zb", 4, 9, 2), {},
     r"m=9: PyTorch's ScheduleInterleavedZeroBubble needs m to be a multiple of "
     r"max\(1, m // p\) = 2"),
    (("zbv", 4, 8, 2), {"order": "megatron"},
     r"order='megatron': schedule 'zbv' exists only in PyTorch"),
    (("looped-bfs", 4, 8, 2), {"microbatch_group_size": 4},
     r"microbatch_group_size=4: only schedule='interleaved'"),
])
def test_bad_input_names_the_argument(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        actmem.simulate_schedule(*args, **kwargs)


def test_v_shape_puts_the_first_and_last_stage_on_gpu_0():
    s = actmem.simulate_schedule("zbv", 4, 8, 2)
    assert s.v_shaped and s.order == "pytorch"
    assert [virtual_stage(0, c, 4, True) for c in (0, 1)] == [0, 7]
    assert [virtual_stage(3, c, 4, True) for c in (0, 1)] == [3, 4]

"""The simulated orders against PyTorch's own ``pipeline_order``, computed by
PyTorch 2.13's schedule classes (not re-typed): for every (p, m, v) with
p <= 8, m <= 4p, v <= 4 that a class accepts, every rank's operations and
the micro-batches it holds after each of them are equal; where the class
refuses, actmem refuses too. The classes are built from stand-in stage
objects (the attributes their constructors read), so no process group is
needed. Skipped without torch unless CI is set."""

import logging
import os
from types import SimpleNamespace

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

from torch.distributed.pipelining import schedules as pt  # noqa: E402
from torch.distributed.pipelining._utils import generate_rank_to_stage_mapping  # noqa: E402

import actmem  # noqa: E402

CLASSES = {"interleaved-zb": (pt.ScheduleInterleavedZeroBubble, "loop"),
           "zbv": (pt.ScheduleZBVZeroBubble, "v"),
           "dualpipev": (pt.ScheduleDualPipeV, "v"),
           "looped-bfs": (pt.ScheduleLoopedBFS, "loop"),
           "interleaved": (pt.ScheduleInterleaved1F1B, "loop")}
"""actmem's name -> (PyTorch's class, its stage-to-rank style)."""


def pytorch_order(schedule, p, m, v):
    """``{rank: [action, ...]}`` from PyTorch's class, or None if its
    constructor refuses (p, m, v)."""
    cls, style = CLASSES[schedule]
    owned = generate_rank_to_stage_mapping(p, p * v, style)[0]
    stages = [SimpleNamespace(num_stages=p * v, group_size=p, group_rank=0, stage_index=k,
                              submod=None, stage_index_to_group_rank=None)
              for k in owned]
    try:
        return cls(stages, n_microbatches=m).pipeline_order
    except ValueError:
        return None


def flat(actions):
    """Compute actions in order, an overlapped pair as its sub-actions."""
    for a in actions:
        if a is None:
            continue
        yield from (a.sub_actions if a.sub_actions else (a,))


def as_ops(actions, p, style):
    """PyTorch's actions as actmem's printed ops (chunk local to the rank)."""
    out = []
    for a in flat(actions):
        chunk = a.stage_index // p if style == "loop" else int(a.stage_index >= p)
        kind = a.computation_type.value
        out.append(f"{kind}{a.microbatch_index}" + (f"/{chunk}" if chunk else ""))
    return out


def held(actions):
    """Passes a rank holds after each action, counted on PyTorch's actions:
    a forward adds one, a full backward or a weight step removes one."""
    count, out = 0, []
    for a in flat(actions):
        count += {"F": 1, "I": 0}.get(a.computation_type.value, -1)
        out.append(count)
    return out


@pytest.fixture(autouse=True)
def quiet():
    logging.disable(logging.WARNING)   # PyTorch logs its bubble counts
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("schedule", list(CLASSES))
def test_every_accepted_case_equals_pytorch_pipeline_order(schedule):
    style = CLASSES[schedule][1]
    accepted = 0
    for p in range(1, 9):
        for v in range(1, 5):
            for m in range(1, 4 * p + 1):
                order = pytorch_order(schedule, p, m, v)
                try:
                    s = actmem.simulate_schedule(schedule, p, m, v, order="pytorch")
                except ValueError:
                    assert order is None or (schedule == "interleaved" and (v == 1 or p == 1)), \
                        (p, m, v)
                    continue
                assert order is not None, (p, m, v)
                accepted += 1
                for rank in range(p):
                    assert [str(op) for op in s.ops[rank]] == as_ops(order[rank], p, style), \
                        (p, m, v, rank)
                    assert s.in_flight(rank) == held(order[rank]), (p, m, v, rank)
                s.makespan()   # the order runs to the end (no deadlock)
    assert accepted > 50

"""When each operation of a pipeline schedule runs: an operation starts when
its GPU is free and the passes it needs have ended.

Dependencies (virtual stage ``k`` is one model chunk on one GPU, ``0 ..
p*v-1`` in the order the micro-batch flows): a forward needs stage ``k-1``'s
forward of the same micro-batch; a backward (``B``) or input-gradient step
(``I``) needs its own forward and stage ``k+1``'s ``B`` or ``I``; a
weight-gradient step (``W``) needs its own ``I`` and nothing else (Qi et al.
2023, sec. 2). Durations are :data:`actmem.run.schedule.ops.PASS_TIME` divided by
``v`` (a chunk holds ``1/v`` of the stage's layers); communication takes no
time.
"""

from __future__ import annotations

from .ops import BACKWARD, FORWARD, INPUT_GRAD, PASS_TIME, WEIGHT_GRAD, Op

_DONE_INPUT_GRAD = "dX"
"""Key of the moment a pass's input gradient exists (after its B or its I)."""


def virtual_stage(i: int, chunk: int, p: int, v_shaped: bool) -> int:
    """Virtual stage of GPU ``i``'s chunk: ``chunk*p + i`` (looped), or
    ``i`` / ``2p-1-i`` for chunk 0 / 1 of a V-shaped schedule."""
    if v_shaped:
        return i if chunk == 0 else 2 * p - 1 - i
    return chunk * p + i


def needs(op: Op, stage: int, last: int) -> list[tuple[str, int, int]]:
    """What ``op`` on virtual stage ``stage`` waits for, as
    ``(event, microbatch, virtual stage)``; ``last`` is the last virtual
    stage (``p*v - 1``)."""
    j = op.microbatch
    if op.kind == FORWARD:
        return [(FORWARD, j, stage - 1)] if stage > 0 else []
    if op.kind == WEIGHT_GRAD:
        return [(_DONE_INPUT_GRAD, j, stage)]
    own = [(FORWARD, j, stage)]
    return own + ([(_DONE_INPUT_GRAD, j, stage + 1)] if stage < last else [])


def _finishes(op: Op, stage: int) -> tuple[str, int, int]:
    kind = _DONE_INPUT_GRAD if op.kind in (BACKWARD, INPUT_GRAD) else op.kind
    return kind, op.microbatch, stage


def simulate_times(ops, p: int, v: int, v_shaped: bool):
    """``(op, start, end)`` per GPU, in integer ticks of ``1/v`` unit.

    Each GPU runs its operations in order; one that waits for an event not
    yet done parks its GPU on that event, and the event's completion wakes
    it, so every operation is looked at a bounded number of times: the cost
    is linear in the number of operations, whatever ``p``.

    Raises:
        RuntimeError: the orders wait for each other (a deadlock), naming
            the stuck GPUs.
    """
    ticks = {kind: int(t) for kind, t in PASS_TIME.items()}
    last = p * v - 1
    done: dict[tuple, int] = {}
    parked: dict[tuple, list[int]] = {}
    placed: list[list[tuple[Op, int, int]]] = [[] for _ in range(p)]
    ready = list(range(p))
    while ready:
        i = ready.pop()
        row, todo = placed[i], ops[i]
        stages = [virtual_stage(i, chunk, p, v_shaped) for chunk in range(v)]
        end = row[-1][2] if row else 0
        while len(row) < len(todo):
            op = todo[len(row)]
            stage = stages[op.chunk]
            waits = needs(op, stage, last)
            missing = next((w for w in waits if w not in done), None)
            if missing is not None:
                parked.setdefault(missing, []).append(i)
                break
            start = max([end, *(done[w] for w in waits)])
            end = start + ticks[op.kind]
            row.append((op, start, end))
            event = _finishes(op, stage)
            done[event] = end
            ready += parked.pop(event, ())
    stuck = [i for i in range(p) if len(placed[i]) < len(ops[i])]
    if stuck:
        raise RuntimeError(f"deadlock: stages {stuck} wait for each other")
    return tuple(map(tuple, placed))

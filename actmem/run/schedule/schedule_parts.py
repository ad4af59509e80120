"""What a stage holds, part by part, as its schedule runs.

One pass through model chunk ``c`` keeps ``parts[c]`` (part name -> bytes)
from its forward until its backward ``B``; with a split backward
(zero-bubble schedules) until its ``I``, then ``pending[c]`` (what the
weight-gradient step reads) until its ``W``, then ``after_weight[c]`` until
the end of the step. So the bytes by part after each operation are the
pass counts in these three states times each state's bytes: a running
count over the stage's operations (:class:`actmem.run.schedule.schedules.PipelineSchedule`).
"""

from __future__ import annotations

from .ops import BACKWARD, FORWARD, INPUT_GRAD, WEIGHT_GRAD
from ...validate import integer


def held_parts(plan, i: int, parts: list[dict[str, int]],
               pending: list[dict[str, int]] | None = None,
               after_weight: list[dict[str, int]] | None = None) -> list[dict[str, int]]:
    """Bytes by part stage ``i`` holds after each operation, when one
    pass through chunk ``c`` keeps ``parts[c]`` (name -> bytes) until its
    ``B``; or until its ``I``, then ``pending[c]`` until its ``W``, then
    ``after_weight[c]`` until the end of the step.

    Args:
        pending: per chunk, what the weight-gradient step still reads
            (:func:`actmem.run.schedule.split_backward.weight_gradient_parts`:
            the linear layers' inputs); None keeps all of ``parts[c]``.
        after_weight: per chunk, what a pass keeps after its ``W`` (None:
            nothing; PyTorch 2.13 keeps some bytes to the end of the
            step, measured by :mod:`actmem.measure.pipeline`).

    Raises:
        TypeError, ValueError: a bad ``i``, or not one dict (part name ->
            bytes, an int >= 0) per chunk.
    """
    states, names = part_states(plan, parts, pending, after_weight)
    return [_parts_held(counts, states, names) for counts in pass_counts(plan, i)]


def peak_parts(plan, i: int, parts: list[dict[str, int]],
               pending: list[dict[str, int]] | None = None,
               after_weight: list[dict[str, int]] | None = None) -> dict[str, int]:
    """Bytes by part that stage ``i`` holds at its peak: the first
    moment, after an operation, of the largest total of
    :func:`held_parts` (chunks may keep different bytes: the first
    stage's chunk 0 also holds the embedding's activations).

    Raises:
        ValueError: as :func:`held_parts`.
    """
    states, names = part_states(plan, parts, pending, after_weight)
    totals = [[sum(state[c].values()) for state in states] for c in range(plan.v)]
    peak, at = -1, None   # only the peak's parts are summed part by part
    for counts in plan.counts_seen[i]:
        total = sum(k * t for held, chunk in zip(counts, totals) for k, t in zip(held, chunk))
        if total > peak:
            peak, at = total, [list(held) for held in counts]
    return _parts_held(at, states, names)


def part_states(plan, parts, pending, after_weight):
    """(per state, per chunk: name -> bytes; the names) of
    :func:`held_parts`' arguments, checked."""
    pending = parts if pending is None else pending
    after_weight = [{}] * plan.v if after_weight is None else after_weight
    states = tuple(_chunk_parts(name, given, plan.v) for name, given in zip(
        ("parts", "pending", "after_weight"), (parts, pending, after_weight)))
    return states, list(dict.fromkeys(n for per_chunk in states for d in per_chunk
                                      for n in d))


def pass_counts(plan, i: int):
    """After each operation of stage ``i``: per chunk, the passes held
    before their I (or B), between their I and W, and after their W
    (tuples)."""
    counts = [(0, 0, 0)] * plan.v
    for op in plan.ops[i]:
        (a, b, c), (da, db, dc) = counts[op.chunk], _MOVES[op.kind]
        counts[op.chunk] = (a + da, b + db, c + dc)
        yield tuple(counts)


def _parts_held(counts, states, names) -> dict[str, int]:
    """Bytes by part when each chunk holds ``counts`` passes in each of
    :func:`held_parts`' three states."""
    return {n: sum(k * state[c].get(n, 0) for c, held in enumerate(counts)
                   for k, state in zip(held, states)) for n in names}


_MOVES = {FORWARD: (1, 0, 0), BACKWARD: (-1, 0, 0), INPUT_GRAD: (-1, 1, 0),
          WEIGHT_GRAD: (0, -1, 1)}
"""How an operation moves one pass of its chunk between the states of
:func:`pass_counts`."""


def _chunk_parts(name: str, given: object, v: int) -> list[dict[str, int]]:
    """``given`` checked: a list of ``v`` dicts, str -> bytes (int >= 0)."""
    if not isinstance(given, (list, tuple)) or len(given) != v:
        raise ValueError(f"{name} needs a list of one dict per model chunk (v={v}), "
                         f"got {given!r}")
    checked = []
    for c, parts in enumerate(given):
        if not isinstance(parts, dict):
            raise TypeError(f"{name}[{c}] must be a dict (part name -> bytes), got {parts!r}")
        for key, n in parts.items():
            if type(key) is str and type(n) is int and n >= 0:   # the plain case, at once
                continue
            if not isinstance(key, str) or integer(f"{name}[{c}][{key!r}]", n,
                                                   "bytes (an int >= 0)") < 0:
                raise ValueError(f"{name}[{c}] must map part names (str) to bytes >= 0, "
                                 f"got {key!r}: {n!r}")
        checked.append({key: int(n) for key, n in parts.items()})
    return checked

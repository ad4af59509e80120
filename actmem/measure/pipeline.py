"""Pipeline schedules measured on PyTorch's own engine, stage by stage.

A stack of :data:`LAYERS` reference GPT layers (:mod:`.layer`) is split into
``p`` pipeline stages (``v`` model chunks per stage for interleaving) and
trained for one step by ``torch.distributed.pipelining``'s
``ScheduleGPipe``, ``Schedule1F1B`` or ``ScheduleInterleaved1F1B``, one
gloo process per stage on 127.0.0.1 (:mod:`.launch`). On every rank
:class:`~actmem.measure.alive.AliveBytes` records the bytes saved for
backward that are alive after each forward and backward operation, and the
order in which PyTorch ran them. The peak over one micro-batch's bytes
through one chunk must equal :meth:`actmem.PipelineSchedule.peak_in_flight`
of the simulation in PyTorch's order (``order="pytorch"``).

Kept out of the count, so that the ratio measures activations only:
parameters (autograd saves a linear layer's weight for the input gradient
when the input requires grad, which differs on the first stage), and
whatever PyTorch's first step saves while it infers the stage shapes (a
first, unrecorded step runs before the recorded one). The first stage
starts with :class:`EmbeddingOutput`, a fresh tensor per micro-batch as an
embedding lookup makes, so that every chunk saves the same bytes. The loss
(a sum) saves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import torch
from torch import nn
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                          ScheduleInterleaved1F1B)

from ..layer.config import LayerConfig
from ..run.schedules import simulate_schedule
from .alive import AliveBytes
from .launch import on_ranks
from .layer import ReferenceLayer
from .variants import SMALL

LAYERS = 8
"""Layers in the measured stack: p*v divides it for p = 2, 4 and v = 1, 2."""
TORCH_SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B,
                   "interleaved": ScheduleInterleaved1F1B}


PYTORCH_ONLY = (("interleaved", 4, 3, 2), ("interleaved", 4, 6, 2))
"""Interleaved cases PyTorch runs and Megatron-LM refuses (m not a
multiple of p): PyTorch groups micro-batches by ``m // max(1, m // p)``."""


def default_cases() -> tuple[tuple[str, int, int, int], ...]:
    """``(schedule, p, m, v)`` measured by default: p = 2 and 4; m = p and
    2p, and p - 1 for GPipe (PyTorch's 1F1B refuses m < p); v = 2 for
    interleaved, plus :data:`PYTORCH_ONLY`."""
    cases = []
    for p in (2, 4):
        cases += [("gpipe", p, m, 1) for m in (p - 1, p, 2 * p)]
        cases += [("1f1b", p, m, 1) for m in (p, 2 * p)]
        cases += [("interleaved", p, m, 2) for m in (p, 2 * p)]
    return tuple(cases) + PYTORCH_ONLY


@dataclass(frozen=True)
class StageResult:
    """One pipeline stage (rank) of one measured schedule.

    Attributes:
        schedule, p, m, v: the case. stage: the rank (0 = first stage).
        ops: the operations PyTorch ran on this rank, in order (``"F3/1"``:
            forward of micro-batch 3 through chunk 1).
        alive: bytes saved for backward alive after each of ``ops``.
        per_microbatch: bytes one forward (one micro-batch through one
            chunk) added; ``uniform`` whether every forward added that much.
        simulated_ops: the simulation's operations for this stage
            (``order="pytorch"``); ``simulated_peak`` its peak in flight.
    """

    schedule: str
    p: int
    m: int
    v: int
    stage: int
    ops: tuple[str, ...]
    alive: tuple[int, ...]
    per_microbatch: int
    uniform: bool
    simulated_ops: tuple[str, ...]
    simulated_peak: int

    @property
    def peak(self) -> int:
        """Most bytes alive after any operation."""
        return max(self.alive)

    @property
    def ratio(self) -> Fraction:
        """``peak / per_microbatch``: micro-batch chunks held at the peak."""
        return Fraction(self.peak, self.per_microbatch)

    @property
    def agrees(self) -> bool:
        """Same order as the simulation, equal forwards, everything freed
        at the end, and the ratio equal to the simulated peak."""
        return (self.ops == self.simulated_ops and self.uniform
                and self.alive[-1] == 0 and self.ratio == self.simulated_peak)


class EmbeddingOutput(nn.Module):
    """The first stage's input as a fresh tensor per micro-batch (an
    embedding lookup's output); saves nothing itself."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


def _sum_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A loss whose backward needs no saved tensor."""
    return output.float().sum()


def _chunk(config: LayerConfig, p: int, v: int, rank: int, chunk: int) -> nn.Module:
    per_chunk = LAYERS // (p * v)
    first = (chunk * p + rank) * per_chunk
    layers = [ReferenceLayer(config, seed=first + k) for k in range(per_chunk)]
    if first == 0:
        layers.insert(0, EmbeddingOutput())
    return nn.Sequential(*layers)


def _run_case(rank: int, case: tuple, config: LayerConfig) -> tuple[list, list, list]:
    """One training step on this rank; ``(ops, alive, forward_bytes)``."""
    schedule, p, m, v = case
    chunks = [_chunk(config, p, v, rank, c) for c in range(v)]
    stages = [PipelineStage(mod, c * p + rank, p * v, torch.device("cpu"))
              for c, mod in enumerate(chunks)]
    runner = TORCH_SCHEDULES[schedule](stages if v > 1 else stages[0], n_microbatches=m,
                                       loss_fn=_sum_loss)
    shape = (m * config.b, config.s, config.h)
    batch = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)

    def step():
        args = (batch,) if rank == 0 else ()
        runner.step(*args, target=torch.zeros(shape) if rank == p - 1 else None)

    step()  # infers shapes; not recorded
    alive = AliveBytes(q for mod in chunks for q in mod.parameters())
    ops, after, added = [], [], []
    for stage in stages:
        _record(stage, stage.stage_index // p, alive, ops, after, added)
    with alive:
        step()
    return ops, after, added


def _record(stage, chunk, alive, ops, after, added) -> None:
    """Wrap ``stage``'s forward and backward to log each operation."""
    forward, backward = stage.forward_one_chunk, stage.backward_one_chunk

    def forward_logged(mb, *args, **kwargs):
        before = alive.bytes
        out = forward(mb, *args, **kwargs)
        added.append(alive.bytes - before)
        ops.append(f"F{mb}/{chunk}" if chunk else f"F{mb}")
        after.append(alive.bytes)
        return out

    def backward_logged(mb, *args, **kwargs):
        out = backward(mb, *args, **kwargs)
        ops.append(f"B{mb}/{chunk}" if chunk else f"B{mb}")
        after.append(alive.bytes)
        return out

    stage.forward_one_chunk, stage.backward_one_chunk = forward_logged, backward_logged


def _measure_rank(rank: int, cases: tuple, config: LayerConfig) -> list:
    return [_run_case(rank, case, config) for case in cases]


def measure_pipelines(cases=None, **sizes) -> list[StageResult]:
    """Run every case on real ranks and compare with the simulation.

    Args:
        cases: ``(schedule, p, m, v)`` tuples (default
            :func:`default_cases`); one launch of ``p`` processes per ``p``.
        **sizes: ``s``, ``b``, ``h``, ``a`` of the layers (default
            :data:`~actmem.measure.variants.SMALL`).

    Returns:
        One :class:`StageResult` per case and stage, in case order.

    Raises:
        ValueError: a case PyTorch or actmem refuses (e.g. ``m < p`` for
            1F1B), or ``p*v`` does not divide :data:`LAYERS`.
    """
    cases = default_cases() if cases is None else tuple(cases)
    config = LayerConfig(**{**SMALL, **sizes})
    for schedule, p, m, v in cases:
        simulate_schedule(schedule, p, m, v, order="pytorch")  # clear errors first
        if LAYERS % (p * v):
            raise ValueError(f"p*v={p * v} must divide the {LAYERS} measured layers")
    results = {}
    for p in sorted({case[1] for case in cases}):
        mine = tuple(c for c in cases if c[1] == p)
        for rank, per_case in enumerate(on_ranks(_measure_rank, p, mine, config)):
            for case, measured in zip(mine, per_case):
                results[case, rank] = _result(case, rank, *measured)
    return [results[case, rank] for case in cases for rank in range(case[1])]


def _result(case, rank, ops, after, added) -> StageResult:
    simulated = simulate_schedule(*case, order="pytorch")
    return StageResult(*case, rank, tuple(ops), tuple(after), added[0],
                       len(set(added)) == 1, tuple(map(str, simulated.ops[rank])),
                       simulated.peak_in_flight(rank))


def measurement(cases=None, **sizes) -> dict:
    """:func:`measure_pipelines` as JSON-ready data: ``{"config": ...,
    "stages": [as_dict(result), ...]}`` (what ``python -m actmem.measure
    pipeline --json`` prints and ``actmem/data/pipeline_measured.json``
    stores)."""
    config = {**SMALL, **sizes, "layers": LAYERS, "torch": torch.__version__}
    return {"config": config,
            "stages": [as_dict(r) for r in measure_pipelines(cases, **sizes)]}


def as_dict(r: StageResult) -> dict:
    """A :class:`StageResult` as plain JSON types (bytes as ints)."""
    return {"schedule": r.schedule, "p": r.p, "m": r.m, "v": r.v, "stage": r.stage,
            "peak_bytes": r.peak, "microbatch_bytes": r.per_microbatch,
            "ratio": str(r.ratio), "simulated_peak_in_flight": r.simulated_peak,
            "agrees": r.agrees, "ops": list(r.ops), "alive_bytes": list(r.alive)}

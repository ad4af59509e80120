"""Pipeline schedules measured on PyTorch's own engine, stage by stage.

A stack of :data:`LAYERS` reference GPT layers (:mod:`.layer`) is split into
``p`` pipeline stages (``v`` model chunks per stage) and trained for one step
by one of ``torch.distributed.pipelining``'s schedules
(:data:`TORCH_SCHEDULES`: GPipe, 1F1B, interleaved 1F1B, interleaved zero
bubble, ZBV, DualPipeV, looped BFS), one gloo process per stage on
127.0.0.1 (:mod:`.launch`); the V-shaped schedules place virtual stages
``i`` and ``2p-1-i`` on rank ``i``. On every rank
:class:`~actmem.measure.alive.AliveBytes` records the bytes saved for
backward that are alive after each forward and backward operation, and the
order in which PyTorch ran them (``F``, ``B``, and ``I``/``W`` where the
backward is split). :mod:`.pipeline_result` compares them with the
simulation in PyTorch's order (``order="pytorch"``).

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

import torch
from torch import nn
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleDualPipeV,
                                          ScheduleGPipe, ScheduleInterleaved1F1B,
                                          ScheduleInterleavedZeroBubble, ScheduleLoopedBFS,
                                          ScheduleZBVZeroBubble)

from ..layer.config import LayerConfig
from ..run.schedule.schedule_timing import virtual_stage
from ..run.schedule.schedules import simulate_schedule
from ..run.schedule.zero_bubble import V_SHAPED
from .pipeline_result import StageResult, as_dict, default_cases, stage_result
from .alive import AliveBytes
from .launch import on_ranks
from .layer import ReferenceLayer
from .variants import SMALL

LAYERS = 8
"""Layers in the measured stack: p*v divides it for p = 2, 4 and v = 1, 2."""
TORCH_SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B,
                   "interleaved": ScheduleInterleaved1F1B,
                   "interleaved-zb": ScheduleInterleavedZeroBubble,
                   "zbv": ScheduleZBVZeroBubble, "dualpipev": ScheduleDualPipeV,
                   "looped-bfs": ScheduleLoopedBFS}


class EmbeddingOutput(nn.Module):
    """The first stage's input as a fresh tensor per micro-batch (an
    embedding lookup's output); saves nothing itself."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


def _sum_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A loss whose backward needs no saved tensor."""
    return output.float().sum()


def _chunk(config: LayerConfig, p: int, v: int, stage: int) -> nn.Module:
    per_chunk = LAYERS // (p * v)
    first = stage * per_chunk
    layers = [ReferenceLayer(config, seed=first + k) for k in range(per_chunk)]
    if first == 0:
        layers.insert(0, EmbeddingOutput())
    return nn.Sequential(*layers)


def _run_case(rank: int, case: tuple, config: LayerConfig) -> tuple[list, list, list]:
    """One training step on this rank; ``(ops, alive, forward_bytes)``."""
    schedule, p, m, v = case
    virtual = [virtual_stage(rank, c, p, schedule in V_SHAPED) for c in range(v)]
    chunks = [_chunk(config, p, v, k) for k in virtual]
    stages = [PipelineStage(mod, k, p * v, torch.device("cpu"))
              for k, mod in zip(virtual, chunks)]
    single = schedule in ("gpipe", "1f1b")
    runner = TORCH_SCHEDULES[schedule](stages[0] if single else stages, n_microbatches=m,
                                       loss_fn=_sum_loss)
    shape = (m * config.b, config.s, config.h)
    batch = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)

    def step():
        args = (batch,) if rank == 0 else ()
        holds_last = p * v - 1 in virtual
        runner.step(*args, target=torch.zeros(shape) if holds_last else None)

    step()  # infers shapes; not recorded
    alive = AliveBytes(q for mod in chunks for q in mod.parameters())
    ops, after, added = [], [], []
    for c, stage in enumerate(stages):
        _record(stage, c, alive, ops, after, added)
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

    def logged(kind, mb):
        ops.append(f"{kind}{mb}/{chunk}" if chunk else f"{kind}{mb}")
        after.append(alive.bytes)

    def backward_logged(mb, *args, full_backward=True, **kwargs):
        out = backward(mb, *args, full_backward=full_backward, **kwargs)
        logged("B" if full_backward else "I", mb)
        return out

    def weight_logged(mb, *args, **kwargs):
        out = weight(mb, *args, **kwargs)
        logged("W", mb)
        return out

    weight = stage.backward_weight_one_chunk
    stage.forward_one_chunk, stage.backward_one_chunk = forward_logged, backward_logged
    stage.backward_weight_one_chunk = weight_logged


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
                results[case, rank] = stage_result(case, rank, *measured)
    return [results[case, rank] for case in cases for rank in range(case[1])]


def measurement(cases=None, **sizes) -> dict:
    """:func:`measure_pipelines` as JSON-ready data: ``{"config": ...,
    "stages": [as_dict(result), ...]}`` (what ``python -m actmem.measure
    pipeline --json`` prints and ``actmem/data/pipeline_measured.json``
    stores)."""
    config = {**SMALL, **sizes, "layers": LAYERS, "torch": torch.__version__}
    return {"config": config,
            "stages": [as_dict(r) for r in measure_pipelines(cases, **sizes)]}

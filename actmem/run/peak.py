"""A GPU's peak training memory, part by part, and whether it fits.

For every pipeline stage :func:`training_memory` adds up, in bytes:

* model states (:mod:`actmem.states`): weights, gradients, optimizer states;
* layer activations at the stage's peak: the schedule's passes in flight
  (:mod:`actmem.schedules`) times the bytes each keeps for its layers
  (:func:`actmem.activation_memory`); under full recomputation in groups of
  ``k`` layers (Megatron-LM's ``recompute_num_layers``, uniform method) a
  pass keeps one checkpoint per group;
* what only the first and the last stage keep, per pass (Korthikanti et al.
  2022, sec. 4.3, and Megatron-LM's ``theoretical_memory_usage.py``): the
  token ids (int64) and the embedding's dropout mask; the final norm's
  input, the output layer's input, the logits the cross-entropy keeps
  (fp32 by default: ``4*s*b*V/t`` bytes) and its int64 targets with their
  1-byte mask;
* the recomputation working set, at the peak *during* backward: one layer's
  recomputed attention core (selective), or one group's full ledger
  (full: ``k`` layers without recomputation);
* a reserve the user sets for what no formula knows (communication
  buffers, workspaces, allocator fragmentation), never a hidden constant.

Under sequence parallelism the norm inputs and the embedding mask are split
along s (divided by t); without it every tensor-parallel rank keeps them
whole.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction

from ..layer.memory import activation_memory
from .model import ModelConfig
from .schedules import simulate_schedule
from .states import model_states
from .training import chunk_layers
from ..units import parse_size
from ..validate import flag, positive_int

PARTS = ("weights", "gradients", "optimizer", "layer_activations",
         "embedding_activations", "output_activations", "recompute_working_set",
         "reserve")
"""The parts of a stage's memory, in the order figures stack them."""


@dataclass(frozen=True)
class StageMemory:
    """Bytes one GPU of pipeline stage ``stage`` holds at its peak, by part
    (:data:`PARTS`)."""

    stage: int
    weights: int
    gradients: int
    optimizer: int
    layer_activations: int
    embedding_activations: int
    output_activations: int
    recompute_working_set: int
    reserve: int

    @property
    def parts(self) -> dict[str, int]:
        """Part name -> bytes, in :data:`PARTS` order."""
        return {name: getattr(self, name) for name in PARTS}

    @property
    def total(self) -> int:
        """The sum of the parts, bytes."""
        return sum(self.parts.values())

    @property
    def held_between_passes(self) -> int:
        """Activations kept from forward to backward at the peak, bytes."""
        return self.layer_activations + self.embedding_activations + self.output_activations

    @property
    def peak_during_backward(self) -> int:
        """:attr:`held_between_passes` plus what recomputation rebuilds."""
        return self.held_between_passes + self.recompute_working_set


@dataclass(frozen=True)
class TrainingMemory:
    """Every stage's memory and the verdict against ``gpu_memory``.

    Attributes:
        stages: one :class:`StageMemory` per pipeline stage, first first.
        gpu_memory: the GPU's capacity in bytes, or None.
    """

    stages: tuple[StageMemory, ...]
    gpu_memory: int | None

    @property
    def most_loaded(self) -> StageMemory:
        """The stage with the largest total (the first one if tied)."""
        return max(self.stages, key=lambda stage: stage.total)

    @property
    def margin(self) -> int | None:
        """``gpu_memory - most_loaded.total`` (negative: does not fit)."""
        return None if self.gpu_memory is None else self.gpu_memory - self.most_loaded.total

    @property
    def fits(self) -> bool | None:
        """Whether the most loaded stage fits, or None without ``gpu_memory``."""
        return None if self.gpu_memory is None else self.margin >= 0


def embedding_activations(model: ModelConfig, t: int = 1,
                          sequence_parallel: bool = False) -> dict[str, int]:
    """Bytes the first stage keeps per micro-batch for the embedding:
    token ids (int64, ``8sb``) and, with dropout, the 1-byte dropout mask
    (``sbh``, ``sbh/t`` under sequence parallelism)."""
    c = model.layer(t, sequence_parallel)
    split = c.t if sequence_parallel else 1
    parts = {"token ids": 8 * c.s * c.b}
    if c.dropout:
        parts["embedding dropout mask"] = c.s * c.b * c.h // split
    return parts


def output_activations(model: ModelConfig, t: int = 1, sequence_parallel: bool = False,
                       logits_bytes: int = 4) -> dict[str, int]:
    """Bytes the last stage keeps per micro-batch for the output: the final
    norm's and the output layer's inputs (``2sbh`` each, ``/t`` under
    sequence parallelism), the logits the cross-entropy keeps
    (``logits_bytes * s*b*V/t``, V padded) and its targets and mask
    (``9sb``: int64 and 1 byte per token)."""
    c = model.layer(t, sequence_parallel)
    if logits_bytes not in (2, 4) or isinstance(logits_bytes, bool):
        raise ValueError(f"logits_bytes must be 4 (fp32, Megatron-LM) or 2 (16-bit), "
                         f"got {logits_bytes!r}")
    sbh = c.s * c.b * c.h // (c.t if sequence_parallel else 1)
    return {"final norm input": 2 * sbh, "output layer input": 2 * sbh,
            "logits": logits_bytes * c.s * c.b * model.padded_vocab(c.t) // c.t,
            "cross-entropy targets": 9 * c.s * c.b}


def _layer_parts(model, t, sequence_parallel, recompute, k, layers) -> tuple[int, int]:
    """(bytes one pass keeps for ``layers`` layers, recomputation working set)."""
    def bytes_(mode):
        return activation_memory(**asdict(model.layer(t, sequence_parallel, mode))).total
    if recompute == "none":
        return layers * bytes_("none"), 0
    if recompute == "selective":
        return layers * bytes_("selective"), bytes_("none") - bytes_("selective")
    groups = -(-layers // k)
    return groups * bytes_("full"), min(k, layers) * bytes_("none")


def training_memory(model: ModelConfig, *, t: int = 1, p: int = 1, d: int = 1,
                    m: int = 1, schedule: str = "1f1b", v: int = 1,
                    order: str = "megatron", sequence_parallel: bool = False,
                    recompute: str = "none", recompute_num_layers: int = 1,
                    accounting: str = "megatron", zero_stage: int = 0,
                    distributed_optimizer: bool = False, logits_bytes: int = 4,
                    reserve: int | float = 0, gpu_memory: int | str | None = None
                    ) -> TrainingMemory:
    """Peak memory of every pipeline stage's GPU, part by part.

    Args:
        model: a :class:`ModelConfig` (e.g. ``actmem.PRESETS["llama2-7b"]``).
        t, p, d: tensor-, pipeline- and data-parallel sizes.
        m, schedule, v, order: micro-batches per step and the pipeline
            schedule (:func:`actmem.simulate_schedule`).
        sequence_parallel, recompute: storage options of the layers;
            recompute_num_layers: k, layers per checkpointed group (full).
        accounting, zero_stage, distributed_optimizer: model states
            (:func:`actmem.model_states`).
        logits_bytes: 4 (fp32 logits, Megatron-LM) or 2.
        reserve: bytes, or a fraction in [0, 1) of ``gpu_memory``, set
            aside on every GPU for what no formula knows.
        gpu_memory: the GPU's capacity: bytes, or ``"80GB"`` (10^9 bytes)
            or ``"80GiB"`` (2^30 bytes).

    Returns:
        :class:`TrainingMemory`: ``.stages``, ``.most_loaded``, ``.margin``
        and ``.fits`` (None without ``gpu_memory``).

    Raises:
        TypeError, ValueError: any invalid value; the message names it.
    """
    flag("sequence_parallel", sequence_parallel)
    k = positive_int("recompute_num_layers", recompute_num_layers)
    plan = simulate_schedule(schedule, p, m, v, order)
    layers = chunk_layers(model.L, p, v)
    held, working = _layer_parts(model, t, sequence_parallel, recompute, k, layers)
    capacity = None if gpu_memory is None else parse_size("gpu_memory", gpu_memory)
    spare = _reserve(reserve, capacity)
    first = embedding_activations(model, t, sequence_parallel)
    last = output_activations(model, t, sequence_parallel, logits_bytes)
    stages = []
    for i in range(p):
        chunks = [{"layer_activations": held,
                   "embedding_activations": sum(first.values()) if (i, c) == (0, 0) else 0,
                   "output_activations": sum(last.values()) if (i, c) == (p - 1, v - 1) else 0}
                  for c in range(v)]
        states = model_states(model, t=t, p=p, d=d, accounting=accounting,
                              zero_stage=zero_stage,
                              distributed_optimizer=distributed_optimizer, stage=i)
        stages.append(StageMemory(i, states.weights, states.gradients, states.optimizer,
                                  **plan.peak_parts(i, chunks),
                                  recompute_working_set=working, reserve=spare))
    return TrainingMemory(tuple(stages), capacity)


def _reserve(reserve: int | float, capacity: int | None) -> int:
    if isinstance(reserve, bool) or not isinstance(reserve, (int, float)):
        raise TypeError(f"reserve must be bytes (int) or a fraction of gpu_memory "
                        f"(float), got {reserve!r}")
    if isinstance(reserve, int):
        if reserve < 0:
            raise ValueError(f"reserve must be >= 0 bytes, got {reserve}")
        return reserve
    if not 0 <= reserve < 1:
        raise ValueError(f"reserve={reserve}: a fraction must be in [0, 1)")
    if capacity is None:
        raise ValueError(f"reserve={reserve} is a fraction of gpu_memory; give gpu_memory "
                         "or a reserve in bytes")
    return math.ceil(Fraction(repr(reserve)) * capacity)  # 0.05 means 5/100 exactly

"""The records of :func:`actmem.training_memory`'s answer: one GPU's bytes
by part and at its peak (:class:`StageMemory`), and every stage's with the
verdict against the GPU's capacity (:class:`TrainingMemory`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .job.record_fields import check_fields, records
from .reserve import ReserveParts
from .moments.timeline import StageTimeline
from ..validate import instance, optional, positive_int

PARTS = ("weights", "gradients", "optimizer", "layer_activations",
         "embedding_activations", "output_activations", "recompute_working_set",
         "reserve")
"""The parts of a stage's memory, in the order figures stack them."""


@dataclass(frozen=True)
class StageMemory:
    """Bytes one GPU of pipeline stage ``stage`` holds at its peak, by part
    (:data:`PARTS`). ``reserve_parts``: the default reserve's parts
    (:class:`actmem.run.reserve.ReserveParts`, whose total is ``reserve``),
    or None when the reserve was given (or is 0 without a GPU preset).
    ``gradients`` counts a 16-bit gradient buffer's fp32 copies, which the
    optimizer step holds beside it (``ModelStates.step_gradients``)."""

    stage: int
    weights: int
    gradients: int
    optimizer: int
    layer_activations: int
    embedding_activations: int
    output_activations: int
    recompute_working_set: int
    reserve: int
    # compared too: the peak is the timeline's (two plans that differ only in
    # when things are alive, e.g. the loss, are not the same plan)
    timeline: StageTimeline | None = field(default=None, repr=False)
    # pinned host bytes of activation offloading (actmem.run.moments.offload), not on the GPU
    host_memory: int = field(default=0, repr=False)
    reserve_parts: ReserveParts | None = field(default=None, repr=False)

    def __post_init__(self):
        """Raises TypeError, ValueError: a stage or bytes that are not
        integers >= 0, a timeline that is not None or a
        :class:`actmem.run.moments.timeline_events.StageTimeline`."""
        check_fields(self, _STAGE)

    @property
    def peak(self) -> int:
        """The largest total alive at one moment of the step (bytes): what
        ``torch.cuda.max_memory_allocated()`` reports on this GPU
        (:attr:`timeline`'s peak event)."""
        return self.timeline.peak.total

    @property
    def needed(self) -> int:
        """:attr:`peak` plus the reserve for what lives outside PyTorch's
        allocator (CUDA context, NCCL buffers), bytes: what must fit."""
        return self.peak + self.reserve

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

    def __post_init__(self):
        """Raises TypeError, ValueError: stages that are not a non-empty
        tuple of :class:`StageMemory`, a GPU memory that is not None or an
        integer >= 1 (bytes)."""
        check_fields(self, _TRAINING)

    @property
    def most_loaded(self) -> StageMemory:
        """The stage whose GPU needs the most at its peak (the first one if
        tied)."""
        return max(self.stages, key=lambda stage: stage.needed)

    @property
    def margin(self) -> int | None:
        """``gpu_memory - most_loaded.needed`` (negative: does not fit)."""
        return None if self.gpu_memory is None else self.gpu_memory - self.most_loaded.needed

    @property
    def fits(self) -> bool | None:
        """Whether the most loaded stage fits, or None without ``gpu_memory``."""
        return None if self.gpu_memory is None else self.margin >= 0


_STAGE = {"timeline": lambda name, value: optional(
    lambda n, v: instance(n, v, StageTimeline, "stage_timeline(...)"), name, value),
          "reserve_parts": lambda name, value: optional(
    lambda n, v: instance(n, v, ReserveParts, "ReserveParts(...)"), name, value)}
_TRAINING = {"stages": lambda name, value: records(StageMemory, name, value),
             "gpu_memory": lambda name, value: optional(positive_int, name, value)}

"""The data of a timeline: its events, its byte categories, and what a pass
and a layer hold at the moments :mod:`actmem.run.moments.timeline` looks at.

:func:`actmem.run.moments.timeline.stage_timeline` walks a stage's operations and
makes the :class:`Event` s; :mod:`actmem.run.moments.pass_parts` and
:mod:`actmem.run.moments.precision` fill :class:`LayerMoments` and :class:`Pass`
from the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..job.record_fields import check_fields, int_tuple, one_of, records
from ...validate import positive_int

CATEGORIES = ("weights", "gradients", "optimizer", "activations", "logits_loss",
              "transient", "workspace")
"""What bytes are for, in the order figures stack them."""
MOMENTS = ("during", "after")
"""When an :class:`Event` is: inside an operation, or after it."""


@dataclass(frozen=True)
class Event:
    """One moment of a stage's training step and the bytes alive then.

    Attributes:
        label: what happens, e.g. ``"loss of micro-batch 3"``.
        op: the schedule's operation as printed (``"F3"``, ``"B0/1"``), or
            ``""`` before the step and for the optimizer.
        moment: ``"during"`` (inside an operation) or ``"after"``.
        bytes: bytes alive by category, in :data:`CATEGORIES` order.
    """

    label: str
    op: str
    moment: str
    bytes: tuple[int, ...]

    def __init__(self, label: str, op: str, moment: str, bytes: tuple[int, ...]):
        """Raises TypeError, ValueError: a label or op that is not a str, a
        moment not in :data:`MOMENTS`, bytes that are not one integer >= 0
        per category. Written out (not the dataclass's ``__init__``): a run
        makes thousands of events, and the plain case costs a few type tests."""
        fields = self.__dict__  # frozen: set once, here
        fields["label"], fields["op"], fields["moment"], fields["bytes"] = label, op, moment, bytes
        if not (type(label) is str and type(op) is str and type(moment) is str
                and moment in MOMENTS and type(bytes) is tuple and len(bytes) == len(CATEGORIES)
                and {*map(type, bytes)} == {int} and min(bytes) >= 0):
            check_fields(self, _EVENT)

    @classmethod
    def _of(cls, label: str, op: str, moment: str, bytes: tuple[int, ...]) -> "Event":
        """An event without the checks, for :mod:`actmem.run.moments.timeline`,
        whose bytes come from one method that checks them (``_Step.alive``):
        a planner's change makes hundreds of events, and checked they took a
        quarter of ``training_memory``'s time right after a figure was drawn
        (sampled with py-spy)."""
        event = object.__new__(cls)
        fields = event.__dict__
        fields["label"], fields["op"], fields["moment"], fields["bytes"] = label, op, moment, bytes
        return event

    @property
    def by_category(self) -> dict[str, int]:
        """Category -> bytes."""
        return dict(zip(CATEGORIES, self.bytes))

    @property
    def total(self) -> int:
        """All bytes alive at this moment (what the allocator holds)."""
        return sum(self.bytes)


@dataclass(frozen=True)
class LayerMoments:
    """One layer's bytes at the moments the timeline looks at (one GPU, one
    micro-batch).

    Attributes:
        kept: the layer's saved bytes under the run's recomputation.
        full: the layer's saved bytes without recomputation.
        to_softmax: the rows without recomputation up to and including the
            softmax output (0 without a stored map).
        scores: one pre-softmax score tensor, the map's size (0 with
            FlashAttention).
        checkpoint: bytes of a full-recomputation checkpoint (the layer input).
        recompute: ``"none"``, ``"selective"`` or ``"full"``; group: layers per
            checkpointed group (full).
        score_gradients: bytes of the softmax's gradients ``dP`` and ``dS``
            together (None: twice ``scores``, as in 16-bit training).
        mlp_gradients: bytes alive beside the rows while the MLP's second
            linear is differentiated (its output's gradient, the dropout's,
            its input's and its weight's gradient), or 0: not looked at.
        weight_rows: bytes of the layer's rows its weight-gradient step (W)
            reads, held from the input-gradient step (I) to W
            (:func:`actmem.run.schedule.split_backward.weight_gradient_bytes`); None:
            the whole pass stays until W, as PyTorch 2.13 keeps it (measured,
            :mod:`actmem.measure.pipeline`).
        dispatch, dispatch_backward: transient bytes of an MoE layer's token
            dispatch at its busiest moment of the forward (after the routed
            experts, while the combine runs) and of the backward (the
            combine's gradients), 0 for a dense layer
            (:func:`actmem.run.moments.moe_dispatch.dispatch_buffers`).
        to_dispatch: the MoE layer's rows alive at that forward moment (its
            rows up to the MoE block, under the run's recomputation).
        to_dispatch_recomputed: the same rows without recomputation: under
            full recomputation the backward runs the layer's forward again
            with its dispatch buffers beside them.
        rebuilt: bytes selective recomputation rebuilds at once in the
            layer's backward, when it differs from every dropped row
            (``full - kept``): named modules rebuild one block at a time
            (:func:`actmem.layer.recompute_modules.working_set`); None: all
            dropped rows (the core attention alone).
        exchange, exchange_backward: transient bytes of a context-parallel
            attention's exchange buffers at its busiest forward and backward
            moment, 0 at cp = 1 (:mod:`actmem.run.moments.cp_timeline`).
        to_attention, to_attention_recomputed: the layer's rows up to its
            attention output, under the run's recomputation and without.
        attention_recomputed: the backward runs the attention's forward
            again (full recomputation, or selective with ``core_attn``),
            with its exchange buffers.
    """

    kept: int
    full: int
    to_softmax: int
    scores: int
    checkpoint: int
    recompute: str
    group: int
    weight_rows: int | None = None
    score_gradients: int | None = None
    mlp_gradients: int = 0
    dispatch: int = 0
    dispatch_backward: int = 0
    to_dispatch: int = 0
    to_dispatch_recomputed: int = 0
    rebuilt: int | None = None
    exchange: int = 0
    exchange_backward: int = 0
    to_attention: int = 0
    to_attention_recomputed: int = 0
    attention_recomputed: bool = False

    def __post_init__(self):
        """Raises TypeError, ValueError: bytes that are not integers >= 0
        (None where allowed), ``recompute`` not ``"none"``, ``"selective"``
        or ``"full"``, ``group`` < 1."""
        check_fields(self, _MOMENTS)

    @property
    def selective_working_set(self) -> int:
        """What selective recomputation rebuilds at once (:attr:`rebuilt`)."""
        return self.full - self.kept if self.rebuilt is None else self.rebuilt

    @property
    def softmax_gradients(self) -> int:
        """Bytes of ``dP`` and ``dS`` beside the saved rows (0 without a map)."""
        return 2 * self.scores if self.score_gradients is None else self.score_gradients


@dataclass(frozen=True)
class Pass:
    """What one forward pass through a model chunk keeps until its backward,
    besides its layers: ``embedding`` (first chunk of the first stage),
    ``output`` (the output layer's inputs and the loss's targets) and
    ``logits_loss`` (what the loss saved), both on the last chunk of the last
    stage; ``loads_data``: the stage loads the micro-batch for this chunk (its
    attention mask is alive during the forward); ``last``: the loss runs here."""

    embedding: int = 0
    output: int = 0
    logits_loss: int = 0
    loads_data: bool = False
    last: bool = False

    def __post_init__(self):
        """Raises TypeError, ValueError: bytes that are not integers >= 0,
        flags that are not bools."""
        check_fields(self)


@dataclass(frozen=True)
class StageTimeline:
    """The events of one stage's training step, in order.

    Attributes:
        stage: the pipeline stage (0 = first). events: the :class:`Event` s.
    """

    stage: int
    events: tuple[Event, ...]

    def __post_init__(self):
        """Raises TypeError, ValueError: a stage that is not an integer >= 0,
        events that are not a non-empty tuple of :class:`Event` s."""
        check_fields(self, {"events": lambda name, value: records(Event, name, value)})

    @classmethod
    def _walked(cls, stage: int, walk, peak: Event) -> "StageTimeline":
        """A timeline whose events are made when first read, by ``walk()``
        (a tuple of :class:`Event` s), and whose ``peak`` is known: a
        planner's readouts need only the peaks, and its figure, drawn after
        they are sent, the events (:mod:`actmem.run.moments.timeline`)."""
        timeline = object.__new__(cls)
        timeline.__dict__.update(stage=stage, peak=peak, _walk=walk)
        return timeline

    def __getattr__(self, name: str):
        """The events of a timeline made by :meth:`_walked`, on first read."""
        walk = self.__dict__.get("_walk")
        if name != "events" or walk is None:
            raise AttributeError(f"'StageTimeline' object has no attribute {name!r}")
        self.__dict__["events"] = events = walk()
        return events

    @cached_property  # a frozen record: found once (planners read it many times)
    def peak(self) -> Event:
        """The first event with the largest total."""
        return max(self.events, key=lambda e: e.total)


_EVENT = {"moment": one_of(MOMENTS),
          "bytes": lambda name, value: int_tuple(name, value, len(CATEGORIES))}
_MOMENTS = {"recompute": one_of(("none", "selective", "full")), "group": positive_int}

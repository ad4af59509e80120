"""What is alive when: one training step of one GPU as a sequence of events.

A GPU's peak is not the sum of everything it ever holds: it is the largest
total alive at one moment. For one GPU of pipeline stage ``i`` this module
walks the stage's operations (:func:`actmem.simulate_schedule`) and, at each
moment that can set the peak, adds the bytes alive by category
(:data:`CATEGORIES`):

* before the step: weights, optimizer states, the gradient buffer if it is
  persistent, and the workspaces (:mod:`actmem.framework`);
* inside a forward pass through a chunk: the passes already held, the
  chunk's layers so far and, where the attention map is stored, the last
  layer's pre-softmax scores beside its softmax output (the rows of the
  ledger up to ``softmax_output`` are alive at that moment, the later ones not
  yet); the data loader's mask on the stages that load data;
* the loss, on the last virtual stage: every layer's activations of the pass,
  the output layer's inputs and what the loss implementation holds in its
  forward (the logits and their copies);
* inside a backward pass: first, on the last stage, the loss's backward;
  then the chunk's last layer being differentiated (the loss's and the output
  layer's saved tensors are freed by then): its MLP's second linear, beside
  the gradients of the layer output, the dropout, that linear's input and,
  unless fused into the buffer, its weight (``LayerMoments.mlp_gradients``);
  with a stored map its
  softmax gradient (``dP`` and ``dS``, each the map's size, beside the saved
  ``P`` and the rows before it), and what recomputation rebuilds (selective:
  the layer's attention core; full: the group's layers from its checkpoint,
  whose input *is* the checkpoint); a tied output weight's gradient waits
  there for the embedding's on a GPU that holds both (``tied_gradient``);
* under autocast, the bf16 copies of the weights (``copies``): all of them
  cached through the forward and the loss, the weights' saved by their
  linears until each one's backward;
* after every operation: what stays (the ledger's rows of the passes in
  flight, Korthikanti et al. 2022 sec. 4.2.3), and gradients once the first
  backward pass has created them when they are not persistent;
* a split backward (zero-bubble schedules): the input-gradient step (``I``)
  is a backward that leaves held what its weight-gradient step (``W``) reads
  (``LayerMoments.weight_rows``), and ``W`` frees it;
* under context parallelism, the last layer's attention in a forward and
  in a backward with its key/value exchange buffers
  (:mod:`actmem.run.moments.cp_timeline`);
* the optimizer step: model states and gradients (Megatron-LM's fused Adam
  updates in place), a 16-bit gradient buffer's fp32 copies
  (``ModelStates.step_gradients``) and, under Muon, its Newton-Schulz
  temporaries (``ModelStates.step_transient``).

The peak is the largest event, and the event that sets it is named.
Activation gradients smaller than a layer's ``sbh`` tensors are not modelled,
nor, in a first backward that creates them, the gradients made so far.
"""

from __future__ import annotations

from copy import copy
from operator import add, sub

from ..schedule.schedules import FORWARD, INPUT_GRAD, WEIGHT_GRAD, PipelineSchedule
from .timeline_backward import BackwardMoments
from .timeline_forward import ForwardMoments
from .timeline_events import CATEGORIES, Event, LayerMoments, Pass, StageTimeline

__all__ = ["CATEGORIES", "Event", "LayerMoments", "Pass", "StageTimeline", "stage_timeline"]


def stage_timeline(plan: PipelineSchedule, i: int, *, states: dict[str, int],
                   persistent_gradients: bool, workspace: int, passes: list[Pass],
                   layers: list[int], layer: LayerMoments, loss: dict[str, int],
                   mask: int, copies=None, tied_gradient: int = 0,
                   stacks=None, scores_in_workspace: bool = False) -> StageTimeline:
    """Stage ``i``'s events for one optimizer step.

    The peak is found at once by a walk over the step that makes no
    events; the events (the same walk, made into :class:`Event` s) are made
    when ``.events`` is first read: a planner's readouts need only the
    peaks, its figure the events, after the readouts are sent.

    Args:
        plan: the schedule. states: ``weights``, ``gradients`` and
            ``optimizer`` bytes on this GPU. persistent_gradients: the
            gradient buffer exists before the step. workspace: persistent
            workspace bytes. passes: one :class:`Pass` per model chunk.
        layers: layers of each model chunk. layer: :class:`LayerMoments`.
        loss: :func:`actmem.loss_bytes` of this run.
        mask: bytes of one micro-batch's attention mask (0 if none).
        copies: autocast's bf16 parameter copies
            (:class:`actmem.run.moments.autocast.AutocastCopies`), or None.
        tied_gradient: bytes of the output layer's weight gradient that
            waits for the embedding's when the two share one weight on this
            GPU (PyTorch's autograd engine, ``torch/csrc/autograd/engine.cpp``
            and ``input_buffer.cpp``: a node runs once all its inputs have
            arrived, so the tied weight's ``AccumulateGrad`` holds the first
            gradient in its input buffer until the embedding's backward).
        stacks: per model chunk, each layer's :class:`LayerMoments`, first
            layer first (a model that mixes dense and MoE layers,
            :func:`actmem.run.moments.moe_timeline.stage_stacks`); None: every layer
            is ``layer``, which gives the recomputation and k in any case.
        scores_in_workspace: the attention scores are written into a buffer
            the workspace already counts (Megatron-LM's global memory buffer),
            not into a new tensor.
    """
    step = _Step(states, persistent_gradients, workspace, passes, layers, layer, loss, mask,
                 copies or _NoCopies(), stacks)
    step.tied = tied_gradient
    step.scores_in_workspace = scores_in_workspace
    ops, chunked = plan.ops[i], plan.v > 1
    # the first of the largest, found without making events (made when read);
    # each walk on its own copy of the running state, sharing the kept moments
    index, peak = max(enumerate(copy(step).walk(ops)), key=_total)
    peak = _event(*peak, chunked)

    def events() -> tuple[Event, ...]:
        made = [_event(*moment, chunked) for moment in copy(step).walk(ops)]
        made[index] = peak   # the timeline's peak is one of its events
        return tuple(made)
    return StageTimeline._walked(i, events, peak)


def _total(numbered_moment) -> int:
    return numbered_moment[1][5]


def _event(label: str, op, moment: str, now: tuple, more, total: int, chunked: bool) -> Event:
    """The :class:`Event` of one moment of :meth:`_Step.walk` (``chunked``:
    the schedule has several model chunks per stage, named in labels)."""
    alive = now if more is None else tuple(map(add, now, more))
    if op is None:
        return Event._of(label, "", moment, alive)
    name = f"micro-batch {op.microbatch}" + (f", chunk {op.chunk}" if chunked else "")
    return Event._of(label.format(name=name), str(op), moment, alive)


_AFTER = {FORWARD: "after the forward of {name}",
          INPUT_GRAD: "after the input-gradient step of {name}",
          WEIGHT_GRAD: "after the weight-gradient step of {name}"}   # else "after the backward"
_HELD = {FORWARD: 1, WEIGHT_GRAD: 0}   # passes held before their I or B (else -1)
_WAITING = {INPUT_GRAD: 1, WEIGHT_GRAD: -1}   # passes between their I and W (else 0)


def _checked(alive: tuple) -> tuple:
    """``alive``, bytes by category, refused if a count is negative: the
    events are made unchecked (``Event._of``), their bytes checked here."""
    if min(alive) < 0:
        raise ValueError(f"negative bytes alive ({dict(zip(CATEGORIES, alive))}): "
                         "a fault of actmem's timeline, please report it")
    return alive


class _NoCopies:
    """No parameter copies (training without autocast)."""

    weights = biases = qkv_weights = qkv_biases = output = 0


class _Step(ForwardMoments, BackwardMoments):
    """The running state of one stage's step: passes held, gradients made
    (the moments of a backward pass: :class:`BackwardMoments`)."""

    def __init__(self, states, persistent_gradients, workspace, passes, layers, layer,
                 loss, mask, copies, stacks=None):
        self.states, self.passes, self.layers, self.layer = states, passes, layers, layer
        self.loss, self.mask, self.copies = loss, mask, copies
        self.workspace = workspace
        self.persistent_gradients = persistent_gradients
        self.tied = 0
        self.scores_in_workspace = False
        self.stacks = ([(layer,) * n for n in layers] if stacks is None
                       else [tuple(stack) for stack in stacks])   # each layer's moments
        # per chunk, summed once: events ask for them thousands of times
        self._layer_sums = [self._sum_layers(stack) for stack in self.stacks]
        self._other_sums = [self._sum_other_layers(stack) for stack in self.stacks]
        self._kept = [self.kept(c) for c in range(len(passes))]
        self._kept_to_w = [self._waiting(c) for c in range(len(passes))]
        self._moments = {}   # see moments

    def walk(self, ops):
        """(label, op, moment, bytes alive after the previous operation,
        bytes more at this moment or None, total) of each moment of the step,
        in order, ``ops`` the stage's operations: labels with ``{name}`` for
        the operation's micro-batch, op None before the step and at the
        optimizer. Each walk starts again from the step's start (the running
        state: passes held, gradients made, a tied gradient waiting). A
        moment's bytes are added up only by an event made of it: the peak
        needs the totals."""
        self._held_now = (0, 0, 0)   # what the passes held now keep, summed as _kept
        self.gradients_exist = self.persistent_gradients
        self.tied_waiting = 0
        now = self.alive()
        total = sum(now)
        yield "before the step", None, "after", now, None, total
        for op in ops:
            if op.kind != WEIGHT_GRAD:   # a W reads what its I left: no larger moment
                for label, more, added, freed in self.moments(op):
                    for c, n in freed:   # a count it lowers, checked against what is alive
                        if now[c] + n < 0:
                            _checked(tuple(map(add, now, more)))   # raises, naming them
                    yield label, op, "during", now, more, total + added
            self.take(op)
            now = self.alive()
            total = sum(now)
            label = _AFTER.get(op.kind, "after the backward of {name}")
            yield label, op, "after", now, None, total
        copies = self.states.get("step_gradients", 0)   # 16-bit buffers' fp32 copies
        step = self.states.get("step_transient", 0)      # Muon's Newton-Schulz
        yield ("optimizer step", None, "during", now, (0, copies, 0, 0, 0, step, 0)
               if copies or step else None, total + copies + step)

    def moments(self, op) -> tuple:
        """(label, bytes more than before ``op``, their sum, the categories
        it lowers as (index, bytes)) of the moments inside ``op``, a forward
        or a backward (B or I), each label with ``{name}`` for its
        micro-batch. What a moment adds to the bytes alive before
        the operation depends only on the operation's kind and chunk (and a
        tied gradient waiting), not on the passes held: kept, a pipeline's
        step computes each kind of moment once, and a planner recomputes
        the timeline at every change of a control."""
        forward = op.kind == FORWARD
        key = (forward, op.chunk, self.tied_waiting)
        if key not in self._moments:   # backward sets tied_waiting: kept with them
            before = self.alive()
            more = [(label, tuple(map(sub, alive, before))) for label, alive
                    in (self.forward if forward else self.backward)(op.chunk)]
            found = tuple((label, bytes_, sum(bytes_), tuple(
                (c, n) for c, n in enumerate(bytes_) if n < 0)) for label, bytes_ in more)
            self._moments[key] = found, self.tied_waiting
        found, self.tied_waiting = self._moments[key]
        return found

    def take(self, op) -> None:
        """Count ``op``: a forward holds a pass, a backward (B) frees it; an
        I frees all but what its W reads, which that W frees."""
        c = op.chunk
        if op.kind != FORWARD and self.passes[c].embedding:
            self.tied_waiting = 0   # the embedding's gradient arrived: summed
        held, waiting = _HELD.get(op.kind, -1), _WAITING.get(op.kind, 0)
        (a, l, w), (ka, kl, kw), (wa, wl, ww) = self._held_now, self._kept[c], self._kept_to_w[c]
        self._held_now = (a + held * ka + waiting * wa, l + held * kl + waiting * wl,
                          w + held * kw + waiting * ww)
        self.gradients_exist |= op.kind != FORWARD

    def _waiting(self, chunk: int) -> tuple[int, int, int]:
        """(activations, logits_loss, weight copies) a pass through ``chunk``
        keeps from I to W (W reads no weight: I frees their copies)."""
        if self.layer.weight_rows is None:
            return self._kept[chunk]
        return sum(m.weight_rows for m in self.stacks[chunk]), 0, 0

    def _layer_bytes(self, chunk: int) -> int:
        """What one pass keeps for the chunk's layers."""
        return self._layer_sums[chunk]

    def _sum_layers(self, stack) -> int:
        if self.layer.recompute == "full":
            return sum(m.checkpoint for m in stack[::self.layer.group])
        return sum(m.kept for m in stack)

    def kept(self, chunk: int) -> tuple[int, int, int]:
        """(activations, logits_loss, weight copies) one pass through ``chunk``
        keeps: autocast's copies of the weights its linears saved (none
        inside a full-recomputation checkpoint, whose forward saves nothing)."""
        p, copies = self.passes[chunk], self.copies
        layers = 0 if self.layer.recompute == "full" else self.layers[chunk]
        return (p.embedding + self._layer_bytes(chunk) + p.output, p.logits_loss,
                layers * copies.weights + (copies.output if p.last else 0))

    def alive(self, activations: int = 0, logits_loss: int = 0, transient: int = 0,
              weights: int = 0):
        """Bytes alive now by category, plus the given extra bytes."""
        held_activations, held_logits_loss, held_weights = self._held_now
        gradients = self.tied_waiting + (self.states["gradients"] if self.gradients_exist else 0)
        # in CATEGORIES order, a tuple, not a dict: a timeline makes thousands
        return _checked((self.states["weights"] + weights + held_weights, gradients,
                         self.states["optimizer"], activations + held_activations,
                         logits_loss + held_logits_loss, transient, self.workspace))

"""Megatron-FSDP's buffers on a step's timeline
(:mod:`actmem.run.model_states.megatron_fsdp` says what they are and when
they live): the timeline's moments in the last layer with them added, the
optimizer step with its copies and gathered layers, and in each pass the
layer boundary that holds the most. Gathered layers count as weights, the
gradient buckets and the optimizer's copies as gradients."""

from __future__ import annotations

import re
from dataclasses import replace

from ..model_states.megatron_fsdp import MegatronFSDP
from .timeline_events import CATEGORIES, Event, StageTimeline


def megatron_fsdp_timeline(timeline: StageTimeline, f: MegatronFSDP, stack, embedding: int,
                           tied: int) -> StageTimeline:
    """``timeline`` (one stage, made with :attr:`MegatronFSDP.states`) with
    Megatron-FSDP's buffers (module docstring).

    Args:
        stack: the layers' :class:`actmem.run.moments.timeline_events.LayerMoments`,
            first layer first (without full recomputation).
        embedding: a pass's embedding bytes. tied: the tied output weight's
            gradient, waiting through the backward (0: none).
    """
    forward = _forward_most(f, stack, embedding)   # the same in every pass
    backward = _backward_most(f, stack, embedding, tied)
    events, before = [], timeline.events[0]
    for event in timeline.events:
        if event.op.startswith("F") and event.op != before.op:
            name = re.search(r"micro-batch \d+", event.label).group(0)
            events.append(_plus(replace(before, label=f"forward of {name}: {FORWARD}",
                                        op=event.op, moment="during"), **forward))
        if event.label.startswith("after the backward of "):
            name = event.label.removeprefix("after the backward of ")
            moment = replace(event, moment="during")
            events += [_plus(replace(moment, label=f"backward of {name}: {label}"), **extra)
                       for label, extra in zip((BACKWARD, END), backward)]
        events.append(_plus(event, **_extra(event.label, f, stack)))
        before = event
    return replace(timeline, events=tuple(events))


def _plus(event: Event, **extra: int) -> Event:
    return replace(event, bytes=tuple(b + extra.get(c, 0)
                                      for c, b in zip(CATEGORIES, event.bytes)))


def _extra(label: str, f: MegatronFSDP, stack) -> dict[str, int]:
    """Megatron-FSDP's bytes at one of the timeline's events: inside the
    last layer's forward (the last MoE layer's, at its dispatch) and
    backward, and at the optimizer step."""
    last = f.layers - 1
    if label.startswith("forward of"):
        at = max(i for i, m in enumerate(stack) if m.dispatch) if "token dispatch" in label \
            else last
        return {"weights": f.forward_gathered(at)}
    if label.startswith("backward of"):
        at, _ = f.gradient_buckets
        own = [b.size for b in f.buckets if b.unit == last]
        made = (0 if "MoE combine" in label or "token dispatch" in label
                else own[-1] if "MLP" in label else sum(own))
        return {"weights": f.backward_gathered(last),
                "gradients": at[last] - f.grad_bytes * (sum(own) - made)}
    if label == "optimizer step":
        return {"weights": f.step_gathered, "gradients": f.optimizer_copies}
    return {}


def _forward_most(f: MegatronFSDP, stack, embedding: int) -> dict[str, int]:
    """The bytes a pass adds at the start of the layer forward that holds the
    most: the earlier layers' rows and the gathered layers."""
    held, best = 0, None
    for layer, moments in enumerate(stack):
        alive = dict(activations=embedding + held, weights=f.forward_gathered(layer))
        if best is None or sum(alive.values()) > sum(best.values()):
            best = alive
        held += moments.kept
    return best


def _backward_most(f: MegatronFSDP, stack, embedding: int, tied: int) -> tuple[dict, dict]:
    """The bytes a pass adds at the layer backward that holds the most at its
    gradients (its rows and the earlier layers', the gathered layers, the
    gradient buckets), and at the end of the backward (every bucket made,
    the reductions not yet freed)."""
    at, end = f.gradient_buckets
    held, best = 0, None
    for layer, moments in enumerate(stack):
        alive = dict(activations=embedding + held + moments.kept,
                     weights=f.backward_gathered(layer), gradients=at[layer] + tied)
        if best is None or sum(alive.values()) >= sum(best.values()):
            best = alive
        held += moments.kept
    return best, dict(activations=embedding, gradients=end)


FORWARD = "the layer forward that holds the most (activations, gathered layers; Megatron-FSDP)"
BACKWARD = ("the layer backward that holds the most (activations, gathered layers, gradient "
            "buckets; Megatron-FSDP)")
END = "end of the backward, before its gradient buckets are freed (Megatron-FSDP)"

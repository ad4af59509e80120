"""What the step timeline's figure marks besides the bytes: the forward and
backward passes, the loss, and the tall transients, each named.

:func:`actmem.views.fit_figures.timeline_figure` draws a stage's events in
order; this module reads the same :class:`actmem.run.moments.timeline.Event` s and
says where each backward pass lies (its events' positions), where each
loss is, and which transient tensors stand tall enough to name. Every name
comes from the event's own label (:mod:`actmem.run.moments.timeline`,
:mod:`actmem.run.moments.cp_timeline`, :mod:`actmem.run.model_states.fsdp`): the moment an
event records tells what its transient bytes are.
"""

from __future__ import annotations

import textwrap

from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch

from ..language import tr, translator
from ..units import format_bytes, to_gib
from .figures import OKABE_ITO
from .printed import event_label

LOSS_COLOUR = OKABE_ITO["vermillion"]
"""The loss marks' colour: the logits and loss category's."""

BACKWARD_OPS = ("B", "I", "W")
"""First letters of a schedule operation that is (part of) a backward pass:
a whole backward, its input-gradient step, its weight-gradient step."""

TALL = 0.03
"""A transient is named when it is at least this share of the panel's
height (a judgement: smaller ones are a sliver of the stacked area)."""
MOST_NAMED = 3
"""Transients named per panel at most (the largest kinds), so the panel
stays readable."""

TRANSIENT_NAMES = (
    ("its batch still loaded", "the batch's attention mask"),
    ("loss of ", "the batch's attention mask"),
    ("attention scores beside the softmax", "attention scores"),
    ("softmax gradient", "softmax gradients"),
    ("the last layer's MLP", "the MLP's gradients"),
    ("token dispatch", "MoE token dispatch"),
    ("MoE combine", "MoE combine gradients"),
    ("context-parallel attention", "context-parallel key/value exchange"),
    ("gradients made", "FSDP2 gathers and gradient buffers"),
    ("gathered", "FSDP2 gathers and gradient buffers"),
)
"""(phrase of an event label, what its transient bytes are), first match
wins: the data loader's mask is the only transient at the end of a forward
and at the loss (:meth:`actmem.run.moments.timeline._Step.forward`); the scores sit
beside it inside a forward that stores the attention map."""


def backward_spans(events) -> list[tuple[int, int]]:
    """(first, last) event positions of each run of consecutive events of
    one backward operation (``B``, ``I`` or ``W``; ``events`` in order)."""
    spans, current = [], None
    for i, event in enumerate(events):
        backward = event.op[:1] in BACKWARD_OPS
        if backward and current is not None and events[current[0]].op == event.op:
            current[1] = i
            continue
        if current is not None:
            spans.append(tuple(current))
        current = [i, i] if backward else None
    if current is not None:
        spans.append(tuple(current))
    return spans


def loss_positions(events) -> list[int]:
    """Positions of the loss's forward moments (``"loss of ..."``)."""
    return [i for i, e in enumerate(events) if e.label.startswith("loss of ")]


def transient_name(label: str) -> str:
    """What an event's transient bytes are, from its label (English; the
    label itself when no phrase of :data:`TRANSIENT_NAMES` is in it)."""
    return next((name for phrase, name in TRANSIENT_NAMES if phrase in label), label)


def tall_transients(events, height: float) -> list[tuple[int, str, int]]:
    """(position, name, bytes) of the transients to name: for each kind
    (:func:`transient_name`), its first event with the kind's most bytes,
    if those are at least :data:`TALL` of ``height`` (bytes, the panel's
    height); the :data:`MOST_NAMED` largest, in order of position. The
    peak's own transient is named too: its label names the moment, not
    what the transient bytes are."""
    largest: dict[str, tuple[int, int]] = {}
    for i, event in enumerate(events):
        size = event.by_category["transient"]
        if size >= TALL * height and size > 0:
            name = transient_name(event.label)
            if size > largest.get(name, (0, -1))[1]:
                largest[name] = (i, size)
    chosen = sorted(largest.items(), key=lambda item: -item[1][1])[:MOST_NAMED]
    return sorted((i, name, size) for name, (i, size) in chosen)


# ------------------------------------------------------------------ drawing

def new_marks(ax) -> dict:
    """A panel's mark artists, empty: the backward passes' shading (one
    PolyCollection, full height, behind the stacked areas), the loss marks
    (one Line2D along the panel's top) and the transients' labels (a list
    of annotations, made anew at each draw)."""
    spans = PolyCollection([], facecolor="0.6", alpha=0.22, linewidths=0, zorder=0.5,
                           transform=ax.get_xaxis_transform())
    ax.add_collection(spans, autolim=False)
    losses, = ax.plot([], [], linestyle="none", marker="D", markersize=4,
                      color=LOSS_COLOUR, transform=ax.get_xaxis_transform(), clip_on=False)
    return {"spans": spans, "losses": losses, "transients": []}


def draw_marks(marks: dict, events) -> None:
    """Shade each backward pass and mark each loss of ``events``."""
    marks["spans"].set_verts([[(a - 0.5, 0), (b + 0.5, 0), (b + 0.5, 1), (a - 0.5, 1)]
                              for a, b in backward_spans(events)])
    at = loss_positions(events)
    marks["losses"].set_data(at, [0.985] * len(at))
    marks["losses"].set_label(tr("loss (forward)") if at else "_loss")


def name_transients(marks: dict, ax, stage, top: float) -> list:
    """Label the stage's tall transients (:func:`tall_transients`, ``top``
    the panel's height in GiB) at the bottom of the panel, each with an
    arrow to its event; the labels of an earlier draw are removed first.
    Returns the new labels."""
    for old in marks["transients"]:
        old.remove()
    events = stage.timeline.events
    found = tall_transients(events, top * 2**30)
    labels = []
    for k, (i, name, size) in enumerate(found):
        left = i < len(events) / 2
        text = tr("{size} transient: {what}").format(size=format_bytes(size, "GiB"),
                                                    what=_translated(name))
        labels.append(ax.annotate(
            "\n".join(textwrap.wrap(text, 28, break_on_hyphens=False)), (i, to_gib(events[i].total)),
            xytext=(i, 0.06 + 0.13 * k), textcoords=ax.get_xaxis_transform(), fontsize=7,
            ha="left" if left else "right", va="bottom",
            arrowprops=dict(arrowstyle="-", color="black", linewidth=0.6),
            bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.9, linewidth=0)))
    marks["transients"] = labels
    return labels


def _translated(name: str) -> str:
    """A transient's name in the learner's language: a name of
    :data:`TRANSIENT_NAMES` from the catalog, an event label as the
    timeline's labels are translated."""
    if name in {known for _, known in TRANSIENT_NAMES}:
        return tr(name)
    return event_label(name, translator())


def legend_entries() -> dict:
    """The legend entry of the backward passes' shading (label -> handle)."""
    return {tr("backward pass (shaded)"): Patch(facecolor="0.6", alpha=0.22, linewidth=0)}

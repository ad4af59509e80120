"""The step timeline's marks (review (d) item 4): backward passes shaded,
losses marked, tall transients named by what they are; the stage figure's
peak beside the sum of the parts."""

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

import actmem
from actmem import PRESETS, fit_figures, training_memory
from actmem.run.moments.timeline_events import Event
from actmem.views.timeline_marks import (backward_spans, loss_positions, tall_transients,
                                         transient_name)

GIB = 2**30
LLAMA = PRESETS["llama2-7b"]
LONG = PRESETS["llama3-8b"].with_(s=131072)


def event(label, op, transient=0, total=10 * GIB):
    return Event(label, op, "during", (total - transient, 0, 0, 0, 0, transient, 0))


def test_backward_spans_group_the_events_of_one_backward_operation():
    r = training_memory(LLAMA, t=2, p=2, d=2, m=8)
    events = r.stages[1].timeline.events
    # stage 1 (last) under 1F1B: before, then per micro-batch the loss and after
    # the forward (F), the loss backward, two moments inside and after (B)
    spans = backward_spans(events)
    assert len(spans) == 8 and spans[0] == (3, 6)
    assert all(events[i].op == f"B{k}" for k, (a, b) in enumerate(spans) for i in (a, b))
    assert loss_positions(events) == [1 + 6 * k for k in range(8)]
    zb = training_memory(LLAMA, p=2, m=4, v=2, schedule="zbv").stages[0].timeline.events
    assert {zb[a].op[0] for a, _ in backward_spans(zb)} == {"I", "W"}


@pytest.mark.parametrize("label, name", [
    ("end of the forward of micro-batch 0, its batch still loaded", "the batch's attention mask"),
    ("loss of micro-batch 3", "the batch's attention mask"),
    ("forward of micro-batch 1: attention scores beside the softmax", "attention scores"),
    ("backward of micro-batch 0: the last layer's MLP", "the MLP's gradients"),
    ("backward of micro-batch 0: softmax gradient, recomputing", "softmax gradients"),
    ("backward of micro-batch 0: the last layer's context-parallel attention",
     "context-parallel key/value exchange"),
    ("something new of micro-batch 2", "something new of micro-batch 2"),
])
def test_a_transient_is_named_from_its_event(label, name):
    assert transient_name(label) == name


def test_only_tall_transients_are_named_each_kind_once_at_its_largest():
    events = [event("before the step", ""),
              event("end of the forward of micro-batch 0, its batch still loaded", "F0", 2 * GIB),
              event("backward of micro-batch 0: the last layer's MLP", "B0", GIB // 100),
              event("end of the forward of micro-batch 1, its batch still loaded", "F1", 3 * GIB),
              event("loss of micro-batch 1", "F1", 3 * GIB)]
    # height 50 GiB: 3 % is 1.5 GiB; the MLP's 10 MiB is too small to name; the
    # mask's largest (3 GiB) is first met at position 3
    assert tall_transients(events, 50 * GIB) == [(3, "the batch's attention mask", 3 * GIB)]
    assert tall_transients(events, 500 * GIB) == []


def texts_overlap(fig):
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # the texts' own boxes (an annotation's extent also covers its arrow)
    boxes = [Text.get_window_extent(t, renderer) for ax in fig.axes for t in ax.texts
             if t.get_text()]
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]


def test_the_long_run_names_its_mask_and_its_exchange_without_overlapping_text():
    r = training_memory(LONG, t=8, cp=2, gpu_memory="H100 80GB SXM")
    fig = fit_figures.timeline_figure(r, "long")
    ax = fig.axes[0]
    named = [t.get_text().replace("\n", " ") for t in ax.texts[1:]]
    assert len(named) == 2
    assert named[0].endswith("transient: context-parallel key/value exchange")
    assert named[1].endswith("transient: the batch's attention mask")
    mask = r.stages[0].timeline.peak.by_category["transient"]
    assert named[1].startswith(actmem.format_bytes(mask, "GiB"))
    assert texts_overlap(fig) == []
    legend = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert {"backward pass (shaded)", "loss (forward)"} <= set(legend)


def test_a_redraw_replaces_the_named_transients():
    fig = fit_figures.timeline_figure(training_memory(LONG, t=8, cp=2))
    assert len(fig.axes[0].texts) == 3
    fit_figures.timeline_figure(training_memory(LLAMA, t=8, cp=2), fig=fig)
    assert len(fig.axes[0].texts) == 1   # the peak's label: no tall transient at s = 4096


def test_the_stage_figure_shows_the_peak_beside_the_sum():
    r = training_memory(LLAMA, t=2, p=2, d=2, m=8, gpu_memory="A100 80GB", reserve=0)
    ax = fit_figures.stage_memory_figure(r).axes[0]
    peaks = next(c for c in ax.collections if c.get_label() == "peak (one moment)")
    ys = sorted({round(float(y) * GIB) for seg in peaks.get_segments() for _, y in seg})
    assert ys == sorted(s.peak for s in r.stages)
    assert [t.get_text() for t in ax.texts] == [
        f"sum {actmem.format_value(s.total, 'GiB')}\npeak {actmem.format_value(s.peak, 'GiB')}"
        for s in r.stages]
    assert texts_overlap(ax.figure) == []

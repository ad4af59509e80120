"""The expert review's figure findings (issue 20, teaching-review.md, 04 and
05): titles that say what the figure shows, labels of at least 9 pt, lines
told apart, box numbers drawn where a box holds them; and the redraws that
keep the explorers' figures fast (issue 19), shown to give what a full
drawing gives. No pixel comparison with stored images."""

import io
import json
from pathlib import Path

import numpy as np
import PIL.Image
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_hex

import actmem
from actmem import figures, schedule_figures
from actmem.views.redraw import png
from actmem.views.schedule_views import chunk_choices, stage_choices

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WORKED = actmem.activation_memory(2048, 1, 4096, 32, 8)  # M = 184 MiB


def numbers_and_bands(chart):
    """The chart's box numbers and the bands behind them (PathCollections,
    numbers drawn above)."""
    found = sorted((c for c in chart.collections if isinstance(c, PathCollection)),
                   key=lambda c: -c.get_zorder())
    return found + [None] * (2 - len(found))


def test_first_stage_chart_says_under_1f1b_and_writes_interleavings_excess():
    fig = schedule_figures.first_stage_figure(WORKED, 32, 16)
    ax = fig.axes[0]
    assert ax.get_title().startswith("Under 1F1B p cancels")
    labels = [t.get_text() for t in ax.texts]
    # interleaved v=2 at p = 2, 4, 8: 1 + (p-1)/(2p) of L*M = 5888 MiB; p = 16 = m: all warm-up
    assert labels[-4:] == ["7360\n+25.0%", "8096\n+37.5%", "8464\n+43.8%", "5888\n+0.0%"]
    assert labels[:5] == ["5888"] * 5
    assert min(t.get_fontsize() for t in ax.texts) >= 9
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("% over L*M" in text for text in legend)


def test_terms_against_t_labels_are_at_least_9_points():
    fig = figures.terms_vs_t_figure(2048, 1, 4096, 32, highlight=8)
    ax = fig.axes[0]
    *bars, ylabel = ax.texts  # the y label: an annotation beside the axis
    assert [t.get_text() for t in bars] == ["912", "496", "288", "184", "132", "106"]
    assert ylabel.get_text().startswith("activation memory (MiB)")
    sizes = [t.get_fontsize() for t in [*ax.texts, *ax.get_legend().get_texts(),
                                        *ax.get_xticklabels(), *ax.get_yticklabels()]]
    assert min(sizes) >= 9


@pytest.mark.parametrize("p", [8, 16])
def test_every_stage_line_has_its_own_colour_and_style(p):
    few = actmem.simulate_schedule("1f1b", p=p, m=3)  # m < p: lines on top of each other
    held = schedule_figures.schedule_figure(few).axes[1]
    looks = [(to_hex(line.get_color()), line.get_linestyle()) for line in held.lines]
    assert len(looks) == p and len(set(looks)) == p
    assert len({colour for colour, _ in looks}) == min(p, 8)
    # neighbours never share a style
    assert all(a[1] != b[1] for a, b in zip(looks, looks[1:]))


@pytest.mark.parametrize("p", [p for p in stage_choices(32) if p <= 8])
def test_box_numbers_are_drawn_at_every_p_up_to_8(p):
    """The explorer's default m = 8 with every v it offers (L = 32): one
    number per box, at least 5 pt high, and a band behind each number in a
    hatched box in that box's colour."""
    for v in [1, *chunk_choices(32, p)]:
        schedule = actmem.simulate_schedule("1f1b" if v == 1 else "interleaved", p, 8, v)
        chart = schedule_figures.schedule_figure(schedule).axes[0]
        numbers, bands = numbers_and_bands(chart)
        ops = sum(len(stage) for stage in schedule.ops)
        assert len(numbers.get_paths()) == ops
        size = schedule_figures.digit_size(schedule)
        assert size >= 5 and "box numbers: micro-batch" in chart.get_title()
        heights = {round(path.get_extents().height, 3) for path in numbers.get_paths()}
        assert min(heights) >= 0.7 * size  # digits' height at that font size, in points
        boxes = [c for c in chart.collections if isinstance(c, PolyCollection)][0]
        if v > 1:  # chunks >= 1 (v-1 of every v boxes), hatched as one path of 5 vertices a box
            later = sum(op.chunk > 0 for stage in schedule.ops for op in stage)
            hatching = chart.patches[0]
            assert hatching.get_hatch() == "//" and later == ops * (v - 1) // v
            assert len(bands.get_offsets()) == len(hatching.get_path().vertices) // 5 == later
            assert {to_hex(c) for c in bands.get_facecolors()} <= \
                {to_hex(c) for c in boxes.get_facecolors()}
        else:
            assert bands is None and len(chart.patches) == 0


def test_boxes_too_narrow_get_no_numbers_and_the_title_says_so():
    schedule = actmem.simulate_schedule("1f1b", 16, 32)
    chart = schedule_figures.schedule_figure(schedule).axes[0]
    assert schedule_figures.digit_size(schedule) is None
    assert numbers_and_bands(chart) == [None, None]
    assert "boxes too narrow for micro-batch numbers" in chart.get_title()


@pytest.mark.parametrize("name", ["05_training_run.ipynb", "zh/05_training_run.ipynb"])
def test_notebook_05_points_to_08_instead_of_a_box_diagram(name):
    cells = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert any("notebook 09 puts a number on every part" in c for c in code)


def image(fig) -> np.ndarray:
    return np.asarray(PIL.Image.open(io.BytesIO(png(fig))))


def test_a_kept_background_is_used_again_for_its_key(monkeypatch):
    """After interleaved (another legend: another key) and back, 1F1B's
    figure is drawn on its kept background, without a full drawing, and
    shows what a full drawing shows."""
    one = actmem.simulate_schedule("1f1b", 4, 8)
    fig = schedule_figures.schedule_figure(one)
    first = image(fig)
    fig = schedule_figures.schedule_figure(actmem.simulate_schedule("interleaved", 4, 8, 2),
                                           fig=fig)
    image(fig)
    draws = []
    monkeypatch.setattr(fig.canvas, "draw", lambda: draws.append(1))
    again = image(schedule_figures.schedule_figure(one, fig=fig))
    assert draws == []
    assert np.count_nonzero((again != first).any(axis=2)) <= 2


def test_going_back_to_a_p_reuses_its_figure():
    four = actmem.simulate_schedule("1f1b", 4, 8)
    fig = schedule_figures.schedule_figure(four)
    png(fig)
    eight = schedule_figures.schedule_figure(actmem.simulate_schedule("1f1b", 8, 8), fig=fig)
    assert eight is not fig
    assert schedule_figures.schedule_figure(four, fig=eight) is fig

"""Figures redrawn in place (issue 10 item 18): the same Figure and Axes,
and exactly what a new figure of the same data shows (no artist left over
from the previous data, limits recomputed)."""

import io

import numpy as np
import PIL.Image
import pytest

import actmem
from actmem import figures, fit_figures, schedule_figures
from actmem.views.redraw import BLIT, figure_axes, png
from actmem.views.variant_views import stacked_figure

LAYER = dict(s=2048, b=1, h=4096, a=32)


def shown(fig) -> list:
    """Everything a reader sees, axes by axes: texts, titles, tick labels,
    legend entries, limits, and how many of each kind of artist."""
    out = [fig._suptitle.get_text() if fig._suptitle else None]
    for ax in fig.axes:
        legend = ax.get_legend()
        out.append((
            sorted(t.get_text() for t in ax.texts), ax.get_title(),
            [t.get_text() for t in ax.get_xticklabels()],
            [t.get_text() for t in ax.get_yticklabels()],
            [t.get_text() for t in legend.get_texts()] if legend else None,
            tuple(round(v, 6) for v in (*ax.get_xlim(), *ax.get_ylim())),
            len(ax.patches), len(ax.lines), len(ax.collections), ax.axison,
        ))
    return out


def schedule(p, m, kind="1f1b"):
    return actmem.simulate_schedule(kind, p=p, m=m)


def fit(preset, **run):
    return actmem.training_memory(actmem.PRESETS[preset], gpu_memory=80 * 2**30, **run)


CASES = {
    "sharding": (figures.sharding_figure, [dict(**LAYER, t=2), dict(**LAYER, t=1),
                                           dict(**LAYER, t=8)]),
    "terms_vs_t": (figures.terms_vs_t_figure, [dict(**LAYER, highlight=8),
                                               dict(LAYER, s=8192, highlight=2)]),
    "stacked": (stacked_figure, [
        dict(results={"a": actmem.activation_memory(**LAYER, t=8), "b":
                      actmem.activation_memory(**LAYER, t=8, flash_attention=True)},
             title="one"),
        dict(results={"a": actmem.activation_memory(**LAYER, t=2), "b":
                      actmem.activation_memory(**LAYER, t=2, recompute="full")},
             title="two")]),
    "schedule": (schedule_figures.schedule_figure, [
        dict(schedule=schedule(4, 8)), dict(schedule=schedule(4, 12, "gpipe")),
        dict(schedule=actmem.simulate_schedule("interleaved", p=4, m=8, v=2))]),
    "stage_memory": (fit_figures.stage_memory_figure, [
        dict(result=fit("llama2-7b", t=2, p=2)),
        dict(result=fit("gpt3-175b", t=8, p=8, recompute="full"), title="big")]),
}


@pytest.mark.parametrize("name", CASES)
def test_redrawn_figure_shows_what_a_new_one_shows(name):
    draw, calls = CASES[name]
    fig = draw(**calls[0])
    png(fig)
    for kwargs in calls[1:] + calls[:1]:
        again = draw(**kwargs, fig=fig)
        assert again is fig  # same size and grid: redrawn in place
        png(fig)
        assert shown(fig) == shown(draw(**kwargs))


def test_a_figure_of_another_size_is_built_new():
    fig = schedule_figures.schedule_figure(schedule(4, 8))
    other = schedule_figures.schedule_figure(schedule(8, 8), fig=fig)
    assert other is not fig and other.get_size_inches()[1] > fig.get_size_inches()[1]


def test_figure_axes_reuses_only_its_own_grid():
    fig, ax = figure_axes(None, (4, 3))
    ax.plot([0, 1], [0, 5])
    again, ax2 = figure_axes(fig, (4, 3))
    assert again is fig and ax2 is ax and not ax.lines
    assert figure_axes(fig, (4, 3), 2, 1)[0] is not fig


def test_png_is_a_72_dpi_image_of_the_figure():
    fig = figures.terms_vs_t_figure(**LAYER)
    image = PIL.Image.open(io.BytesIO(png(fig)))
    assert image.format == "PNG" and image.size == (8 * 72, int(4.5 * 72))


def test_a_wider_legend_is_laid_out_again():
    """A redraw keeps the first layout unless a legend would spill over
    the figure's edge."""
    fig = fit_figures.stage_memory_figure(fit("llama2-7b", t=2, p=2))
    png(fig)
    fig = fit_figures.stage_memory_figure(fit("gpt3-175b", t=8, p=8, recompute="full"),
                                          fig=fig)
    png(fig)
    legend = fig.axes[0].get_legend().get_window_extent()
    assert legend.x1 <= fig.bbox.x1 + 1


def test_wider_tick_labels_still_fit():
    """s = 8192 gives five-digit ticks: the y label must not be cut off at
    the left edge (a learner's review of notebook 04); the figure's fixed
    margins leave room for them, and png would lay it out again if not."""
    fig = figures.terms_vs_t_figure(2048, 1, 4096, 32, highlight=8)
    png(fig)
    fig = figures.terms_vs_t_figure(8192, 1, 4096, 32, highlight=8, fig=fig)
    png(fig)
    label = fig.axes[0].yaxis.label.get_window_extent()
    assert label.x0 >= fig.bbox.x0 - 1


def test_hidden_axes_do_not_count_as_spilling():
    """The sharding figure's axes are off: their (undrawn) ticks must not
    make every redraw lay the figure out again."""
    from actmem.views.redraw import _spills
    fig = figures.sharding_figure(t=2)
    png(fig)
    fig = figures.sharding_figure(t=4, fig=fig)
    fig.canvas.draw()
    assert not _spills(fig)


KEPT = {  # two calls whose figures differ only in what the figure marks as changing
    "sharding": (figures.sharding_figure, dict(**LAYER, t=2), dict(**LAYER, t=4)),
    "terms_vs_t": (figures.terms_vs_t_figure, dict(**LAYER, highlight=8),
                   dict(**LAYER, highlight=2)),
    "terms_vs_t_layer": (figures.terms_vs_t_figure, dict(**LAYER, highlight=8),  # 5-digit ticks
                         dict(LAYER, s=8192, b=2, highlight=8)),
    "stacked": (stacked_figure, *CASES["stacked"][1][:1], dict(
        results={"a": actmem.activation_memory(**LAYER, t=8), "b":
                 actmem.activation_memory(**LAYER, t=8, recompute="selective")}, title="one")),
    "schedule": (schedule_figures.schedule_figure, dict(schedule=schedule(4, 8)),
                 dict(schedule=schedule(4, 12))),
}


@pytest.mark.parametrize("name", KEPT)
def test_drawing_on_the_kept_background_shows_a_full_drawing(name):
    """png draws only the changing artists on the kept image of the rest:
    the same pixels as drawing the whole figure again, but where a redrawn
    spine's antialiased corner meets a kept axis (at most 2 pixels)."""
    draw, first, second = KEPT[name]
    fig = draw(**first)
    png(fig)
    key = getattr(fig, BLIT)[0]
    fig = draw(**second, fig=fig)
    assert getattr(fig, BLIT)[0] == key  # the background is kept
    kept = np.asarray(PIL.Image.open(io.BytesIO(png(fig))))
    fig.canvas.draw()  # everything, in the layout png kept
    full = np.asarray(fig.canvas.buffer_rgba())
    assert kept.shape == full.shape
    assert np.count_nonzero((kept != full).any(axis=2)) <= 2


STAMPED = [("1f1b", 4, 8, 1), ("interleaved", 4, 8, 2), ("zbv", 4, 8, 2), ("1f1b", 5, 10, 1),
           ("interleaved", 4, 12, 2), ("zbv", 5, 10, 2), ("gpipe", 4, 8, 1)]
"""Schedules whose charts share legends and axis labels (stamps) across two
sizes of figure and three kinds of legend."""


@pytest.mark.parametrize("title", [True, False])
def test_kept_backgrounds_and_stamps_give_a_new_figures_pixels(title):
    """Redrawn in turn into one family of Figures (two sizes), each chart's
    PNG is pixel for pixel that of a new figure drawn whole: the legend and
    axis labels pasted from another size land where they are drawn."""
    fig = None
    for args in STAMPED:
        s = actmem.simulate_schedule(*args)
        fig = schedule_figures.schedule_figure(s, fig=fig, title=title)
        kept = np.asarray(PIL.Image.open(io.BytesIO(png(fig))))
        new = np.asarray(PIL.Image.open(io.BytesIO(png(
            schedule_figures.schedule_figure(s, title=title)))))
        assert kept.shape == new.shape and (kept == new).all(), args
    stamps = fig._actmem_stamps
    assert len({key for key, *_ in stamps}) == 3 + 2 + 1  # legends; y labels; the x label


def test_a_stamp_is_drawn_once_per_key_and_place():
    """Redrawing with the same legend and labels draws none of them again."""
    fig = schedule_figures.schedule_figure(schedule(4, 8))
    png(fig)
    drawn = []
    legend = fig.axes[0].get_legend()
    fig = schedule_figures.schedule_figure(schedule(4, 12, "gpipe"), fig=fig)
    fig.axes[0].get_legend().draw = lambda renderer: drawn.append(renderer)
    png(fig)
    assert fig.axes[0].get_legend() is not legend and drawn == []

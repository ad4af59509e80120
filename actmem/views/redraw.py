"""Redraw a figure in place: the same Figure and Axes, new artists.

Building a matplotlib Figure and laying it out (constrained layout) costs
more than drawing what it shows, so an explorer that redraws on every
control change keeps one Figure. Each figure function of actmem takes
``fig=None``: given the Figure it returned before, it empties that
Figure's axes with :func:`figure_axes` and draws the new data into them,
keeping the layout computed at the first draw (:func:`png` freezes it).
A Figure of another size or grid is never reused: a new one is built.
"""

from __future__ import annotations

import io

import numpy as np
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

LAYOUT = "_actmem_layout"
BLIT = "_actmem_blit"
"""Attribute of a Figure whose redraws change only some artists: ``(key,
artists)`` set by :func:`changing_only`; :func:`png` keeps an image of the
rest (the background) while ``key`` stays the same."""
_BACKGROUND = "_actmem_background"
"""Attribute of a Figure built here: ``(key, axes)``, its size and grid and
the axes ``Figure.subplots`` returned, to tell whether a redraw can reuse it."""


def figure_axes(fig: Figure | None, figsize: tuple, nrows: int = 1, ncols: int = 1,
                **grid) -> tuple[Figure, object]:
    """The Figure and axes to draw into, as ``Figure.subplots`` returns them.

    ``fig`` is reused, its axes emptied by :func:`empty`, when it was built
    here with the same ``figsize``, ``nrows``, ``ncols`` and ``grid``
    (keywords of ``Figure.subplots``); otherwise a new Figure with
    constrained layout is built.
    """
    key = (tuple(figsize), nrows, ncols, tuple(sorted((k, str(v)) for k, v in grid.items())))
    if fig is not None and getattr(fig, LAYOUT, (None,))[0] == key:
        for ax in fig.axes:
            empty(ax)
        return fig, getattr(fig, LAYOUT)[1]
    fig = Figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(nrows, ncols, **grid)
    setattr(fig, LAYOUT, (key, axes))
    return fig, axes


def empty(ax) -> None:
    """Remove what ``ax`` shows (bar containers, patches, lines, texts,
    collections, images, legend, titles) and reset its limits as a new
    Axes has them; keep the Axes, its position and its tick machinery."""
    for container in list(ax.containers):  # bars: else the legend keeps them
        container.remove()
    for artist in [*ax.patches, *ax.lines, *ax.texts, *ax.collections, *ax.images]:
        artist.remove()
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    for loc in ("left", "center", "right"):
        ax.set_title("", loc=loc)
    ax.relim()  # no artists left: no data limits
    ax.set_xlim(0, 1, auto=True)  # as a new Axes: (0, 1), autoscaled
    ax.set_ylim(0, 1, auto=True)
    ax.set_axis_on()


def changing_only(fig: Figure, key, artists) -> None:
    """Declare that, while ``key`` (any value that can be compared with
    ``==``) stays the same, redraws of ``fig`` change only ``artists``:
    :func:`png` then draws the rest once, keeps that image, and draws only
    ``artists`` on a copy of it. ``key`` must change with anything else the
    figure shows (limits, ticks, legend, titles outside ``artists``)."""
    setattr(fig, BLIT, (key, list(artists)))


def png(fig: Figure) -> bytes:
    """PNG bytes of ``fig`` at 72 dpi (for an ``Image`` widget).

    Drawn on an Agg canvas and encoded with light compression. The first
    call lays the figure out; the layout is then kept, so a redraw into
    the same axes (:func:`figure_axes`) skips it, unless something would no
    longer fit in the figure (wider tick labels, a longer legend or title):
    then it is laid out again. A figure marked by :func:`changing_only`
    whose key has not changed since the last call gets only its changing
    artists drawn, on the kept image of the rest.
    """
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.set_dpi(72)
    key, artists = getattr(fig, BLIT, (None, []))
    kept = getattr(fig, _BACKGROUND, None)
    size = tuple(fig.bbox.size)
    if artists and kept is not None and kept[0] == (key, size):
        fig.canvas.restore_region(kept[1])
    else:
        for artist in artists:  # the background: all but them (Axes.draw skips animated)
            artist.set_animated(True)
        try:
            fig.canvas.draw()
            if _spills(fig):
                fig.set_layout_engine("constrained")
                fig.canvas.draw()
        finally:
            for artist in artists:
                artist.set_animated(False)
        fig.set_layout_engine("none")
        setattr(fig, _BACKGROUND, ((key, tuple(fig.bbox.size)),
                                   fig.canvas.copy_from_bbox(fig.bbox)) if artists else None)
    renderer = fig.canvas.get_renderer()
    for artist in sorted(artists, key=lambda a: a.get_zorder()):  # as Axes.draw does
        if artist.get_visible():
            artist.draw(renderer)
    buffer = io.BytesIO()
    PIL.Image.fromarray(np.asarray(fig.canvas.buffer_rgba())).save(
        buffer, format="png", compress_level=1)
    return buffer.getvalue()


def _spills(fig: Figure) -> bool:
    """Whether anything an axes of ``fig`` shows (as last drawn: tick
    labels and axis labels unless the axis is off, title, legend) reaches
    past the figure's edges."""
    renderer, frame = fig.canvas.get_renderer(), fig.bbox
    parts = [p for ax in fig.axes
             for p in ((ax.xaxis, ax.yaxis) if ax.axison else ()) + (ax.title, ax.get_legend())]
    for part in parts:
        box = part.get_tightbbox(renderer) if part is not None and part.get_visible() else None
        if box is not None and (box.x0 < frame.x0 - 1 or box.x1 > frame.x1 + 1 or
                                box.y0 < frame.y0 - 1 or box.y1 > frame.y1 + 1):
            return True
    return False

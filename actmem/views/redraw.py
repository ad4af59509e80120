"""Redraw a figure in place: the same Figure and Axes, new artists.

Building a matplotlib Figure and laying it out (constrained layout) costs
more than drawing what it shows, so an explorer that redraws on every
control change keeps one Figure. Each figure function of actmem takes
``fig=None``: given the Figure it returned before, it empties that
Figure's axes with :func:`figure_axes` and draws the new data into them,
keeping the layout computed at the first draw (:func:`png` freezes it).
A Figure of another size or grid is never reused for it: the Figure
built for that size and grid before (kept with the Figure given, up to
:data:`FAMILY` of them) or a new one is used. A figure function can ask
for fixed margins (inches) instead of constrained layout, which is costly
on a new Figure; :func:`png` still lays out with constrained layout
whatever would not fit.
"""

from __future__ import annotations

import io

import numpy as np
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

LAYOUT = "_actmem_layout"
"""Attribute of a Figure built here: ``(key, axes)``, its size and grid and
the axes ``Figure.subplots`` returned, to tell whether a redraw can reuse it."""
FAMILY = 8
"""Figures of other sizes or grids kept with an explorer's Figure (a learner
who goes back to a p redraws into its Figure, already laid out)."""
_FAMILY = "_actmem_family"
"""Attribute of Figures built from one another: one shared ``{key: Figure}``."""
BLIT = "_actmem_blit"
"""Attribute of a Figure whose redraws change only some artists: ``(key,
artists)`` set by :func:`changing_only`; :func:`png` keeps an image of the
rest (the background) for each key."""
KEPT_BACKGROUNDS = 8
"""Background images (one per key of :func:`changing_only`) a Figure keeps."""
_BACKGROUND = "_actmem_background"
"""Attribute of a Figure: ``{(key, size): image}``, the images of what
does not change, newest last, at most :data:`KEPT_BACKGROUNDS`."""


def figure_axes(fig: Figure | None, figsize: tuple, nrows: int = 1, ncols: int = 1,
                margins: tuple | None = None, **grid) -> tuple[Figure, object]:
    """The Figure and axes to draw into, as ``Figure.subplots`` returns them.

    ``fig`` is reused, its axes emptied by :func:`empty`, when it was built
    here with the same ``figsize``, ``nrows``, ``ncols``, ``margins`` and
    ``grid`` (keywords of ``Figure.subplots``); else the Figure built for
    them with ``fig`` before (its family, :data:`FAMILY`), else a new one:
    with constrained layout, or with ``margins`` = (left, right, top,
    bottom, space between rows) in inches, placed at once (cheaper; what
    would not fit is laid out by :func:`png`).
    """
    key = (tuple(figsize), nrows, ncols, margins,
           tuple(sorted((k, str(v)) for k, v in grid.items())))
    family = getattr(fig, _FAMILY, {}) if fig is not None else {}
    if fig is not None and getattr(fig, LAYOUT, (None,))[0] == key:
        family[key] = fig
    fig = family.pop(key, None)
    if fig is not None:
        for ax in fig.axes:
            empty(ax)
        family[key] = fig  # newest last
        return fig, getattr(fig, LAYOUT)[1]
    if margins is None:
        fig = Figure(figsize=figsize, layout="constrained")
        axes = fig.subplots(nrows, ncols, **grid)
    else:
        fig = Figure(figsize=figsize)
        (left, right, top, bottom, space), (width, height) = margins, figsize
        axes = fig.subplots(nrows, ncols, gridspec_kw=dict(
            left=left / width, right=1 - right / width, top=1 - top / height,
            bottom=bottom / height, hspace=space * nrows / (height - top - bottom)), **grid)
    setattr(fig, LAYOUT, (key, axes))
    family[key] = fig
    while len(family) > FAMILY:
        del family[next(iter(family))]
    setattr(fig, _FAMILY, family)
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
    kept = getattr(fig, _BACKGROUND, {})
    background = kept.pop((key, tuple(fig.bbox.size)), None) if artists else None
    if background is not None:
        fig.canvas.restore_region(background)
    else:
        for artist in artists:  # the background: all but them (Axes.draw skips animated)
            artist.set_animated(True)
        try:
            fig.canvas.draw()
            if _spills(fig):
                fig.set_layout_engine("constrained")
                fig.canvas.draw()
                kept = {}  # laid out anew: the kept images no longer fit
        finally:
            for artist in artists:
                artist.set_animated(False)
        fig.set_layout_engine("none")
        background = fig.canvas.copy_from_bbox(fig.bbox) if artists else None
    if background is not None:
        kept[(key, tuple(fig.bbox.size))] = background  # newest last
        while len(kept) > KEPT_BACKGROUNDS:
            del kept[next(iter(kept))]
    setattr(fig, _BACKGROUND, kept)
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

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

A figure function can also declare what its redraws change
(:func:`changing_only`): :func:`png` then keeps an image of the rest (the
background) and draws only the changing artists on it, and keeps each
"stamp" (a legend or a label in a margin) as pixels, pasted wherever the
stamp is placed in the figure or in another of its family.
"""

from __future__ import annotations

import io
import math

import numpy as np
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

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
artists, stamps)`` set by :func:`changing_only`; :func:`png` keeps an image
of the rest (the background) for each key."""
KEPT_BACKGROUNDS = 8
"""Background images (one per key of :func:`changing_only`) a Figure keeps."""
_BACKGROUND = "_actmem_background"
"""Attribute of a Figure: ``{(key, size): image}``, the images of what
does not change, newest last, at most :data:`KEPT_BACKGROUNDS`."""
KEPT_STAMPS = 64
"""Stamps (a few KiB each) a family of Figures keeps."""
_STAMPS = "_actmem_stamps"
"""Attribute of Figures built from one another: one shared ``{(key,
fraction of a pixel where it starts, size): image}``, newest last."""


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
    stamps = getattr(fig, _STAMPS, {}) if fig is not None else {}
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
    setattr(fig, _STAMPS, stamps)
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


def changing_only(fig: Figure, key, artists, stamps=()) -> None:
    """Declare that, while ``key`` (any value that can be compared with
    ``==``) stays the same, redraws of ``fig`` change only ``artists`` and
    ``stamps``: :func:`png` then draws the rest once, keeps that image, and
    draws only ``artists`` on a copy of it. ``key`` must change with
    anything else the figure shows (limits, ticks, titles outside
    ``artists`` and ``stamps``).

    ``stamps``: ``(artist, stamp key)`` pairs, artists drawn on the plain
    figure background (a legend or a label in a margin, overlapping no
    other artist) whose pixels depend only on the stamp key: each is drawn
    once per stamp key, kept, and pasted where it is placed, in ``fig`` or
    in another Figure of its family (:func:`figure_axes`), at the same
    fraction of a pixel."""
    setattr(fig, BLIT, (key, list(artists), list(stamps)))


def png(fig: Figure) -> bytes:
    """PNG bytes of ``fig`` at 72 dpi (for an ``Image`` widget).

    Drawn on an Agg canvas and encoded with light compression. The first
    call lays the figure out; the layout is then kept, so a redraw into
    the same axes (:func:`figure_axes`) skips it, unless something would no
    longer fit in the figure (wider tick labels, a longer legend or title):
    then it is laid out again. A figure marked by :func:`changing_only`
    whose key has not changed since the last call gets only its changing
    artists drawn, on the kept image of the rest, and its stamps pasted.
    """
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.set_dpi(72)
    key, artists, stamps = getattr(fig, BLIT, (None, [], []))
    kept = getattr(fig, _BACKGROUND, {})
    background = kept.pop((key, tuple(fig.bbox.size)), None) if artists else None
    if background is not None:
        fig.canvas.restore_region(background)
    else:
        apart = [*artists, *(artist for artist, _ in stamps)]
        for artist in apart:  # the background: all but them (Axes.draw skips animated)
            artist.set_animated(True)
        try:
            fig.canvas.draw()
            if _spills(fig):
                fig.set_layout_engine("constrained")
                fig.canvas.draw()
                kept = {}  # laid out anew: the kept images no longer fit
        finally:
            for artist in apart:
                artist.set_animated(False)
        fig.set_layout_engine("none")
        background = fig.canvas.copy_from_bbox(fig.bbox) if artists else None
    if background is not None:
        kept[(key, tuple(fig.bbox.size))] = background  # newest last
        while len(kept) > KEPT_BACKGROUNDS:
            del kept[next(iter(kept))]
    setattr(fig, _BACKGROUND, kept)
    renderer = fig.canvas.get_renderer()
    for artist, stamp_key in stamps:
        _stamp(fig, artist, stamp_key, renderer)
    for artist in sorted(artists, key=lambda a: a.get_zorder()):  # as Axes.draw does
        if artist.get_visible():
            artist.draw(renderer)
    buffer = io.BytesIO()
    PIL.Image.fromarray(np.asarray(fig.canvas.buffer_rgba())).save(
        buffer, format="png", compress_level=1)
    return buffer.getvalue()


def _stamp(fig: Figure, artist, key, renderer) -> None:
    """Draw ``artist`` (a stamp of :func:`changing_only`): paste its kept
    pixels if its family kept them for ``key`` at the same fraction of a
    pixel, else draw it and keep its pixels (2 pixels around its extent,
    for its frame's stroke and antialiasing)."""
    if not artist.get_visible():
        return
    box = artist.get_window_extent(renderer)
    x0, y0 = math.floor(box.x0) - 2, math.floor(box.y0) - 2
    x1, y1 = math.ceil(box.x1) + 2, math.ceil(box.y1) + 2
    stamps = getattr(fig, _STAMPS, {})
    where = (key, round(box.x0 % 1, 3), round(box.y0 % 1, 3), x1 - x0, y1 - y0)
    image = stamps.pop(where, None)
    if image is None:
        artist.draw(renderer)
        image = fig.canvas.copy_from_bbox(Bbox([[x0, y0], [x1, y1]]))
    else:  # restore_region's xy: the top-left corner, y down
        fig.canvas.restore_region(image, xy=(x0, int(fig.bbox.height) - y1))
    stamps[where] = image  # newest last
    while len(stamps) > KEPT_STAMPS:
        del stamps[next(iter(stamps))]
    setattr(fig, _STAMPS, stamps)


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

"""Answers that stay closed until the learner opens them, whatever runs.

Collapsed cell outputs (``jupyter.outputs_hidden``) open again whenever a
cell runs, so "Run All" would show every answer under its exercise and
every "predict first" result under its prompt. The notebooks therefore show
answers and predicted results inside a closed ``<details>`` element (click
its summary to open it), which running the cell writes closed again:

* :func:`hidden_answers`: what a block prints (the exercises' numbers, a
  predicted table);
* :func:`hidden_figure`: a figure (notebook 04's bars against ``t``).

Each output keeps a plain-text form too (the printed text, the figure's
repr), which is what nbval and the Chinese twin's parity test compare.
"""

from __future__ import annotations

import base64
import html
import io
from contextlib import contextmanager, redirect_stdout

from ..language import tr

SUMMARY = "Show the numbers behind the answers"
"""The line a learner clicks to open the exercises' answers."""
RESULT = "Show the result"
"""The line a learner clicks to open a "predict first" result."""


def closed(summary: str, inner_html: str, text: str) -> dict:
    """The display bundle of a closed answer: ``text/html`` (``<details>``
    around ``inner_html``, under ``summary`` in the language of
    :mod:`actmem.language`) and ``text/plain`` (``text``)."""
    return {"text/plain": text,
            "text/html": f"<details><summary>{html.escape(tr(summary))}</summary>"
                         f"{inner_html}</details>"}


def _check_summary(summary) -> None:
    if not isinstance(summary, str):
        raise TypeError(f"summary must be a str (the line a learner clicks), got "
                        f"{summary!r} ({type(summary).__name__})")


@contextmanager
def hidden_answers(summary: str = SUMMARY):
    """Collect what the block prints; show it closed, under ``summary``.

    Output: one display with ``text/html`` (``<details>`` with the text in
    ``<pre>``) and ``text/plain`` (the text itself).

    Raises:
        TypeError: ``summary`` is not a str, before the block runs (so
            nothing it prints is lost).
    """
    _check_summary(summary)
    from IPython.display import display

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        yield
    text = buffer.getvalue()
    display(closed(summary, f"<pre>{html.escape(text)}</pre>", text), raw=True)


def figure_bundle(fig, summary: str = RESULT) -> dict:
    """The display bundle :func:`hidden_figure` shows: the figure as a PNG
    (drawn as IPython's inline backend draws it, ``bbox_inches="tight"``)
    inside a closed ``<details>``, its first axes title as the image's alt
    text; ``text/plain`` is the figure's repr."""
    from IPython.core.pylabtools import print_figure

    png = base64.b64encode(print_figure(fig, "png", bbox_inches="tight")).decode("ascii")
    alt = next((ax.get_title() for ax in fig.axes if ax.get_title()), "")
    image = f'<img src="data:image/png;base64,{png}" alt="{html.escape(alt)}"/>'
    return closed(summary, image, repr(fig))


def hidden_figure(fig, summary: str = RESULT) -> None:
    """Show the matplotlib figure ``fig`` closed, under ``summary`` (a
    "predict first" figure: notebook 04). Call it as the cell's last line,
    in place of ``fig``.

    Raises:
        TypeError: ``fig`` is not a matplotlib Figure, or ``summary`` not a str.
    """
    _check_summary(summary)
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure (what actmem.figures returns), "
                        f"got {type(fig).__name__}")
    from IPython.display import display

    display(figure_bundle(fig, summary), raw=True)

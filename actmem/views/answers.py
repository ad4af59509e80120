"""Exercise answers that stay closed until the learner opens them.

Collapsed cell outputs (``jupyter.outputs_hidden``) open again whenever a
cell runs, so "Run All" would show every answer under its exercise. The
answer cells of the notebooks therefore print inside :func:`hidden_answers`:
what they print is shown in a closed ``<details>`` element (click to open)
and kept as plain text too, which is what nbval compares.
"""

from __future__ import annotations

import html
import io
from contextlib import contextmanager, redirect_stdout

from ..language import tr

SUMMARY = "Show the numbers behind the answers"
"""The line a learner clicks to open the answers."""


@contextmanager
def hidden_answers(summary: str = SUMMARY):
    """Collect what the block prints; show it closed, under ``summary``
    (in the language of :mod:`actmem.language`).

    Output: one display with ``text/html`` (``<details>`` with the text in
    ``<pre>``) and ``text/plain`` (the text itself).

    Raises:
        TypeError: ``summary`` is not a str, before the block runs (so
            nothing it prints is lost).
    """
    if not isinstance(summary, str):
        raise TypeError(f"summary must be a str (the line a learner clicks), got "
                        f"{summary!r} ({type(summary).__name__})")
    from IPython.display import display

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        yield
    text = buffer.getvalue()
    display({"text/plain": text,
             "text/html": f"<details><summary>{html.escape(tr(summary))}</summary>"
                          f"<pre>{html.escape(text)}</pre></details>"}, raw=True)

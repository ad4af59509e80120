"""An explorer's readouts, shown together in one ipywidgets ``HTML``.

Each control change of an explorer rewrites several readouts. As separate
Label widgets they would reach the browser as separate messages, each
handled in turn; in one panel they travel as one message, so the last
readout arrives as soon as the first. Tests and notebooks still read each
readout by name: ``explorer.readouts["total"].value``. In the page each
readout is a ``<div>`` with the CSS class ``actmem-readout-<name>``.

A readout has two texts: ``value``, always English (what notebooks and
tests assert on, identical in both tracks), and ``shown``, what the page
shows, in the explorer's language (:mod:`actmem.language`).
"""

from __future__ import annotations

import html
from contextlib import contextmanager

import ipywidgets as widgets

TEXT = "text"
"""A readout of plain text (escaped when shown), like a ``Label``."""
HTML = "html"
"""A readout of HTML (a table, say), like an ``HTML`` widget."""


class Readout:
    """One named readout: ``value`` is its English text or HTML (``str``),
    ``shown`` the same in the language the page shows."""

    def __init__(self, panel: "ReadoutPanel", kind: str):
        self._panel = panel
        self.kind = kind
        self._value = self.shown = ""

    @property
    def value(self) -> str:
        return self._value

    def write(self, value: str, shown: str) -> None:
        """Set the English ``value`` and the ``shown`` text."""
        if (value, shown) != (self._value, self.shown):
            self._value, self.shown = value, shown
            self._panel.changed()


class ReadoutPanel:
    """Named readouts in one ``HTML`` widget (``widget``), sent as one message.

    Args:
        kinds: readout name -> :data:`TEXT` or :data:`HTML`, in display order.
    """

    def __init__(self, kinds: dict[str, str]):
        self.widget = widgets.HTML()
        self.widget.add_class("actmem-readouts")
        self.readouts = {name: Readout(self, kind) for name, kind in kinds.items()}
        self._holding = False
        self._dirty = False

    def changed(self) -> None:
        """A readout changed: show it now, or at :meth:`send` while held."""
        self._dirty = True
        if not self._holding:
            self.send()

    @contextmanager
    def hold(self):
        """Collect readout changes and show them together at the end (or
        earlier, at :meth:`send`)."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
            self.send()

    def send(self) -> None:
        """Write every readout into the widget, if one changed since last time."""
        if self._dirty:
            self._dirty = False
            self.widget.value = "".join(
                f'<div class="actmem-readout-{name}">'
                f"{r.shown if r.kind == HTML else html.escape(r.shown)}</div>"
                for name, r in self.readouts.items())

"""Pick a measured layer and read its comparison (core ipywidgets only).

A thin view over results already measured (:func:`.measure_variants`);
changing the choice writes two readouts, ``summary`` (text) and ``table``
(HTML), so tests and notebooks can assert on them. Like the explorers of
:mod:`actmem.widgets` it exposes ``box``, ``controls`` (``{"variant":
Dropdown}``), ``readouts`` (``summary`` and ``table``, also the attributes
of those names) and ``layer`` (the sizes s, b, h, a it was measured at); it is
one of them (a subclass of ``actmem.widgets._Explorer``), with the same
DOM hooks (CSS classes ``actmem-explorer``, ``actmem-readout-<name>``).
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from ..language import tr
from ..views.readouts import HTML, TEXT
from ..views.widgets import _Explorer
from .report import summary_line, table
from .variants import VARIANTS, check_names


class MeasureExplorer(_Explorer):
    """Dropdown of variants -> one-line summary and the row table.

    Args:
        results: ``{variant: {t: [comparison per rank]}}``.
        variant: the first choice.

    Raises:
        ValueError: ``results`` is empty or names an unknown variant, or
            ``variant`` is not one of its keys (the message lists them).
    """

    def __init__(self, results: dict, variant: str = "paper"):
        if not results:
            raise ValueError("results must hold at least one measured variant, got none")
        check_names(list(results))
        if variant not in results:
            raise ValueError(f"variant={variant!r} was not measured; choose from "
                             f"{', '.join(results)}")
        self.results = results
        self.choice = widgets.Dropdown(
            options=[(tr(VARIANTS[n].title), n) for n in results], value=variant,
            description=tr("layer"))
        config = next(iter(results.values()))[1][0].measurement.config
        self.layer = {k: getattr(config, k) for k in ("s", "b", "h", "a")}
        super().__init__({"variant": self.choice}, {"summary": TEXT, "table": HTML},
                         image=False, layout=[self.choice])
        self.summary, self.table = self.readouts["summary"], self.readouts["table"]

    def refresh(self) -> None:
        """Write the chosen variant's summary line and table."""
        name = self.choice.value
        rows = html.escape(table(self.results[name]))
        self.say("summary", lambda tr: summary_line(name, self.results[name], tr))
        self.say("table", lambda tr: f"<p>{html.escape(tr(VARIANTS[name].expect))}</p>"
                                     f"<pre>{rows}</pre>")

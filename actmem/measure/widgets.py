"""Pick a measured layer and read its comparison (core ipywidgets only).

A thin view over results already measured (:func:`.measure_variants`);
changing the choice writes two readouts, ``summary`` (text) and ``table``
(HTML), with the variant's title and the ledger's row names rather than
code keys, in the explorer's language (numbers the same in every
language), so tests and notebooks can assert on them. Like the explorers of
:mod:`actmem.widgets` it exposes ``box``, ``controls`` (``{"variant":
Dropdown}``), ``readouts`` (``summary`` and ``table``, also the attributes
of those names) and ``layer`` (the sizes s, b, h, a it was measured at); it is
one of them (a subclass of ``actmem.widgets._Explorer``), with the same
DOM hooks (CSS classes ``actmem-explorer``, ``actmem-readout-<name>``).
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from ..language import english, tr
from ..views.readouts import HTML, TEXT
from ..views.widgets import _Explorer
from .compare import Comparison
from .report import summary_line
from .variants import VARIANTS, check_names

LEDGER_COLUMN = "ledger, t={t} rank {rank}"
"""Heading of a rank's ledger bytes in :func:`comparison_html`."""
MEASURED_COLUMN = "measured, t={t} rank {rank}"
"""Heading of a rank's measured bytes in :func:`comparison_html`."""


def comparison_html(by_t: dict[int, list[Comparison]], tr=english) -> str:
    """Ledger and measured bytes per ledger row as an HTML table, one
    column pair per t and rank (``by_t`` maps t to the comparisons of its
    ranks, one variant), then the extras and the totals. Rows carry the
    ledger's names and groups, words translated by ``tr``
    (:mod:`actmem.language`); "-" where a rank has no such row."""
    cols = [(t, c) for t, ranks in sorted(by_t.items()) for c in ranks]
    head = [tr("tensor"), tr("group")] + [
        tr(template).format(t=t, rank=c.measurement.rank) for t, c in cols
        for template in (LEDGER_COLUMN, MEASURED_COLUMN)]
    by_key = [{r.key: r for r in c.rows} for _, c in cols]
    lines = []
    for key in dict.fromkeys(r.key for _, c in cols for r in c.rows):
        row = next(rows[key] for rows in by_key if key in rows)
        lines.append([tr(row.name), tr(row.group)] + [
            v for rows in by_key
            for v in ((str(rows[key].ledger_bytes), str(rows[key].measured_bytes))
                      if key in rows else ("-", "-"))])
    lines.append([tr("extras (not in ledger)"), ""] + [
        v for _, c in cols for v in ("-", str(c.extras_total))])
    lines.append([tr("total"), ""] + [
        str(v) for _, c in cols
        for v in (c.ledger_total, c.measured_rows_total + c.extras_total)])
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in line) + "</tr>"
                    for line in lines)
    return ("<table><tr>" + "".join(f"<th>{html.escape(x)}</th>" for x in head)
            + f"</tr>{cells}</table>")


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
        self.say("summary", lambda tr: summary_line(name, self.results[name], tr))
        self.say("table", lambda tr: f"<p>{html.escape(tr(VARIANTS[name].expect))}</p>"
                                     f"{comparison_html(self.results[name], tr)}")

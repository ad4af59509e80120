"""Bar chart: ledger bytes against measured bytes, row by row (matplotlib)."""

from __future__ import annotations

from .compare import Comparison

SERIES_COLOURS = ("blue", "orange", "green", "purple")
"""Okabe-Ito colour names (:data:`actmem.figures.OKABE_ITO`, safe for
colour-blind readers), one per bar series, in turn."""


def comparison_figure(by_t: dict[int, list[Comparison]], title: str = ""):
    """Horizontal bars per ledger row (and the extras) in KiB: the ledger at
    t = 1, measured at t = 1, and measured on each rank at larger t. Rows
    are labelled by the ledger's names in the current language
    (:func:`actmem.language.tr`), as the other ledger figures draw them.

    Returns a matplotlib Figure made without pyplot (nothing accumulates);
    a notebook shows it with ``display(fig)``.
    """
    from matplotlib.figure import Figure

    from ..language import tr
    from ..views.figures import OKABE_ITO

    colours = [OKABE_ITO[name] for name in SERIES_COLOURS]
    one = by_t[1][0]
    series = [(tr("ledger, t=1"), one, False), (tr("measured, t=1"), one, True)] + [
        (tr("measured, t={t} rank {rank}").format(t=t, rank=c.measurement.rank), c, True)
        for t, ranks in sorted(by_t.items()) if t > 1 for c in ranks]
    labels = [tr(r.name) for r in one.rows] + [tr("extras (not in ledger)")]
    fig = Figure(figsize=(8, 0.35 * len(labels) + 1.5))
    ax = fig.add_subplot()
    height = 0.8 / len(series)
    for i, (name, c, measured) in enumerate(series):
        values = [(r.measured_bytes if measured else r.ledger_bytes) / 1024
                  for r in c.rows] + [c.extras_total / 1024 if measured else 0]
        ax.barh([y + i * height for y in range(len(labels))], values, height,
                label=name, color=colours[i % len(colours)])
    ax.set_yticks([y + 0.4 - height / 2 for y in range(len(labels))], labels)
    ax.invert_yaxis()
    ax.set_xlabel(tr("bytes saved for backward (KiB)"))
    ax.set_ylabel(tr("ledger row"))
    ax.set_title(tr(title))
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig

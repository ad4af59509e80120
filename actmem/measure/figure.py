"""Bar chart: ledger bytes against measured bytes, row by row (matplotlib)."""

from __future__ import annotations

from .compare import Comparison

T_COLOURS = (("blue", "sky"), ("orange", "vermillion"), ("green", "grey"),
             ("purple", "yellow"))
"""Okabe-Ito colour names (:data:`actmem.figures.OKABE_ITO`, safe for
colour-blind readers) per tensor-parallel size, in turn (t = 1, then t = 2,
...): the first colour draws the ledger (hatched) and the even ranks'
measured bars, the second the odd ranks'."""


def comparison_figure(by_t: dict[int, list[Comparison]], title: str = ""):
    """Horizontal bars per ledger row (and the extras) in KiB; for each t in
    ``by_t`` (t mapped to the comparisons of its ranks, one variant), the
    ledger's bytes per rank (hatched), then the bytes measured on each rank
    (solid). At t = 2 the ledger bar shows what each rank should keep, so
    the halved rows read off the figure. The ledger is the same on every
    rank of one t (:func:`actmem.ledger_rows` depends on the configuration,
    not the rank), so it is drawn once per t, from the first rank. The
    extras have no ledger bar. Rows are labelled by the ledger's names in
    the current language (:func:`actmem.language.tr`), as the other ledger
    figures draw them.

    Returns a matplotlib Figure made without pyplot (nothing accumulates);
    a notebook shows it with ``display(fig)``.
    """
    from matplotlib.figure import Figure

    from ..language import tr

    series = _series(by_t)
    one = by_t[min(by_t)][0]
    labels = [tr(r.name) for r in one.rows] + [tr("extras (not in ledger)")]
    fig = Figure(figsize=(8, 0.45 * len(labels) + 1.5))
    ax = fig.add_subplot()
    height = 0.8 / len(series)
    for i, (name, values, style) in enumerate(series):
        ax.barh([y + i * height for y in range(len(labels))], values, height,
                label=name, **style)
    ax.set_yticks([y + 0.4 - height / 2 for y in range(len(labels))], labels)
    ax.invert_yaxis()
    ax.set_xlabel(tr("bytes saved for backward (KiB)"))
    ax.set_ylabel(tr("ledger row"))
    ax.set_title(tr(title))
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def _series(by_t: dict[int, list[Comparison]]) -> list[tuple[str, list[float], dict]]:
    """(legend label, KiB per row then the extras, bar style) per bar series."""
    from ..language import tr
    from ..views.figures import OKABE_ITO

    series = []
    for i, (t, ranks) in enumerate(sorted(by_t.items())):
        colours = [OKABE_ITO[c] for c in T_COLOURS[i % len(T_COLOURS)]]
        ledger = ranks[0]
        series.append((tr("ledger, t=1") if t == 1 else tr("ledger, t={t} (each rank)").format(t=t),
                       [r.ledger_bytes / 1024 for r in ledger.rows] + [0],
                       {"color": "white", "edgecolor": colours[0], "hatch": "///"}))
        for c in ranks:
            rank = c.measurement.rank
            name = (tr("measured, t=1") if t == 1 else
                    tr("measured, t={t} rank {rank}").format(t=t, rank=rank))
            series.append((name, [r.measured_bytes / 1024 for r in c.rows]
                           + [c.extras_total / 1024], {"color": colours[rank % 2]}))
    return series

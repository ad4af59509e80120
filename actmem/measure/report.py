"""Comparisons as plain data (JSON) and as a text table (bytes)."""

from __future__ import annotations

from ..language import english, translator
from .compare import Comparison
from .variants import VARIANTS


def as_dict(c: Comparison) -> dict:
    """One rank's comparison as JSON-ready data, bytes as ints."""
    return {
        "rank": c.measurement.rank,
        "rows": [{"key": r.key, "group": r.group, "placement": r.placement,
                  "ledger_bytes": r.ledger_bytes,
                  "measured_bytes": r.measured_bytes,
                  "measured_dtype": r.measured_dtype} for r in c.rows],
        "extras": [{"block": e.storage.block, "saved_by": list(e.storage.saved_by),
                    "dtype": e.storage.dtype, "shape": list(e.storage.shape),
                    "bytes": e.storage.nbytes, "why": e.why} for e in c.extras],
        "ledger_total": c.ledger_total,
        "measured_rows_total": c.measured_rows_total,
        "extras_total": c.extras_total,
        "masks_same_on_ranks": c.measurement.same_on_ranks,
    }


def _aligned(lines: list[list[str]], left: int) -> str:
    """Rows of cells in columns as wide as their widest cell (display
    columns: a Chinese character takes two), the first ``left`` columns
    aligned left and the others right, two spaces apart."""
    from ..views.printed import pad, width

    widths = [max(width(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(pad(cell, w, "<" if i < left else ">")
                               for i, (cell, w) in enumerate(zip(line, widths)))
                     for line in lines)


def table(by_t: dict[int, list[Comparison]], tr=None) -> str:
    """Ledger and measured bytes per row, one column pair per t and rank.

    ``by_t`` maps t to the comparisons of its ranks (same variant); words
    translated by ``tr`` (:mod:`actmem.language`; default: the current
    language), numbers as they are. Rows are named by their ledger key
    (``qkv_input``) in English and by the ledger's name in Chinese
    (``QKV 投影的输入``), as :func:`.figure.comparison_figure` labels them.
    """
    tr = translator() if tr is None else tr
    cols = [(t, c) for t, ranks in sorted(by_t.items()) for c in ranks]
    head = [tr("row"), tr("group")] + [
        tr(kind).format(t=t, rank=c.measurement.rank) for t, c in cols
        for kind in ("ledger t={t} r{rank}", "measured t={t} r{rank}")]
    keys = list(dict.fromkeys(r.key for _, c in cols for r in c.rows))
    lines = [head]
    for key in keys:
        found = [next((r for r in c.rows if r.key == key), None) for _, c in cols]
        first = next(r for r in found if r)
        lines.append([_row_label(first, tr), tr(first.group)] + [
            "-" if r is None else str(v) for r in found
            for v in ((r.ledger_bytes, r.measured_bytes) if r else (0, 0))])
    lines.append([tr("extras (not in ledger)"), ""] + [
        v for _, c in cols for v in ("-", str(c.extras_total))])
    lines.append([tr("total"), ""] + [
        v for _, c in cols for v in (str(c.ledger_total),
                                     str(c.measured_rows_total + c.extras_total))])
    return _aligned(lines, 2)


def _row_label(row, tr) -> str:
    """A row as the tables name it: its key in English, its name in ``tr``'s language."""
    return row.key if tr is english else tr(row.name)


SHORT_TITLES = {"paper": "the paper's layer", "gqa": "grouped-query attention"}
"""Variants whose title holds a number (a section, a head count): a table names
them without it, so that it does not stand among the measured numbers (and a
Chinese line keeps the numbers of its English one, which names the key)."""


def _variant_label(name: str, tr) -> str:
    """A variant as the tables name it: its key in English (``cpu_dropout``),
    its title in ``tr``'s language (:data:`.VARIANTS`, :data:`SHORT_TITLES`)."""
    return name if tr is english else tr(SHORT_TITLES.get(name, VARIANTS[name].title))


def differing_rows(name: str, c: Comparison, tr=None) -> str:
    """One line: the rows of variant ``name``'s comparison ``c`` whose
    measured bytes differ from the ledger's. In English the variant's key
    and ``(key, ledger bytes, measured bytes, measured dtype)`` per row;
    in Chinese (``tr``, default the current language) the variant's title
    and a sentence per row, with the same numbers.
    """
    tr = translator() if tr is None else tr
    differ = [r for r in c.rows if not r.exact]
    if tr is english:
        found = [(r.key, r.ledger_bytes, r.measured_bytes, r.measured_dtype) for r in differ]
        return f"{name}: rows that differ: {found if found else 'none'}"
    variant = _variant_label(name, tr)
    if not differ:
        return tr("{variant}: no row differs").format(variant=variant)
    rows = [tr("{row}: ledger {ledger} B, measured {measured} B ({dtype})").format(
        row=tr(r.name), ledger=r.ledger_bytes, measured=r.measured_bytes,
        dtype=r.measured_dtype or tr("nothing saved")) for r in differ]
    return tr("{variant}: rows that differ: {rows}").format(
        variant=variant, rows=tr(SUMMARY_JOIN).join(rows))


def extras_table(c: Comparison, tr=None) -> str:
    """Every extra on one rank: bytes, dtype, shape, node, and why (the why
    translated by ``tr``, default the current language)."""
    from ..views.printed import translate

    tr = translator() if tr is None else tr
    return "\n".join(
        f"{e.storage.nbytes:>8} B  {e.storage.dtype:<8} {str(e.storage.shape):<16}"
        f" {e.storage.block:<9} {e.storage.saved_by[0] if e.storage.saved_by else '?'}\n"
        f"{'':>11}{translate(e.why, tr)}" for e in c.extras) or tr("(no extras)")


def variants_table(results: dict[str, dict[int, list[Comparison]]],
                   rank: int = 0, tr=None) -> str:
    """One line per variant, one column group per t (rank ``rank`` of each):
    ledger bytes, bytes measured for the ledger rows, exact rows, extras;
    headings translated by ``tr`` (default: the current language).

    ``results`` maps a variant name to ``{t: [comparison per rank]}``;
    a variant is named by its key in English and by its title in Chinese.
    """
    tr = translator() if tr is None else tr
    ts = sorted(next(iter(results.values())))
    head = [tr("variant")] + [tr(kind).format(t=t) for t in ts for kind in
                              ("ledger t={t}", "measured t={t}", "exact t={t}", "extras t={t}")]
    lines = [head]
    for name, by_t in results.items():
        line = [_variant_label(name, tr)]
        for t in ts:
            c = by_t[t][min(rank, len(by_t[t]) - 1)]
            exact = sum(r.exact for r in c.rows)
            line += [str(c.ledger_total), str(c.measured_rows_total),
                     f"{exact}/{len(c.rows)}", str(c.extras_total)]
        lines.append(line)
    return _aligned(lines, 1)


SUMMARY_PART = ("t={t} rank {rank}: ledger {ledger} B, rows measured {measured} B "
                "({exact}/{rows} exact), extras {extras} B")
"""One rank's part of :func:`summary_line` (a template of :mod:`actmem.language`)."""
SUMMARY = "{variant}: {parts}"
"""The whole line of :func:`summary_line`: the variant's title, then its parts."""
SUMMARY_JOIN = "; "
"""What joins the parts of :func:`summary_line` (full-width in Chinese)."""


def summary_line(name: str, by_t: dict[int, list[Comparison]], tr=english) -> str:
    """One line per variant: its title (:data:`.VARIANTS`), then ledger vs
    measured rows vs extras on every rank, in bytes; words and punctuation
    translated by ``tr`` (:mod:`actmem.language`), numbers the same in every
    language."""
    parts = [tr(SUMMARY_PART).format(
        t=t, rank=c.measurement.rank, ledger=c.ledger_total, measured=c.measured_rows_total,
        exact=sum(r.exact for r in c.rows), rows=len(c.rows), extras=c.extras_total)
        for t, ranks in sorted(by_t.items()) for c in ranks]
    return tr(SUMMARY).format(variant=tr(VARIANTS[name].title),
                              parts=tr(SUMMARY_JOIN).join(parts))

"""07's figure: a ledger bar per t, beside the bars measured on each rank.

The t = 1 comparison is measured in this process (a fraction of a second);
the t = 2 ranks are comparisons of empty recordings (no processes spawned),
so their measured bars are 0 and only the ledger's bytes are drawn.
"""

import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

import actmem  # noqa: E402
from actmem.measure import SMALL, measure_variants  # noqa: E402
from actmem.measure.compare import compare  # noqa: E402
from actmem.measure.figure import comparison_figure  # noqa: E402
from actmem.measure.run import Measurement  # noqa: E402


@pytest.fixture(scope="module")
def by_t():
    t2 = actmem.LayerConfig(**SMALL, t=2)
    return {1: measure_variants(["paper"])["paper"],
            2: [compare(Measurement(t2, rank, "bool", ())) for rank in (0, 1)]}


def _bars(fig):
    """Legend label -> bar widths (KiB), one per ledger row, then the extras."""
    ax = fig.axes[0]
    return {c.get_label(): [p.get_width() for p in c.patches] for c in ax.containers}


def test_every_t_has_its_ledger_bar_before_its_measured_ranks(by_t):
    bars = _bars(comparison_figure(by_t))
    assert list(bars) == ["ledger, t=1", "measured, t=1", "ledger, t=2 (each rank)",
                          "measured, t=2 rank 0", "measured, t=2 rank 1"]
    rows = {t: actmem.ledger_rows(actmem.LayerConfig(**SMALL, t=t)) for t in (1, 2)}
    for t in (1, 2):
        assert bars[f"ledger, t={t}" + (" (each rank)" if t > 1 else "")] == [
            r.bytes / 1024 for r in rows[t]] + [0]
    halved = [r1.group != "fixed" for r1 in rows[1]]
    ledger1, ledger2 = bars["ledger, t=1"][:-1], bars["ledger, t=2 (each rank)"][:-1]
    assert [b2 * 2 == b1 if split else b2 == b1
            for b1, b2, split in zip(ledger1, ledger2, halved)] == [True] * len(halved)
    assert sum(ledger2) * 1024 == actmem.activation_memory(**SMALL, t=2).total == 110592


def test_measured_bars_and_extras_are_the_comparisons(by_t):
    bars = _bars(comparison_figure(by_t))
    one = by_t[1][0]
    assert bars["measured, t=1"] == [r.measured_bytes / 1024 for r in one.rows] + [0.5]
    assert bars["measured, t=2 rank 1"] == [0] * (len(one.rows) + 1)


def test_chinese_legend(by_t):
    actmem.set_language("zh")
    try:
        bars = _bars(comparison_figure(by_t))
    finally:
        actmem.set_language("en")
    assert list(bars) == ["账本，t=1", "实测，t=1", "账本，t=2（每个 rank）",
                          "实测，t=2 rank 0", "实测，t=2 rank 1"]

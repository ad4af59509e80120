"""actmem.hidden_figure (issue 41): a "predict first" figure shown inside a
closed <details>, which running the cell writes closed again (unlike
JupyterLab's collapsed-output flag, which running clears)."""

import base64
import re

import IPython.display
import pytest

import actmem
from actmem import figures
from actmem.views.answers import figure_bundle


@pytest.fixture
def shown(monkeypatch):
    displayed = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw: displayed.append(data))
    return displayed


def test_a_figure_is_shown_closed_with_its_png_and_alt_text(shown):
    fig = figures.terms_vs_t_figure(2048, 1, 4096, 32, highlight=8)
    actmem.hidden_figure(fig)
    (bundle,) = shown
    assert bundle["text/plain"] == repr(fig)
    match = re.fullmatch(r'<details><summary>Show the result</summary>'
                         r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)"/>'
                         r'</details>', bundle["text/html"])
    assert match, bundle["text/html"][:200]
    assert base64.b64decode(match.group(1)).startswith(b"\x89PNG\r\n")
    assert match.group(2) == next(ax.get_title() for ax in fig.axes if ax.get_title())


def test_the_summary_is_in_the_learners_language(shown):
    actmem.set_language("zh")
    try:
        fig = figures.terms_vs_t_figure(2048, 1, 4096, 32)
        assert figure_bundle(fig)["text/html"].startswith("<details><summary>显示结果</summary>")
    finally:
        actmem.set_language("en")


@pytest.mark.parametrize("fig, summary, message", [
    ("a figure", "Show the result", "fig must be a matplotlib Figure"),
    (None, "Show the result", "fig must be a matplotlib Figure"),
    ("ok", 3, "summary must be a str"),
])
def test_bad_input_is_refused_by_name(shown, fig, summary, message):
    if fig == "ok":
        fig = figures.terms_vs_t_figure(2048, 1, 4096, 32)
    with pytest.raises(TypeError, match=message):
        actmem.hidden_figure(fig, summary)
    assert shown == []

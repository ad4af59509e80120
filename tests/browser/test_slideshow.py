"""A notebook presented as slides with jupyterlab-rise (issue 12): the
/rise/ page renders one reveal.js slide per slide cell of the notebook's
slideshow metadata, and arrow keys move through them; on the pins of the
``workshop`` extra a widget on a slide renders and responds (issue 24)."""

import json
import re

import pytest

from jlab import NOTEBOOKS

NOTEBOOK = "03_sharding_t2.ipynb"


def slide_count(name: str) -> int:
    cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
    return sum(c["metadata"].get("slideshow", {}).get("slide_type") == "slide" for c in cells)


def test_a_notebook_presents_as_its_slides(lab_server, browser):
    page = browser.new_page()
    try:
        page.goto(f"{lab_server.url}/rise/{NOTEBOOK}", timeout=60_000)
        expected = slide_count(NOTEBOOK)
        assert expected == 6
        # reveal.js adds the sections one by one: wait until it has made them all
        page.wait_for_function(
            f"() => document.querySelectorAll('.reveal .slides > section').length >= {expected}",
            timeout=60_000)
        slides = page.locator(".reveal .slides > section")
        assert slides.count() == expected
        assert "See what each GPU keeps" in slides.first.inner_text()
        go_to_slide(page, 1)
        assert page.evaluate("location.hash") == "#/slide-1-0"
    finally:
        page.close()


def go_to_slide(page, slide: int) -> None:
    """Move the deck to ``slide`` and return once it has stayed there for a
    second. A press made before reveal.js listens to the keyboard is lost, and
    RISE may still move the deck to the selected cell's slide after a press
    has landed (its start and its ``activeCellChanged`` handler), so this
    reads where the deck is, presses towards ``slide`` and checks again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # the suite's own skip
    page.wait_for_selector(".reveal.ready", timeout=60_000)
    for _ in range(4 * slide + 12):
        shown = shown_slide(page)
        if shown == slide:
            page.wait_for_timeout(1_000)
            if shown_slide(page) == slide:
                return
            continue
        before = page.evaluate("location.hash")
        page.keyboard.press("ArrowRight" if shown < slide else "ArrowLeft")
        try:
            page.wait_for_function("(before) => location.hash !== before", arg=before,
                                   timeout=5_000)
        except PlaywrightTimeout:  # the press was lost: look and press again
            continue
    raise AssertionError(f"the deck did not stay at slide {slide}: {page.url}")


def shown_slide(page) -> int:
    """Index of the slide the deck shows, from reveal.js's hash ``#/slide-h-v``."""
    found = re.fullmatch(r"#/slide-(\d+)-\d+", page.evaluate("location.hash"))
    return int(found.group(1)) if found else 0


def explorer_slide(name: str) -> int:
    """Index (from 0) of the slide that shows the notebook's first explorer."""
    cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
    slide = -1
    for cell in cells:
        slide += cell["metadata"].get("slideshow", {}).get("slide_type") == "slide"
        if "display(explorer.box)" in "".join(cell["source"]):
            return slide
    raise ValueError(f"{name} displays no explorer")


@pytest.mark.parametrize("notebook", ["01_variables.ipynb", NOTEBOOK])
def test_a_widget_on_a_slide_responds(lab_server, browser, runs, notebook):
    """The pins of the ``workshop`` extra: with jupyterlab_widgets 3.0.11 or
    newer the /rise/ page lacks the shared module @jupyterlab/console that the
    widget manager requires, and every widget shows as text."""
    runs.get(notebook)  # run and saved in JupyterLab: the slideshow shares its kernel
    page = browser.new_page()
    try:
        page.goto(f"{lab_server.url}/rise/{notebook}", timeout=60_000)
        page.wait_for_selector(".reveal .slides > section", timeout=60_000)
        slide = explorer_slide(notebook)
        go_to_slide(page, slide)
        shown = ".reveal .slides > section.present .actmem-explorer"
        t = page.locator(f"{shown} .widget-dropdown").filter(
            has=page.locator("label", has_text=re.compile(r"^t$"))).locator("select")
        t.wait_for(state="visible", timeout=60_000)
        # the browser suite moved this explorer's controls before (same kernel):
        # check that the readouts respond to t, whatever the other controls are
        readouts = f"[...document.querySelectorAll('{shown} [class*=actmem-readout]')]" \
            ".map(el => el.innerText).join('|')"
        page.wait_for_function(f"() => ({readouts}).includes('MiB')", timeout=60_000)
        before = page.evaluate(f"() => {readouts}")
        current = t.evaluate("el => el.options[el.selectedIndex].text")
        other = [o for o in t.locator("option").all_inner_texts() if o != current]
        t.select_option(label=other[-1])
        page.wait_for_function(f"(before) => {{ const now = {readouts}; "
                               "return now !== before && now.includes('MiB'); }",
                               arg=before, timeout=60_000)
    finally:
        page.close()

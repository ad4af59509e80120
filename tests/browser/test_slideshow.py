"""A notebook presented as slides with jupyterlab-rise (issue 12): the
/rise/ page renders one reveal.js slide per slide cell of the notebook's
slideshow metadata, and arrow keys move through them."""

import json
import time

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
        page.wait_for_selector(".reveal .slides > section", timeout=60_000)
        slides = page.locator(".reveal .slides > section")
        assert slides.count() == slide_count(NOTEBOOK) == 6
        assert "See what each GPU keeps" in slides.first.inner_text()
        page.keyboard.press("ArrowRight")
        deadline = time.monotonic() + 10
        while "slide-1" not in page.url and time.monotonic() < deadline:
            time.sleep(0.2)
        assert page.url.endswith("#/slide-1-0")
    finally:
        page.close()

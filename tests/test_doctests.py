"""The examples in actmem's docstrings run and print what they say: every
module with an example (a ``>>>`` line not marked ``+SKIP``) is found, so a
new or changed example cannot go unchecked."""

import doctest
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "actmem"
EXAMPLE = re.compile(r"^\s*>>> (?!.*doctest: \+SKIP)", re.MULTILINE)
MODULES = sorted(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
                 for path in PACKAGE.rglob("*.py")
                 if EXAMPLE.search(path.read_text(encoding="utf-8")))


def test_the_modules_with_examples_are_found():
    assert {"actmem.layer.memory", "actmem.run.schedule.schedules", "actmem.views.fit_levers",
            "actmem.views.fit_views"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ImportError:  # actmem.measure raises its own, with the install hint
        if importlib.util.find_spec("torch") is not None:
            raise
        pytest.skip(f"{name} needs torch (pip install -e '.[measure]')")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0

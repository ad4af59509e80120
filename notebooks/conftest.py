"""nbval collection rules for notebooks/.

Notebook 07 measures a PyTorch layer, so it needs the ``measure`` extra
(torch). Without torch its cells are skipped with a reason, unless the
``CI`` environment variable is set: in CI a missing torch must fail.
"""

import importlib.util
import os

import pytest

NEEDS_TORCH = {"07_measure_it.ipynb"}


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CI") or importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason="torch is not installed: pip install -e "
                            "'.[measure]' (torch==2.13.0, CPU) to run this notebook")
    for item in items:
        if item.path.name in NEEDS_TORCH:
            item.add_marker(skip)

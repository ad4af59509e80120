"""nbval collection rules for notebooks/ (kept at the repository root, so that
``jupyter lab notebooks/`` shows the lessons and no test plumbing).

A notebook lists the optional modules it needs in its metadata
(``"actmem": {"requires": ["torch"]}``; notebook 08 needs the ``measure``
extra). When one is missing its cells are skipped with a reason, unless the
``CI`` environment variable is set: in CI a missing module must fail.
"""

import importlib.util
import json
import os

import pytest


def missing_requirements(path) -> list[str]:
    """Modules the notebook at ``path`` requires that cannot be imported."""
    metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    needs = metadata.get("actmem", {}).get("requires", [])
    return [m for m in needs if importlib.util.find_spec(m) is None]


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CI"):
        return
    for item in items:
        if item.path.suffix == ".ipynb" and (missing := missing_requirements(item.path)):
            item.add_marker(pytest.mark.skip(
                reason=f"{', '.join(missing)} not installed: pip install torch==2.13.0 "
                "--index-url https://download.pytorch.org/whl/cpu to run this notebook"))

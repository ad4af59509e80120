"""Notebook 04 under a learner's edits (issue 10 item 10): another valid
layer runs top to bottom, an invalid one stops at the layer cell with a
message that names the sizes, and no output shows bytes in scientific
notation."""

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "04_worked_example.ipynb"
LAYER = "s, b, h, a = 2048, 1, 4096, 32"
SCIENTIFIC = re.compile(r"\d(\.\d+)?e[+-]?\d", re.I)


def run_with(layer: str) -> nbformat.NotebookNode:
    """Notebook 04 with its layer line replaced by ``layer``, executed as
    "Run All" does: it stops at the first failing cell."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith(LAYER))
    cell.source = cell.source.replace(LAYER, layer, 1)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    return nb


def printed(nb) -> str:
    return "\n".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.parametrize("layer, table_ts", [
    ("s, b, h, a = 2048, 1, 5120, 40", [1, 2, 4, 8]),
    ("s, b, h, a = 2048, 1, 6656, 52", [1, 2, 4]),
    ("s, b, h, a = 2**26, 1, 4096, 32", [1, 2, 4, 8]),
])
def test_another_valid_layer_runs_top_to_bottom(layer, table_ts):
    text = printed(run_with(layer))
    rows = re.findall(r"^ *(\d+) +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+$", text, re.M)
    assert [int(t) for t in rows] == table_ts
    assert not SCIENTIFIC.search(text), SCIENTIFIC.search(text)


@pytest.mark.parametrize("layer, message", [
    ("s, b, h, a = 2048, 1, 4096, 30", "h=4096 must be divisible by a=30"),
    ("s, b, h, a = 2047, 1, 4096, 32", "s=2047, h=4096, a=32 share no tensor-parallel size"),
])
def test_an_invalid_layer_stops_at_the_layer_cell_with_a_clear_message(layer, message):
    with pytest.raises(CellExecutionError) as error:
        run_with(layer)
    assert message in str(error.value) and "NameError" not in str(error.value)
    assert LAYER.split(" = ")[0] in str(error.value)  # the failing cell is the layer cell

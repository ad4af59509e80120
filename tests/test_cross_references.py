"""Every "notebook NN" of the English course points to a notebook that exists
and, where the words just before it name a topic, to the notebook that teaches
it (issue 38: the split and renumbering left references to the old numbers).

A topic counts as taught by a notebook when the notebook's own prose names it,
leaving out its sentences that point elsewhere ("see notebook 06's uneven
stages" does not make 05 the place of uneven stages). Only the clause around
a reference is read, so a sentence naming several notebooks checks each one
against its own words.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}
NUMBER = r"\d{2}[a-z]?(?![\d.]|\s?(?:MiB|GiB|GB|KiB|%|x\b))"
REFERENCE = re.compile(r"[Nn]otebooks?\s+(" + NUMBER + r"(?:(?:,\s*|\s+and\s+|\s+or\s+|-|–)"
                       + NUMBER + r")*)")
SENTENCE = re.compile(r"\n\n|(?<=[.!?])\s+|(?<=[.!?]\))\s+")
TOPICS = ("uneven", "timeline", "mask", "logits", "FSDP2", "planner", "ledger",
          "LayerNorm statistics", "reserve", "zero bubble", "DualPipe", "glossary", "cheat sheet")
"""Topics a reference's clause may name; each lives in some notebooks' prose."""


def prose(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def own_prose(path: Path) -> str:
    """The prose without the sentences that point to other notebooks."""
    return " ".join(s for s in SENTENCE.split(prose(path)) if not REFERENCE.search(s)).lower()


OWN = {number: own_prose(path) for number, path in NOTEBOOKS.items()}


def references(path: Path):
    """(the referenced numbers, the clause before the reference) in ``path``."""
    text, last = prose(path), 0
    for found in REFERENCE.finditer(text):
        clause = re.split(r"[,;]|\n\n", text[max(last, found.start() - 60):found.end()])[-1]
        last = found.end()
        yield re.findall(r"\d{2}[a-z]?", found.group(1)), clause.lower()


@pytest.mark.parametrize("number", list(NOTEBOOKS))
def test_references_name_existing_notebooks_that_teach_their_topic(number):
    wrong = []
    for numbers, clause in references(NOTEBOOKS[number]):
        wrong += [f"notebook {n} does not exist: {clause!r}" for n in numbers if n not in OWN]
        if len(numbers) == 1 and numbers[0] in OWN:
            wrong += [f"notebook {numbers[0]} does not teach {topic!r}: {clause!r}"
                      for topic in TOPICS if topic.lower() in clause
                      and topic.lower() not in OWN[numbers[0]]]
    assert not wrong, "\n".join(wrong)


def test_a_stale_reference_is_caught(tmp_path):
    """The check fails on the slip the review found (09 sent uneven splits to 05)."""
    stale = tmp_path / "09_x.ipynb"
    stale.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": [
        "the last the logits; an uneven split (notebook 05) moves layers away."]}]}))
    (numbers, clause), = references(stale)
    assert numbers == ["05"] and "uneven" in clause and "uneven" not in OWN["05"]
    assert "uneven" in OWN["06"]

"""Glossary, cheat sheet and common mistakes (issue 11 item 6): generated
from actmem, so they cover its names and state its numbers."""

import json
import re
from pathlib import Path

import pytest

import actmem
from actmem.glossary import GLOSSARY, SYMBOLS, glossary_table
from actmem.run.states import ACCOUNTINGS
from actmem.views.cheatsheet import formulas, mistakes
from actmem.views.cli import main

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def markdown_symbols() -> set[str]:
    """Single letters the notebooks' prose writes as code: `s`, `t`, ..."""
    found = set()
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                found |= set(re.findall(r"`([A-Za-z])`", "".join(cell["source"])))
    return found


def test_every_symbol_the_notebooks_use_is_in_the_glossary():
    assert markdown_symbols() <= {e.term for e in SYMBOLS}


def test_every_name_actmem_gives_a_reader_is_explained():
    names = {*actmem.PLACEMENTS, *actmem.GROUPS, *actmem.SCHEDULES,
             *(r for r in actmem.RECOMPUTE if r != "none"), "zero"}
    explained = {name for e in GLOSSARY for name in e.code}
    assert names <= explained and "megatron" in ACCOUNTINGS


def test_every_entry_has_a_meaning_and_a_chinese_term():
    assert all(e.meaning and re.search(r"[\u4e00-\u9fff]", e.chinese) for e in GLOSSARY)
    assert len({e.term for e in GLOSSARY}) == len(GLOSSARY)
    assert glossary_table().count("\n") == len(GLOSSARY) + 1


def test_cheat_sheet_states_the_published_numbers():
    rows = {formula: number for formula, _, number in formulas()}
    assert rows["sbh(10 + 24/t + 5as/(ht))"] == "worked example, t=8: 184 MiB"
    # the paper's Table 2 for GPT-3 175B at t=8
    assert rows["sbh/t (34 + 5as/h)"] == "GPT-3 175B, t=8: 342 MiB"
    assert rows["34sbh/t"] == "GPT-3 175B, t=8: 102 MiB"
    assert rows["2sbh"] == "GPT-3 175B: 48 MiB"
    assert rows["L · M"] == "worked example, L=32, t=8: 5.75 GiB"  # 32 x 184 MiB


def test_common_mistakes_carry_their_numbers():
    rows = dict(mistakes())
    assert rows["GB for GiB"] == "an 80 GB GPU holds 74.51 GiB, not 80 GiB"
    assert "L·M = 5.75 GiB" in rows["L·M/p as a pipeline stage's peak"]
    assert "not L·M/p = 1.44 GiB" in rows["L·M/p as a pipeline stage's peak"]
    assert rows["selective recomputation on top of FlashAttention"].startswith(
        "saves only the log-sum-exp: 32 KiB of 104.03 MiB")


def test_cli_writes_the_cheat_sheet_and_refuses_other_files(tmp_path, capsys):
    out = tmp_path / "sheet.pdf"
    assert main(["cheatsheet", str(out)]) == 0
    assert out.read_bytes().startswith(b"%PDF")
    with pytest.raises(SystemExit) as exit_info:
        main(["cheatsheet", str(tmp_path / "sheet.txt")])
    assert exit_info.value.code == 2
    assert "must end in .pdf or .png" in capsys.readouterr().err

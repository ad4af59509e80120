"""Glossary, cheat sheet and common mistakes (issue 11 item 6): generated
from actmem, so they cover its names and state its numbers."""

import json
import re
from pathlib import Path

import pytest

import actmem
from actmem.glossary import GLOSSARY, SYMBOLS, glossary_table
from actmem.run.model_states.states import ACCOUNTINGS
from actmem.language import english, set_language
from actmem.views.cheatsheet import (checklist_markdown, cheat_sheet_figure, formulas,
                                     formulas_markdown, mistakes, mistakes_markdown,
                                     states_and_peak)
from actmem.views.cheatsheet_levers import levers_figure
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
    """A Chinese term, or the name itself where Chinese keeps it (FlashAttention:
    闪存 would be flash storage), and the meaning in both languages."""
    han = re.compile(r"[\u4e00-\u9fff]")
    assert all(e.meaning and han.search(e.meaning_zh) for e in GLOSSARY)
    assert all(han.search(e.chinese) or e.chinese == e.term for e in GLOSSARY)
    assert next(e for e in GLOSSARY if e.term == "FlashAttention").chinese == "FlashAttention"
    assert len({e.term for e in GLOSSARY}) == len(GLOSSARY)
    assert glossary_table("en").count("\n") == glossary_table("zh").count("\n") == len(GLOSSARY) + 1


def test_the_glossary_table_speaks_the_language_asked():
    english, chinese = glossary_table("en"), glossary_table("zh")
    assert english.startswith("| term | meaning | 中文 |")
    assert chinese.startswith("| 符号或术语 | 含义 | 中文术语 |")
    m = next(e for e in GLOSSARY if e.term == "m")
    assert "per optimizer step" in m.meaning and "peak_in_flight" in m.meaning
    assert f"| `m` | {m.meaning_zh} | 每步微批次数 |" in chinese
    set_language("zh")
    try:
        assert glossary_table() == chinese
    finally:
        set_language("en")
    with pytest.raises(ValueError, match="language='fr' is not offered"):
        glossary_table("fr")


def test_cheat_sheet_states_the_published_numbers():
    rows = {formula: number for formula, _, number in formulas(english)}
    assert rows["sbh(10 + 24/t + 5as/(ht))"] == "worked example, t=8: 184 MiB"
    # the paper's Table 2 for GPT-3 175B at t=8
    assert rows["sbh/t (34 + 5as/h)"] == "GPT-3 175B, t=8: 342 MiB"
    assert rows["34sbh/t"] == "GPT-3 175B, t=8: 102 MiB"
    assert rows["2sbh"] == "GPT-3 175B: 48 MiB"
    assert rows["L · M"] == "worked example, L=32, t=8: 5.75 GiB"  # 32 x 184 MiB


def test_cheat_sheet_states_model_states_logits_and_the_peak():
    rows = {formula: number for formula, _, number in states_and_peak(english)}
    # ZeRO sec. 3.1: 16 B; Megatron-LM: 18 B, 6 + 12/d with the distributed optimizer
    assert set(rows) >= {"2 + 2 + 12 = 16", "2 + 4 + 12 = 18", "6 + 12/d"}
    params = actmem.parameter_count(actmem.PRESETS["llama2-7b"])
    assert rows["2 + 4 + 12 = 18"].endswith(actmem.format_bytes(18 * params, "GiB"))
    # Megatron's loss: fp32 logits kept (4sbV), the bf16 logits beside them at the loss (6sbV)
    sbv = 8192 * 128256
    assert rows["4·s·b·V/t  (6·s·b·V/t)"] == (
        f"LLaMA-3-8B, s=8192, V=128256: {actmem.format_bytes(4 * sbv, 'GiB')} "
        f"({actmem.format_bytes(6 * sbv, 'GiB')})")
    peak = actmem.training_memory(actmem.PRESETS["llama2-7b"],
                                  gradient_buffer="backward").stages[0]
    assert peak.peak == peak.timeline.peak.total < peak.total
    assert rows["peak = the largest moment"].endswith(
        f"peak {actmem.format_bytes(peak.peak, 'GiB')}, "
        f"parts {actmem.format_bytes(peak.total, 'GiB')}")


def test_common_mistakes_are_costliest_first_and_carry_their_numbers():
    rows = mistakes(english)
    assert [r.cost for r in rows] == sorted((r.cost for r in rows), reverse=True)
    by_name = {r.name: r for r in rows}
    # GPU memory is binary: an A100 80GB reports 81920 MiB; 80 x 10^9 bytes is 74.51 GiB
    label = by_name['reading a GPU\'s "80GB" as 80 x 10^9 bytes']
    assert label.cost == 81920 * 2**20 - 80 * 10**9
    assert label.numbers == ("A100 80GB reports 81920 MiB = 80 GiB; 80 x 10^9 bytes is only "
                             "74.51 GiB")
    assert by_name["forgetting the fp32 logits at a 128k vocabulary"].cost == 6 * 8192 * 128256
    assert "L·M = 5.75 GiB" in by_name["L·M/p as a pipeline stage's peak"].numbers
    assert "not L·M/p = 1.44 GiB" in by_name["L·M/p as a pipeline stage's peak"].numbers
    dropout = by_name["forgetting dropout"]
    assert dropout.numbers.startswith("three masks and the attention-dropout output")
    # attention-dropout mask as²b/t (16 MiB) and output 2as²b/t (32 MiB), two sbh masks (8 each)
    assert dropout.cost == 64 * 2**20
    last = by_name["assuming the first stage is the most loaded"]
    assert "stage 3 peaks at" in last.numbers and last.cost > 0
    # the two small ones go last
    assert [r.name for r in rows[-2:]] == ["SwiGLU at the wrong width",
                                           "selective recomputation on top of FlashAttention"]
    assert rows[-1].numbers.startswith("saves only the log-sum-exp: 32 KiB of 104.03 MiB")
    assert not any("74.51 GiB, not 80" in r.numbers for r in rows)


def test_markdown_tables_carry_every_row():
    assert formulas_markdown(english).count("\n") == len(formulas()) + len(states_and_peak()) + 1
    assert mistakes_markdown(english).count("\n") == len(mistakes()) + 1
    assert "81920 MiB" in checklist_markdown(english)


def _overlaps(fig):
    """Pairs of texts whose boxes overlap, and texts outside the page."""
    from matplotlib.text import Text
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
             if t.get_text().strip()]
    page = fig.bbox
    outside = [text for text, box in boxes
               if box.x0 < page.x0 or box.x1 > page.x1 or box.y0 < page.y0 or box.y1 > page.y1]
    clash = [(a[:30], b[:30]) for i, (a, box_a) in enumerate(boxes)
             for b, box_b in boxes[i + 1:] if box_a.overlaps(box_b)]
    return outside, clash


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("page", [cheat_sheet_figure, levers_figure])
def test_each_page_is_one_a4_landscape_without_overlaps_and_displays(page, language):
    set_language(language)
    try:
        fig = page()
        assert tuple(fig.get_size_inches()) == (11.69, 8.27)
        assert fig.axes and not fig.axes[0].axison  # IPython shows a figure with axes only
        assert _overlaps(fig) == ([], [])
    finally:
        set_language("en")


def test_cli_writes_the_cheat_sheet_and_refuses_other_files(tmp_path, capsys):
    out = tmp_path / "sheet.pdf"
    assert main(["cheatsheet", str(out)]) == 0
    assert out.read_bytes().startswith(b"%PDF")
    assert re.findall(rb"/Count (\d+)", out.read_bytes()) == [b"2"]  # and today's levers
    with pytest.raises(SystemExit) as exit_info:
        main(["cheatsheet", str(tmp_path / "sheet.txt")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err  # names the argument, its value and what is allowed
    assert "out=" in err and "sheet.txt" in err and ".pdf or .png" in err

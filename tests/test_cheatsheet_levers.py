"""The cheat sheet's second page, today's levers (issue 23 item 10): each
number is actmem's, in both languages, and the sheet is two A4 pages."""

import re

from actmem import ledger_rows, model_states, training_memory
from actmem.language import english, translator
from actmem.run.moments.cp_timeline import exchange_buffers
from actmem.views.cheatsheet_levers import (LLAMA2, LONG, LORA, MIXTRAL, levers,
                                            levers_markdown, write_sheet)

ROWS = levers(english)
LEVER = {lever.split()[0]: (rule, number) for lever, rule, number in ROWS}


def test_every_lever_of_the_issue_has_a_row_with_its_flag():
    assert list(LEVER) == ["cp", "ep,", "FP8", "LoRA", "offloading", "MLA",
                           "recompute_modules"]
    assert all(re.search(r"\(--[a-z-]+|\(lora_rank", lever) for lever, _, _ in ROWS)


def test_cp_row_states_the_rows_over_cp_and_the_exchange_buffers():
    """17.02 GiB per layer at cp=1 (s=131072), an eighth at cp=8, and the
    p2p ring's 1.52 GiB (cp_timeline)."""
    rule, number = LEVER["cp"]
    layer = sum(r.bytes for r in ledger_rows(LONG.layer(1, False, "none", moe=False)))
    ring = sum(exchange_buffers(LONG.layer(1, False, "none", moe=False, cp=8)).values())
    assert "s/cp" in rule and "d·cp" in rule
    assert f"keeps {layer / 2**30:.2f} GiB at cp=1" in number
    assert f"plus {ring / 2**30:.2f} GiB inside" in number
    assert ring == 8 * (64 + 128 + 2) * 2**20  # cp x (K+V, the output, the fp32 lse) per step


def test_ep_row_is_model_states_over_the_experts():
    states = model_states(MIXTRAL, accounting="megatron", distributed_optimizer=True, d=8,
                          ep=8, etp=1)
    assert f"{states.weights / 2**30:.2f} GiB at ep=8" in LEVER["ep,"][1]


def test_lora_row_is_the_peak_with_frozen_weights():
    peak = training_memory(LLAMA2.with_(**LORA), accounting="megatron").most_loaded.peak
    assert LEVER["LoRA"][1].endswith(f"-> {peak / 2**30:.2f} GiB")
    assert "frozen weights: 2 bytes" in LEVER["LoRA"][0]


def test_both_languages_carry_the_same_numbers():
    zh = levers(translator("zh"))
    numbers = re.compile(r"\d+(?:\.\d+)?")
    for (_, rule, number), (_, rule_zh, number_zh) in zip(ROWS, zh):
        assert re.search(r"[\u4e00-\u9fff]", rule_zh + number_zh)
        assert sorted(numbers.findall(number)) == sorted(numbers.findall(number_zh))
    assert levers_markdown(english).count("\n") == len(ROWS) + 1


def test_a_png_sheet_stacks_the_two_a4_pages(tmp_path):
    """(A PDF's two pages: tests/test_cheatsheet.py.)"""
    png = tmp_path / "sheet.png"
    with open(png, "wb") as file:
        write_sheet(file, "png")
    from PIL import Image
    with Image.open(png) as image:
        assert image.size == (round(11.69 * 100), 2 * round(8.27 * 100))

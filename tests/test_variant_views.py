"""Notebook 07's views: valid choices, text tables, the stacked figure and
the VariantExplorer, whose readouts must equal the pure functions."""

import itertools

import pytest

import actmem
from actmem.layer.ledger_diff import diff_ledgers
from actmem import variant_views
from actmem.views.figures import GROUP_LABELS
from actmem.views.variant_views import (
    BASELINE, VariantExplorer, breakdown, change_text, diff_html, ffn_choices,
    kv_head_choices, results_table, stacked_figure,
)

GPT3 = dict(s=2048, b=1, h=12288, a=96, t=8)
LLAMA = dict(s=4096, b=1, h=8192, a=64, t=8, kv_heads=8, ffn_hidden_size=28672,
             activation="swiglu", dropout=False, flash_attention=True)


@pytest.mark.parametrize("a, t, expected", [
    (64, 8, [8, 16, 32, 64]), (32, 8, [8, 16, 32]), (32, 1, [1, 2, 4, 8, 16, 32]),
    (96, 8, [8, 16, 24, 32, 48, 96]), (52, 13, [13, 26, 52]), (8, 8, [8]),
])
def test_kv_heads_divide_a_and_are_multiples_of_t(a, t, expected):
    assert kv_head_choices(a, t) == expected


def test_tensor_parallel_choices_add_s_only_under_sequence_parallelism():
    assert actmem.valid_tensor_parallel_sizes(6656, 52) == [1, 2, 4, 13, 26, 52]
    assert actmem.valid_tensor_parallel_sizes(6656, 52, s=2048) == [1, 2, 4]
    assert actmem.valid_tensor_parallel_sizes(6656, 52, s=2080) == [1, 2, 4, 13, 26, 52]


def test_ffn_choices_keep_whole_widths_that_t_divides():
    # 8h/3 is not whole for h = 8192; Megatron-LM's SwiGLU width rounds it to 21824
    assert ffn_choices(8192, 8, 28672) == [("4h = 32768", 32768), ("7h/2 = 28672", 28672),
                                           ("SwiGLU default = 21824", 21824)]
    assert ffn_choices(4096, 8) == [("4h = 16384", 16384), ("7h/2 = 14336", 14336),
                                    ("SwiGLU default = 10880", 10880)]
    assert ffn_choices(4096, 256) == [("4h = 16384", 16384), ("7h/2 = 14336", 14336)]
    assert ffn_choices(16, 1) == [("4h = 64", 64), ("7h/2 = 56", 56)]  # no SwiGLU rule
    assert ffn_choices(3072, 1, 11008) == [("4h = 12288", 12288), ("8h/3 = 8192", 8192),
                                           ("7h/2 = 10752", 10752), ("f = 11008", 11008)]
    assert ffn_choices(3072, 1024, 11008) == [("4h = 12288", 12288), ("8h/3 = 8192", 8192)]


def test_results_table_prints_gpt3_table2_in_mib():
    lines = results_table(actmem.table2(**GPT3)).splitlines()
    totals = [line.split()[-2] for line in lines[1:]]
    assert totals == ["2736", "552", "342", "312", "102", "48"]
    assert lines[1].startswith("no parallelism ")
    assert lines[1].split()[2:4] == ["240", "MiB"]  # fixed 10sbh at t=1


def test_breakdown_and_change_text():
    base = actmem.activation_memory(2048, 1, 4096, 32, 8)
    sel = actmem.activation_memory(2048, 1, 4096, 32, 8, recompute="selective")
    assert breakdown(base) == ("184 MiB (fixed 80 MiB, intermediate 24 MiB, "
                               "attention map 80 MiB)")
    assert change_text(base, sel) == "-80 MiB (-43.5%)"
    swiglu = actmem.activation_memory(2048, 1, 4096, 32, 8, activation="swiglu",
                                      ffn_hidden_size=4 * 4096)
    assert change_text(base, swiglu) == "+8 MiB (+4.3%)"
    # Megatron-LM's SwiGLU width 10880 for h = 4096: 64 KiB less than GeLU's 4h
    narrow = actmem.activation_memory(2048, 1, 4096, 32, 8, activation="swiglu")
    assert change_text(base, narrow) == "-0.06 MiB (under 0.1%)"


def test_diff_html_has_one_row_per_tensor_and_bolds_changes():
    base = actmem.activation_memory(2048, 1, 4096, 32, 8)
    flash = actmem.activation_memory(2048, 1, 4096, 32, 8, flash_attention=True)
    text = diff_html(diff_ledgers(base, flash))
    assert text.count("<tr>") == 1 + 16
    assert text.count('style="font-weight:bold"') == 4 * 5
    assert "<td>added</td>" in text.replace('<td style="font-weight:bold">', "<td>")


def test_stacked_figure_bars_are_the_groups_in_mib():
    results = actmem.table2(**GPT3)
    fig = stacked_figure(results, "GPT-3 175B")
    ax = fig.axes[0]
    assert "MiB" in ax.get_xlabel()
    assert [tick.get_text() for tick in ax.get_yticklabels()] == list(results)[::-1]
    widths = [p.get_width() for p in ax.patches[:18]]
    # three groups x six bars, bottom bar = full recomputation, top = no parallelism
    totals = [sum(widths[i::6]) for i in range(6)]
    assert totals == [48, 102, 312, 342, 552, 2736]
    # then the full-recomputation bar again, hatched: the layer input, not the fixed term
    (checkpoint,) = ax.patches[18:]
    assert checkpoint.get_width() == 48 and checkpoint.get_hatch() == "//"
    assert [t.get_text() for t in ax.texts] == [" 48", " 102", " 312", " 342",
                                                " 552", " 2736"]
    # neutral labels: true under sequence parallelism and FlashAttention too
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        *GROUP_LABELS.values(), "layer input, kept for full recomputation"]


def check_readouts(x: VariantExplorer) -> None:
    v = x.values()
    s, h = x.layer["s"], x.layer["h"]
    assert v["t"] in actmem.valid_tensor_parallel_sizes(
        h, v["a"], s if v["sequence_parallel"] else None)
    assert list(x.controls["kv_heads"].options) == kv_head_choices(v["a"], v["t"])
    assert v["kv_heads"] in kv_head_choices(v["a"], v["t"])
    assert v["ffn_hidden_size"] % v["t"] == 0
    base = actmem.activation_memory(**x.layer, a=v["a"], t=v["t"])
    chosen = actmem.activation_memory(**x.layer, **v)
    assert x.readouts["chosen"].value == f"chosen layer: {breakdown(chosen)}"
    assert x.readouts["baseline"].value == f"{BASELINE}: {breakdown(base)}"
    assert x.readouts["change"].value == f"change: {change_text(base, chosen)}"
    assert x.readouts["diff"].value == diff_html(diff_ledgers(base, chosen))


def test_explorer_readouts_equal_the_pure_functions_over_a_grid():
    x = VariantExplorer(s=2048, b=1, h=4096, a=32, t=8, figure=False)
    c = x.controls
    grid = itertools.product(c["a"].options, actmem.RECOMPUTE, (False, True),
                             (False, True), actmem.ACTIVATIONS, (False, True))
    for a, recompute, sp, flash, activation, dropout in grid:
        c["a"].value = a
        c["sequence_parallel"].value = sp
        for t in c["t"].options:
            c["t"].value = t
            for kv in c["kv_heads"].options[::2]:
                c["kv_heads"].value = kv
                c["recompute"].value = recompute
                c["flash_attention"].value = flash
                c["activation"].value = activation
                c["dropout"].value = dropout
                check_readouts(x)


def test_kv_heads_and_f_options_narrow_when_a_and_t_change():
    x = VariantExplorer(s=4096, b=1, h=8192, a=64, t=1, kv_heads=2, figure=False)
    assert x.controls["kv_heads"].options == tuple(kv_head_choices(64, 1))
    x.controls["t"].value = 8
    assert list(x.controls["kv_heads"].options) == [8, 16, 32, 64]
    assert x.controls["kv_heads"].value == 8  # 2 is no longer valid: smallest valid
    x.controls["a"].value = 8
    assert list(x.controls["kv_heads"].options) == [8]
    x.controls["t"].value = 2
    assert list(x.controls["kv_heads"].options) == [2, 4, 8]
    assert x.controls["kv_heads"].value == 8
    check_readouts(x)


def test_sequence_parallelism_narrows_t_to_divisors_of_s():
    x = VariantExplorer(s=2048, b=1, h=6656, a=52, t=13, figure=False)
    assert list(x.controls["t"].options) == [1, 2, 4, 13, 26, 52]
    x.controls["sequence_parallel"].value = True
    assert list(x.controls["t"].options) == [1, 2, 4]
    assert x.controls["t"].value == 4
    assert list(x.controls["kv_heads"].options) == [4, 52]
    check_readouts(x)


def test_llama_style_explorer_shows_flash_and_swiglu_changes():
    x = VariantExplorer(**LLAMA, figure=False)
    check_readouts(x)
    assert x.values()["ffn_hidden_size"] == 28672
    changes = {c.key: c.kind for c in diff_ledgers(*x.results())}
    assert {k for k, kind in changes.items() if kind == "removed"} == {
        "softmax_output", "attn_dropout_mask", "attn_dropout_output",
        "attn_out_dropout_mask", "mlp_out_dropout_mask", "gelu_input"}
    assert {k for k, kind in changes.items() if kind == "added"} == {
        "softmax_lse", "swiglu_gate", "swiglu_up"}
    assert {k for k, kind in changes.items() if kind == "shrunk"} == {
        "key", "value", "fc2_input"}  # g = 8 of 64 heads; f = 3.5h < 4h


def test_explorer_image_is_a_png_and_refreshes():
    x = VariantExplorer(**GPT3)
    first = x.image.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    x.controls["recompute"].value = "full"
    assert x.image.value != first and x.image.value[:4] == b"\x89PNG"
    assert x.readouts["chosen"].value.startswith("chosen layer: 48 MiB")
    assert x.readouts["baseline"].value.startswith("paper's layer (no options): 552 MiB")


def test_invalid_initial_values_raise_the_models_errors():
    with pytest.raises(ValueError, match=r"^t=8 must divide a=52"):
        VariantExplorer(h=6656, a=52, t=8, figure=False)
    with pytest.raises(ValueError, match=r"^kv_heads=5 must divide a=32"):
        VariantExplorer(kv_heads=5, figure=False)


def test_multi_head_attention_follows_a_and_gqa_keeps_its_kv_heads():
    mha = VariantExplorer(s=2048, b=1, h=4096, a=32, t=1, figure=False)
    mha.controls["a"].value = 64
    assert mha.values()["kv_heads"] == 64
    assert mha.results()[1].total == actmem.activation_memory(2048, 1, 4096, 64).total
    gqa = VariantExplorer(s=2048, b=1, h=4096, a=32, t=1, kv_heads=8, figure=False)
    gqa.controls["a"].value = 64
    assert gqa.values()["kv_heads"] == 8


def test_choices_refuse_sizes_that_are_not_positive_integers():
    with pytest.raises(ValueError, match=r"^t must be a positive integer \(>= 1\), got 0$"):
        ffn_choices(4096, 0)
    with pytest.raises(ValueError, match=r"^t must be a positive integer \(>= 1\), got 0$"):
        kv_head_choices(32, 0)
    with pytest.raises(ValueError, match=r"^a must be a positive integer"):
        kv_head_choices(0, 1)
    with pytest.raises(TypeError, match=r"^h must be a positive integer"):
        ffn_choices(4096.0, 1)
    with pytest.raises(ValueError, match=r"^extra must be a positive integer"):
        ffn_choices(4096, 1, extra=-8)


def test_large_layer_readouts_print_whole_mib():
    """s=32768, b=8, h=12288, a=96: millions of MiB, never 1.6e+06."""
    x = VariantExplorer(s=32768, b=8, h=12288, a=96, t=1, figure=True)
    texts = [w.value for w in x.readouts.values()]
    assert not any("e+" in text for text in texts)
    assert x.readouts["baseline"].value.startswith(f"{BASELINE}: 4036608 MiB (")
    assert "attention map 3932160 MiB" in x.readouts["baseline"].value
    x.controls["flash_attention"].value = True
    diff = x.readouts["diff"].value.replace('<td style="font-weight:bold">', "<td>")
    assert "<td>1572864</td><td>-</td><td>-1572864</td>" in diff  # softmax output
    assert not any("e+" in w.value for w in x.readouts.values())
    fig = stacked_figure(dict(zip(("paper", "flash"), x.results())), "big")
    # bars bottom-up: flash = 34 sbh + 4 bas bytes = 34 * 3072 + 96 MiB
    assert [t.get_text() for t in fig.axes[0].texts] == [" 104544", " 4036608"]


def test_docstring_examples():
    import doctest
    result = doctest.testmod(variant_views)
    assert result.attempted > 0 and result.failed == 0

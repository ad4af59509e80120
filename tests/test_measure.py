"""Measured saved tensors of the reference layer against the ledger.

Exact byte arithmetic for the small configuration (s=32, b=2, h=64, a=4):
t = 1 in this process, t = 2 on two real gloo ranks (one launch for all
variants). Skipped without torch unless CI is set (then torch must be there).
"""

import json
import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

import actmem  # noqa: E402
from actmem.measure import (SMALL, VARIANTS, measure_variants,  # noqa: E402
                            tensor_parallel_error)
from actmem.measure.__main__ import main  # noqa: E402
from actmem.measure.launch import on_ranks  # noqa: E402

s, b, h, a = SMALL["s"], SMALL["b"], SMALL["h"], SMALL["a"]
SBH, MAP = s * b * h, b * a * s * s
LAYERNORM_STATS = 2 * 2 * (s * b * 2)
"""Two LayerNorms x (mean, rstd) x s*b bfloat16 elements (CPU)."""


@pytest.fixture(scope="module")
def t1():
    return {n: ranks[0] for n, ranks in measure_variants().items()}


@pytest.fixture(scope="module")
def t2():
    return measure_variants(t=2)


def by_key(comparison):
    return {r.key: r for r in comparison.rows}


def test_paper_layer_t1_every_row_exact(t1):
    c = t1["paper"]
    assert all(r.exact for r in c.rows), [r for r in c.rows if not r.exact]
    assert c.measured_rows_total == c.ledger_total == SBH * 34 + 5 * MAP
    assert actmem.activation_memory(s, b, h, a).total == c.ledger_total


def test_paper_layer_extras_are_the_layernorm_statistics(t1):
    extras = t1["paper"].extras
    assert [e.storage.saved_by[0] for e in extras] == [
        "NativeLayerNormBackward0.result1", "NativeLayerNormBackward0.result2"] * 2
    assert [e.storage.block for e in extras] == ["attn_norm"] * 2 + ["mlp_norm"] * 2
    assert all(e.storage.nbytes == s * b * 2 and e.storage.dtype == "bfloat16"
               for e in extras)
    assert t1["paper"].extras_total == LAYERNORM_STATS == 512


@pytest.mark.parametrize("rank", [0, 1])
def test_paper_layer_t2_each_rank_exact(t2, rank):
    c = t2["paper"][rank]
    assert c.measurement.rank == rank
    assert all(r.exact for r in c.rows), [r for r in c.rows if not r.exact]
    assert c.measured_rows_total == SBH * (10 + 12) + 5 * MAP // 2 == 110592


@pytest.mark.parametrize("rank", [0, 1])
def test_t2_keeps_fixed_whole_and_halves_the_rest(t1, t2, rank):
    one, two = t1["paper"], t2["paper"][rank]
    assert two.group_bytes("fixed") == one.group_bytes("fixed") == 10 * SBH
    for group in ("intermediate", "attention_map"):
        assert 2 * two.group_bytes(group) == one.group_bytes(group)
    assert two.extras_total == one.extras_total  # LayerNorm is replicated


def test_dropout_masks_same_where_replicated(t2):
    for rank in t2["paper"]:
        assert rank.measurement.same_on_ranks == {
            "attn_dropout_mask": False,      # each rank its own heads
            "attn_out_dropout_mask": True,   # whole (s, b, h) on both ranks
            "mlp_out_dropout_mask": True}


@pytest.mark.parametrize("name", ["paper", "selective", "full", "no_dropout",
                                  "sdpa", "gqa", "swiglu"])
@pytest.mark.parametrize("t", [1, 2])
def test_variant_rows_match_the_ledger_exactly(t1, t2, name, t):
    for c in [t1[name]] if t == 1 else t2[name]:
        assert all(r.exact for r in c.rows), [r for r in c.rows if not r.exact]


def test_variant_totals_t1(t1):
    total = {n: c.measured_rows_total for n, c in t1.items()}
    assert total["selective"] == 34 * SBH
    assert total["full"] == 2 * SBH and t1["full"].extras == ()
    assert total["no_dropout"] == (34 - 2) * SBH + 2 * MAP  # two 1-byte masks go
    assert total["gqa"] == total["paper"] - 2 * (2 * SBH // 2)
    lse = by_key(t1["sdpa"])["softmax_lse"]
    assert (lse.measured_bytes, lse.measured_dtype) == (4 * b * a * s, "float32")


def test_cpu_dropout_masks_are_two_byte_noise(t1):
    rows = by_key(t1["cpu_dropout"])
    for key in ("attn_dropout_mask", "attn_out_dropout_mask", "mlp_out_dropout_mask"):
        r = rows[key]
        assert r.same_elements and r.measured_dtype == "bfloat16"
        assert r.measured_bytes == 2 * r.ledger_bytes
    assert t1["cpu_dropout"].measured_rows_total == t1["paper"].ledger_total + MAP + 2 * SBH


def test_eager_swiglu_keeps_silu_of_gate(t1):
    extras = [e for e in t1["swiglu"].extras if e.storage.block == "mlp"]
    f = 128  # Megatron-LM's SwiGLU width int(4h * 2/3 / 64) * 64 for h = 64
    assert len(extras) == 1 and extras[0].storage.nbytes == 2 * s * b * f
    assert extras[0].storage.saved_by == ("MulBackward0.self",)
    assert "silu(gate)" in extras[0].why


def test_sdpa_with_dropout_falls_back_to_fp32_math(t1):
    c = t1["sdpa_dropout"]
    rows = by_key(c)
    assert [k for k, r in rows.items() if r.measured_bytes == 0] == [
        "query", "key", "value", "softmax_lse"]
    fp32 = [e.storage for e in c.extras if e.storage.dtype == "float32"]
    assert sum(st.nbytes for st in fp32) == 4 * (3 * SBH + 3 * MAP)
    assert c.extras_total - LAYERNORM_STATS == 4 * (3 * SBH + 3 * MAP)


@pytest.mark.parametrize("options", [{}, {"activation": "swiglu", "kv_heads": 2,
                                          "recompute": "selective"}])
def test_tensor_parallel_layer_computes_the_unsharded_function(options):
    config = actmem.LayerConfig(s, b, h, a, t=2, **options)
    for out_err, grad_err in on_ranks(tensor_parallel_error, 2, config):
        assert out_err < 1e-5 and grad_err < 1e-5


def test_cli_json_t1_and_t2(capsys):
    assert main(["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"] == SMALL
    paper = data["variants"]["paper"]
    assert [len(paper["t=1"]), len(paper["t=2"])] == [1, 2]
    for rank in paper["t=1"] + paper["t=2"]:
        assert all(r["ledger_bytes"] == r["measured_bytes"] for r in rank["rows"])
        assert rank["extras_total"] == LAYERNORM_STATS
    assert paper["t=2"][1]["ledger_total"] == 110592


def test_every_variant_is_measured(t1):
    assert set(t1) == set(VARIANTS)


def test_rows_carry_the_measured_element_size(t1):
    rows = by_key(t1["paper"])
    assert rows["query"].measured_itemsize == 2  # bfloat16
    assert rows["attn_dropout_mask"].measured_itemsize == 1  # bool
    assert by_key(t1["sdpa"])["softmax_lse"].measured_itemsize == 4  # float32


def test_unknown_variant_names_are_refused_with_the_list():
    listed = ", ".join(VARIANTS)
    with pytest.raises(ValueError, match=f"^unknown variant 'flash'; choose from {listed}$"):
        measure_variants(["paper", "flash"])
    with pytest.raises(TypeError, match=r"^names must be a list of variant names, "
                                        r"e\.g\. \['paper'\], got the string 'paper'$"):
        measure_variants("paper")


def test_explorer_refuses_an_unmeasured_variant(t1):
    from actmem.measure.widgets import MeasureExplorer

    results = {"paper": {1: [t1["paper"]]}, "full": {1: [t1["full"]]}}
    with pytest.raises(ValueError, match=r"^variant='sdpa' was not measured; "
                                         r"choose from paper, full$"):
        MeasureExplorer(results, variant="sdpa")
    with pytest.raises(ValueError, match=r"^unknown variant 'mine'"):
        MeasureExplorer({"mine": results["paper"]}, variant="mine")
    with pytest.raises(ValueError, match=r"^results must hold at least one"):
        MeasureExplorer({})
    assert MeasureExplorer(results, variant="full").summary.value.startswith(
        "full recomputation (checkpointed layer): t=1 rank 0: ledger 8192 B, ")


def test_explorer_writes_the_chosen_variant(t1, t2):
    from actmem.measure.report import summary_line
    from actmem.measure.widgets import MeasureExplorer

    results = {n: {1: t1_list, 2: t2[n]} for n, t1_list in
               ((n, [c]) for n, c in t1.items())}
    explorer = MeasureExplorer(results)
    assert explorer.layer == SMALL and list(explorer.readouts) == ["summary", "table"]
    assert "(15/15 exact)" in explorer.summary.value
    explorer.choice.value = "sdpa_dropout"
    assert explorer.summary.value == summary_line("sdpa_dropout", results["sdpa_dropout"])
    assert "(9/13 exact), extras 147968 B" in explorer.summary.value
    assert "query" in explorer.table.value and "math fallback" in explorer.table.value


@pytest.fixture
def zh():
    actmem.set_language("zh")
    yield
    actmem.set_language("en")


def _code_keys(text, rows):
    """The ledger keys (``fc1_input``, ``query``) that ``text`` shows as words."""
    import re
    return [r.key for r in rows
            if re.search(rf"(?<![A-Za-z_]){r.key}(?![A-Za-z_])", text)]


def test_chinese_figure_labels_rows_by_their_names_not_their_keys(t1, t2, zh):
    from actmem.measure.figure import comparison_figure
    from actmem.translations import ZH

    paper = {1: [t1["paper"]], 2: t2["paper"]}
    fig = comparison_figure(paper, "The paper's layer: ledger and measurement")
    labels = [x.get_text() for x in fig.axes[0].get_yticklabels()]
    assert labels == [ZH[r.name] for r in t1["paper"].rows] + ["额外项（不在账本中）"]
    assert "MLP 第一个线性层的输入" in labels and "fc1_input" not in labels
    assert _code_keys(" ".join(labels), t1["paper"].rows) == []
    assert fig.axes[0].get_title() == "论文中的层：账本与实测"


def test_chinese_explorer_shows_titles_names_and_the_same_numbers(t1, t2, zh):
    import re

    from actmem.measure.widgets import MeasureExplorer

    results = {n: {1: [c], 2: t2[n]} for n, c in t1.items()}
    explorer = MeasureExplorer(results)
    for name in VARIANTS:
        explorer.choice.value = name
        summary, table = explorer.summary, explorer.table
        assert summary.shown.startswith(actmem.language.chinese(VARIANTS[name].title) + "：")
        assert "; " not in summary.shown and ": " not in summary.shown
        assert re.findall(r"\d+", summary.shown) == re.findall(r"\d+", summary.value)
        assert re.findall(r">(\d+|-)<", table.shown) == re.findall(r">(\d+|-)<", table.value)
        rows = [r for ranks in results[name].values() for c in ranks for r in c.rows]
        for text in (summary.shown, table.shown):
            assert _code_keys(text, rows) == [], (name, text)
        for text in (summary.value, table.value):  # "query", "key" are English words
            assert [k for k in _code_keys(text, rows) if "_" in k] == [], (name, text)
    explorer.choice.value = "paper"
    assert explorer.summary.shown == (
        "论文中的层（第 4.1 节）："
        "t=1 rank 0：账本 180224 B，实测各行 180224 B（15/15 行完全一致），额外项 512 B；"
        "t=2 rank 0：账本 110592 B，实测各行 110592 B（15/15 行完全一致），额外项 512 B；"
        "t=2 rank 1：账本 110592 B，实测各行 110592 B（15/15 行完全一致），额外项 512 B")
    assert "<td>MLP 第一个线性层的输入</td><td>固定项</td><td>8192</td><td>8192</td>" \
        in explorer.table.shown
    assert "<td>input of the MLP&#x27;s first linear</td><td>fixed</td><td>8192</td>" \
        in explorer.table.value


def test_variants_table_has_one_line_per_variant_with_exact_counts(t1, t2):
    from actmem.measure.report import variants_table
    results = {n: {1: [t1[n]], 2: t2[n]} for n in ("paper", "full")}
    lines = variants_table(results).splitlines()
    assert lines[0].split() == ["variant", "ledger", "t=1", "measured", "t=1", "exact",
                                "t=1", "extras", "t=1", "ledger", "t=2", "measured",
                                "t=2", "exact", "t=2", "extras", "t=2"]
    paper = lines[1].split()
    assert paper == ["paper", "180224", "180224", "15/15", "512",
                     "110592", "110592", "15/15", "512"]
    assert lines[2].split() == ["full", "8192", "8192", "1/1", "0",
                                "8192", "8192", "1/1", "0"]


def test_tables_name_rows_and_variants_in_chinese_and_keep_keys_in_english(t1, t2, zh):
    """Review M1: in Chinese the comparison and variant tables name a row as the figure does
    (the ledger's name) and a variant by its title; the numbers stay."""
    from actmem.language import english
    from actmem.measure.report import differing_rows, table, variants_table

    paper = {1: [t1["paper"]], 2: t2["paper"]}
    chinese, plain = table(paper).splitlines(), table(paper, tr=english).splitlines()
    assert chinese[1].startswith("第一个 LayerNorm 的输入") and plain[1].startswith("attn_norm_input")
    assert _code_keys(table(paper), t1["paper"].rows) == []
    assert [line.split()[-6:] for line in chinese[1:]] == [line.split()[-6:] for line in plain[1:]]
    results = {n: {1: [t1[n]], 2: t2[n]} for n in ("paper", "cpu_dropout")}
    lines = variants_table(results).splitlines()
    assert lines[2].startswith("F.dropout 在 CPU 上保存的 dropout 掩码")
    assert lines[2].split()[-8:] == ["180224", "196608", "12/15", "512",
                                     "110592", "122880", "12/15", "512"]
    assert differing_rows("cpu_dropout", t1["cpu_dropout"], tr=english) == (
        "cpu_dropout: rows that differ: [('attn_dropout_mask', 8192, 16384, 'bfloat16'), "
        "('attn_out_dropout_mask', 4096, 8192, 'bfloat16'), "
        "('mlp_out_dropout_mask', 4096, 8192, 'bfloat16')]")
    assert differing_rows("cpu_dropout", t1["cpu_dropout"]) == (
        "F.dropout 在 CPU 上保存的 dropout 掩码，不一致的行："
        "注意力 dropout 掩码，账本 8192 B，实测 16384 B（bfloat16）；"
        "注意力模块之后的 dropout 掩码，账本 4096 B，实测 8192 B（bfloat16）；"
        "MLP 模块之后的 dropout 掩码，账本 4096 B，实测 8192 B（bfloat16）")
    assert differing_rows("paper", t1["paper"], tr=english) == "paper: rows that differ: none"
    assert differing_rows("paper", t1["paper"]) == "论文中的层：没有不一致的行"
    assert variants_table(results).splitlines()[1].startswith("论文中的层  ")

"""Storage options as changes to ledger rows (sequence parallelism,
recomputation, FlashAttention, GQA, SwiGLU, no dropout)."""

import pytest
from hypothesis import given
from strategies import layers

import actmem
from actmem import activation_memory

S, B, H, A = 2048, 1, 4096, 32
SBH, MAP = S * B * H, B * A * S * S
MAP_ROWS = {"softmax_output", "attn_dropout_mask", "attn_dropout_output"}


def keys(result):
    return [r.key for r in result.rows]


@given(layers())
def test_explicit_defaults_equal_the_paper_formula(layer):
    defaults = dict(sequence_parallel=False, recompute="none", flash_attention=False,
                    kv_heads=layer[3], ffn_hidden_size=4 * layer[2],
                    activation="gelu", dropout=True)
    assert activation_memory(*layer, **defaults).total == actmem.paper_formula(*layer)


@given(layers(max_a=48, max_head_dim=48, max_s=4096, s_multiple_of_t=True))
def test_table2_rows_equal_the_papers_closed_forms(layer):
    s, b, h, a, t = layer
    sbh, map_ = s * b * h, 5 * a * s * s * b
    numerators = {  # Table 2 as (bytes * t, t); exact, no floor division
        "no parallelism": (34 * sbh + map_, 1),
        "tensor parallel": (10 * sbh * t + 24 * sbh + map_, t),
        "tensor + sequence parallel": (34 * sbh + map_, t),
        "tensor parallel + selective recompute": (10 * sbh * t + 24 * sbh, t),
        "tensor + sequence parallel + selective recompute": (34 * sbh, t),
        "full recompute": (2 * sbh, 1),
    }
    for name, result in actmem.table2(s, b, h, a, t).items():
        numerator, divisor = numerators[name]
        assert result.total * divisor == numerator, name
        assert result.total == actmem.TABLE2_FORMULAS[name](s, b, h, a, t), name


def test_sequence_parallel_divides_the_fixed_term_by_t():
    r = activation_memory(S, B, H, A, 8, sequence_parallel=True)
    assert r.fixed == 10 * SBH // 8
    assert {row.placement for row in r.rows if row.group == "fixed"} == {"sequence-split"}
    at_t1 = activation_memory(S, B, H, A, 1, sequence_parallel=True)
    assert [r.bytes for r in at_t1.rows] == [r.bytes for r in activation_memory(S, B, H, A, 1).rows]


def test_selective_recompute_drops_exactly_the_attention_map_rows():
    base, sel = activation_memory(S, B, H, A, 8), activation_memory(S, B, H, A, 8, recompute="selective")
    assert set(keys(base)) - set(keys(sel)) == MAP_ROWS
    assert sel.attention_map == 0 and sel.total == base.fixed + base.intermediate


@pytest.mark.parametrize("sp, expected", [(False, 2 * SBH), (True, 2 * SBH // 8)])
def test_full_recompute_keeps_only_the_layer_input(sp, expected):
    r = activation_memory(S, B, H, A, 8, recompute="full", sequence_parallel=sp)
    assert keys(r) == ["layer_input"] and r.total == expected


def test_flash_attention_stores_no_s_by_s_tensor_only_fp32_lse():
    r = activation_memory(S, B, H, A, 8, flash_attention=True)
    assert not any(row.shape == ("b", "a", "s", "s") for row in r.rows)
    lse = next(row for row in r.rows if row.key == "softmax_lse")
    assert (lse.shape, lse.bytes_per_element, lse.bytes) == (("b", "a", "s"), 4, 4 * B * A * S // 8)
    assert r.attention_map == 4 * B * A * S // 8
    assert r.fixed + r.intermediate == activation_memory(S, B, H, A, 8).fixed + \
        activation_memory(S, B, H, A, 8).intermediate


def test_selective_on_top_of_flash_saves_only_the_statistics():
    flash = activation_memory(S, B, H, A, 8, flash_attention=True)
    both = activation_memory(S, B, H, A, 8, flash_attention=True, recompute="selective")
    assert flash.total - both.total == 4 * B * A * S // 8  # 32 KiB of 30 MiB
    assert (flash.total - both.total) / flash.total < 0.002


@pytest.mark.parametrize("g", [1, 4, 8, 32])
def test_grouped_query_attention_shrinks_k_and_v(g):
    t = 1 if g < 8 else 8
    r = activation_memory(S, B, H, A, t, kv_heads=g)
    for row in r.rows:
        if row.key in ("key", "value"):
            assert row.bytes == 2 * SBH * g // A // t
    assert r.intermediate == (20 * SBH + 4 * SBH * g // A) // t


def test_swiglu_with_f_8h_over_3_stores_what_gelu_with_4h_stores():
    h = 3 * 1024
    gelu = activation_memory(S, B, h, 24, 8)
    swiglu = activation_memory(S, B, h, 24, 8, activation="swiglu", ffn_hidden_size=8 * h // 3)
    assert swiglu.total == gelu.total
    assert {"swiglu_gate", "swiglu_up", "fc2_input"} <= set(keys(swiglu))
    assert "gelu_input" not in keys(swiglu)


def test_ffn_hidden_size_changes_mlp_rows_only():
    r = activation_memory(S, B, H, A, 1, ffn_hidden_size=11008)
    assert r.intermediate == 8 * SBH + 2 * 2 * S * B * 11008


def test_no_dropout_removes_three_masks_and_the_dropout_output():
    r = activation_memory(S, B, H, A, 1, dropout=False)
    assert r.fixed == 8 * SBH and r.attention_map == 2 * MAP
    assert not any("dropout" in k for k in keys(r))


def test_llama_style_layer():
    # GQA + SwiGLU + no dropout + FlashAttention, LLaMA-2-70B-like shapes, t=8, SP.
    r = activation_memory(4096, 1, 8192, 64, 8, kv_heads=8, ffn_hidden_size=28672,
                          activation="swiglu", dropout=False, flash_attention=True,
                          sequence_parallel=True)
    sbh = 4096 * 8192
    assert r.fixed == 8 * sbh // 8
    # Q and the projection input 2sbh each, K and V 2sbh*g/a each, SwiGLU 6sbf.
    assert r.intermediate == (4 * sbh + 4 * sbh * 8 // 64 + 6 * 4096 * 28672) // 8
    assert r.attention_map == 4 * 64 * 4096 // 8


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(t=8, kv_heads=4), ValueError, r"^t=8 must divide a=32 and h=4096 and kv_heads=4; valid t: 1, 2, 4$"),
    (dict(kv_heads=5), ValueError, r"^kv_heads=5 must divide a=32; valid kv_heads: 1, 2, 4, 8, 16, 32$"),
    (dict(kv_heads=0), ValueError, r"^kv_heads must be a positive integer"),
    (dict(kv_heads=2.0), TypeError, r"^kv_heads must be a positive integer"),
    (dict(t=8, ffn_hidden_size=11004), ValueError, r"^t=8 must divide a=32 and h=4096 and ffn_hidden_size=11004; valid t: 1, 2, 4$"),
    (dict(ffn_hidden_size=-1), ValueError, r"^ffn_hidden_size must be a positive integer"),
    (dict(recompute="partial"), ValueError, r"^recompute must be one of 'none', 'selective', 'full', got 'partial'$"),
    (dict(activation="relu"), ValueError, r"^activation must be one of 'gelu', 'swiglu', 'squared_relu', got 'relu'$"),
    (dict(s=2047, t=2, sequence_parallel=True), ValueError, r"^t=2 must divide a=32 and h=4096 and s=2047; valid t: 1$"),
    (dict(sequence_parallel="yes"), TypeError, r"^sequence_parallel must be True or False, got 'yes'$"),
    (dict(flash_attention=1), TypeError, r"^flash_attention must be True or False"),
    (dict(dropout=None), TypeError, r"^dropout must be True or False"),
])
def test_invalid_combinations_name_the_argument(kwargs, error, message):
    args = dict(s=S, b=B, h=H, a=A, t=1) | kwargs
    with pytest.raises(error, match=message):
        activation_memory(**args)


def test_unknown_option_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="flash"):
        activation_memory(S, B, H, A, flash=True)


@pytest.mark.parametrize("name", list(actmem.TABLE2_FORMULAS))
def test_table2_formulas_validate_instead_of_flooring(name):
    with pytest.raises(ValueError, match=r"^t=3 must divide a=32 and h=4096"):
        actmem.TABLE2_FORMULAS[name](S, B, H, A, 3)


@pytest.mark.parametrize("name", [n for n in actmem.TABLE2_FORMULAS if "sequence" in n])
def test_sequence_parallel_formulas_need_t_to_divide_s(name):
    with pytest.raises(ValueError, match=r"^t=2 must divide a=32 and h=4096 and s=2047"):
        actmem.TABLE2_FORMULAS[name](2047, B, H, A, 2)


@pytest.mark.parametrize("key", ["sequence_parallel", "recompute"])
def test_table2_refuses_options_it_sets_per_row(key):
    with pytest.raises(ValueError, match=f"table2 sets {key} per row"):
        actmem.table2(S, B, H, A, 8, **{key: "full" if key == "recompute" else True})

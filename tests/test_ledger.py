"""The ledger rows: the tensors of paper section 4.1 and what each stores."""

import pytest

import actmem
from actmem import activation_memory

S, B, H, A = 2048, 1, 4096, 32
SBH, MAP = S * B * H, B * A * S * S

PAPER_ROWS = {
    # key: (block, shape, bytes per element, placement, group, global bytes)
    "attn_norm_input": ("LayerNorm", ("s", "b", "h"), 2, "replicated", "fixed", 2 * SBH),
    "qkv_input": ("attention", ("s", "b", "h"), 2, "replicated", "fixed", 2 * SBH),
    "query": ("attention", ("s", "b", "h"), 2, "head-split", "intermediate", 2 * SBH),
    "key": ("attention", ("s", "b", "h"), 2, "head-split", "intermediate", 2 * SBH),
    "value": ("attention", ("s", "b", "h"), 2, "head-split", "intermediate", 2 * SBH),
    "softmax_output": ("attention", ("b", "a", "s", "s"), 2, "head-split", "attention_map", 2 * MAP),
    "attn_dropout_mask": ("attention", ("b", "a", "s", "s"), 1, "head-split", "attention_map", MAP),
    "attn_dropout_output": ("attention", ("b", "a", "s", "s"), 2, "head-split", "attention_map", 2 * MAP),
    "proj_input": ("attention", ("s", "b", "h"), 2, "head-split", "intermediate", 2 * SBH),
    "attn_out_dropout_mask": ("attention", ("s", "b", "h"), 1, "replicated", "fixed", SBH),
    "mlp_norm_input": ("LayerNorm", ("s", "b", "h"), 2, "replicated", "fixed", 2 * SBH),
    "fc1_input": ("MLP", ("s", "b", "h"), 2, "replicated", "fixed", 2 * SBH),
    "gelu_input": ("MLP", ("s", "b", "4h"), 2, "hidden-split", "intermediate", 8 * SBH),
    "fc2_input": ("MLP", ("s", "b", "4h"), 2, "hidden-split", "intermediate", 8 * SBH),
    "mlp_out_dropout_mask": ("MLP", ("s", "b", "h"), 1, "replicated", "fixed", SBH),
}


def test_paper_layer_has_exactly_the_fifteen_tensors_of_section_4_1():
    rows = activation_memory(S, B, H, A).rows
    assert [r.key for r in rows] == list(PAPER_ROWS)
    for r in rows:
        block, shape, bpe, placement, group, global_bytes = PAPER_ROWS[r.key]
        assert (r.block, r.shape, r.bytes_per_element, r.placement, r.group,
                r.global_bytes) == (block, shape, bpe, placement, group, global_bytes)
        assert r.name and r.source.startswith("Sec. 4.1")
        assert r.placement in actmem.PLACEMENTS and r.group in actmem.GROUPS


@pytest.mark.parametrize("t", [2, 4, 8])
def test_split_rows_shrink_by_t_replicated_rows_do_not(t):
    for r in activation_memory(S, B, H, A, t).rows:
        expected = r.global_bytes if r.placement == "replicated" else r.global_bytes // t
        assert r.bytes == expected
        assert r.ranks == (1 if r.placement == "replicated" else t)


def test_group_sums_are_the_coefficients_10_24_5():
    r = activation_memory(S, B, H, A)
    assert r.fixed == 10 * SBH and r.intermediate == 24 * SBH and r.attention_map == 5 * MAP


def test_unknown_group_is_refused_by_name():
    with pytest.raises(ValueError, match="group must be one of"):
        activation_memory(S, B, H, A).group_bytes("attention")

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


# ------------------------------------------- issue 11, item 2: why each row is kept

OPTION_SETS = [dict(sequence_parallel=sp, recompute=rc, flash_attention=fa,
                    activation=act, dropout=do, kv_heads=kv)
               for sp in (False, True) for rc in actmem.RECOMPUTE for fa in (False, True)
               for act in actmem.ACTIVATIONS for do in (False, True) for kv in (8, 32)]


def test_every_row_under_every_option_says_what_backward_needs_it():
    keys = set()
    for options in OPTION_SETS:
        for row in activation_memory(S, B, H, A, 8, **options).rows:
            assert row.needed_for == actmem.ledger.NEEDED_FOR[row.key] != ""
            keys.add(row.key)
    assert keys == set(actmem.ledger.NEEDED_FOR)  # no entry for a row that never exists


@pytest.mark.parametrize("key, computation", [
    ("qkv_input", "dW = X^T dY"), ("fc1_input", "dW = X^T dY"),
    ("proj_input", "dW = X^T dY"), ("fc2_input", "dW = X^T dY"),
    ("gelu_input", "GeLU'(X)"), ("softmax_output", "needs P"),
    ("attn_dropout_mask", "same mask"), ("query", "dK = dS^T Q"), ("key", "dQ = dS K"),
])
def test_linear_inputs_serve_weight_gradients_and_functions_their_derivatives(key, computation):
    assert computation in actmem.ledger.NEEDED_FOR[key]

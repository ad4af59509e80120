"""Ledger diffs: what each storage option removes, shrinks, grows or adds,
in exact bytes per GPU (the worked example's layer s=2048, b=1, h=4096, a=32, t=8)."""

from hypothesis import given, strategies as st

import actmem
from actmem.layer.ledger_diff import KINDS, bytes_by_kind, changed, diff_ledgers, format_changes

S, B, H, A, T = 2048, 1, 4096, 32, 8
SBH, MAP = S * B * H, B * A * S * S
MAP_ROWS = ["softmax_output", "attn_dropout_mask", "attn_dropout_output"]
FIXED_ROWS = ["attn_norm_input", "qkv_input", "attn_out_dropout_mask",
              "mlp_norm_input", "fc1_input", "mlp_out_dropout_mask"]


def diff(**options):
    base = actmem.activation_memory(S, B, H, A, T)
    return diff_ledgers(base, actmem.activation_memory(S, B, H, A, T, **options))


def by_kind(changes, kind):
    return {c.key: (c.bytes_before, c.bytes_after) for c in changes if c.kind == kind}


def test_selective_recompute_removes_exactly_the_three_attention_map_rows():
    changes = diff(recompute="selective")
    assert by_kind(changes, "removed") == {
        "softmax_output": (2 * MAP // T, 0),
        "attn_dropout_mask": (MAP // T, 0),
        "attn_dropout_output": (2 * MAP // T, 0),
    }
    assert [c.key for c in changed(changes)] == MAP_ROWS
    assert bytes_by_kind(changes)["removed"] == -5 * MAP // T == -80 * 2**20


def test_flash_attention_removes_the_map_and_adds_the_fp32_log_sum_exp():
    changes = diff(flash_attention=True)
    assert by_kind(changes, "added") == {"softmax_lse": (0, 4 * B * A * S // T)}
    assert set(by_kind(changes, "removed")) == set(MAP_ROWS)
    assert [c.key for c in changed(changes)] == MAP_ROWS + ["softmax_lse"]
    assert bytes_by_kind(changes)["added"] == 32 * 2**10


def test_sequence_parallel_shrinks_the_six_fixed_rows_by_t():
    changes = diff(sequence_parallel=True)
    shrunk = by_kind(changes, "shrunk")
    assert list(shrunk) == FIXED_ROWS
    for before, after in shrunk.values():
        assert before == T * after
    assert sum(before for before, _ in shrunk.values()) == 10 * SBH
    assert bytes_by_kind(changes) == {"removed": 0, "shrunk": -10 * SBH * 7 // 8,
                                      "unchanged": 0, "grown": 0, "added": 0}


def test_sequence_parallel_at_t1_changes_nothing():
    base = actmem.activation_memory(S, B, H, A, 1)
    sp = actmem.activation_memory(S, B, H, A, 1, sequence_parallel=True)
    assert changed(diff_ledgers(base, sp)) == ()


def test_full_recompute_removes_every_row_and_adds_the_layer_input():
    changes = diff(recompute="full")
    assert len(by_kind(changes, "removed")) == 15
    assert by_kind(changes, "added") == {"layer_input": (0, 2 * SBH)}
    assert sum(c.delta for c in changes) == 2 * SBH - actmem.paper_formula(S, B, H, A, T)


def test_grouped_query_attention_shrinks_key_and_value_by_a_over_g():
    assert by_kind(diff(kv_heads=8), "shrunk") == {
        "key": (2 * SBH // T, 2 * SBH // 4 // T),
        "value": (2 * SBH // T, 2 * SBH // 4 // T),
    }


def test_no_dropout_removes_three_masks_and_the_dropout_output():
    assert by_kind(diff(dropout=False), "removed") == {
        "attn_dropout_mask": (MAP // T, 0),
        "attn_dropout_output": (2 * MAP // T, 0),
        "attn_out_dropout_mask": (SBH, 0),
        "mlp_out_dropout_mask": (SBH, 0),
    }


def test_swiglu_replaces_the_gelu_input_by_gate_and_up_in_its_place():
    changes = diff(activation="swiglu", ffn_hidden_size=4 * H)
    keys = [c.key for c in changed(changes)]
    assert keys == ["gelu_input", "swiglu_gate", "swiglu_up"]
    assert bytes_by_kind(changes)["added"] == 2 * 2 * 4 * SBH // T


def test_swiglu_without_a_width_takes_megatron_lms_default():
    f = 10880  # int(4h * 2/3 / 64) * 64 for h = 4096
    sbf = 2 * S * B * f // T
    changes = diff(activation="swiglu")
    assert by_kind(changes, "shrunk") == {"fc2_input": (8 * SBH // T, sbf)}
    assert by_kind(changes, "added") == {"swiglu_gate": (0, sbf), "swiglu_up": (0, sbf)}


def test_a_wider_mlp_grows_its_two_inner_rows():
    grown = by_kind(diff(ffn_hidden_size=8 * H), "grown")
    assert grown == {"gelu_input": (8 * SBH // T, 16 * SBH // T),
                     "fc2_input": (8 * SBH // T, 16 * SBH // T)}


def test_format_changes_marks_absent_rows_with_a_dash():
    text = format_changes(changed(diff(flash_attention=True)), unit="KiB")
    lines = text.splitlines()
    assert lines[0].split() == ["tensor", "change", "before", "after"]
    assert lines[1].endswith("32768 KiB            -")
    assert lines[-1].endswith("-       32 KiB")


OPTIONS = st.fixed_dictionaries({
    "sequence_parallel": st.booleans(),
    "recompute": st.sampled_from(actmem.RECOMPUTE),
    "flash_attention": st.booleans(),
    "kv_heads": st.sampled_from([8, 16, 32]),
    "activation": st.sampled_from(actmem.ACTIVATIONS),
    "dropout": st.booleans(),
})


@given(OPTIONS, OPTIONS)
def test_every_row_appears_once_and_deltas_add_up_to_the_totals(first, second):
    before = actmem.activation_memory(S, B, H, A, T, **first)
    after = actmem.activation_memory(S, B, H, A, T, **second)
    changes = diff_ledgers(before, after)
    assert sorted(c.key for c in changes) == sorted(
        {r.key for r in before.rows} | {r.key for r in after.rows})
    assert sum(bytes_by_kind(changes).values()) == after.total - before.total
    assert set(bytes_by_kind(changes)) == set(KINDS)
    assert [c.after for c in changes if c.after] == list(after.rows)
    assert [c.before for c in changes if c.before] == list(before.rows)


def test_identical_ledgers_are_all_unchanged():
    base = actmem.activation_memory(S, B, H, A, T)
    assert {c.kind for c in diff_ledgers(base, base)} == {"unchanged"}



def test_docstring_examples():
    import doctest

    import actmem.layer.ledger_diff
    result = doctest.testmod(actmem.ledger_diff)
    assert result.attempted > 0 and result.failed == 0

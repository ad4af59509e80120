"""Context parallelism measured on 2 gloo CPU ranks: saved bytes per row equal
the ledger's, and the ring and Ulysses layers compute what one rank computes
on the whole sequence. Skipped without torch unless CI is set.
"""

import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

from actmem import LayerConfig, activation_memory  # noqa: E402
from actmem.layer.context_parallel import A2A_OUTPUT  # noqa: E402
from actmem.measure.compare import compare  # noqa: E402
from actmem.measure.context_parallel import (chunk_positions,  # noqa: E402
                                             measure_context_parallel)

s, b, h, a, cp = 32, 2, 64, 4, 2
BASE = dict(s=s, b=b, h=h, a=a, kv_heads=2, flash_attention=True, cp=cp)
VARIANTS = {
    "p2p_gelu_dropout": dict(cp_comm_type="p2p"),
    "a2a_swiglu": dict(cp_comm_type="a2a", activation="swiglu", dropout=False),
    "a2a_selective": dict(cp_comm_type="a2a", recompute="selective"),
}
CONFIGS = {name: LayerConfig(**BASE, **extra) for name, extra in VARIANTS.items()}


@pytest.fixture(scope="module")
def measured():
    results = measure_context_parallel(*CONFIGS.values())
    return dict(zip(CONFIGS, results))


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_row_on_every_rank_is_the_ledger(measured, name):
    for measurement, _, _ in measured[name]:
        c = compare(measurement)
        assert all(r.exact for r in c.rows), [r for r in c.rows if not r.exact]
        assert c.measured_rows_total == activation_memory(**vars(CONFIGS[name])).total


def test_rows_hold_s_over_cp_tokens(measured):
    rows = {r.key: r for r in compare(measured["p2p_gelu_dropout"][0][0]).rows}
    n = s // cp * b
    assert rows["fc1_input"].measured_bytes == 2 * n * h
    assert rows["gelu_input"].measured_bytes == 2 * n * 4 * h
    assert rows["mlp_out_dropout_mask"].measured_bytes == n * h
    assert rows["key"].measured_bytes == 2 * n * h // 2  # 2 of 4 heads' width
    assert rows["softmax_lse"].measured_bytes == 4 * b * a * s // cp


def test_a2a_keeps_its_output_before_the_all_to_all_unless_recomputed(measured):
    for rank in measured["a2a_swiglu"]:
        rows = {r.key: r.measured_bytes for r in compare(rank[0]).rows}
        assert rows[A2A_OUTPUT] == rows["proj_input"] == 2 * s * b * h // cp
    for rank in measured["a2a_selective"]:
        assert A2A_OUTPUT not in {r.key for r in compare(rank[0]).rows}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_cp_ranks_compute_the_whole_sequence_layer(measured, name):
    for _, output_error, gradient_error in measured[name]:
        assert output_error < 1e-5 and gradient_error < 1e-5


def test_only_layernorm_statistics_and_eager_silu_are_extra(measured):
    for name in VARIANTS:
        extras = compare(measured[name][0][0]).extras
        assert all("LayerNorm" in e.why or "silu(gate)" in e.why for e in extras), extras


def test_load_balanced_chunks():
    assert chunk_positions(16, 2, 0).tolist() == [0, 1, 2, 3, 12, 13, 14, 15]
    assert chunk_positions(16, 2, 1).tolist() == [4, 5, 6, 7, 8, 9, 10, 11]


@pytest.mark.parametrize("extra", [dict(t=2), dict(cp_comm_type="allgather")])
def test_unmeasured_combinations_are_refused(extra):
    with pytest.raises(ValueError, match="need t=1 and cp_comm_type in"):
        measure_context_parallel(LayerConfig(**{**BASE, **extra}))

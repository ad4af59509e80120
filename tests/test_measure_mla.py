"""The reference MLA layer on CPU saves exactly the ledger's rows (actmem.measure.mla)."""

import pytest

torch = pytest.importorskip("torch")

from actmem import LayerConfig, ledger_rows  # noqa: E402
from actmem.measure.compare import compare  # noqa: E402
from actmem.measure.launch import on_ranks  # noqa: E402
from actmem.measure.mla import (RoPEKeyValue, RoPEQuery, _rotate, _tables,  # noqa: E402
                                measure_mla, measure_mla_rank)

BASE = dict(multi_latent_attention=True, kv_lora_rank=16, qk_head_dim=8,
            qk_pos_emb_head_dim=4, v_head_dim=6)
VARIANTS = {
    "q latent, gelu": dict(q_lora_rank=24),
    "no q latent": dict(),
    "swiglu": dict(q_lora_rank=12, activation="swiglu"),
    "flash, no dropout": dict(q_lora_rank=24, dropout=False, flash_attention=True,
                              qk_head_dim=8, qk_pos_emb_head_dim=8, v_head_dim=16),
    "unfused rope": dict(q_lora_rank=24, unfused_rope=True),
    "unfused rope, flash": dict(q_lora_rank=24, dropout=False, flash_attention=True,
                                qk_head_dim=8, qk_pos_emb_head_dim=8, v_head_dim=16,
                                unfused_rope=True),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def comparison(request):
    return compare(measure_mla(LayerConfig(16, 2, 64, 4, **{**BASE, **VARIANTS[request.param]})))


def test_every_row_measured_to_the_byte(comparison):
    assert comparison.rows
    for row in comparison.rows:
        assert row.exact, (row.key, row.ledger_bytes, row.measured_bytes)
    assert comparison.measured_rows_total == comparison.ledger_total


def test_extras_are_the_norm_statistics_and_named_kernel_outputs(comparison):
    c = comparison.measurement.config
    norms = 3 + (c.q_lora_rank is not None)  # input, KV latent, Q latent, MLP norm
    stats = [e for e in comparison.extras
             if e.storage.saved_by[0].startswith("NativeLayerNormBackward0")]
    assert len(stats) == 2 * norms
    assert all(e.storage.nbytes == 2 * c.s * c.b for e in stats)  # bf16 per token
    others = {e.storage.saved_by[0] for e in comparison.extras} - {
        e.storage.saved_by[0] for e in stats}
    expected = set()
    if c.activation == "swiglu":
        expected.add("MulBackward0.self")  # eager silu(gate), as for the dense layer
    if c.flash_attention:
        expected.add("ScaledDotProductFlashAttentionForCpuBackward0.output")  # (b,a,s,d) layout
    assert others == expected


def test_the_unfused_rotation_keeps_four_tables_of_s_by_d_r():
    """Two calls of _apply_rotary_pos_emb_bshd (Q's and K's positional
    columns), each keeping a fresh cos_ and sin_ of s x d_r in bf16."""
    c = LayerConfig(16, 2, 64, 4, **BASE, q_lora_rank=24, unfused_rope=True)
    rows = {r.key: r for r in compare(measure_mla(c)).rows}
    kept = rows["rope_cos_sin"]
    assert kept.measured_bytes == 4 * 16 * 4 * 2 == kept.ledger_bytes
    recomputed = LayerConfig(16, 2, 64, 4, **BASE, q_lora_rank=24, unfused_rope=True,
                             recompute="selective", recompute_modules=("mla_up_proj",))
    assert "rope_cos_sin" not in {r.key for r in ledger_rows(recomputed)}


def test_rope_functions_backward_matches_autograd():
    gen = torch.Generator().manual_seed(3)
    s, a, nope, rope, dv = 3, 2, 2, 4, 2
    cos, sin = _tables(s, rope, torch.float64)
    q = torch.randn(2, s, a, nope + rope, generator=gen, dtype=torch.float64, requires_grad=True)
    kv = torch.randn(2, s, a, nope + dv, generator=gen, dtype=torch.float64, requires_grad=True)
    pe = torch.randn(2, s, rope, generator=gen, dtype=torch.float64, requires_grad=True)

    def plain_q(q):
        return torch.cat([q[..., :nope], _plain_rotate(q[..., nope:], cos.unsqueeze(-2),
                                                        sin.unsqueeze(-2))], dim=-1)

    def plain_kv(kv, pe):
        r = _plain_rotate(pe, cos, sin).unsqueeze(-2).expand(2, s, a, rope)
        return torch.cat([kv[..., :nope], r], dim=-1), kv[..., nope:]

    assert torch.autograd.gradcheck(lambda q: RoPEQuery.apply(q, cos.unsqueeze(-2),
                                                              sin.unsqueeze(-2), nope), (q,))
    assert torch.autograd.gradcheck(lambda kv, pe: RoPEKeyValue.apply(kv, pe, cos, sin, nope),
                                    (kv, pe))
    assert torch.allclose(RoPEQuery.apply(q, cos.unsqueeze(-2), sin.unsqueeze(-2), nope),
                          plain_q(q))
    for mine, plain in zip(RoPEKeyValue.apply(kv, pe, cos, sin, nope), plain_kv(kv, pe)):
        assert torch.allclose(mine, plain)


def _plain_rotate(x, cos, sin):
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, odd * cos + even * sin], dim=-1).flatten(-2)


def test_rotation_is_a_rotation():
    cos, sin = _tables(4, 4, torch.float64)
    x = torch.randn(4, 4, dtype=torch.float64)
    assert torch.allclose(_rotate(_rotate(x, cos, sin), cos, sin, -1), x)


@pytest.mark.parametrize("options, message", [
    (dict(BASE, t=2, sequence_parallel=True), "sequence_parallel=True is not measured"),
    (dict(BASE, recompute="selective"), "recompute='selective'"),
    (dict(BASE, flash_attention=True, dropout=False), "v_head_dim here"),
    ({}, "multi_latent_attention=False"),
])
def test_unmeasured_configurations_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        measure_mla(LayerConfig(16, 2, 64, 4, **options))


TP = LayerConfig(16, 2, 64, 4, t=2, q_lora_rank=24, **BASE)


@pytest.fixture(scope="module")
def two_ranks():
    return on_ranks(measure_mla_rank, 2, TP)


def test_tensor_parallel_rows_measured_on_each_rank(two_ranks):
    one = {r.key: r.ledger_bytes for r in compare(measure_mla(
        LayerConfig(16, 2, 64, 4, q_lora_rank=24, **BASE))).rows}
    for measurement, _ in two_ranks:
        rank = compare(measurement)
        assert all(r.exact for r in rank.rows)
        rows = {r.key: r.measured_bytes for r in rank.rows}
        assert rows["kv_up_input"] == one["kv_up_input"]  # latents whole on each rank
        assert rows["q_down_output"] == one["q_down_output"]
        assert 2 * rows["query"] == one["query"] and 2 * rows["value"] == one["value"]


def test_tensor_parallel_layer_computes_the_t1_function(two_ranks):
    for _, (out_err, grad_err) in two_ranks:
        assert out_err < 1e-4 and grad_err < 1e-4

"""Multi-latent attention (actmem.layer.mla): rows, splits, parameters, presets, checks."""

import pytest

from actmem import LayerConfig, ModelConfig, activation_memory, model_states, parameter_count
from actmem.layer.mla import MLA_OPTIONS, mla_attention_parameters
from actmem.run.job.presets import MOE_PRESETS
from actmem.run.model_states.placement import stage_parameter_groups

V3_ATTN = dict(multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512,
               qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128)
SMALL = dict(multi_latent_attention=True, q_lora_rank=24, kv_lora_rank=16, qk_head_dim=8,
             qk_pos_emb_head_dim=4, v_head_dim=6)


def _bytes(m):
    return {r.key: r.bytes for r in m.rows}


def test_rows_of_the_paper_layer_with_mla_by_hand():
    s, b, h, a = 32, 2, 64, 4
    m = activation_memory(s, b, h, a, **SMALL)
    sb, rq, rkv, dq, dv = s * b, 24, 16, 8 + 4, 6
    assert [r.key for r in m.rows[:13]] == [
        "attn_norm_input", "mla_down_input", "q_down_output", "q_up_input", "kv_down_output",
        "kv_up_input", "query", "key", "value", "softmax_output", "attn_dropout_mask",
        "attn_dropout_output", "proj_input"]
    attention = (2 * sb * h * 2 + 2 * 2 * sb * rq + 2 * 2 * sb * rkv + 2 * 2 * sb * a * dq
                 + 2 * sb * a * dv + 5 * a * s * s * b + 2 * sb * a * dv + sb * h)
    mlp = activation_memory(s, b, h, a).total - sum(
        r.bytes for r in activation_memory(s, b, h, a).rows if r.block != "MLP"
        and r.key != "mlp_norm_input")
    assert m.total == attention + mlp
    assert m.fixed == 2 * sb * h * 2 + 4 * sb * (rq + rkv) + sb * h + 2 * sb * h * 2 + sb * h


def test_deepseek_v3_layer_rows():
    m = activation_memory(4096, 1, 7168, 128, activation="swiglu", ffn_hidden_size=18432,
                          flash_attention=True, dropout=False, **V3_ATTN)
    rows, N = _bytes(m), 4096
    assert rows["mla_down_input"] == 2 * N * 7168
    assert rows["q_down_output"] == rows["q_up_input"] == 2 * N * 1536
    assert rows["kv_down_output"] == rows["kv_up_input"] == 2 * N * 512
    assert rows["query"] == rows["key"] == 2 * N * 128 * 192
    assert rows["value"] == rows["proj_input"] == 2 * N * 128 * 128
    assert rows["softmax_lse"] == 4 * 128 * N
    assert m.total == 1330 * 2**20


def test_tensor_parallel_splits_heads_and_replicates_latents():
    one = _bytes(activation_memory(32, 2, 64, 4, **SMALL))
    two = _bytes(activation_memory(32, 2, 64, 4, t=2, **SMALL))
    for key in ("mla_down_input", "q_down_output", "q_up_input", "kv_down_output",
                "kv_up_input"):
        assert two[key] == one[key]  # duplicated down projections: whole on every rank
    for key in ("query", "key", "value", "proj_input", "softmax_output"):
        assert two[key] * 2 == one[key]
    sp = _bytes(activation_memory(32, 2, 64, 4, t=2, sequence_parallel=True, **SMALL))
    for key in ("mla_down_input", "q_down_output", "kv_up_input"):
        assert sp[key] * 2 == one[key]


def test_no_q_compression_and_options_compose():
    keys = [r.key for r in activation_memory(32, 2, 64, 4, **{**SMALL, "q_lora_rank": None}).rows]
    assert "q_down_output" not in keys and "q_up_input" not in keys
    assert "kv_up_input" in keys
    sel = _bytes(activation_memory(32, 2, 64, 4, recompute="selective", **SMALL))
    assert "softmax_output" not in sel and sel["query"] == 2 * 64 * 4 * 12
    full = activation_memory(32, 2, 64, 4, recompute="full", **SMALL)
    assert [r.key for r in full.rows] == ["layer_input"]


def test_default_layer_is_unchanged():
    assert activation_memory(2048, 1, 4096, 32, t=8).total == activation_memory(
        2048, 1, 4096, 32, t=8, multi_latent_attention=False).total
    assert "mla_down_input" not in _bytes(activation_memory(2048, 1, 4096, 32))


@pytest.mark.parametrize("options, message", [
    ({"q_lora_rank": 8}, "q_lora_rank given without multi_latent_attention"),
    ({"v_head_dim": 64}, "v_head_dim given without"),
    ({**SMALL, "qk_pos_emb_head_dim": 5}, "qk_pos_emb_head_dim=5 must be even"),
    ({**SMALL, "kv_heads": 2}, "kv_heads=2 with multi_latent_attention=True"),
    ({**SMALL, "kv_lora_rank": 0}, "kv_lora_rank must be a positive integer"),
    ({**SMALL, "q_lora_rank": -1}, "q_lora_rank must be a positive integer"),
])
def test_invalid_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        LayerConfig(32, 2, 64, 4, **options)


def test_wrong_types_are_refused():
    with pytest.raises(TypeError, match="multi_latent_attention must be True or False"):
        LayerConfig(32, 2, 64, 4, multi_latent_attention=1)
    with pytest.raises(TypeError, match="qk_head_dim"):
        LayerConfig(32, 2, 64, 4, **{**SMALL, "qk_head_dim": 8.0})


def test_mla_parameters_by_hand():
    c = LayerConfig(32, 2, 64, 4, **SMALL)
    split, replicated = mla_attention_parameters(c, 64, 1, False)
    assert split == 24 * 4 * 12 + 16 * 4 * (8 + 6) + 4 * 6 * 64
    assert replicated == 64 * 24 + 64 * (16 + 4) + 24 + 16 + 64
    c = LayerConfig(32, 2, 64, 4, **{**SMALL, "q_lora_rank": None})
    assert mla_attention_parameters(c, 64, 2, True) == (
        64 * 4 * 12 + 16 * 4 * 14 + 4 * 6 * 64, 64 * 20 + 2 * (16 + 64) + 64)


def test_deepseek_v3_parameters():
    model = MOE_PRESETS["deepseek-v3"]
    count = parameter_count(model)
    h = 7168
    attention = (h * 1536 + 1536 + 1536 * 128 * 192 + h * 576 + 512 + 512 * 128 * 256
                 + 128 * 128 * h + h)
    assert count.per_layer == attention + h + 3 * h * 18432
    assert count.per_moe_layer == attention + h + 256 * 3 * h * 2048 + 3 * h * 2048 + 256 * h
    assert int(count) == 671_026_404_352
    assert int(count) + 58 * 256 == 671_026_419_200  # with e_score_correction_bias
    assert round(int(count) / 1e9) == 671  # the paper's "671B"


def test_deepseek_v2_lite_parameters():
    count = parameter_count(MOE_PRESETS["deepseek-v2-lite"])
    assert int(count) == 15_706_484_224
    assert round(int(count) / 1e8) == 157  # the model card's "15.7B"


def test_model_states_split_up_projections_only():
    model = MOE_PRESETS["deepseek-v2-lite"].with_(L=2, moe_layer_freq=(0, 1))
    c = model.layer(moe=False)
    split, replicated = mla_attention_parameters(c, model.h, 1, False)
    (one, _), = stage_parameter_groups(model, 1, 1)
    (two, _), = stage_parameter_groups(model, 2, 1)
    # a t=2 rank keeps half the split weights (both layers' MLA up and output
    # projections, the dense MLP, the shared experts, both vocabulary tables)
    # and all replicated ones (down projections, norms, router)
    halves = 2 * split + 3 * 2048 * 10944 + 3 * 2048 * 2816 + 2 * 102400 * 2048
    assert model.padded_vocab(2) == 102400 and one - two == halves // 2
    assert model_states(model, t=2).parameters == two + stage_parameter_groups(model, 2, 1)[0][1]
    assert replicated == 2048 * 576 + 512 + 2048


def test_model_config_passes_mla_to_its_layers():
    model = ModelConfig(s=64, b=1, h=64, a=4, L=2, vocab_size=100, **SMALL)
    layer = model.layer(2)
    assert {n: getattr(layer, n) for n in MLA_OPTIONS} == SMALL
    with pytest.raises(ValueError, match="kv_heads=2 with multi_latent_attention"):
        ModelConfig(s=64, b=1, h=64, a=4, L=2, vocab_size=100, kv_heads=2, **SMALL)
    with pytest.raises(TypeError, match="ModelConfig.layer"):
        model.layer(q_lora_rank=8)


def _dense_lite():
    return MOE_PRESETS["deepseek-v2-lite"].with_(
        num_experts=None, moe_router_topk=2, moe_ffn_hidden_size=None,
        moe_shared_expert_intermediate_size=None, moe_layer_freq=1, moe_router_pre_softmax=False,
        L=4)


def test_training_memory_keeps_the_mla_rows():
    from dataclasses import asdict

    from actmem import training_memory
    model = _dense_lite()
    stage = training_memory(model, t=2, sequence_parallel=True).stages[0]
    layer = activation_memory(**asdict(model.layer(2, True)))
    assert "kv_up_input" in {r.key for r in layer.rows}
    assert stage.layer_activations == 4 * layer.total


def test_training_memory_refuses_other_precisions_with_mla():
    from actmem import training_memory
    with pytest.raises(ValueError, match="precision='fp32'.*multi_latent_attention=True"):
        training_memory(_dense_lite(), precision="fp32", logits_bytes=4)

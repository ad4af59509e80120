"""Presets of 2024-2025 models (issue 23, item 9) and the two attention options
they need: kv_channels (a head width other than h/a) and qk_layernorm.

Published counts are the safetensors totals of the checkpoints (the sources
in each preset); the rows and parameters are derived here by hand from the
shapes, as actmem/layer/head_dim.py's docstring states them.
"""

import pytest

from actmem import (MOE_PRESETS, PRESETS, LayerConfig, activation_memory, parameter_count,
                    training_memory)

S, H, A, G, D = 512, 256, 8, 2, 64   # h/a = 32, heads of width 64


@pytest.mark.parametrize("name, published", [
    ("qwen3-30b-a3b", 30_532_122_624), ("qwen3-235b-a22b", 235_093_634_560)])
def test_qwen3_parameter_counts_are_the_published_ones(name, published):
    model = MOE_PRESETS[name]
    count = parameter_count(model)
    assert count == published and count.moe_layers == model.L
    h, a, g, d = model.h, model.a, model.kv_heads, model.kv_channels
    assert count.moe_split["attention"] == h * (a * d + 2 * g * d) + a * d * h
    assert count.moe_replicated == {"attention": 2 * d + h, "mlp": h, "router": 128 * h}
    assert f"{published:,}" in model.source


def test_llama31_405b_parameter_count_is_the_published_one():
    model = PRESETS["llama3.1-405b"]
    assert parameter_count(model) == 405_853_388_800
    assert "405,853,388,800" in model.source


def rows(**options):
    return {r.key: r for r in activation_memory(S, 1, H, A, kv_heads=G, **options).rows}


def test_kv_channels_sets_the_width_of_q_k_v_and_the_projection_input():
    plain, wide = rows(), rows(kv_channels=D)
    assert wide["query"].bytes == 2 * S * A * D and wide["query"].shape == ("s", "b", "a*d_h")
    assert wide["key"].bytes == wide["value"].bytes == 2 * S * G * D
    assert wide["proj_input"].bytes == 2 * S * A * D
    assert wide["softmax_output"].bytes == plain["softmax_output"].bytes == 2 * A * S * S
    same = [k for k in plain if k not in ("query", "key", "value", "proj_input")]
    assert all(wide[k] == plain[k] for k in same)
    assert activation_memory(S, 1, H, A, kv_heads=G, kv_channels=H // A).total == \
        activation_memory(S, 1, H, A, kv_heads=G).total


def test_qk_layernorm_keeps_the_norms_inputs_after_v_split_over_the_heads():
    r = rows(kv_channels=D, qk_layernorm=True, t=2, sequence_parallel=True)
    keys = list(r)
    assert keys[keys.index("value") + 1:keys.index("value") + 3] == ["q_norm_input",
                                                                     "k_norm_input"]
    assert r["q_norm_input"].bytes == 2 * S * A * D // 2
    assert r["k_norm_input"].bytes == 2 * S * G * D // 2
    assert r["q_norm_input"].placement == "head-split"
    assert r["q_norm_input"].needed_for.startswith("query norm backward")
    assert "q_layernorm" in r["q_norm_input"].source
    assert set(rows(qk_layernorm=True, recompute="full")) == {"layer_input"}
    assert "q_norm_input" in rows(qk_layernorm=True, recompute="selective")


@pytest.mark.parametrize("options, message", [
    ({"kv_channels": 0}, r"kv_channels must be"),
    ({"qk_layernorm": 1}, r"qk_layernorm"),
    ({"kv_channels": 64, "multi_latent_attention": True, "q_lora_rank": None},
     r"kv_channels=64 \(not h/a=32\) with multi_latent_attention=True"),
])
def test_invalid_head_options_name_the_argument(options, message):
    with pytest.raises((TypeError, ValueError), match=message):
        LayerConfig(S, 1, H, A, **options)


def test_qwen3_trains_with_expert_parallelism():
    model = MOE_PRESETS["qwen3-30b-a3b"].with_(L=4)  # 4 of its layers, quick
    r = training_memory(model, t=2, d=8, ep=8, etp=1, sequence_parallel=True)
    layer = activation_memory(**vars(model.layer(2, True, etp=1)))
    assert r.stages[0].layer_activations == 4 * layer.total
    assert layer.config.kv_channels == 128 and "q_norm_input" in {x.key for x in layer.rows}


def test_other_precisions_refuse_head_options_they_do_not_model():
    with pytest.raises(ValueError, match=r"precision='fp32' does not model kv_channels=256 \(heads are h/a wide"):
        training_memory(PRESETS["llama2-7b"].with_(kv_channels=256), precision="fp32")

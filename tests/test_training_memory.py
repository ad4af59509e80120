"""A whole model's parameters, model states and peak training memory per GPU:
published counts, the ZeRO paper's worked figures, hand-derived bytes, and
properties (parts add up; more d or t never raises a part)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actmem
from actmem import PRESETS, model_states, parameter_count, training_memory
from actmem.run.moments.pass_parts import embedding_activations, output_activations
from actmem.run.peak import PARTS
from actmem.run.model_states.placement import stage_parameters

MIB, GIB = 2**20, 2**30
L7 = PRESETS["llama2-7b"]


@pytest.mark.parametrize("name, published", [
    ("llama2-7b", 6_738_415_616), ("llama2-13b", 13_015_864_320),
    ("llama2-70b", 68_976_648_192), ("llama3-8b", 8_030_261_248),
    ("llama3-70b", 70_553_706_496), ("gpt2-large", 774_030_080),
])
def test_parameter_counts_match_published(name, published):
    count = parameter_count(PRESETS[name])
    assert count == published and count.total == published and isinstance(count, int)


def test_gpt3_layer_is_12h2_plus_13h():
    c = parameter_count(PRESETS["gpt3-175b"])
    h = 12288
    assert c.per_layer == 12 * h * h + 13 * h
    assert c.total == 96 * c.per_layer + 50257 * h + 2048 * h + 2 * h  # tied: one table


def test_megatron_pads_the_vocabulary_per_t():
    gpt = PRESETS["gpt3-175b"]
    assert [gpt.padded_vocab(t) for t in (1, 2, 8)] == [50304, 50432, 51200]
    assert L7.padded_vocab(8) == 32768


@pytest.mark.parametrize("stage, gb", [(0, 120), (1, 31.40625), (2, 16.640625), (3, 1.875)])
def test_zero_paper_figure_1(stage, gb):
    # Rajbhandari et al. 2020, Fig. 1: 7.5B parameters, Adam (K=12), d=64.
    assert model_states(7_500_000_000, d=64, zero_stage=stage).total == gb * 10**9


def test_megatron_bytes_per_parameter():
    n = 1_000_000
    assert model_states(n, accounting="megatron").total == 18 * n
    assert model_states(n, d=4, accounting="megatron", distributed_optimizer=True).total \
        == (6 + 12 // 4) * n


def test_llama2_7b_stage_parameters_by_hand():
    # t=2, p=2: 16 layers of 202,375,168/2 split + 8,192 norm weights each;
    # stage 0 adds the embedding 32000*4096/2, stage 1 the final norm and output layer.
    per_layer = 202_375_168 // 2 + 8192
    assert stage_parameters(L7, t=2, p=2) == [
        16 * per_layer + 65_536_000, 16 * per_layer + 4096 + 65_536_000]
    states = model_states(L7, t=2, p=2, accounting="megatron")
    assert states.stage == 1 and states.weights == 2 * 1_684_672_512


def test_tied_embeddings_keep_a_copy_on_the_last_stage():
    gpt = PRESETS["22b"]
    total = parameter_count(gpt, vocab=gpt.padded_vocab(1)).total
    assert sum(stage_parameters(gpt, 1, 1)) == total
    assert sum(stage_parameters(gpt, 1, 4)) == total + 51200 * 6144


def test_llama2_7b_on_8_gpus_by_hand():
    # t=2, p=2, d=2, m=8, 1F1B. One layer (SwiGLU f=11008, no dropout, no map
    # kept, t=2): sbh(8 + 8/t) + 6sbf/t + 4bas/t = 336,855,040 B; stage 0
    # holds 2 passes of 16 layers.
    r = training_memory(L7, t=2, p=2, d=2, m=8, gpu_memory="A100 80GB", reserve=0)
    first, last = r.stages
    sbh = 4096 * 4096
    layer = 12 * sbh + 6 * 4096 * 11008 // 2 + 4 * 32 * 4096 // 2
    assert layer == 336_855_040
    assert first.layer_activations == 2 * 16 * layer
    assert last.layer_activations == 16 * layer
    # last stage, one pass: 2sbh + 2sbh + fp32 logits 4*s*b*V/t + 9sb
    assert last.output_activations == 2 * 33_554_432 + 262_144_000 + 9 * 4096
    assert first.embedding_activations == 2 * 8 * 4096  # token ids of the 2 passes held
    # stage 0's peak: the backward of micro-batch 0 at its last layer's MLP,
    # with both passes held, beside model states and an A100's workspaces
    # (two of PyTorch's 8 MiB + 128 KiB, Transformer Engine's 4 MiB): the
    # gradients of the layer output (2sbh) and of fc2's input (2sbf/t), the
    # weight's going straight into the fp32 buffer (gradient accumulation
    # fusion). It beats the end of the second forward with its b*s*s mask.
    states = first.weights + first.gradients + first.optimizer
    workspaces = 2 * (8 * MIB + 128 * 1024) + 4 * MIB
    held = 2 * (16 * layer + 8 * 4096)
    mlp_gradients = 2 * sbh + 2 * 4096 * 11008 // 2
    assert mlp_gradients > 4096**2
    # Transformer Engine's cached dummy weight gradients (gradient accumulation
    # fusion), one bf16 tensor per weight shape: QKV 3h/t x h, the output
    # projection h x h/t, fc1 2f/t x h, fc2 h x f/t
    dummies = 2 * 4096 * (3 * 4096 // 2 + 4096 // 2 + 11008 + 11008 // 2)
    assert first.peak == states + held + mlp_gradients + workspaces + dummies
    assert first.timeline.peak.label == "backward of micro-batch 0: the last layer's MLP"
    assert r.most_loaded.stage == 0 and r.fits
    assert r.margin == 81920 * MIB - first.peak


def test_the_786_mib_allocation_is_the_fp32_logits():
    gpt2 = PRESETS["gpt2-large"].with_(s=2048, b=2)
    assert output_activations(gpt2)["logits"] == 4 * 2048 * 2 * 50304 == 824_180_736
    assert 824_180_736 // MIB == 786
    assert output_activations(gpt2, logits_bytes=2)["logits"] == 824_180_736 // 2


def test_parts_add_up_and_gb_is_not_gib():
    r = training_memory(L7, t=2, p=2, d=2, m=8, gpu_memory="80GiB", reserve=0.05)
    for stage in r.stages:
        assert stage.total == sum(stage.parts.values()) and list(stage.parts) == list(PARTS)
        assert stage.reserve == 4 * GIB  # 5 % of 80 GiB, exactly
    assert r.gpu_memory - training_memory(L7, gpu_memory="80GB").gpu_memory == 5_899_345_920


def test_full_recomputation_peak_is_u_shaped_in_k():
    # 96 layers, FlashAttention, sequence parallelism: checkpoints fall as L/k,
    # the recomputed group grows as k.
    gpt = PRESETS["175b"].with_(flash_attention=True)
    peaks = []
    for k in range(1, 97):
        s = training_memory(gpt, t=8, sequence_parallel=True, recompute="full",
                            recompute_num_layers=k).stages[0]
        layer = actmem.activation_memory(2048, 1, 12288, 96, 8, sequence_parallel=True,
                                         flash_attention=True)
        checkpoint = 2 * 2048 * 12288 // 8  # the group's input, already kept
        assert s.recompute_working_set == k * layer.total - checkpoint
        assert s.layer_activations == math.ceil(96 / k) * 2 * 2048 * 12288 // 8
        peaks.append(s.layer_activations + s.recompute_working_set)
    best = peaks.index(min(peaks))
    assert 0 < best < 95 and peaks[0] > peaks[best] < peaks[-1]


def test_selective_recomputation_working_set_is_one_attention_map():
    r = training_memory(PRESETS["175b"], t=8, recompute="selective").stages[0]
    layer = actmem.activation_memory(2048, 1, 12288, 96, 8)
    assert r.recompute_working_set == layer.attention_map == 5 * 96 * 2048**2 // 8
    assert r.peak_during_backward - r.held_between_passes == layer.attention_map
    assert r.layer_activations == 96 * (layer.total - layer.attention_map)


def test_embedding_mask_is_split_only_under_sequence_parallelism():
    gpt = PRESETS["22b"]
    assert embedding_activations(gpt, 8)["embedding dropout mask"] == 2048 * 6144
    assert embedding_activations(gpt, 8, True)["embedding dropout mask"] == 2048 * 6144 // 8


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["llama2-7b", "22b", "llama3-8b"]),
       d=st.sampled_from([1, 2, 4, 8]), zero=st.integers(0, 3))
def test_more_data_parallelism_never_raises_states(name, d, zero):
    model = PRESETS[name]
    a = model_states(model, d=d, zero_stage=zero)
    b = model_states(model, d=2 * d, zero_stage=zero)
    assert all(x <= y for x, y in zip((b.weights, b.gradients, b.optimizer),
                                      (a.weights, a.gradients, a.optimizer)))


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(["llama2-7b", "22b", "gpt2-large"]),
       sp=st.booleans(), recompute=st.sampled_from(actmem.RECOMPUTE))
def test_more_tensor_parallelism_never_raises_any_part(name, sp, recompute):
    model = PRESETS[name]
    ts = [t for t in actmem.valid_tensor_parallel_sizes(model.h, model.a, model.s)
          if t <= 8 and (model.kv_heads or model.a) % t == 0
          and (model.ffn_hidden_size or 4 * model.h) % t == 0]
    results = [training_memory(model, t=t, sequence_parallel=sp, recompute=recompute)
               .stages[0].parts for t in ts]
    for small, big in zip(results, results[1:]):
        assert all(big[k] <= small[k] for k in PARTS), (small, big)


@pytest.mark.parametrize("call, error, message", [
    (lambda: actmem.preset("llama9"), ValueError, "preset must be one of gpt2-large, "),
    (lambda: training_memory(L7, p=3), ValueError, r"p=3 must divide L=32"),
    (lambda: model_states(L7, zero_stage=4), ValueError, "zero_stage must be 0, 1, 2 or 3, got 4"),
    (lambda: training_memory(L7, gpu_memory="80 gigs"), ValueError,
     "gpu_memory='80 gigs' is not a size"),
    (lambda: training_memory(L7, reserve=0.1), ValueError, "fraction of gpu_memory"),
    (lambda: model_states(L7, accounting="megatron", zero_stage=1), ValueError,
     "zero_stage=1 belongs to accounting='zero'"),
    (lambda: model_states(10**9, t=2), ValueError, "a bare parameter count"),
    (lambda: training_memory(L7, t=3), ValueError, "t=3 must divide"),
    (lambda: L7.with_(norm="batchnorm"), ValueError, "norm must be one of"),
])
def test_bad_input_names_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()

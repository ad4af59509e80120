"""FP8 with Transformer Engine (issue 23 item 3): rows, model states, checks, measured."""

import os

import pytest

from actmem import LayerConfig, activation_memory
from actmem.layer.fp8_weights import fp8_state_bytes

LLAMA = dict(s=4096, b=1, h=4096, a=32, activation="swiglu", ffn_hidden_size=11008,
             flash_attention=True, dropout=False)
"""LLaMA-2-7B's layer (Touvron et al. 2023) at s = 4096, b = 1."""


def _rows(**kw):
    return {r.key: r for r in activation_memory(**kw).rows}


def test_linear_inputs_take_one_byte_and_flash_keeps_the_bf16_output():
    bf16, fp8 = _rows(**LLAMA), _rows(**LLAMA, fp8="hybrid")
    sbh, sbf = 4096 * 4096, 4096 * 11008
    for key, size in (("qkv_input", sbh), ("fc1_input", sbh), ("fc2_input", sbf)):
        assert (bf16[key].bytes, fp8[key].bytes) == (2 * size, size)
    assert fp8["proj_input"].bytes == 2 * sbh  # FlashAttention's backward reads O
    assert fp8["proj_input_fp8"].bytes == sbh
    assert fp8["fp8_scale_inv"].bytes == 4 * 4  # one fp32 per saved FP8 tensor
    for key in ("attn_norm_input", "query", "key", "value", "swiglu_gate", "mlp_norm_input"):
        assert fp8[key] == bf16[key]
    saved = activation_memory(**LLAMA).total - activation_memory(**LLAMA, fp8="e4m3").total
    assert saved == (sbh + sbh + sbf) - sbh - 16  # qkv, fc1, fc2 halved; proj's FP8 copy added


def test_without_flash_attention_the_projection_input_is_fp8_only():
    rows = _rows(s=64, b=2, h=64, a=4, fp8="e4m3")
    assert rows["proj_input"].bytes == 64 * 2 * 64 and "proj_input_fp8" not in rows
    assert rows["fp8_scale_inv"].elements == 4


def test_sequence_parallel_keeps_the_local_shard_in_fp8():
    rows = _rows(s=64, b=2, h=64, a=4, t=2, sequence_parallel=True, fp8="hybrid")
    assert rows["qkv_input"].bytes == 64 * 2 * 64 // 2  # s/t tokens, 1 byte
    assert rows["fp8_scale_inv"].bytes == 16  # each rank its own scales


def test_full_recomputation_and_default_unchanged():
    kw = dict(s=64, b=2, h=64, a=4, recompute="full")
    assert activation_memory(**kw, fp8="hybrid").rows == activation_memory(**kw).rows
    assert activation_memory(64, 2, 64, 4, fp8=False).rows == activation_memory(64, 2, 64, 4).rows
    assert activation_memory(2048, 1, 4096, 32, t=8).total // 2**20 == 184


def test_state_bytes_per_layer_follow_te():
    c = LayerConfig(**LLAMA, t=2, fp8="hybrid")
    weights = (4096 * 3 * 4096 + 4096 * 4096 + 4096 * 2 * 11008 + 11008 * 4096) // 2
    assert fp8_state_bytes(c) == {"weight_copies": 2 * weights + 16, "parameters": 0,
                                  "scaling": 4 * 40}
    assert fp8_state_bytes(c, amax_history_len=1024)["scaling"] == 4 * 20 * 1025
    assert fp8_state_bytes(LayerConfig(**LLAMA)) == {"weight_copies": 0, "parameters": 0,
                                                     "scaling": 0}


@pytest.mark.parametrize("kw, message", [
    (dict(fp8=True), "--fp8-format"),
    (dict(fp8="e5m2"), "'e4m3', 'hybrid'"),
    (dict(fp8="hybrid", s=60), "tokens s\\*b=60 must be divisible by 8"),
    (dict(fp8="hybrid", h=72, a=4), "h=72 must be divisible by 16"),
    (dict(fp8="hybrid", h=96, t=4), "a\\*d/t=24"),
    (dict(fp8="hybrid", ffn_hidden_size=200), "f/t"),
    (dict(fp8="hybrid", lora_rank=4, lora_targets=("q_proj",)), "no LoRA"),
])
def test_invalid_fp8_names_the_argument(kw, message):
    shape = {"s": 64, "b": 1, "h": 64, "a": 4, **kw}
    with pytest.raises(ValueError, match=message):
        LayerConfig(**shape)


@pytest.fixture(scope="module", params=["gelu", "swiglu_flash", "selective"])
def measured(request):
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="torch is not installed")
    from actmem.measure.compare import compare
    from actmem.measure.fp8 import measure_fp8
    kw = {"gelu": {}, "swiglu_flash": dict(activation="swiglu", flash_attention=True,
                                           dropout=False),
          "selective": dict(recompute="selective")}[request.param]
    return compare(measure_fp8(LayerConfig(16, 2, 32, 4, fp8="hybrid", **kw)))


def test_measured_fp8_rows_to_the_byte(measured):
    assert [(r.key, r.measured_bytes) for r in measured.rows] == \
        [(r.key, r.ledger_bytes) for r in measured.rows]
    dtypes = {r.key: r.measured_dtype for r in measured.rows}
    assert dtypes["qkv_input"] == dtypes["fc2_input"] == "float8_e4m3fn"
    assert dtypes["fp8_scale_inv"] == "float32" and dtypes["attn_norm_input"] == "bfloat16"
    assert all(e.storage.saved_by[0].startswith(("NativeLayerNorm", "MulBackward0"))
               for e in measured.extras)


def test_training_memory_with_fp8_on_an_h100():
    from actmem import PRESETS, training_memory
    llama = PRESETS["llama2-7b"]
    bf16 = training_memory(llama, gpu_memory="H100 80GB SXM").most_loaded
    fp8 = training_memory(llama, gpu_memory="H100 80GB SXM", fp8="hybrid").most_loaded
    sbh, sbf = 4096 * 4096, 4096 * 11008
    assert bf16.layer_activations - fp8.layer_activations == 32 * (sbh + sbf - 16)
    per_layer = sum(fp8_state_bytes(llama.layer(1, fp8="hybrid")).values())
    assert fp8.weights - bf16.weights == 32 * per_layer
    assert per_layer == 2 * (4096 * 3 * 4096 + 4096 * 4096 + 3 * 4096 * 11008) + 16 + 160
    assert training_memory(llama, fp8=None).most_loaded == training_memory(llama).most_loaded


@pytest.mark.parametrize("kw, message", [
    (dict(fp8="e5m2"), "--fp8-format"),
    (dict(fp8="hybrid", precision="fp32"), "does not model fp8='hybrid'.*over bf16"),
])
def test_training_memory_refuses_bad_fp8(kw, message):
    from actmem import PRESETS, training_memory
    with pytest.raises(ValueError, match=message):
        training_memory(PRESETS["llama2-7b"], **kw)


def test_model_states_gain_te_state_per_layer_of_the_stage():
    from actmem import PRESETS, model_states
    from actmem.run.model_states.fp8_states import fp8_stage_bytes
    llama = PRESETS["llama2-7b"]
    per_layer = sum(fp8_state_bytes(llama.layer(2, fp8="e4m3")).values())
    assert fp8_stage_bytes(llama, "e4m3", t=2, p=4) == [8 * per_layer] * 4
    for stage in (0, 3):
        plain = model_states(llama, t=2, p=4, accounting="megatron", stage=stage)
        fp8 = model_states(llama, t=2, p=4, accounting="megatron", stage=stage, fp8="e4m3")
        assert fp8.weights - plain.weights == 8 * per_layer
        assert (fp8.gradients, fp8.optimizer) == (plain.gradients, plain.optimizer)
    with pytest.raises(ValueError, match="--fp8-format"):
        model_states(llama, fp8="fp8")


def test_zero_bubble_w_step_reads_the_fp8_copies():
    from actmem.run.schedule.split_backward import weight_gradient_rows
    rows = weight_gradient_rows(activation_memory(**LLAMA, fp8="hybrid"))
    assert [(r.key, r.bytes_per_element) for r in rows] == [
        ("qkv_input", 1), ("proj_input_fp8", 1), ("fc1_input", 1), ("fc2_input", 1)]


def test_fp8_weight_copies_follow_the_head_width():
    c = LayerConfig(64, 1, 64, 4, kv_heads=2, kv_channels=32, fp8="hybrid")
    weights = 64 * (128 + 2 * 64) + 128 * 64 + 64 * 256 + 256 * 64
    assert fp8_state_bytes(c)["weight_copies"] == 2 * weights + 16


def test_training_memory_refuses_fp8_with_context_parallelism():
    from actmem import PRESETS, training_memory
    with pytest.raises(ValueError, match=r"fp8='e4m3' with cp=2 under delayed scaling: .* "
                                         r"use cp=1, fp8_recipe='tensorwise' .* or fp8=None"):
        training_memory(PRESETS["llama3-8b"].with_(flash_attention=True), fp8="e4m3", cp=2)

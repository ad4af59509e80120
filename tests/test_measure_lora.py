"""A frozen reference layer with LoRA adapters against the LoRA ledger rows, on CPU.

Small layer (s=16, b=2, h=32, a=4); every row's saved bytes equal the
ledger's, the extras are those of the paper's layer (LayerNorm statistics,
eager SwiGLU's silu(gate)), and gradients and Adam states exist for the
adapters only. Skipped without torch unless CI is set.
"""

import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

from actmem import LayerConfig, ModelConfig, parameter_count  # noqa: E402
from actmem.layer.lora import lora_parameters  # noqa: E402
from actmem.measure.compare import compare  # noqa: E402
from actmem.measure.lora import measure_lora, measure_lora_states  # noqa: E402

SHAPE = dict(s=16, b=2, h=32, a=4)
VARIANTS = {
    "peft_q_v_swiglu": dict(activation="swiglu", lora_targets=("q_proj", "v_proj")),
    "bridge_all_swiglu": dict(activation="swiglu", lora_targets=(
        "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")),
    "qkv_flash": dict(flash_attention=True, dropout=False, lora_targets=("linear_qkv",)),
    "gqa_gate_up_k": dict(activation="swiglu", kv_heads=2,
                          lora_targets=("gate_proj", "up_proj", "k_proj")),
    "selective_flash": dict(recompute="selective", flash_attention=True, dropout=False,
                            lora_targets=("linear_q", "o_proj")),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def case(request):
    config = LayerConfig(**SHAPE, lora_rank=8, **VARIANTS[request.param])
    return config, compare(measure_lora(config))


def test_every_row_is_saved_to_the_byte(case):
    config, comparison = case
    assert [(r.key, r.measured_bytes) for r in comparison.rows] == \
        [(r.key, r.ledger_bytes) for r in comparison.rows]
    assert comparison.measured_rows_total == comparison.ledger_total > 0


def test_extras_are_the_paper_layers_own(case):
    config, comparison = case
    ops = sorted(e.storage.saved_by[0] for e in comparison.extras)
    statistics = ["NativeLayerNormBackward0.result1"] * 2 + \
        ["NativeLayerNormBackward0.result2"] * 2
    silu = ["MulBackward0.self"] if config.activation == "swiglu" else []
    assert ops == sorted(statistics + silu)


def test_frozen_base_saves_less_than_the_trained_layer():
    config = LayerConfig(**SHAPE, lora_rank=8, lora_targets=("linear_fc2",))
    rows = {r.key for r in compare(measure_lora(config)).rows}
    assert {"qkv_input", "proj_input", "fc1_input"}.isdisjoint(rows)
    assert {"fc2_input", "lora_linear_fc2_a_output"} <= rows


@pytest.mark.parametrize("name", ["peft_q_v_swiglu", "bridge_all_swiglu"])
def test_gradients_and_adam_states_only_for_the_adapters(name):
    config = LayerConfig(**SHAPE, lora_rank=8, **VARIANTS[name])
    states = measure_lora_states(config)
    assert states.trainable == lora_parameters(config)
    assert states.gradients == states.trainable
    assert states.optimizer == 2 * states.trainable  # exp_avg and exp_avg_sq
    assert states.frozen_with_state == 0
    model = ModelConfig(**SHAPE, L=1, vocab_size=128, activation="swiglu")
    assert states.frozen == parameter_count(model).per_layer  # the frozen base, whole


def test_two_tensor_parallel_ranks_keep_the_adapters_rows_to_the_byte():
    from actmem.measure.lora import measure_lora_parallel
    config = LayerConfig(**SHAPE, t=2, kv_heads=2, activation="swiglu", lora_rank=8,
                         lora_targets=("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"))
    for m in measure_lora_parallel(config):
        rows = compare(m).rows
        assert [(r.key, r.measured_bytes) for r in rows] == [(r.key, r.ledger_bytes) for r in rows]
        saved = {r.key: r.measured_bytes for r in rows}
        # A's output is whole on each rank (gathered, or all-reduced for the row-parallel bases)
        a_output = 16 * 2 * 8 * 2  # s * b * r, 2 bytes
        assert saved["lora_linear_qkv_a_output"] == saved["lora_linear_fc2_a_output"] == a_output
        assert saved["proj_input"] == 16 * 2 * 32 // 2 * 2  # the base's slice, read by A

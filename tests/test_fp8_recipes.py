"""FP8 beyond delayed scaling (issue 43: ``--fp8-recipe tensorwise``,
``--fp8-param-gather``) and the GPU's transposes, derived by hand from
actmem/layer/fp8.py's sources (Transformer Engine 2.17, Megatron-LM
d98e8a64)."""

import os

import pytest

from actmem import PRESETS, Job, LayerConfig, activation_memory, training_memory
from actmem.layer.fp8_weights import fp8_state_bytes
from actmem.layer.ledger import FLASH_OUTPUT

LLAMA = dict(s=4096, b=1, h=4096, a=32, activation="swiglu", ffn_hidden_size=11008,
             flash_attention=True, dropout=False)
SBH = 4096 * 4096
W1 = 4096 * 3 * 4096 + 4096 * 4096 + 3 * 4096 * 11008   # one layer's linear weights at t=1


def rows(**kw):
    return {r.key: r for r in activation_memory(**kw).rows}


def test_under_current_scaling_the_projection_keeps_its_16_bit_input_and_no_fp8_copy():
    delayed, current = rows(**LLAMA, fp8="hybrid"), rows(**LLAMA, fp8="hybrid",
                                                         fp8_recipe="tensorwise")
    assert "proj_input_fp8" not in current and current["proj_input"].bytes == 2 * SBH
    assert current["fp8_scale_inv"].bytes == 3 * 4   # qkv, fc1, fc2
    assert sum(r.bytes for r in delayed.values()) - sum(r.bytes for r in current.values()) \
        == SBH + 4
    # flash-attn's sbhd copy (b > 1) is what the projection saves as given; under delayed
    # scaling it saves its FP8 copy instead, and the copy is not kept
    two = dict(LLAMA, b=2, flash_output_copy=True, fp8="hybrid")
    assert FLASH_OUTPUT in rows(**two, fp8_recipe="tensorwise")
    assert FLASH_OUTPUT not in rows(**two)


def test_state_bytes_per_recipe_gpu_and_fp8_parameters():
    c = LayerConfig(**LLAMA, t=2, fp8="hybrid", fp8_recipe="tensorwise")
    w = W1 // 2
    assert fp8_state_bytes(c) == {"weight_copies": 2 * w + 16, "parameters": 0, "scaling": 0}
    assert fp8_state_bytes(c, transpose=False)["weight_copies"] == w + 16   # Blackwell
    assert fp8_state_bytes(c, param_gather=True) == {"weight_copies": 0, "parameters": 16,
                                                     "scaling": 0}
    assert fp8_state_bytes(c, transpose=False, param_gather=True)["parameters"] == -w + 16


JOB = dict(t=8, d=8, m=4, sequence_parallel=True, fp8="hybrid", accounting="megatron",
           distributed_optimizer=True)


def stage(**kw):
    return training_memory(PRESETS["llama2-7b"], **JOB, **kw).stages[0]


def test_a_job_takes_the_recipe_the_fp8_parameters_and_the_gpus_transposes():
    w, layers = W1 // 8, 32
    delayed, hopper = stage(), stage(gpu_memory="H100 80GB SXM")
    assert delayed.weights == hopper.weights   # no GPU preset: Hopper's
    assert stage(gpu_memory="GB200").weights - hopper.weights == -layers * w
    assert stage(fp8_param_gather=True).weights - delayed.weights == -layers * 2 * w
    current = stage(fp8_recipe="tensorwise")
    assert delayed.weights - current.weights == layers * 4 * 20 * 2   # no scaling state
    assert delayed.layer_activations - current.layer_activations == layers * (SBH // 8 + 4)
    both = stage(gpu_memory="GB200", fp8_param_gather=True, fp8_recipe="tensorwise")
    assert both.weights - hopper.weights == -layers * (w + 2 * w + 4 * 20 * 2)


@pytest.mark.parametrize("kw, message", [
    (dict(fp8_recipe="custom"), r"fp8_recipe must be one of 'delayed', 'tensorwise'"),
    (dict(fp8=None, fp8_recipe="tensorwise"), r"need fp8 \(a format\)"),
    (dict(fp8=None, fp8_param_gather=True), r"need fp8 \(a format\)"),
    (dict(distributed_optimizer=False, fp8_param_gather=True), r"fp8_param_gather=True needs "
                                                               r"Megatron-LM's distributed"),
    (dict(fp8_param_gather="yes"), r"fp8_param_gather"),
])
def test_what_fp8_recipes_and_parameters_refuse_is_named(kw, message):
    with pytest.raises((TypeError, ValueError), match=message):
        Job(PRESETS["llama2-7b"], **{**JOB, **kw})


BASE = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
        "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1024",
        "--bf16", "--fp8-format", "hybrid", "--use-distributed-optimizer"]


def test_a_launch_reads_the_recipe_and_the_fp8_parameters():
    job = Job.from_megatron_args(BASE + ["--fp8-recipe", "tensorwise", "--fp8-param-gather"],
                                 world_size=2)
    assert (job.fp8, job.fp8_recipe, job.fp8_param_gather) == ("hybrid", "tensorwise", True)
    with pytest.raises(ValueError, match=r"--fp8-recipe custom: actmem models delayed, "
                                         r"tensorwise, blockwise, mxfp8"):
        Job.from_megatron_args(BASE + ["--fp8-recipe", "custom"], world_size=2)


@pytest.fixture(scope="module")
def measured():
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="torch is not installed")
    from actmem.measure.compare import compare
    from actmem.measure.fp8 import measure_fp8
    return compare(measure_fp8(LayerConfig(16, 2, 32, 4, activation="swiglu",
                                           flash_attention=True, dropout=False, fp8="hybrid",
                                           fp8_recipe="tensorwise")))


def test_measured_current_scaling_rows_to_the_byte(measured):
    assert [(r.key, r.measured_bytes) for r in measured.rows] == \
        [(r.key, r.ledger_bytes) for r in measured.rows]
    dtypes = {r.key: r.measured_dtype for r in measured.rows}
    assert dtypes["proj_input"] == "bfloat16" and dtypes["fc2_input"] == "float8_e4m3fn"


def test_current_scaling_under_context_parallelism_quantizes_the_other_linears_only():
    """The projection keeps context parallelism's 16-bit attention output, so
    only qkv, fc1 and fc2 halve their saved inputs (delayed scaling with
    cp > 1 stays refused)."""
    kw = dict(LLAMA, cp=2)
    plain, current = rows(**kw), rows(**kw, fp8="hybrid", fp8_recipe="tensorwise")
    halved = sum(plain[k].bytes // 2 for k in ("qkv_input", "fc1_input", "fc2_input"))
    assert sum(r.bytes for r in plain.values()) - sum(r.bytes for r in current.values()) \
        == halved - 12
    assert {k: r.bytes for k, r in current.items() if k not in (
        "qkv_input", "fc1_input", "fc2_input", "fp8_scale_inv")} == {
        k: r.bytes for k, r in plain.items() if k not in ("qkv_input", "fc1_input", "fc2_input")}
    with pytest.raises(ValueError, match="cp=1 under delayed scaling"):
        activation_memory(**kw, fp8="hybrid")

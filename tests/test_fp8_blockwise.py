"""Blockwise FP8 (Megatron-LM's --fp8-recipe blockwise, TE's Float8BlockScaling):
the saved inputs' 1x128 scales, the weights' two copies and 128x128 scales,
no recipe state, each against a hand derivation; and measured on CPU."""

import os

import pytest

from actmem import MOE_PRESETS, PRESETS, Job, LayerConfig, training_memory
from actmem.layer.fp8_weights import fp8_state_bytes
from actmem.layer.fp8_scales import input_scales, weight_copy_bytes
from actmem.layer.ledger import ledger_rows

N, H, F = 4096, 4096, 11008   # tokens s*b, h, ffn width (LLaMA-2-7B's layer)
DENSE = dict(s=N, b=1, h=H, a=32, t=2, sequence_parallel=True, activation="swiglu",
             ffn_hidden_size=F, flash_attention=True)


def per_rank(config):
    return {r.key: r.elements * r.bytes_per_element // r.ranks for r in ledger_rows(config)}


def test_scale_shapes_follow_te():
    """quantizer.cpp: get_scale_shape, column-wise 1x128 blocks: ceil(M/128)
    x roundup(K, 4); a weight keeps both copies and 128x128 blocks."""
    assert input_scales(2048, 4096) == 16 * 4096 and input_scales(129, 5) == 2 * 8
    assert weight_copy_bytes(4096, 5504) == 2 * 4096 * 5504 + 4 * (32 * 44 + 43 * 32)


def test_saved_inputs_keep_one_scale_per_block():
    tensorwise = per_rank(LayerConfig(**DENSE, fp8="hybrid", fp8_recipe="tensorwise"))
    blockwise = per_rank(LayerConfig(**DENSE, fp8="hybrid", fp8_recipe="blockwise"))
    # qkv and fc1: the local shard, N/t = 2048 rows of h; fc2: N rows of f/t = 5504
    scales = 2 * 16 * 4096 + 32 * 5504
    assert scales == 307_200
    assert {k: v for k, v in blockwise.items() if tensorwise[k] != v} == {
        "fp8_scale_inv": 4 * scales}
    assert "proj_input_fp8" not in blockwise   # save_original_input, as tensorwise


def test_experts_grouped_buffer_keeps_its_alignment_pad():
    moe = dict(DENSE, ffn_hidden_size=None, num_experts=8, moe_ffn_hidden_size=1024,
               moe_shared_expert_intermediate_size=2048, etp=1, ep=4)
    rows = per_rank(LayerConfig(**moe, fp8="hybrid", fp8_recipe="blockwise"))
    # qkv: 2048 rows of h (the shared fc1 saves the router's 16-bit input); the shared
    # fc2: N rows of 1024; 2 local experts of 2048 expected copies: fc1 of h, fc2 of
    # 1024; + 64 per buffer
    scales = 16 * 4096 + 32 * 1024 + 2 * 16 * 4096 + 64 + 2 * 16 * 1024 + 64
    assert rows["fp8_scale_inv"] == 4 * scales == 4 * 262_272


def test_weights_keep_both_copies_on_every_gpu_and_no_recipe_state():
    shapes = [(3 * 4096 // 2, 4096), (4096, 2048), (2 * F // 2, 4096), (4096, F // 2)]
    expected = sum(weight_copy_bytes(n, k) for n, k in shapes)
    assert expected == 2 * sum(n * k for n, k in shapes) + 4 * 12_448
    for transpose in (True, False):
        assert fp8_state_bytes(LayerConfig(**DENSE, fp8="e4m3", fp8_recipe="blockwise"),
                               transpose=transpose) == {
            "weight_copies": expected, "parameters": 0, "scaling": 0}


def test_a_job_under_blockwise_scaling_on_hopper_and_blackwell():
    llama = PRESETS["llama2-7b"]
    per_layer = sum(fp8_state_bytes(llama.layer(8, True, fp8="hybrid",
                                                fp8_recipe="blockwise")).values())
    for gpu in ("H100 80GB SXM", "GB200"):
        job = dict(t=8, sequence_parallel=True, gpu_memory=gpu)
        bf16 = training_memory(llama, **job).most_loaded
        fp8 = training_memory(llama, **job, fp8="hybrid", fp8_recipe="blockwise").most_loaded
        assert fp8.weights - bf16.weights == 32 * per_layer


@pytest.mark.parametrize("build, message", [
    (lambda: training_memory(PRESETS["llama2-7b"], fp8="hybrid", fp8_recipe="blockwise",
                             gpu_memory="L40S"),
     r"fp8_recipe='blockwise' does not run on gpu_memory='L40S' \(compute capability 8.9\)"),
    (lambda: Job(PRESETS["llama2-7b"], t=8, d=8, sequence_parallel=True, fp8="hybrid",
                 fp8_recipe="blockwise", fp8_param_gather=True, accounting="megatron",
                 distributed_optimizer=True),
     "fp8_param_gather=True with fp8_recipe='blockwise'"),
    (lambda: LayerConfig(**DENSE, fp8="hybrid", fp8_recipe="custom"),
     "custom is not modelled"),
])
def test_what_blockwise_refuses_is_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_a_launch_reads_blockwise_and_an_moe_job_runs():
    argv = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
            "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
            "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", "1024", "--bf16", "--fp8-format", "hybrid", "--fp8-recipe",
            "blockwise"]
    assert Job.from_megatron_args(argv, world_size=2).fp8_recipe == "blockwise"
    mixtral = training_memory(MOE_PRESETS["mixtral-8x7b"], t=2, sequence_parallel=True, ep=4,
                              d=4, fp8="e4m3", fp8_recipe="blockwise").most_loaded
    assert mixtral.peak > 0


@pytest.fixture(scope="module", params=["swiglu_flash", "gelu_odd_rows"])
def measured(request):
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="torch is not installed")
    from actmem.measure.compare import compare
    from actmem.measure.fp8 import measure_fp8
    extra = {"swiglu_flash": dict(s=96, activation="swiglu", flash_attention=True,
                                  dropout=False),
             "gelu_odd_rows": dict(s=200, h=48, a=4, ffn_hidden_size=80)
             }[request.param]
    shape = {"s": 16, "b": 2, "h": 32, "a": 4, **extra}
    return compare(measure_fp8(LayerConfig(**shape, fp8="hybrid", fp8_recipe="blockwise")))


def test_measured_blockwise_rows_to_the_byte(measured):
    """Measured: the reference layer quantizing in TE's 1x128 blocks saves
    exactly the ledger's rows, the scales' padding included."""
    assert [(r.key, r.measured_bytes) for r in measured.rows] == \
        [(r.key, r.ledger_bytes) for r in measured.rows]
    assert {r.key: r.measured_dtype for r in measured.rows}["fp8_scale_inv"] == "float32"

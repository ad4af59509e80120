"""MXFP8 (Megatron-LM's --fp8-recipe mxfp8, TE's MXFP8BlockScaling): the saved
inputs' E8M0 scales per 32 elements, the weights' two copies and their
scales, no recipe state, Blackwell only, dimensions divisible by 32, each
against a hand derivation; and measured on CPU."""

import os

import pytest

from actmem import MOE_PRESETS, PRESETS, Job, LayerConfig, training_memory
from actmem.layer.fp8_scales import input_scales, weight_copy_bytes
from actmem.layer.fp8_weights import fp8_state_bytes
from actmem.layer.ledger import ledger_rows
from actmem.run.job.gpus import GPU

N, H, F = 4096, 4096, 10944   # tokens s*b, h, an ffn width whose f/t is no multiple of 128
DENSE = dict(s=N, b=1, h=H, a=32, t=2, sequence_parallel=True, activation="swiglu",
             ffn_hidden_size=F, flash_attention=True)


def per_rank(config):
    return {r.key: r.elements * r.bytes_per_element // r.ranks for r in ledger_rows(config)}


def test_scale_shapes_follow_te():
    """quantizer.cpp: MXFP8Quantizer::get_scale_shape: column-wise
    roundup(M/32, 4) x roundup(K, 128), row-wise roundup(M, 128) x
    roundup(K/32, 4), one byte each."""
    assert input_scales(2048, 4096, "mxfp8") == 64 * 4096
    assert input_scales(4096, 5472, "mxfp8") == 128 * 5504        # K padded to 128
    assert input_scales(96, 64, "mxfp8") == 4 * 128                # 3 blocks padded to 4
    # a weight [N, K] with both dimensions multiples of 128: 2NK + NK/16
    assert weight_copy_bytes(6144, 4096, "mxfp8") == 2 * 6144 * 4096 + 6144 * 4096 // 16
    assert weight_copy_bytes(4096, 5472, "mxfp8") == 2 * 4096 * 5472 + 4096 * 172 + 128 * 5504


def test_saved_inputs_keep_one_byte_per_32_elements():
    tensorwise = per_rank(LayerConfig(**DENSE, fp8="hybrid", fp8_recipe="tensorwise"))
    mxfp8 = per_rank(LayerConfig(**DENSE, fp8="hybrid", fp8_recipe="mxfp8"))
    # qkv and fc1: the local shard, N/t = 2048 rows of h; fc2: N rows of f/t = 5472
    scales = 2 * 64 * 4096 + 128 * 5504
    assert {k: v for k, v in mxfp8.items() if tensorwise[k] != v} == {"fp8_scale_inv": scales}
    blockwise = per_rank(LayerConfig(**DENSE, fp8="hybrid", fp8_recipe="blockwise"))
    # the same bytes where K is a multiple of 128 (4-byte scales per 128 rows, 1-byte per
    # 32), more where it is not: 5504 columns against 5472
    assert scales - blockwise["fp8_scale_inv"] == 128 * 5504 - 4 * 32 * 5472 == 4096


def test_experts_pad_their_tokens_to_32_and_keep_the_buffer_pad():
    moe = dict(DENSE, ffn_hidden_size=None, num_experts=8, moe_ffn_hidden_size=1024,
               moe_shared_expert_intermediate_size=2048, etp=1, ep=4, moe_router_topk=3,
               s=4032)
    rows = per_rank(LayerConfig(**moe, fp8="hybrid", fp8_recipe="mxfp8"))
    # qkv: 2016 rows of h (63 blocks, 64 in tiles of 4); shared fc2: 4032 rows of 1024;
    # 2 local experts of 4032 * 3 / 2 / 2 = 3024 expected copies, padded to 3040
    # (95 blocks, 96 in tiles): fc1 of h, fc2 of 1024; + 256 bytes per buffer
    scales = 64 * 4096 + 128 * 1024 + 2 * 96 * 4096 + 256 + 2 * 96 * 1024 + 256
    assert rows["fp8_scale_inv"] == scales == 1_376_768


def test_weights_keep_both_copies_and_no_recipe_state():
    shapes = [(3 * 4096 // 2, 4096), (4096, 2048), (2 * F // 2, 4096), (4096, F // 2)]
    scales = [6144 * 4096 // 16, 4096 * 2048 // 16,
              11008 * 128 + 344 * 4096,          # fc1 [10944, 4096]: N padded to 128
              4096 * 172 + 128 * 5504]           # fc2 [4096, 5472]: K/32 = 171 to 172
    expected = 2 * sum(n * k for n, k in shapes) + sum(scales)
    assert fp8_state_bytes(LayerConfig(**DENSE, fp8="e4m3", fp8_recipe="mxfp8"),
                           transpose=False) == {
        "weight_copies": expected, "parameters": 0, "scaling": 0}


def test_a_job_runs_on_blackwell_only():
    llama = PRESETS["llama2-7b"]
    job = dict(t=2, sequence_parallel=True, d=4, fp8="hybrid", fp8_recipe="mxfp8")
    b200 = training_memory(llama, **job, gpu_memory="B200").most_loaded
    bf16 = training_memory(llama, t=2, sequence_parallel=True, d=4,
                           gpu_memory="B200").most_loaded
    assert b200.layer_activations < bf16.layer_activations
    with pytest.raises(ValueError, match=r"fp8_recipe='mxfp8' does not run on gpu_memory='H100 "
                                         r"80GB SXM' \(compute capability 9\.0\).*"
                                         r"_compute_mxfp8_support.*or a newer GPU$"):
        training_memory(llama, **job, gpu_memory="H100 80GB SXM")
    rtx = GPU("RTX PRO 6000", 96 * 2**30, (12, 0), 96, "a card of compute capability 12.0")
    with pytest.raises(ValueError, match=r"not supported on 12\.0\+ architectures yet.*use "
                                         r"fp8_recipe='tensorwise' or a GPU of compute "
                                         r"capability 10\.x to 11\.x$"):
        training_memory(llama, **job, gpu_memory=rtx)


def test_a_launch_reads_mxfp8():
    argv = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
            "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
            "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", "1024", "--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"]
    assert Job.from_megatron_args(argv, world_size=2).fp8_recipe == "mxfp8"
    mixtral = training_memory(MOE_PRESETS["mixtral-8x7b"], t=2, sequence_parallel=True, ep=4,
                              d=4, fp8="e4m3", fp8_recipe="mxfp8", gpu_memory="GB200")
    assert mixtral.most_loaded.peak > 0


@pytest.mark.parametrize("build, message", [
    (lambda: LayerConfig(**dict(DENSE, h=4112, a=16), fp8="hybrid", fp8_recipe="mxfp8"),
     r"h=4112 must be divisible by 32 \(fp8_recipe='mxfp8'"),
    (lambda: LayerConfig(**dict(DENSE, s=4080), fp8="hybrid", fp8_recipe="mxfp8"),
     r"tokens s\*b/t=2040 must be divisible by 32"),
    (lambda: LayerConfig(**dict(DENSE, ffn_hidden_size=None, num_experts=8, ep=4,
                                moe_ffn_hidden_size=1040), fp8="hybrid", fp8_recipe="mxfp8"),
     r"f_e/etp \(moe_ffn_hidden_size/etp\)=520 must be divisible by 32"),
    (lambda: training_memory(PRESETS["llama2-7b"], fp8="hybrid", fp8_recipe="mxfp8",
                             fp8_param_gather=True, accounting="megatron",
                             distributed_optimizer=True, d=2),
     "fp8_param_gather=True with fp8_recipe='mxfp8'"),
])
def test_what_mxfp8_refuses_is_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.fixture(scope="module", params=["swiglu_flash", "gelu_padded_blocks"])
def measured(request):
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="torch is not installed")
    from actmem.measure.compare import compare
    from actmem.measure.fp8 import measure_fp8
    extra = {"swiglu_flash": dict(s=96, activation="swiglu", flash_attention=True,
                                  dropout=False),
             "gelu_padded_blocks": dict(s=48, h=96, a=3, ffn_hidden_size=160)
             }[request.param]
    shape = {"s": 16, "b": 2, "h": 64, "a": 4, **extra}
    return compare(measure_fp8(LayerConfig(**shape, fp8="hybrid", fp8_recipe="mxfp8")))


def test_measured_mxfp8_rows_to_the_byte(measured):
    """Measured: the reference layer quantizing in MXFP8's 32-row blocks
    with E8M0 scales in TE's 4 x 128 tiles saves exactly the ledger's rows."""
    assert [(r.key, r.measured_bytes) for r in measured.rows] == \
        [(r.key, r.ledger_bytes) for r in measured.rows]
    assert {r.key: r.measured_dtype for r in measured.rows}["fp8_scale_inv"] == "uint8"

"""The flex dispatcher with HybridEP (actmem.layer.moe_hybridep): its rows,
transients and buffers, each against a hand derivation from DeepEP's
hybrid-ep source (34152ae, Megatron-LM's LTS pin); what it refuses, by name."""

import pytest

from actmem import MOE_PRESETS, Job, LayerConfig, training_memory
from actmem.layer.ledger import ledger_rows
from actmem.layer.moe_hybridep import buffer_tokens, hybridep_buffer
from actmem.run.moments.moe_dispatch import dispatch_buffers, dispatch_gradients

N, H, F = 4096, 4096, 14336    # s*b tokens, h, Mixtral's expert width
SHAPE = dict(s=N, b=1, h=H, a=32, t=2, sequence_parallel=True, activation="swiglu",
             num_experts=8, moe_ffn_hidden_size=F, flash_attention=True, ep=4, etp=1,
             moe_token_dispatcher_type="flex")
HYBRID = dict(SHAPE, moe_flex_dispatcher_backend="hybridep")
MiB = 2**20


def per_rank(config):
    return {r.key: r.elements * r.bytes_per_element // r.ranks for r in ledger_rows(config)}


def test_hybridep_rows_by_hand():
    """n = N/t = 2048 tokens on each of W = 4 ranks, L = 2 local experts,
    E' = W*L = 8; T = 2048 tokens per rank in the buffers; the experts take
    R_e = 4096 copies. No top-k indices, no multi-hot conversion, no
    permutation of its own: HybridEP permutes while it dispatches."""
    hybrid, alltoall = per_rank(LayerConfig(**HYBRID)), per_rank(
        LayerConfig(**dict(SHAPE, moe_token_dispatcher_type="alltoall")))
    n, W, L, T, copies = 2048, 4, 2, 2048, 4096
    assert {key: hybrid[key] for key in hybrid if key not in alltoall
            or hybrid[key] != alltoall[key]} == {
        "hybridep_routing_map": n * W * L,                       # bool [N, E']
        "hybridep_token_probs": 4 * n * W * L,                   # fp32 [N, E']
        "hybridep_handle_tokens": 4 * n * W + n,                 # int32 [N, W], bool [N, 1]
        "hybridep_local_map": n * W * L,                         # bool [N*W, L]
        "hybridep_row_id_map": 4 * T * W * L,                    # int32 [T*W, L]
        "expert_probs": 4 * copies}                              # fp32
    assert set(alltoall) - set(hybrid) == {"permute_probs_index", "permute_index"}
    assert not any(key.startswith("flex_") for key in hybrid)


def test_buffers_follow_the_nvlink_coordinator():
    """DeepEP's docs' example scale: h = 7168, N = 4096 tokens, 8 local
    experts on each of 8 GPUs: the worst case M = T*W = 32768 tokens of 2h
    bytes, their probabilities over E' = 64, scaling factors h/128 fp32,
    the routing map's all-gather buffer E'*T*W, the chunk flags 2*(T/64)*W*4
    and the metadata scratch 108*(W+L)*8."""
    assert buffer_tokens(4096) == 4096 and buffer_tokens(100) == 512
    assert buffer_tokens(4100) == 4112
    small = 2 * 64 * 8 * 4 + 108 * 16 * 8
    assert hybridep_buffer(7168, 4096, 8, 8) == (448 + 8 + 7 + 2) * MiB + small


def test_transients_by_hand():
    c = LayerConfig(**HYBRID)
    n, copies, row = 2048, 4096, 2 * H
    assert dispatch_buffers(c, 4) == {"experts' output": copies * row, "combined output": n * row}
    assert dispatch_gradients(c, 4) == {"layer output gradient": 2 * 2 * n * H,   # + dropout's
                                        "combine gradients": (n + copies) * row}


def test_fp8_pads_in_the_dispatch():
    """Under FP8 HybridEP pads each local expert to 16 (pad_multiple): its
    row map gains 16 rows, the experts make no Fp8Padding copy, and the
    16-bit input stays held by the layer."""
    c = LayerConfig(**HYBRID, fp8="hybrid", fp8_recipe="tensorwise")
    rows = per_rank(c)
    assert rows["hybridep_row_id_map"] == 4 * (2048 * 4 + 16) * 2
    row = 2 * H * 4096
    assert dispatch_buffers(c, 4) == {"experts' 16-bit input": row, "experts' output": row,
                                      "combined output": 2 * H * 2048}


def test_a_mixtral_job_with_hybridep():
    mixtral = MOE_PRESETS["mixtral-8x7b"]
    job = dict(t=2, sequence_parallel=True, ep=4, etp=1, d=4, p=2, m=8,
               gpu_memory="H100 80GB SXM")
    hybrid = training_memory(mixtral.with_(moe_token_dispatcher_type="flex",
                                           moe_flex_dispatcher_backend="hybridep"), **job)
    deepep = training_memory(mixtral.with_(moe_token_dispatcher_type="flex"), **job)
    # T = 2048, W = 4, L = 2: 8192 tokens of 8 KiB, their probabilities over E' = 8, 32
    # scaling factors each, and the all-gather buffer of 8 x 2048 x 4
    assert hybrid.most_loaded.reserve_parts.deepep == hybridep_buffer(4096, 2048, 2, 4) == \
        64 * MiB + 8192 * 8 * 4 + 8192 * 32 * 4 + 8 * 2048 * 4 + 2 * 32 * 4 * 4 + 108 * 6 * 8
    assert hybrid.most_loaded.reserve_parts.communicators == \
        deepep.most_loaded.reserve_parts.communicators   # the same setup gather
    assert hybrid.most_loaded.weights == deepep.most_loaded.weights
    assert hybrid.most_loaded.layer_activations < deepep.most_loaded.layer_activations


HYBRID_MODEL = MOE_PRESETS["mixtral-8x7b"].with_(moe_token_dispatcher_type="flex",
                                                  moe_flex_dispatcher_backend="hybridep")


@pytest.mark.parametrize("build, message", [
    (lambda: Job(HYBRID_MODEL, t=2, sequence_parallel=True, ep=8, etp=2, d=8),
     r"moe_flex_dispatcher_backend='hybridep' with etp\*ep=16"),
    (lambda: Job(HYBRID_MODEL.with_(num_experts=6), ep=3, d=3),
     r"etp\*ep=3 and 2 local experts.*divisible by 4"),
    (lambda: Job(HYBRID_MODEL.with_(s=4097), ep=2, etp=1, d=2),   # 4097 mod 64 = 1, W = 2
     r"4097 tokens per GPU and etp\*ep=2: HybridEP needs \(tokens mod 64\) x etp\*ep"),
    (lambda: LayerConfig(**dict(HYBRID, moe_token_dispatcher_type="alltoall")),
     "moe_flex_dispatcher_backend='hybridep' needs moe_token_dispatcher_type='flex'"),
    (lambda: LayerConfig(**dict(HYBRID, moe_flex_dispatcher_backend="ncclep")),
     "moe_flex_dispatcher_backend must be one of 'deepep', 'hybridep'"),
])
def test_what_hybridep_refuses_is_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()


ARGV = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
        "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1024",
        "--bf16", "--num-experts", "4", "--expert-model-parallel-size", "2",
        "--disable-bias-linear", "--moe-grouped-gemm", "--moe-token-dispatcher-type", "flex",
        "--moe-flex-dispatcher-backend", "hybridep"]


def test_a_launch_with_hybridep():
    job = Job.from_megatron_args(ARGV + ["--moe-hybridep-num-blocks-permute", "8"],
                                 world_size=2, gpu="H100 80GB SXM")
    assert job.model.moe_flex_dispatcher_backend == "hybridep"
    stage = training_memory(job).stages[0]
    # N = 512 * 2 tokens, T = 1024, W = 2, L = 2, h = 256: M = 2048
    assert stage.reserve_parts.deepep == hybridep_buffer(256, 1024, 2, 2) == \
        2048 * 512 + 2048 * 4 * 4 + 2048 * 2 * 4 + 4 * 1024 * 2 + 2 * 16 * 2 * 4 + 108 * 4 * 8
    for extra, message in ((["--moe-permute-fusion-into-hybridep"], "fused permutation"),
                           (["--moe-hybridep-pad-uneven-dispatch-inputs"], "pads each rank"),
                           (["--moe-hybridep-num-sms-preprocessing", "64"], "metadata")):
        with pytest.raises(ValueError, match=message):
            Job.from_megatron_args(ARGV + extra, world_size=2)

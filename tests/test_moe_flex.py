"""The flex dispatcher with DeepEP (actmem.layer.moe_flex): its rows, transients
and buffers, each against a hand derivation; what it refuses, by name."""

import os
from fractions import Fraction
from math import comb

import pytest

from actmem import MOE_PRESETS, Job, LayerConfig, training_memory
from actmem.layer.ledger import ledger_rows
from actmem.layer.moe_flex import received_tokens
from actmem.run.moments.moe_dispatch import dispatch_buffers, dispatch_gradients
from actmem.layer.moe_flex import deepep_buffer

N, H, F = 4096, 4096, 14336    # s*b tokens, h, Mixtral's expert width
SHAPE = dict(s=N, b=1, h=H, a=32, t=2, sequence_parallel=True, activation="swiglu",
             num_experts=8, moe_ffn_hidden_size=F, flash_attention=True)


def per_rank(config):
    return {r.key: r.elements * r.bytes_per_element // r.ranks for r in ledger_rows(config)}


def test_a_rank_receives_each_token_once_per_hit_group():
    """N/t = 2048 tokens on each of W = etp*ep ranks; a token reaches a rank
    when one of its k = 2 experts is among the rank's L = E/ep."""
    assert received_tokens(LayerConfig(**SHAPE, ep=4, etp=1)) == round(
        4 * 2048 * (1 - Fraction(comb(6, 2), comb(8, 2)))) == 3803
    assert received_tokens(LayerConfig(**SHAPE, ep=2, etp=2)) == round(
        4 * 2048 * (1 - Fraction(comb(4, 2), comb(8, 2)))) == 6437
    assert received_tokens(LayerConfig(**SHAPE, ep=1, etp=1)) == 2048   # every token local


@pytest.mark.parametrize("fusion", [False, True])
def test_flex_rows_by_hand(fusion):
    flex = per_rank(LayerConfig(**SHAPE, ep=4, etp=1, moe_token_dispatcher_type="flex",
                                moe_permute_fusion=fusion))
    alltoall = per_rank(LayerConfig(**SHAPE, ep=4, etp=1))
    n, R, copies, W, L, k, C = 2048, 3803, 4096, 4, 2, 2, 10
    permutation = ({"permute_row_id_map": 4 * R * (2 * L + 1)} if fusion else
                   {"permute_probs_index": 8 * R * L})   # permute_index: 8 R_e, as alltoall's
    assert {key: flex[key] for key in flex if key not in alltoall or flex[key] != alltoall[key]
            } == {
        "flex_topk_indices": 8 * n * k, "flex_token_probs": 4 * n * k,
        "flex_handle_tokens": 5 * n * W, "flex_handle_received": 4 * (R + W * W + 2 * W * C),
        "flex_routing_map": R * L, "flex_multihot_mask": R * k,
        "flex_multihot_indices": 2 * 8 * copies,
        "expert_probs": 4 * copies,                      # fp32: DeepEP's probabilities
        **permutation}
    assert alltoall["expert_probs"] == 2 * copies
    assert fusion or flex["permute_index"] == alltoall["permute_index"] == 8 * copies


def test_dispatch_transients_by_hand():
    c = LayerConfig(**SHAPE, ep=4, etp=1, moe_token_dispatcher_type="flex")
    n, R, copies, L, k, row = 2048, 3803, 4096, 2, 2, 2 * H
    assert dispatch_buffers(c, 4) == {
        "received tokens": R * row, "received indices and probabilities": R * (8 * k + 4 * L),
        "experts' output": copies * row, "unpermuted output": R * row}
    assert dispatch_gradients(c, 4) == {"layer output gradient": 2 * 2 * n * H,  # + dropout's
                                        "combine gradients": (R + copies) * row}


@pytest.mark.parametrize("fusion", [False, True])
def test_fp8_with_flex_by_hand(fusion):
    """DeepEP still sends bf16 tokens; the experts save FP8 inputs and hold
    the 16-bit permuted tokens until unpermute returns. Unfused, the experts'
    Fp8Padding copies the R_e tokens and Fp8Unpadding fc2's output; fused,
    the permutation pads and keeps int64 pad offsets of the L = 2 local
    experts instead."""
    shape = dict(SHAPE, ep=4, etp=1, moe_token_dispatcher_type="flex", moe_permute_fusion=fusion)
    bf16, fp8 = LayerConfig(**shape), LayerConfig(**shape, fp8="hybrid", fp8_recipe="tensorwise")
    R, copies, row, L, k = 3803, 4096, 2 * H, 2, 2
    held = {"received tokens": R * row, "received indices and probabilities": R * (8 * k + 4 * L),
            "experts' output": copies * row, "experts' 16-bit input": copies * row}
    busiest = {"unpermuted output": R * row} if fusion else {   # the experts' end is busier
        "padded experts' input": copies * row, "fc2's padded output": copies * row}
    assert dispatch_buffers(fp8, 4) == {**held, **busiest}
    rows = per_rank(fp8)
    assert rows["expert_fc1_input"] == copies * H                 # 1 byte, R_e copies
    assert rows.get("flex_pad_offsets") == (8 * L if fusion else None)
    assert {k: v for k, v in per_rank(bf16).items() if k.startswith("flex_")} == {
        k: v for k, v in rows.items() if k.startswith("flex_") and k != "flex_pad_offsets"}


def test_deepep_buffer_follows_its_size_hint():
    """get_nvl_buffer_size_hint for 8 ranks, 10 channels, 256 tokens each of
    2h bytes and 8 of source meta, 128 int64 indices, fp32 weights and
    scales, 5 ints of prefixes per channel and rank; aligned to 128, plus
    160 bytes of signals, in 2 MiB pages, plus the 32 MiB workspace."""
    slots = 10 * 8 * 256
    nvl = 10 * 8 * 5 * 4 + slots * (2 * H + 8 + 128 * 16)
    assert nvl == 209_880_640
    assert deepep_buffer(H, 8) == 101 * 2**21 + 32 * 2**20 == 245_366_784


def test_a_mixtral_job_with_deepep():
    mixtral = MOE_PRESETS["mixtral-8x7b"]
    job = dict(t=2, sequence_parallel=True, ep=4, etp=1, d=4, p=2, m=8,
               gpu_memory="H100 80GB SXM")
    flex = training_memory(mixtral.with_(moe_token_dispatcher_type="flex"), **job)
    alltoall = training_memory(mixtral, **job)
    parts = flex.most_loaded.reserve_parts
    assert parts.deepep == deepep_buffer(4096, 4)
    assert "expert" not in parts.communicators   # DeepEP carries the tokens; its setup
    assert "expert tensor and expert" in parts.communicators   # gathers over its group
    assert "expert" in alltoall.most_loaded.reserve_parts.communicators
    assert flex.most_loaded.weights == alltoall.most_loaded.weights


FLEX = MOE_PRESETS["mixtral-8x7b"].with_(moe_token_dispatcher_type="flex")


@pytest.mark.parametrize("build, message", [
    (lambda: Job(FLEX, t=2, sequence_parallel=True, ep=8, etp=2, d=8),
     r"moe_token_dispatcher_type='flex' with etp\*ep=16"),
    (lambda: Job(FLEX, t=2, sequence_parallel=True, ep=1, etp=1, d=2),
     r"etp\*ep=1: DeepEP needs etp\*ep > 1"),
    (lambda: Job(FLEX, t=2, sequence_parallel=True, ep=4, d=4, moe_hot_expert=2),
     "moe_hot_expert=2 with moe_token_dispatcher_type='flex'"),
])
def test_what_flex_refuses_is_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()


ARGV = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
        "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1024",
        "--bf16", "--num-experts", "4", "--expert-model-parallel-size", "2",
        "--disable-bias-linear", "--moe-grouped-gemm", "--moe-token-dispatcher-type", "flex"]


def test_a_launch_with_the_flex_dispatcher():
    job = Job.from_megatron_args(ARGV + ["--moe-enable-deepep"], world_size=2)
    assert job.model.moe_token_dispatcher_type == "flex"
    assert training_memory(job).stages[0].peak > 0
    for extra, message in ((["--moe-flex-dispatcher-backend", "ncclep"], "NCCL-EP"),
                           (["--moe-flex-dispatcher-num-sms", "24"], "channels"),
                           (["--moe-permute-fusion", "--enable-experimental"],
                            "fused multi-hot conversion")):
        with pytest.raises(ValueError, match=message):
            Job.from_megatron_args(ARGV + extra, world_size=2)


def test_measured_the_multihot_conversions_autograd_keeps_a_mask_and_two_indices():
    """Megatron-LM's _DeepepManager._indices_to_multihot, run on CPU: the
    received probabilities require a gradient, so ``probs[mask]`` keeps the
    [R, k'] mask and the index_put its two int64 indices of R_e entries."""
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="torch is not installed")
    import torch
    saved = []
    indices = torch.tensor([[0, -1, 1, -1], [1, -1, -1, -1], [-1, 0, -1, -1], [0, 1, -1, -1]])
    probs = torch.rand(4, 4, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        mask = indices != -1
        valid = indices[mask]
        rows = torch.arange(4).repeat_interleave(mask.sum(dim=1))
        multihot_probs = torch.zeros(4, 2)
        multihot_probs[rows, valid] = probs[mask]
    copies = int(mask.sum())
    assert [(tuple(t.shape), t.dtype) for t in saved] == [
        ((4, 4), torch.bool), ((copies,), torch.int64), ((copies,), torch.int64)]

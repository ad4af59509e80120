"""Context parallelism in the timeline (issue 23, item 2): the exchange
buffers of Transformer Engine's context-parallel attention, by hand from
its code (``dot_product_attention/context_parallel.py``)."""

import doctest

import pytest

import actmem.run.moments.cp_timeline as cp_timeline
from actmem import LayerConfig, ledger_rows, training_memory
from actmem.layer.context_parallel import CP_COMM_TYPES
from actmem.run.moments.cp_timeline import BACKWARD, FORWARD, exchange_buffers, exchange_gradients
from actmem.run.job.presets import MOE_PRESETS, PRESETS

MIB = 2**20
LLAMA = dict(s=8192, b=1, h=4096, a=32, kv_heads=8, ffn_hidden_size=14336,
             activation="swiglu", dropout=False, flash_attention=True)
"""LLaMA-3-8B's layer. At cp=4 a rank holds 2048 tokens: Q = O = 2*2048*4096
bytes = 16 MiB, K = V = 2*2048*8*128 = 4 MiB, L = 4*32*2048 = 1/4 MiB."""

FORWARD_MIB = {
    # n(K+V) ring buffers and the caller's k, v; n outputs; n fp32 lse (n = 4)
    "p2p": {"K/V ring buffers and the caller's K, V": 32, "per-step outputs": 64,
            "per-step log-sum-exps": 1},
    # gathered K, V (4*8); then max(index_select copy 4*4, zero out + two half outputs 2*16)
    "allgather": {"gathered K and V": 32, "output accumulator and per-step outputs": 32},
    # caller's Q+K+V; busiest all-to-all moment: copies Q+K, received Q+K (40 > 32)
    "a2a": {"caller's Q, K, V": 24, "head-major copies": 20, "received buffers": 20},
    # (2, 2): the ring over 2 ranks, 2*(8 + 16 + 1/4) = 48.5 > 40
    "a2a+p2p": {"caller's Q, K, V": 24, "K/V ring buffers and the caller's K, V": 16,
                "per-step outputs": 32, "per-step log-sum-exps": 0.5},
}
BACKWARD_MIB = {
    # dq_buffer Q, two (2, K+V) double buffers, one full step's dq, dk, dv
    "p2p": {"dq buffer": 16, "K/V and dK/dV ring buffers": 32, "one step's dq, dk, dv": 24},
    # per-step dk, dv: 2n+1 = 9 chunks of (K+V)/2 = 4 MiB
    "allgather": {"dq": 16, "whole-sequence dk, dv": 32, "gathered K and V": 32,
                  "per-step dq": 16, "per-step dk, dv": 36, "reordered dk copy": 16},
    # dO after its all-to-all; FlashAttention's dq, dk, dv; their copies; 2Q + K
    "a2a": {"dO after the all-to-all": 16, "attention gradients": 24,
            "head-major copies": 24, "received and converted": 36},
    # the ring's dq_buffer and double buffers hold the gradients: Q + 4(K+V)
    "a2a+p2p": {"dO after the all-to-all": 16, "attention gradients": 48,
                "head-major copies": 24, "received and converted": 36},
}


def layer(kind, **options):
    sizes = (2, 2) if kind == "a2a+p2p" else None
    return LayerConfig(**{**LLAMA, **options}, cp=4, cp_comm_type=kind,
                       hierarchical_context_parallel_sizes=sizes)


@pytest.mark.parametrize("kind", CP_COMM_TYPES)
def test_exchange_bytes_by_hand(kind):
    c = layer(kind)
    assert exchange_buffers(c) == {k: int(v * MIB) for k, v in FORWARD_MIB[kind].items()}
    assert exchange_gradients(c) == {k: int(v * MIB) for k, v in BACKWARD_MIB[kind].items()}


def test_recomputation_does_not_change_the_buffers():
    """The attention holds the same buffers whatever the layer keeps."""
    assert exchange_buffers(layer("p2p", recompute="full")) == exchange_buffers(layer("p2p"))


def test_no_context_parallelism_no_buffers():
    c = LayerConfig(**LLAMA)
    assert exchange_buffers(c) == exchange_gradients(c) == {}


def test_doctests():
    assert doctest.testmod(cp_timeline).failed == 0


SMALL = PRESETS["llama3-8b"].with_(s=4096, L=2, vocab_size=1024)
"""Two LLaMA-3-8B layers with a small vocabulary, so the attention, not the
loss, can set the peak."""


def events(result, template):
    stage = getattr(result, "most_loaded", result)
    return [e for e in stage.timeline.events
            if e.label == template.format(name="micro-batch 0")]


@pytest.mark.parametrize("kind", ["p2p", "allgather", "a2a"])
def test_timeline_adds_the_buffers_inside_the_attention(kind):
    result = training_memory(SMALL, cp=2, cp_comm_type=kind,
                             create_attention_mask_in_dataloader=False)
    c = SMALL.layer(1, False, "none", moe=False, cp=2, cp_comm_type=kind)
    (forward,), (backward,) = events(result, FORWARD), events(result, BACKWARD)
    assert forward.by_category["transient"] == sum(exchange_buffers(c).values())
    assert backward.by_category["transient"] == sum(exchange_gradients(c).values())


def test_attention_events_hold_the_rows_up_to_the_attention_output():
    """Forward and backward of the last layer's attention: the embedding's
    rows, the first layer's all, the second's up to ``proj_input`` (the
    MLP's rows are not made yet, or freed by then)."""
    top = training_memory(SMALL, cp=2, create_attention_mask_in_dataloader=False).most_loaded
    rows = ledger_rows(SMALL.layer(1, False, "none", moe=False, cp=2))
    keys = [r.key for r in rows]
    upto = sum(r.bytes for r in rows[:keys.index("proj_input") + 1])
    # norm input, qkv input, Q, K, V, the output (bf16) and the fp32 lse at 2048 tokens
    assert upto == 2 * 2048 * (4 * 4096 + 2 * 1024) + 4 * 32 * 2048
    whole = top.layer_activations // 2
    for template in (FORWARD, BACKWARD):
        (event,) = events(top, template)
        assert event.by_category["activations"] == top.embedding_activations + whole + upto


def test_cp_1_adds_no_event():
    result = training_memory(SMALL)
    labels = [e.label for e in result.most_loaded.timeline.events]
    assert not any("context-parallel" in label for label in labels)


def test_full_recomputation_runs_the_forward_buffers_again():
    top = training_memory(SMALL, cp=2, recompute="full",
                          create_attention_mask_in_dataloader=False).most_loaded
    c = SMALL.layer(1, False, "none", moe=False, cp=2)
    (again,) = events(top, cp_timeline.RECOMPUTING)
    assert again.by_category["transient"] == sum(exchange_buffers(c).values())


def test_moe_layers_carry_the_buffers():
    """Mixtral's attention (32 heads, 8 KV heads) at cp=2: the MoE layer's
    attention holds the same buffers as a dense layer's."""
    mixtral = MOE_PRESETS["mixtral-8x7b"].with_(s=4096, L=2, vocab_size=1024)
    top = training_memory(mixtral, cp=2, create_attention_mask_in_dataloader=False).most_loaded
    c = mixtral.layer(1, False, "none", moe=False, cp=2)
    (forward,) = events(top, FORWARD)
    assert forward.by_category["transient"] == sum(exchange_buffers(c).values()) > 0


def test_selective_recomputation_runs_the_attention_again():
    """Megatron-LM checkpoints the core attention (TE's, ring and all):
    its forward buffers return in the backward; recomputing only the MLP
    does not run the attention again."""
    def again(**options):
        top = training_memory(SMALL, cp=2, create_attention_mask_in_dataloader=False,
                              **options).most_loaded
        return [e.by_category["transient"] for e in events(top, cp_timeline.RECOMPUTING)]
    c = SMALL.layer(1, False, "none", moe=False, cp=2)
    assert again(recompute="selective") == [sum(exchange_buffers(c).values())]
    assert again(recompute="selective", recompute_modules=["mlp"]) == []
    assert again() == []

"""The flex token dispatcher with DeepEP (``--moe-token-dispatcher-type flex``): its rows.

Megatron-LM's ``megatron/core/transformer/moe/token_dispatcher.py``:
MoEFlexTokenDispatcher with its default backend, _DeepepManager, sends each
token once to every rank of the expert tensor x expert parallel group (W =
etp*ep ranks) that holds one of its experts, through DeepEP's fused
all-to-all (``fused_a2a.py``: FusedDispatch, FusedCombine, DeepEP's
``Buffer.dispatch`` and ``combine`` within one node). The dispatcher sees
the group as W ranks of L = E/ep local experts each: a token's k experts
become k' = etp*k entries of a map over etp*E "experts"
(``_initialize_metadata``). Then it turns what a rank received into a
multi-hot map over its L experts (``_indices_to_multihot``) and permutes
the received tokens to the experts (``moe_utils.py``: permute, fused or not).

Symbols: N = s*b tokens (N/t per rank under sequence parallelism), R the
distinct tokens a rank receives (:func:`received_tokens`), R_e = N*k*etp/t
the routed copies its experts take (the all-to-all dispatcher's T), h.

Rows (per MoE layer, one micro-batch, each alive until the backward has
used it or the layer's next forward replaces it), besides the router's
rows and the experts' (whose probabilities are fp32: DeepEP takes fp32
probabilities, ``_DeepepManager.dispatch`` casts them):

* ``flex_topk_indices``: the top-k over the group's map, int64 [N, k']
  (``setup_metadata``: ``torch.topk``, whose backward keeps them);
* ``flex_token_probs``: their fp32 probabilities [N, k'], the manager's
  ``token_probs``, kept until the layer's next forward;
* ``flex_handle_tokens``, ``flex_handle_received``: DeepEP's intranode
  handle, which FusedDispatch and FusedCombine keep for their backward
  (``deep_ep/buffer.py``: dispatch):
  ``is_token_in_rank`` [N, W] bool and ``send_head`` [N, W] int32 per
  token, ``recv_src_idx`` [R] int32, and the prefix matrices [W, W] and
  2 x [W, C] int32, C = 10 channels (DeepEP's 20 SMs, Megatron-LM's default);
* ``flex_routing_map``: the received tokens' multi-hot map [R, L] (bool),
  the manager's ``dispatched_routing_map``, kept until the next forward;
* ``flex_multihot_mask``, ``flex_multihot_indices``: what the multi-hot
  conversion's autograd keeps
  (``_indices_to_multihot``: ``probs[mask]`` keeps the mask [R, k'] bool,
  the ``index_put`` of the probabilities its two int64 index vectors of
  R_e entries; measured on CPU by the layer's test);
* the permutation of the R received tokens over L experts, as the
  all-to-all dispatcher's over N tokens and E experts
  (:func:`actmem.layer.moe.dispatch_rows`): unfused, the argsort of the
  L x R map (int64) and the copies' index (int64, R_e); with
  ``moe_permute_fusion`` TE's row map, int32 [R, 2L+1];
* ``flex_pad_offsets``: under FP8 with ``moe_permute_fusion``, the fused
  permutation pads each local expert's tokens to the recipe's multiple
  (``moe_utils.py``: permute with ``align_size``, TE's
  ``permutation.py``: moe_permute_and_pad_with_probs) and keeps where the
  pads start, int64 [L] (the manager's ``pad_offsets``, until the next
  forward); the pad rows (0 to multiple - 1 per local expert by the
  routing) are not counted. Unfused, the experts pad instead
  (:func:`actmem.run.moments.moe_dispatch.fp8_padding`). DeepEP still
  sends 16-bit tokens under FP8 (``fused_a2a.py``: FusedDispatch).

Not modelled (refused): the NCCL-EP backend (HybridEP is
:mod:`actmem.layer.moe_hybridep`), DeepEP across nodes (W > 8: NVSHMEM
buffers and another handle), a hot rank, and Megatron-LM's experimental
fused multi-hot conversion. DeepEP's own
buffers live outside PyTorch's allocator (:func:`deepep_buffer`), a part
of the reserve (:mod:`actmem.run.reserve`).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

from .ledger import EXPERT_ROUTED, REPLICATED, LedgerRow
from .moe import moe_row

NVL_PEERS = 8
"""GPUs DeepEP connects within one node (its NUM_MAX_NVL_PEERS)."""
CHANNELS = 10
"""DeepEP's channels: half its SMs, 20 in Megatron-LM (``set_deepep_num_sms``)."""

DEEPEP_WORKSPACE = 32 * 2**20
"""DeepEP's workspace, bytes (``csrc/kernels/configs.cuh``: NUM_WORKSPACE_BYTES)."""
DEEPEP_RECV_TOKENS = 256
"""Tokens per channel DeepEP's buffer holds for each of 2 to 8 ranks, in the
dispatch and the combine configs alike (``deep_ep/buffer.py``:
get_dispatch_config, get_combine_config)."""
DEEPEP_SIGNALS = 160
"""Bytes DeepEP adds to its buffer for barrier signals and peer pointers
(``csrc/deep_ep.cpp``: Buffer::Buffer, 8 ints and twice 8 pointers)."""
CUDA_GRANULARITY = 2 * 2**20
"""cudaMalloc's allocation granularity, bytes."""

_FLEX = "megatron/core/transformer/moe/token_dispatcher.py: _DeepepManager."
SOURCES = {
    "flex_topk_indices": _FLEX + "setup_metadata (torch.topk over the TPxEP map)",
    "flex_token_probs": _FLEX + "setup_metadata and dispatch (token_probs, cast to fp32)",
    "flex_handle_tokens": "deep_ep/buffer.py: Buffer.get_dispatch_layout and dispatch "
                          "(is_token_in_rank, send_head), kept by megatron/core/transformer/"
                          "moe/fused_a2a.py: FusedDispatch and FusedCombine",
    "flex_handle_received": "deep_ep/buffer.py: Buffer.dispatch (recv_src_idx, "
                            "rank_prefix_matrix, channel_prefix_matrix, "
                            "recv_channel_prefix_matrix), kept by fused_a2a.py",
    "flex_routing_map": _FLEX + "get_permuted_hidden_states_by_experts "
                        "(dispatched_routing_map)",
    "flex_multihot_mask": _FLEX + "_indices_to_multihot (probs[mask])",
    "flex_multihot_indices": _FLEX + "_indices_to_multihot (index_put of the probabilities)",
    "flex_pad_offsets": "megatron/core/transformer/moe/moe_utils.py: permute (align_size), "
                        "transformer_engine/pytorch/permutation.py: "
                        "moe_permute_and_pad_with_probs (pad_offsets)",
}
"""Where Megatron-LM and DeepEP keep each flex row."""
NEEDED_FOR = {
    "flex_topk_indices": "backward of topk: the probabilities' gradient goes back to the "
                         "chosen experts' columns",
    "flex_token_probs": "the dispatcher's state, replaced by the layer's next forward",
    "flex_handle_tokens": "backward of the dispatch (a combine) and of the combine (a "
                          "dispatch): where each token went",
    "flex_handle_received": "the same backwards: where each received token came from",
    "flex_routing_map": "unpermute in the forward; the dispatcher's state until the next "
                        "forward",
    "flex_multihot_mask": "backward of probs[mask]: the picked probabilities' gradient "
                          "goes back to their slots",
    "flex_multihot_indices": "backward of the multi-hot conversion: each probability's "
                             "gradient goes back to its (token, expert) slot",
    "flex_pad_offsets": "unpermute and the permutation's backward: where each local "
                        "expert's pad rows start",
}
"""Why each flex row is kept."""


def received_tokens(c) -> int:
    """R, the distinct tokens one rank receives: each of the W = etp*ep
    ranks of the group sends its N/t tokens, a token to every rank whose
    ep group holds one of its k experts, which under balanced routing
    (k distinct experts, uniformly) happens with probability
    1 - C(E-L, k)/C(E, k), L = E/ep; the expectation, rounded."""
    E, k, L = c.num_experts, c.moe_router_topk, c.num_experts // c.ep
    hit = 1 - Fraction(comb(E - L, k), comb(E, k))
    return round(c.expert_t * c.ep * Fraction(c.s * c.b, c.t) * hit)


def _row(c, key, name, shape, elements, bpe, placement=REPLICATED):
    return moe_row(c, key, name, shape, elements, bpe, placement, "fixed",
                   (SOURCES, NEEDED_FOR))


def flex_rows(c, copies: int) -> list[LedgerRow]:
    """The flex dispatcher's own rows (module docstring) for one MoE layer;
    ``copies``: R_e over the layer (the rank's routed copies times t, as
    :func:`actmem.layer.moe.dispatch_rows` counts them). Per-token rows
    cover the N tokens (split along s by sequence parallelism), the
    received ones a rank's R and R_e."""
    N, W, L, t = c.s * c.b, c.expert_t * c.ep, c.num_experts // c.ep, c.t
    k, R = c.expert_t * c.moe_router_topk, received_tokens(c)
    return [
        _row(c, "flex_topk_indices", "top-k indices over the group's map (int64)",
             ("s", "b", "k*etp"), N * k, 8),
        _row(c, "flex_token_probs", "their probabilities, fp32", ("s", "b", "k*etp"), N * k, 4),
        _row(c, "flex_handle_tokens", "DeepEP's handle: each token's ranks (bool, int32)",
             ("s", "b", "W"), N * W, 5),
        _row(c, "flex_handle_received", "DeepEP's handle: received tokens' sources and "
             "prefix matrices (int32)", ("R + W*W + 2*W*C",),
             (R + W * W + 2 * W * CHANNELS) * t, 4, EXPERT_ROUTED),
        _row(c, "flex_routing_map", "received tokens' map over the local experts (bool)",
             ("R", "L"), R * L * t, 1, EXPERT_ROUTED),
        _row(c, "flex_multihot_mask", "multi-hot conversion's mask (bool)", ("R", "k*etp"),
             R * k * t, 1, EXPERT_ROUTED),
        _row(c, "flex_multihot_indices", "multi-hot conversion's indices (int64)",
             ("2", "R_e"), 2 * copies, 8, EXPERT_ROUTED),
    ]


def flex_dispatch_rows(c, copies: int, gathered: tuple) -> list[LedgerRow]:
    """:func:`flex_rows` and the permutation of the R tokens a rank
    received over its L = E/ep experts, the all-to-all dispatcher's of N
    tokens over E (``moe_utils.py``: permute on the received multi-hot
    map): unfused, the L x R map's argsort (int64) and the ``copies``'
    index (int64, shape ``gathered``); with ``moe_permute_fusion``, TE's
    row map, int32 R x (2L+1)."""
    R, L = received_tokens(c) * c.t, c.num_experts // c.ep
    if c.moe_permute_fusion:
        permutation = [moe_row(c, "permute_row_id_map", "row map of the fused permutation "
                               "(int32)", ("R", "2L+1"), R * (2 * L + 1), 4, EXPERT_ROUTED,
                               "fixed")]
        if c.fp8:
            permutation.append(_row(c, "flex_pad_offsets", "where each local expert's FP8 "
                                    "pad rows start (int64)", ("L",), L * c.t, 8, EXPERT_ROUTED))
    else:
        permutation = [
            moe_row(c, "permute_probs_index", "permutation index of the probabilities (int64)",
                    ("L", "R"), R * L, 8, EXPERT_ROUTED, "fixed"),
            moe_row(c, "permute_index", "permutation index of the tokens (int64)", gathered,
                    copies, 8, EXPERT_ROUTED, "fixed")]
    return flex_rows(c, copies) + permutation


def deepep_buffer(h: int, ranks: int) -> int:
    """DeepEP's buffers on one GPU of the flex dispatcher's group of
    ``ranks`` GPUs (2 to 8, one node), for tokens of ``h`` bf16 values,
    bytes: what Megatron-LM asks for (``fused_a2a.py``: get_buffer, the
    larger of the dispatch and combine configs'
    ``get_nvl_buffer_size_hint``, ``csrc/config.hpp``) with its signals,
    rounded to cudaMalloc's 2 MiB, and the 32 MiB workspace. Per channel
    (10: Megatron-LM's 20 SMs) and rank it holds 256 tokens of 2h bytes,
    each with 8 bytes of source meta (DeepEP built with NVSHMEM, as
    Megatron-LM's image builds it) and room for 128 top-k indices (int64),
    weights and scales (fp32), and 5 ints of prefixes; one copy per GPU,
    its peers' mapped over IPC, allocated with cudaMalloc outside PyTorch."""
    slots = CHANNELS * ranks * DEEPEP_RECV_TOKENS
    nvl = CHANNELS * ranks * 5 * 4 + slots * (2 * h + 8 + 128 * (8 + 4 + 4))
    nvl = -(-nvl // 128) * 128 + DEEPEP_SIGNALS
    return -(-nvl // CUDA_GRANULARITY) * CUDA_GRANULARITY + DEEPEP_WORKSPACE

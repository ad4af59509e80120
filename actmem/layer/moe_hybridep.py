"""The flex token dispatcher with HybridEP (``--moe-flex-dispatcher-backend hybridep``): its rows.

Megatron-LM's ``megatron/core/transformer/moe/token_dispatcher.py``:
_HybridEPManager hands the router's dense routing map and probabilities to
DeepEP's HybridEP (``fused_a2a.py``: HybridEPDispatch, HybridEPCombine;
DeepEP's ``deep_ep/hybrid_ep_buffer.py`` and ``csrc/hybrid_ep/`` at
34152ae, the commit Megatron-LM's LTS image pins), which permutes while it
dispatches: each of a rank's L = E/ep local experts receives its tokens
straight into the experts' input [R_e, h], with no received-but-unpermuted
copy, no top-k indices and no multi-hot conversion (contrast
:mod:`actmem.layer.moe_flex`, the DeepEP backend). As with DeepEP the
group is the W = etp*ep ranks of the expert tensor x expert group, which
see E' = etp*E "experts" (``_initialize_metadata``). actmem models one
NVLink domain (W <= 8, one 8-GPU node; n = 1 in HybridEP's terms).

Symbols: N = s*b/t tokens of a rank (split along s by sequence
parallelism), W, L, E' = W*L, R_e the routed copies the rank's experts take,
T = max(roundup(N, 16), 512) the tokens per rank HybridEP's buffers hold
(``csrc/hybrid_ep/config.cuh``; ``hybrid_ep_buffer.py``:
update_template_config).

Rows (per MoE layer, one micro-batch; the manager's attributes and the
autograd functions' ``ctx.handle`` keep them, none through
``save_for_backward``):

* ``hybridep_routing_map``: the manager's routing map, bool [N, E']
  (a view of the router's map, kept until the layer's next forward);
* ``hybridep_token_probs``: the manager's probabilities, fp32 [N, E']
  (``_HybridEPManager.dispatch`` casts them to fp32);
* ``hybridep_handle_tokens``: the handle's ``sparse_to_dense_map`` int32
  [N, W] and ``rdma_to_attn_map`` bool [roundup(N, 16), 1]
  (``csrc/hybrid_ep/executor/executor.cu``: metadata_preprocess_core);
* ``hybridep_local_map``: the handle's ``local_expert_routing_map``, bool
  [N*W, L];
* ``hybridep_row_id_map``: the handle's permutation map, int32 [T*W + p, L],
  sized by the buffer's worst case T*W, not by the tokens received, plus p
  = the FP8 pad multiple (``csrc/hybrid_ep/extension/permute.cu``:
  permute_preprocessing);
* the experts' probabilities, one fp32 per routed copy [R_e] (the
  ``expert_probs`` row, as DeepEP's).

Not modelled (refused by name): HybridEP across NVLink domains (W > 8:
RDMA buffers, another handle), ``--moe-permute-fusion-into-hybridep`` (its
handle keeps a [N*W, L] int32 map instead of the row map),
``--moe-hybridep-pad-uneven-dispatch-inputs`` and SM counts other than
Megatron-LM's defaults. HybridEP's own buffers live outside PyTorch's
allocator (:func:`hybridep_buffer`), a part of the reserve.
"""

from __future__ import annotations

from .ledger import EXPERT_ROUTED, REPLICATED, LedgerRow
from .moe import moe_row

MIN_TOKENS = 512
"""The fewest tokens per rank HybridEP's buffers hold (``config.cuh``)."""
CHUNK = 64
"""Tokens per chunk of HybridEP's dispatch and combine (``config.cuh``)."""
PREPROCESSING_SMS = 108
"""Blocks of HybridEP's metadata kernel, Megatron-LM's
``--moe-hybridep-num-sms-preprocessing`` default."""

_MANAGER = "megatron/core/transformer/moe/token_dispatcher.py: _HybridEPManager."
_HANDLE = ("deep_ep csrc/hybrid_ep/executor/executor.cu: metadata_preprocess_core ({}), kept "
           "by megatron/core/transformer/moe/fused_a2a.py: HybridEPDispatch and HybridEPCombine "
           "(ctx.handle) and the manager")
SOURCES = {
    "hybridep_routing_map": _MANAGER + "setup_metadata (routing_map)",
    "hybridep_token_probs": _MANAGER + "setup_metadata and dispatch (token_probs, cast to fp32)",
    "hybridep_handle_tokens": _HANDLE.format("sparse_to_dense_map, rdma_to_attn_map"),
    "hybridep_local_map": _HANDLE.format("local_expert_routing_map"),
    "hybridep_row_id_map": "deep_ep csrc/hybrid_ep/extension/permute.cu: "
                           "permute_preprocessing (row_id_map), in the handle",
}
"""Where Megatron-LM and HybridEP keep each row."""
NEEDED_FOR = {
    "hybridep_routing_map": "the dispatcher's state, replaced by the layer's next forward",
    "hybridep_token_probs": "the dispatcher's state, replaced by the layer's next forward",
    "hybridep_handle_tokens": "backward of the dispatch (a combine) and of the combine (a "
                              "dispatch): where each token goes",
    "hybridep_local_map": "read by the forward's permute preprocessing; kept with the "
                          "handle the backwards use",
    "hybridep_row_id_map": "the combine's unpermute and the backwards' permutes",
}
"""Why each row is kept."""


def buffer_tokens(tokens: int) -> int:
    """T, the tokens per rank HybridEP's buffers hold: the rank's ``tokens``
    (N = s*b/t) rounded up to 16, at least 512."""
    return max(-(-tokens // 16) * 16, MIN_TOKENS)


def _row(c, key, name, shape, elements, bpe, placement=EXPERT_ROUTED):
    return moe_row(c, key, name, shape, elements, bpe, placement, "fixed",
                   (SOURCES, NEEDED_FOR))


def hybridep_rows(c) -> list[LedgerRow]:
    """HybridEP's rows (module docstring) for one MoE layer, on one GPU
    (per-token rows over the layer's N = s*b tokens, the others times t, as
    the ledger counts rows a rank holds alone)."""
    from .fp8_scales import fp8_align   # the FP8 pad multiple
    N, W, L, t = c.s * c.b, c.expert_t * c.ep, c.num_experts // c.ep, c.t
    n = N // t
    pad = fp8_align(c) if c.fp8 else 0
    return [
        _row(c, "hybridep_routing_map", "the manager's routing map (bool)", ("s", "b", "E'"),
             N * W * L, 1, REPLICATED),
        _row(c, "hybridep_token_probs", "the manager's probabilities, fp32", ("s", "b", "E'"),
             N * W * L, 4, REPLICATED),
        _row(c, "hybridep_handle_tokens", "HybridEP's handle: each token's slot on each rank "
             "(int32, bool)", ("N", "W"), (4 * n * W + -(-n // 16) * 16) * t, 1),
        _row(c, "hybridep_local_map", "HybridEP's handle: local experts' routing map (bool)",
             ("N*W", "L"), n * W * L * t, 1),
        _row(c, "hybridep_row_id_map", "HybridEP's handle: the permutation's row map (int32)",
             ("T*W + p", "L"), (buffer_tokens(n) * W + pad) * L * t, 4),
    ]


def hybridep_buffer(h: int, tokens: int, local: int, ranks: int) -> int:
    """HybridEP's buffers on one GPU of its group of W = ``ranks`` = etp*ep
    GPUs in one NVLink domain, for ``tokens`` (N = s*b/t) bf16 tokens of
    ``h`` values per rank and ``local`` (L) experts per GPU (Megatron-LM's
    defaults), bytes: allocated once by the first MoE layer's dispatch
    (``fused_a2a.py``: init_hybrid_ep_buffer) for the worst case, M = T*W
    tokens landing on this GPU (``csrc/hybrid_ep/buffer/intranode.cu``:
    NVLCoordinator), outside PyTorch's allocator (cudaMalloc, or cuMem with
    fabric handles), the peers' mapped over IPC: the tokens M*2h, their
    probabilities M*E'*4 and scaling factors M*(h/128)*4 (allocated for
    bf16 too), the routing map's all-gather buffer E'*T*W bytes
    (``extension/allgather.cu``), the chunk flags 2 * ceil(T/64)*W*4 and
    the metadata kernel's scratch 108*(W + L)*8, at their sizes. Not
    counted: a few dozen bytes of flags, and what the driver rounds each of
    these ~20 allocations up to (cudaMalloc's pages, or the fabric path's
    granule on GB200), unmeasured."""
    T, W, L = buffer_tokens(tokens), ranks, local
    M = T * W
    data = M * 2 * h + M * W * L * 4 + M * (h // 128) * 4 + W * L * T * W
    return data + 2 * -(-T // CHUNK) * W * 4 + PREPROCESSING_SMS * (W + L) * 8

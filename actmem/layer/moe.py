"""The rows a mixture-of-experts MLP saves for backward, as Megatron-LM runs it.

:func:`with_moe` is a row transformation: it takes a layer's rows (paper
sec. 4.1) and replaces the dense MLP's (``fc1_input``, the activation's
inputs, ``fc2_input``) by the MoE layer's, keeping the pre-MLP LayerNorm's
input and the dropout mask after the block. Every row follows Megatron-LM's
default training path (``megatron/core/transformer/moe/``): the top-k
router with the softmax after top-k (``router.py``: TopKRouter.routing,
``moe_utils.py``: topk_routing_with_score_function), the all-to-all token
dispatcher (``token_dispatcher.py``: MoEAlltoAllTokenDispatcher) with the
unfused permutation (``moe_utils.py``: permute, unpermute), the experts of
``experts.py`` (TEGroupedMLP, or SequentialMLP: the same saved bytes) with
the fused weighted SwiGLU (``fusions/fused_bias_swiglu.py``:
WeightedSwiGLUFunction), and the shared experts (``shared_experts.py``:
SharedExpertMLP, a tensor-parallel MLP with fused SwiGLU).

Symbols: N = s*b tokens of the layer (N/t per rank under sequence
parallelism, which Megatron-LM requires with t > 1), E experts, k =
``moe_router_topk``, f_e = ``moe_ffn_hidden_size``, f_s the shared experts'
width, etp the expert tensor-parallel size.

**Tokens per expert: balanced routing in expectation.** Dropless routing
(no capacity factor, Megatron-LM's default) sends each rank's N/t tokens as
k copies; each rank sends its copies to the ep ranks of its expert-parallel
group and, when the router spreads tokens evenly over the E experts, gets
back as many as it sent (N*k/t), all-gathers them over its etp group
(``dispatch_postprocess``) and so runs its E/ep local experts on
T = N*k*etp/t copies, T*ep/E per expert. ep does not change a rank's
expected bytes; an uneven router does (a rank's experts can receive up to
all N*k*etp*ep/t copies), so the expert rows are expectations, exact when
ep = 1 (every copy stays local, whatever the routing). A capacity factor c
(``--moe-expert-capacity-factor``) caps each expert at
ceil(N*k*c/(t*E)) copies per source rank (``moe_utils.py``: get_capacity,
apply_router_token_dropping), an option here (:func:`actmem.layer.moe_copies.routed_copies`):
dropping keeps the balanced expectation for c >= 1 and caps each expert at
the capacity below it, and the masking of the probabilities keeps an N x E
boolean mask;
``--moe-pad-expert-input-to-capacity`` makes every expert's input exactly
the capacity (T = E*capacity*etp per rank, not an expectation) and
permutes with two int64 indices of E*capacity each (``permute`` and
``unpermute`` with ``drop_and_pad``). The load-balancing loss
(``--moe-aux-loss-coeff`` > 0, type ``aux_loss``) keeps the router's fp32
softmax over all E experts (``moe_utils.py``:
compute_routing_scores_for_aux_loss). The other routers
(:mod:`actmem.layer.router`), the all-gather and flex dispatchers and GeLU
experts: :func:`~actmem.layer.router.router_rows`, :func:`dispatch_rows`,
:func:`actmem.layer.moe_flex.flex_dispatch_rows`, :func:`expert_rows`.

**Checked against Megatron-LM itself.** Megatron-LM's own ``MoELayer``
(d98e8a64, its local layer specs, one gloo rank on CPU: SequentialMLP,
GeLU experts, sinkhorn, the all-gather dispatcher; top-1 with a bf16
router, top-2 with bf16 and fp32 routers) saved exactly these rows, byte
for byte, and no other tensor (a check run once, outside the tests, which
cannot depend on Megatron-LM; the tests measure the reference layer of
:mod:`actmem.measure.moe`, which runs the same operations). Not rows:
the dispatcher's attributes (``local_map``, the permutation index and the
permuted probabilities) outlive the backward until the layer's next
forward, N*E + 8Nk + Nk*probability bytes per MoE layer.
"""

from __future__ import annotations

from .config import LayerConfig
from .ledger import EXPERT_ROUTED, HIDDEN_SPLIT, REPLICATED, LedgerRow
from .moe_copies import received_copies, routed_copies
from .moe_options import ROUTER_DTYPES
from .router import NEEDED_FOR as ROUTER_NEEDED_FOR
from .router import SOURCES as ROUTER_SOURCES
from .router import router_rows

DENSE_MLP_ROWS = ("fc1_input", "gelu_input", "relu_output", "swiglu_gate", "swiglu_up",
                  "fc2_input")
"""The dense MLP's rows an MoE layer replaces."""

_MOE = "megatron/core/transformer/moe/"
SOURCES = {
    **ROUTER_SOURCES,
    "moe_input": _MOE + "moe_utils.py: RouterGatingLinearFunction.forward "
                 "(save_for_backward(inp, ...)); also the shared experts' linear_fc1 input",
    "permute_probs_index": _MOE + "moe_utils.py: permute (probs.T.contiguous()"
                           ".reshape(-1)[flat_sorted], flat_sorted a slice of the argsort)",
    "permute_row_id_map": "transformer_engine/pytorch/permutation.py: moe_permute_with_probs "
                          "(save_for_backward(row_id_map)) and moe_unpermute, called by "
                          + _MOE + "moe_utils.py: permute and unpermute with fused=True",
    "sort_row_id_map": "transformer_engine/pytorch/permutation.py: "
                       "moe_sort_chunks_by_index(_with_probs) (save_for_backward(row_id_map)), "
                       "called by " + _MOE + "moe_utils.py: sort_chunks_by_idxs with fused=True",
    "permute_index": _MOE + "moe_utils.py: permute (tokens.index_select(0, sorted_indices)) "
                     "and unpermute (scatter_add_ with the same indices), called by "
                     "token_dispatcher.py's dispatchers",
    "dispatch_local_probs": _MOE + "token_dispatcher.py: MoEAllGatherTokenDispatcher."
                            "dispatch_postprocess (local_probs.T.contiguous().masked_select"
                            "(local_map.T.contiguous()))",
    "dispatch_local_map": _MOE + "token_dispatcher.py: MoEAllGatherTokenDispatcher."
                          "dispatch_postprocess (the mask masked_select saves)",
    "expert_act_output": _MOE + "experts.py: TEGroupedMLP.forward and transformer/mlp.py: "
                         "MLP.forward, unfused activation with probabilities "
                         "(activation_func(x) * probs.unsqueeze(-1))",
    "expert_fc1_input": _MOE + "experts.py: TEGroupedMLP.forward (linear_fc1 on the tokens "
                        "token_dispatcher.py: MoEAlltoAllTokenDispatcher dispatched)",
    "expert_fc1_output": "megatron/core/fusions/fused_bias_swiglu.py: "
                         "WeightedSwiGLUFunction.forward (save_for_backward(input, weights)); "
                         "GeLU: torch.nn.functional.gelu saves its input",
    "expert_probs": "megatron/core/fusions/fused_bias_swiglu.py: WeightedSwiGLUFunction."
                    "forward (the permuted probabilities as weights)",
    "expert_fc2_input": _MOE + "experts.py: TEGroupedMLP.forward (linear_fc2 on the "
                        "weighted SwiGLU output)",
    "shared_fc1_output": _MOE + "shared_experts.py: SharedExpertMLP (transformer/mlp.py: "
                         "MLP.forward, fused bias_swiglu or bias_gelu saves its input)",
    "shared_fc2_input": _MOE + "shared_experts.py: SharedExpertMLP (transformer/mlp.py: "
                        "MLP.forward, linear_fc2)",
}
"""Where Megatron-LM saves each MoE row (file: function)."""

NEEDED_FOR = {
    **ROUTER_NEEDED_FOR,
    "moe_input": "weight gradient of the router (dW = dlogits^T X) and of the shared "
                 "experts' first linear (dW = X^T dY)",
    "permute_probs_index": "backward of the probabilities' gather: each permuted "
                           "probability's gradient goes back to its (token, expert) slot",
    "permute_row_id_map": "backward of the fused permute and unpermute: where each token's "
                          "copies went, per expert",
    "sort_row_id_map": "backward of the fused sorts: where each copy moved",
    "permute_index": "backward of permute and unpermute: each routed copy's gradient is "
                     "summed back into its token, and the output's gradient gathered to "
                     "each copy",
    "dispatch_local_probs": "backward of masked_select: the selected probabilities' "
                            "gradient is scattered back into the local experts' columns",
    "dispatch_local_map": "backward of masked_select: where each selected probability "
                          "came from",
    "expert_act_output": "backward of gelu(x) * p: the probability's gradient is "
                         "rowsum(dY * gelu(x))",
    "expert_fc1_input": "weight gradient of each expert's first linear: dW_e = X_e^T dY_e",
    "expert_fc1_output": "activation backward: SwiGLU's d(up) and d(gate) need gate and "
                         "up, GeLU's derivative needs its input",
    "expert_probs": "weighted SwiGLU backward: the gradient is scaled by each copy's "
                    "routing probability, and the probability's gradient is "
                    "rowsum(dY * swiglu(x))",
    "expert_fc2_input": "weight gradient of each expert's second linear: dW_e = X_e^T dY_e",
    "shared_fc1_output": "activation backward of the shared experts: SwiGLU needs gate "
                         "and up, GeLU its input",
    "shared_fc2_input": "weight gradient of the shared experts' second linear: dW = X^T dY",
}
"""Why each MoE row is kept, keyed by :attr:`LedgerRow.key`."""


def moe_row(c, key, name, shape, elements, bpe, placement, group, tables=None):
    """The MoE row ``key`` of layer ``c``, with its source and why it is
    kept from ``tables`` (a module's SOURCES and NEEDED_FOR; this module's
    :data:`SOURCES` and :data:`NEEDED_FOR` by default), over t ranks unless
    replicated."""
    sources, needed_for = tables or (SOURCES, NEEDED_FOR)
    ranks = 1 if placement == REPLICATED else c.t
    return LedgerRow(key, name, "MoE", shape, elements, bpe, placement, ranks, group,
                     sources[key], needed_for[key])


def moe_rows(c: LayerConfig) -> tuple[LedgerRow, ...]:
    """The MoE block's rows for one micro-batch (shapes in the module's symbols).

    The router (whole on each tensor-parallel rank; split along s by
    :func:`actmem.layer.ledger.with_sequence_parallel`): the MoE input 2Nh
    and :func:`~actmem.layer.router.router_rows`. The dispatcher's permutation tensors
    (:func:`dispatch_rows`). Routed copies (``EXPERT_ROUTED``, per rank over
    t): fc1 input 2Nk*etp*h, then :func:`expert_rows`. With a capacity
    factor, Nk is replaced by the copies of :func:`~actmem.layer.moe_copies.routed_copies` (times t);
    with ``moe_rank_load`` by those of
    :func:`~actmem.layer.moe_copies.received_copies`.
    Shared experts (hidden-split over t): fc1 output 2*2N*f_s (SwiGLU's gate
    and up; GeLU's input: 2N*f_s), fc2 input 2N*f_s.
    """
    N, h, x = c.s * c.b, c.h, c.expert_t
    T, received = routed_copies(c) * c.t, received_copies(c) * c.t
    sent = ("s", "b", "k") if T == N * c.moe_router_topk else ("E", "capacity")
    copies = sent if received == T else ("s", "b", "k*load")
    gathered = (*copies[:-1], copies[-1] + "*etp")
    rows = [moe_row(c, "moe_input", "input of the MoE layer (router and shared experts)",
                    ("s", "b", "h"), N * h, 2, REPLICATED, "fixed"),
            *router_rows(c, ROUTER_DTYPES[c.moe_router_dtype]),
            *dispatch_rows(c, (T, sent), (received, gathered)),
            moe_row(c, "expert_fc1_input", "input of the experts' first linear (routed copies)",
                    (*gathered, "h"), received * x * h, 2, EXPERT_ROUTED, "intermediate"),
            *expert_rows(c, received, copies, gathered)]
    fs = c.moe_shared_expert_intermediate_size
    if fs:
        glu = 2 if c.activation == "swiglu" else 1
        rows += [
            moe_row(c, "shared_fc1_output", "shared experts' " + _ACT_INPUT[c.activation],
                    ("s", "b", f"{'2' * (glu > 1)}f_s"), glu * N * fs, 2, HIDDEN_SPLIT,
                    "intermediate"),
            moe_row(c, "shared_fc2_input", "input of the shared experts' second linear",
                    ("s", "b", "f_s"), N * fs, 2, HIDDEN_SPLIT, "intermediate"),
        ]
    return tuple(rows)


_ACT_INPUT = {"gelu": "fc1 output (GeLU input)", "swiglu": "fc1 output (SwiGLU gate and up)",
              "squared_relu": "ReLU output (squared ReLU's input to pow)"}
"""The f-wide tensor an activation keeps, by activation: squared ReLU keeps
``relu(fc1 output)``, which ``relu`` and ``pow`` both save, not fc1's output."""


def probability_bytes(c: LayerConfig) -> int:
    """Bytes of one routing probability as the dispatcher and the experts
    keep it: the router's logits dtype (``--moe-router-dtype``; None: bf16,
    ``router.py``: TopKRouter.gating; ``moe_utils.py``:
    topk_routing_with_score_function casts the probabilities back to it);
    fp32 at least with the flex dispatcher (DeepEP takes fp32 probabilities:
    ``token_dispatcher.py``: _DeepepManager.dispatch casts them), fp32
    exactly with HybridEP (_HybridEPManager.dispatch casts fp64 down too)."""
    nbytes = ROUTER_DTYPES[c.moe_router_dtype]
    if c.moe_token_dispatcher_type != "flex":
        return nbytes
    return 4 if c.moe_flex_dispatcher_backend == "hybridep" else max(nbytes, 4)


def dispatch_rows(c: LayerConfig, sent: tuple[int, tuple], received: tuple[int, tuple]
                  ) -> list[LedgerRow]:
    """The permutation's saved tensors. All-to-all (permute before the
    exchange, on the rank's own tokens): the probabilities' gather index
    8NE (int64: a slice of the argsort of the whole E x N routing map
    keeps all of it alive) and the tokens' index 8Nk (int64); padded to
    capacity, both hold the E*capacity copies. All-gather
    (``token_dispatcher.py``: MoEAllGatherTokenDispatcher, after gathering
    the tokens, probabilities and routing map of the etp*ep ranks of its
    group): the tokens' index of the copies its local experts take,
    8Nk*etp per rank over t (int64), and the transposed probabilities and
    routing map of its E/ep local experts over the gathered s*b*etp*ep/t
    tokens that ``masked_select`` saves, N*E*etp per rank over t each
    (the probability's bytes, and bool). ``sent``, ``received``: (copies
    over the layer, their shape) a rank sends, and its experts receive
    (:func:`~actmem.layer.moe_copies.received_copies`, before the etp
    all-gather). With ``moe_permute_fusion``: :func:`fused_dispatch_rows`."""
    N, E, x = c.s * c.b, c.num_experts, c.expert_t
    (T, copies), (got, gathered) = sent, received
    if c.moe_token_dispatcher_type == "allgather":
        return [moe_row(c, "permute_index", "permutation index of the tokens (int64)",
                        gathered, got * x, 8, EXPERT_ROUTED, "fixed"),
                moe_row(c, "dispatch_local_probs", "local experts' probabilities, transposed",
                        ("E", "s*etp", "b"), N * E * x, probability_bytes(c), EXPERT_ROUTED,
                        "fixed"),
                moe_row(c, "dispatch_local_map", "local experts' routing map, transposed (bool)",
                        ("E", "s*etp", "b"), N * E * x, 1, EXPERT_ROUTED, "fixed")]
    if c.moe_token_dispatcher_type == "flex" and c.moe_flex_dispatcher_backend == "hybridep":
        from .moe_hybridep import hybridep_rows   # permuted while dispatched
        return hybridep_rows(c)
    if c.moe_token_dispatcher_type == "flex":
        from .moe_flex import flex_dispatch_rows  # moe_flex builds on this module's rows
        return flex_dispatch_rows(c, got * x, gathered)
    if c.moe_permute_fusion:
        return fused_dispatch_rows(c, got * x, gathered)
    padded = c.moe_pad_expert_input_to_capacity
    return [moe_row(c, "permute_probs_index", "permutation index of the probabilities (int64)",
                    copies if padded else ("E", "s", "b"), T if padded else N * E, 8, REPLICATED,
                    "fixed"),
            moe_row(c, "permute_index", "permutation index of the tokens (int64)",
                    copies, T, 8, REPLICATED, "fixed")]


def fused_dispatch_rows(c: LayerConfig, copies: int, gathered: tuple) -> list[LedgerRow]:
    """Transformer Engine's fused permutation (``--moe-permute-fusion``,
    ``transformer_engine/pytorch/permutation.py`` since TE 2.6, commit
    dc97cc9 of 2025-07; earlier releases kept an int64 E x N map):
    ``moe_permute_with_probs`` saves its row map, int32 of N x (2E + 1)
    (``triton/permutation.py``: make_row_id_map), which ``moe_unpermute``
    saves again (the same tensor); ``moe_sort_chunks_by_index_with_probs``
    and ``moe_sort_chunks_by_index`` (the sort by local expert, after the
    etp all-gather, and its inverse before the reduce-scatter) save an
    int32 row map of the rank's ``copies`` (after the etp all-gather, over
    the layer; shape ``gathered``) each. Megatron-LM sorts only with
    more than one local expert (E/ep > 1, which the run checks)."""
    N, E = c.s * c.b, c.num_experts
    return [moe_row(c, "permute_row_id_map", "row map of the fused permutation (int32)",
                    ("s", "b", "2E+1"), N * (2 * E + 1), 4, REPLICATED, "fixed"),
            moe_row(c, "sort_row_id_map", "row maps of the fused sorts by local expert (int32)",
                    ("2", *gathered), 2 * copies, 4, EXPERT_ROUTED, "fixed")]


def expert_rows(c: LayerConfig, T: int, copies: tuple, gathered: tuple) -> list[LedgerRow]:
    """What the experts keep beyond their input, per routed copy
    (``experts.py``: TEGroupedMLP, SequentialMLP). SwiGLU: the fused
    weighted SwiGLU keeps its input 2*2f_e and the copy's probability.
    GeLU (the unfused path Megatron-LM takes when the experts get
    probabilities): ``F.gelu`` keeps its input 2f_e, and
    ``gelu(x) * probs`` both its operands, the GeLU output 2f_e and the
    probability. Then the input of fc2, 2f_e. Squared ReLU takes the same
    unfused path (``--use-fused-weighted-squared-relu`` off): ``relu`` keeps
    its output 2f_e (``pow`` reads the same tensor), and
    ``pow(...) * probs`` the squared output and the probability."""
    f, x, glu = c.f_e, c.expert_t, c.activation == "swiglu"
    rows = [moe_row(c, "expert_fc1_output", "experts' " + _ACT_INPUT[c.activation],
                    (*copies, "2f_e" if glu else "f_e"),
                    (2 if glu else 1) * T * f, 2, EXPERT_ROUTED, "intermediate")]
    if not glu:
        name = "GeLU" if c.activation == "gelu" else "squared ReLU"
        rows.append(moe_row(c, "expert_act_output", f"experts' {name} output (kept by the "
                            "probability's multiplication)", (*copies, "f_e"), T * f, 2,
                            EXPERT_ROUTED, "intermediate"))
    return rows + [
        moe_row(c, "expert_probs", "routing probability of each routed copy",
                gathered, T * x, probability_bytes(c), EXPERT_ROUTED, "intermediate"),
        moe_row(c, "expert_fc2_input", "input of the experts' second linear",
                (*copies, "f_e"), T * f, 2, EXPERT_ROUTED, "intermediate")]


def with_moe(rows, c: LayerConfig):
    """Replace the dense MLP's rows by the MoE block's (:func:`moe_rows`),
    where ``fc1_input`` stood; the LayerNorm input before and the dropout
    mask after the block stay."""
    keys = [r.key for r in rows]
    at = keys.index("fc1_input")
    kept = tuple(r for r in rows if r.key not in DENSE_MLP_ROWS)
    before = sum(1 for r in rows[:at] if r.key not in DENSE_MLP_ROWS)
    return kept[:before] + moe_rows(c) + kept[before:]

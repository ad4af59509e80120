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
apply_router_token_dropping), an option here (:func:`routed_copies`):
dropping keeps the balanced expectation for c >= 1 and caps each expert at
the capacity below it, and the masking of the probabilities keeps an N x E
boolean mask;
``--moe-pad-expert-input-to-capacity`` makes every expert's input exactly
the capacity (T = E*capacity*etp per rank, not an expectation) and
permutes with two int64 indices of E*capacity each (``permute`` and
``unpermute`` with ``drop_and_pad``). The load-balancing loss
(``--moe-aux-loss-coeff`` > 0, type ``aux_loss``) keeps the router's fp32
softmax over all E experts (``moe_utils.py``:
compute_routing_scores_for_aux_loss).
"""

from __future__ import annotations

import math
from fractions import Fraction

from .config import LayerConfig
from .ledger import EXPERT_ROUTED, HIDDEN_SPLIT, REPLICATED, LedgerRow

DENSE_MLP_ROWS = ("fc1_input", "gelu_input", "swiglu_gate", "swiglu_up", "fc2_input")
"""The dense MLP's rows an MoE layer replaces."""

_MOE = "megatron/core/transformer/moe/"
SOURCES = {
    "moe_input": _MOE + "moe_utils.py: RouterGatingLinearFunction.forward "
                 "(save_for_backward(inp, ...)); also the shared experts' linear_fc1 input",
    "router_topk_indices": _MOE + "moe_utils.py: topk_routing_with_score_function "
                           "(torch.topk, then scatter into the routing map)",
    "router_probs": _MOE + "moe_utils.py: topk_routing_with_score_function "
                    "(torch.softmax(scores, dtype=torch.float32) after top-k)",
    "permute_probs_index": _MOE + "moe_utils.py: permute (probs.T.contiguous()"
                           ".reshape(-1)[flat_sorted], flat_sorted a slice of the argsort)",
    "permute_index": _MOE + "moe_utils.py: permute (tokens.index_select(0, sorted_indices)) "
                     "and unpermute (scatter_add_ with the same indices)",
    "router_aux_scores": _MOE + "moe_utils.py: compute_routing_scores_for_aux_loss "
                         "(torch.softmax(logits, dtype=torch.float32)), called by router.py: "
                         "TopKRouter.routing when the aux loss is on",
    "router_capacity_mask": _MOE + "moe_utils.py: apply_router_token_dropping "
                            "(final_probs = routing_probs * final_map)",
    "expert_fc1_input": _MOE + "experts.py: TEGroupedMLP.forward (linear_fc1 on the tokens "
                        "token_dispatcher.py: MoEAlltoAllTokenDispatcher dispatched)",
    "expert_fc1_output": "megatron/core/fusions/fused_bias_swiglu.py: "
                         "WeightedSwiGLUFunction.forward (save_for_backward(input, weights))",
    "expert_probs": "megatron/core/fusions/fused_bias_swiglu.py: WeightedSwiGLUFunction."
                    "forward (the permuted probabilities as weights)",
    "expert_fc2_input": _MOE + "experts.py: TEGroupedMLP.forward (linear_fc2 on the "
                        "weighted SwiGLU output)",
    "shared_fc1_output": _MOE + "shared_experts.py: SharedExpertMLP (transformer/mlp.py: "
                         "MLP.forward, fused bias_swiglu saves its input)",
    "shared_fc2_input": _MOE + "shared_experts.py: SharedExpertMLP (transformer/mlp.py: "
                        "MLP.forward, linear_fc2)",
}
"""Where Megatron-LM saves each MoE row (file: function)."""

NEEDED_FOR = {
    "moe_input": "weight gradient of the router (dW = dlogits^T X) and of the shared "
                 "experts' first linear (dW = X^T dY)",
    "router_topk_indices": "top-k and scatter backward: the gradient of the k chosen "
                           "scores goes back to their experts' columns",
    "router_probs": "softmax backward over the k chosen scores: dS = P * (dP - "
                    "rowsum(dP * P)) needs P",
    "permute_probs_index": "backward of the probabilities' gather: each permuted "
                           "probability's gradient goes back to its (token, expert) slot",
    "permute_index": "backward of permute and unpermute: each routed copy's gradient is "
                     "summed back into its token, and the output's gradient gathered to "
                     "each copy",
    "router_aux_scores": "load-balancing loss backward through the softmax over all E "
                         "experts: dS = P * (dP - rowsum(dP * P)) needs P",
    "router_capacity_mask": "backward of the capacity masking: the probabilities' gradient "
                            "is multiplied by the same mask",
    "expert_fc1_input": "weight gradient of each expert's first linear: dW_e = X_e^T dY_e",
    "expert_fc1_output": "weighted SwiGLU backward: d(up) and d(gate) need gate and up",
    "expert_probs": "weighted SwiGLU backward: the gradient is scaled by each copy's "
                    "routing probability, and the probability's gradient is "
                    "rowsum(dY * swiglu(x))",
    "expert_fc2_input": "weight gradient of each expert's second linear: dW_e = X_e^T dY_e",
    "shared_fc1_output": "SwiGLU backward of the shared experts: needs gate and up",
    "shared_fc2_input": "weight gradient of the shared experts' second linear: dW = X^T dY",
}
"""Why each MoE row is kept, keyed by :attr:`LedgerRow.key`."""


def _row(c, key, name, shape, elements, bpe, placement, group):
    ranks = 1 if placement == REPLICATED else c.t
    return LedgerRow(key, name, "MoE", shape, elements, bpe, placement, ranks, group,
                     SOURCES[key], NEEDED_FOR[key])


def moe_rows(c: LayerConfig) -> tuple[LedgerRow, ...]:
    """The MoE block's rows for one micro-batch (shapes in the module's symbols).

    Router and permutation (whole on each tensor-parallel rank; split along s
    by :func:`actmem.layer.ledger.with_sequence_parallel`): the MoE input
    2Nh, the top-k indices 8Nk (int64), the softmax probabilities 4Nk
    (fp32), the probabilities' gather index 8NE (int64: a slice of the
    argsort of the whole E x N routing map keeps all of it alive), the
    tokens' permutation index 8Nk (int64). Routed copies (``EXPERT_ROUTED``,
    per rank over t): fc1 input 2Nk*etp*h, fc1 output 2*2Nk*f_e, the copies'
    probabilities 2Nk*etp (bf16, the logits' dtype), fc2 input 2Nk*f_e.
    With the load-balancing loss (``moe_aux_loss_coeff`` > 0): the softmax
    over all experts, 4NE (fp32); its loss keeps E int64 token counts and a
    0-d fp32 loss besides, 8E + 4 bytes left out (not split along s).
    With a capacity factor: an N x E bool mask more, and Nk replaced by the
    copies of :func:`routed_copies` (times t); padded to capacity, both
    permutation indices hold those copies' E*capacity entries. Shared
    experts (hidden-split over t): fc1 output 2*2N*f_s, fc2 input
    2N*f_s.
    """
    N, E, k, h, f, x = c.s * c.b, c.num_experts, c.moe_router_topk, c.h, c.f_e, c.expert_t
    T, padded = routed_copies(c) * c.t, c.moe_pad_expert_input_to_capacity
    copies = ("s", "b", "k") if T == N * k else ("E", "capacity")
    gathered = (*copies[:-1], copies[-1] + "*etp")
    rows = [
        _row(c, "moe_input", "input of the MoE layer (router and shared experts)",
             ("s", "b", "h"), N * h, 2, REPLICATED, "fixed"),
        _row(c, "router_topk_indices", "router's top-k expert indices (int64)",
             ("s", "b", "k"), N * k, 8, REPLICATED, "fixed"),
        _row(c, "router_probs", "router's softmax over the top-k scores (fp32)",
             ("s", "b", "k"), N * k, 4, REPLICATED, "fixed"),
    ]
    if c.moe_aux_loss_coeff > 0:
        rows.append(_row(c, "router_aux_scores", "router's softmax over all experts (fp32)",
                         ("s", "b", "E"), N * E, 4, REPLICATED, "fixed"))
    if c.moe_expert_capacity_factor is not None:
        rows.append(_row(c, "router_capacity_mask", "capacity mask of the probabilities (bool)",
                         ("s", "b", "E"), N * E, 1, REPLICATED, "fixed"))
    rows += [
        _row(c, "permute_probs_index", "permutation index of the probabilities (int64)",
             copies if padded else ("E", "s", "b"), T if padded else N * E, 8, REPLICATED,
             "fixed"),
        _row(c, "permute_index", "permutation index of the tokens (int64)",
             copies, T, 8, REPLICATED, "fixed"),
        _row(c, "expert_fc1_input", "input of the experts' first linear (routed copies)",
             (*gathered, "h"), T * x * h, 2, EXPERT_ROUTED, "intermediate"),
        _row(c, "expert_fc1_output", "experts' fc1 output (SwiGLU gate and up)",
             (*copies, "2f_e"), 2 * T * f, 2, EXPERT_ROUTED, "intermediate"),
        _row(c, "expert_probs", "routing probability of each routed copy",
             gathered, T * x, 2, EXPERT_ROUTED, "intermediate"),
        _row(c, "expert_fc2_input", "input of the experts' second linear",
             (*copies, "f_e"), T * f, 2, EXPERT_ROUTED, "intermediate"),
    ]
    fs = c.moe_shared_expert_intermediate_size
    if fs:
        rows += [
            _row(c, "shared_fc1_output", "shared experts' fc1 output (SwiGLU gate and up)",
                 ("s", "b", "2f_s"), 2 * N * fs, 2, HIDDEN_SPLIT, "intermediate"),
            _row(c, "shared_fc2_input", "input of the shared experts' second linear",
                 ("s", "b", "f_s"), N * fs, 2, HIDDEN_SPLIT, "intermediate"),
        ]
    return tuple(rows)


def routed_copies(c: LayerConfig) -> int:
    """Copies one rank sends to the experts (T before the etp all-gather):
    N_r*k for dropless routing, N_r = s*b/t the rank's tokens; with a
    capacity factor c each expert takes at most
    ``capacity = ceil(N_r*k/E * c)`` (Megatron-LM's get_capacity, in its
    floating-point arithmetic), and no more than the N_r tokens there are:
    E*capacity when padded to capacity or when the balanced share N_r*k/E
    is above the capacity (the rest are dropped), else N_r*k.
    """
    tokens, E, k = c.s * c.b // c.t, c.num_experts, c.moe_router_topk
    if c.moe_expert_capacity_factor is None:
        return tokens * k
    factor = c.moe_expert_capacity_factor
    try:
        capacity = min(math.ceil((tokens * k / E) * factor), tokens)
    except OverflowError:  # past floats (a factor of 1e308): the exact share
        capacity = min(math.ceil(Fraction(tokens * k, E) * Fraction(factor)), tokens)
    if c.moe_pad_expert_input_to_capacity or tokens * k > E * capacity:
        return E * capacity
    return tokens * k


def with_moe(rows, c: LayerConfig):
    """Replace the dense MLP's rows by the MoE block's (:func:`moe_rows`),
    where ``fc1_input`` stood; the LayerNorm input before and the dropout
    mask after the block stay."""
    keys = [r.key for r in rows]
    at = keys.index("fc1_input")
    kept = tuple(r for r in rows if r.key not in DENSE_MLP_ROWS)
    before = sum(1 for r in rows[:at] if r.key not in DENSE_MLP_ROWS)
    return kept[:before] + moe_rows(c) + kept[before:]

"""What an MoE layer's router keeps for backward, for every score function
Megatron-LM's unfused router runs, and the router options' checks.

Megatron-LM (``megatron/core/transformer/moe/router.py``: TopKRouter.routing;
``moe_utils.py``: topk_routing_with_score_function,
compute_routing_scores_for_aux_loss, group_limited_topk) scores the E
logits of each of the N tokens, picks k experts and keeps, for the
gradient of the probabilities:

* ``softmax`` after top-k (the default): the k indices (int64) and the fp32
  softmax of the k chosen logits, 12Nk bytes;
* ``softmax`` before top-k (``--moe-router-pre-softmax``): the fp32 softmax
  of all E (4NE) and the k indices; the probabilities are the k top values;
* ``sigmoid`` (``--moe-router-score-function sigmoid``, DeepSeek-V3): the
  fp32 sigmoid of all E (4NE), the k indices and, for k > 1, the k chosen
  scores and their sum (4Nk + 4N) that normalise them;
* group-limited routing (``--moe-router-group-topk`` of
  ``--moe-router-num-groups`` groups): the N x E bool mask of the experts
  outside the chosen groups, which ``masked_fill`` saves, when the top-k
  values carry the gradient; with an expert bias
  (``--moe-router-enable-expert-bias``) the top-k runs on the biased copy
  and only its indices are used, so the mask is freed with it;
* with a load-balancing loss (``aux_loss``, ``seq_aux_loss``,
  ``global_aux_loss`` and ``--moe-aux-loss-coeff`` > 0) a second set of
  fp32 scores over all E (4NE), for the sigmoid normalised by its sum (4N
  more); the E token counts and the 0-d loss (at most 4Eb + 8 bytes) are
  left out;
* Sinkhorn (``router.py``: TopKRouter.sinkhorn_load_balancing, whose
  iterations and top-k run without grad): the scores of all E (the
  sigmoid in the logits' dtype at k = 1, an fp32 softmax at k > 1) and the
  routing map (bool) that ``logits * routing_map`` saves.

A capacity factor adds an N x E bool mask (``apply_router_token_dropping``).
Checked on CPU: Megatron-LM's own functions at d98e8a64 saved these bytes
exactly in all 114 valid combinations of score function, pre-softmax, groups,
expert bias, aux and sequence-aux loss, k = 1, 2, 4 and bf16 or fp32 logits (a
check run once outside the tests, which cannot depend on Megatron-LM; the tests
measure :mod:`actmem.measure.router`, the same operations).
``--moe-router-topk-scaling-factor`` multiplies by a Python float, which
autograd saves nothing for. ``sqrtsoftplus`` and the fused router
(``--moe-router-fusion``) are not modelled.
"""

from __future__ import annotations

from .ledger import REPLICATED, LedgerRow

ROUTER_OPTIONS = ("moe_router_score_function", "moe_router_pre_softmax",
                  "moe_router_num_groups", "moe_router_group_topk",
                  "moe_router_enable_expert_bias")
"""The router's options (Megatron-LM's flags in snake_case)."""

SCORE_FUNCTIONS = ("softmax", "sigmoid")
"""``--moe-router-score-function`` values the rows follow."""

AUX_LOSSES = ("aux_loss", "seq_aux_loss", "global_aux_loss")
"""Load-balancing types whose loss keeps scores over all experts
(``moe_utils.py``: compute_routing_scores_for_aux_loss), when its
coefficient is > 0 (``router.py``: TopKRouter.is_aux_loss_enabled)."""

_MOE = "megatron/core/transformer/moe/"
_TOPK = _MOE + "moe_utils.py: topk_routing_with_score_function "
SOURCES = {
    "router_topk_indices": _TOPK + "(torch.topk, then scatter into the routing map)",
    "router_probs": _TOPK + "(softmax: torch.softmax(scores, dtype=torch.float32) after "
                    "top-k; sigmoid: scores / (scores.sum(-1) + 1e-20) saves the k scores)",
    "router_score_sums": _TOPK + "(sigmoid, k > 1: the sum that divides the k scores)",
    "router_scores": _TOPK + "(torch.softmax(logits, dtype=torch.float32) before top-k, "
                     "or torch.sigmoid(logits.float()))",
    "router_group_mask": _MOE + "moe_utils.py: group_limited_topk "
                         "(scores.masked_fill(~score_mask.bool(), -inf))",
    "router_aux_scores": _MOE + "moe_utils.py: compute_routing_scores_for_aux_loss "
                         "(torch.softmax(logits, dtype=torch.float32), or "
                         "torch.sigmoid(logits.float())), called by router.py: "
                         "TopKRouter.routing when the aux loss is on",
    "router_aux_sums": _MOE + "moe_utils.py: compute_routing_scores_for_aux_loss "
                       "(sigmoid: scores / (scores.sum(-1) + 1e-20))",
    "router_sinkhorn_scores": _MOE + "router.py: TopKRouter._sinkhorn_activation "
                              "(torch.sigmoid(logits) for k = 1, else torch.softmax(logits, "
                              "dtype=torch.float32)), called by sinkhorn_load_balancing",
    "router_routing_map": _MOE + "router.py: TopKRouter.sinkhorn_load_balancing "
                          "(scores = logits * routing_map saves the map)",
    "router_capacity_mask": _MOE + "moe_utils.py: apply_router_token_dropping "
                            "(final_probs = routing_probs * final_map)",
}
"""Where Megatron-LM saves each router row (file: function)."""

NEEDED_FOR = {
    "router_topk_indices": "top-k and scatter backward: the gradient of the k chosen "
                           "scores goes back to their experts' columns",
    "router_probs": "backward of the k probabilities: the softmax's dS = P * (dP - "
                    "rowsum(dP * P)) needs P; the sigmoid's normalisation needs the k scores",
    "router_score_sums": "backward of the normalisation p = score / sum: both gradients "
                         "need the sum",
    "router_scores": "backward of the softmax (needs its output P) or of the sigmoid "
                     "(dS = dP * P * (1 - P)) over all E experts",
    "router_group_mask": "backward of masked_fill: the masked experts get no gradient",
    "router_aux_scores": "load-balancing loss backward through the softmax or sigmoid "
                         "over all E experts: both need their output",
    "router_aux_sums": "backward of the aux scores' normalisation by their sum",
    "router_sinkhorn_scores": "backward of the sigmoid (dS = dP * P * (1 - P)) or the "
                              "softmax over all E experts: both need their output P",
    "router_routing_map": "backward of logits * routing_map: the scores' gradient is "
                          "masked by the same map",
    "router_capacity_mask": "backward of the capacity masking: the probabilities' gradient "
                            "is multiplied by the same mask",
}
"""Why each router row is kept, keyed by :attr:`LedgerRow.key`."""


def _row(key, name, shape, elements, bpe):
    return LedgerRow(key, name, "MoE", shape, elements, bpe, REPLICATED, 1, "fixed",
                     SOURCES[key], NEEDED_FOR[key])


def router_rows(c, probability_bytes: int) -> list[LedgerRow]:
    """The router's rows for one micro-batch (N = s*b tokens, E experts,
    k; whole on each tensor-parallel rank, split along s by sequence
    parallelism), as the module's docstring lists them.
    ``probability_bytes``: the logits' dtype (Sinkhorn's k = 1 sigmoid)."""
    N, E, k = c.s * c.b, c.num_experts, c.moe_router_topk
    lb, sigmoid = c.moe_router_load_balancing_type, c.moe_router_score_function == "sigmoid"
    if lb == "sinkhorn":
        rows = [_row("router_sinkhorn_scores", "router's scores over all experts",
                     ("s", "b", "E"), N * E, probability_bytes if k == 1 else 4),
                _row("router_routing_map", "router's routing map (bool)", ("s", "b", "E"),
                     N * E, 1)]
    else:
        rows = _topk_rows(c, N, E, k, sigmoid)
    if lb in AUX_LOSSES and c.moe_aux_loss_coeff > 0:
        what = "sigmoid" if sigmoid else "softmax"
        rows.append(_row("router_aux_scores", f"router's {what} over all experts for the "
                         "load-balancing loss (fp32)", ("s", "b", "E"), N * E, 4))
        if sigmoid:
            rows.append(_row("router_aux_sums", "sums of the load-balancing loss's sigmoid "
                             "scores (fp32)", ("s", "b", "1"), N, 4))
    if c.moe_expert_capacity_factor is not None:
        rows.append(_row("router_capacity_mask", "capacity mask of the probabilities (bool)",
                         ("s", "b", "E"), N * E, 1))
    return rows


def _topk_rows(c, N: int, E: int, k: int, sigmoid: bool) -> list[LedgerRow]:
    """Top-k routing's rows (``topk_routing_with_score_function``)."""
    pre = c.moe_router_pre_softmax
    rows = [_row("router_topk_indices", "router's top-k expert indices (int64)",
                 ("s", "b", "k"), N * k, 8)]
    if sigmoid or pre:
        what = "sigmoid" if sigmoid else "softmax"
        rows.append(_row("router_scores", f"router's {what} over all experts (fp32)",
                         ("s", "b", "E"), N * E, 4))
    if not pre and not (sigmoid and k == 1):
        what = "chosen sigmoid scores" if sigmoid else "softmax over the top-k scores"
        rows.append(_row("router_probs", f"router's {what} (fp32)", ("s", "b", "k"), N * k, 4))
    if sigmoid and k > 1:
        rows.append(_row("router_score_sums", "sums of the chosen sigmoid scores (fp32)",
                         ("s", "b", "1"), N, 4))
    if c.moe_router_group_topk and not c.moe_router_enable_expert_bias:
        rows.append(_row("router_group_mask", "mask of the experts outside the chosen "
                         "groups (bool)", ("s", "b", "E"), N * E, 1))
    return rows


def check_router(c) -> None:
    """Megatron-LM's rules on the router options (``transformer_config.py``:
    TransformerConfig.__post_init__), for a layer with experts.

    The options' types and ranges are checked before, with the other MoE
    options (:func:`actmem.layer.moe_options.check_moe_values`).

    Raises:
        ValueError: the expert bias without the sigmoid; k = 1 with the softmax after
            top-k (a softmax of one score has no gradient); pre-softmax with
            the sigmoid (Megatron-LM ignores it there: pass False);
            ``moe_router_group_topk`` without ``moe_router_num_groups``, a
            group count not dividing E, more groups chosen than there are,
            or fewer experts in a group than k / group_topk; any of these
            with Sinkhorn, which routes on its own.
    """
    score, pre = c.moe_router_score_function, c.moe_router_pre_softmax
    bias = c.moe_router_enable_expert_bias
    if c.moe_router_load_balancing_type == "sinkhorn":
        given = [n for n in ROUTER_OPTIONS if getattr(c, n) not in (None, False, "softmax")]
        if given:
            raise ValueError(f"{', '.join(given)} with moe_router_load_balancing_type="
                             "'sinkhorn': Sinkhorn routing takes none of these options")
        return
    if bias and score != "sigmoid":
        raise ValueError("moe_router_enable_expert_bias=True needs moe_router_score_function="
                         "'sigmoid' (Megatron-LM's aux-loss-free routing)")
    if pre and score != "softmax":
        raise ValueError("moe_router_pre_softmax=True with moe_router_score_function="
                         f"{score!r}: it orders the softmax only; pass False")
    if c.moe_router_topk == 1 and score == "softmax" and not pre:
        raise ValueError("moe_router_topk=1 with the softmax after top-k: a softmax of one "
                         "score has no gradient, so Megatron-LM refuses it; pass "
                         "moe_router_pre_softmax=True")
    _check_groups(c)


def _check_groups(c) -> None:
    groups, chosen, E, k = (c.moe_router_num_groups, c.moe_router_group_topk,
                            c.num_experts, c.moe_router_topk)
    if chosen is None:
        return
    if groups is None:
        raise ValueError(f"moe_router_group_topk={chosen} needs moe_router_num_groups: the "
                         "groups the experts are divided into")
    if E % groups or chosen > groups or E // groups < k // chosen:
        raise ValueError(f"moe_router_num_groups={groups}, moe_router_group_topk={chosen}: "
                         f"the groups must divide num_experts={E}, at most all of them are "
                         f"chosen, and each holds at least k/group_topk = {k // chosen} "
                         "experts")

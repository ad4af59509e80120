"""A reference MoE router in plain PyTorch, in Megatron-LM's order
(``megatron/core/transformer/moe/moe_utils.py``: topk_routing_with_score_function,
group_limited_topk, compute_routing_scores_for_aux_loss; the unfused path,
as :mod:`actmem.layer.router` counts it).

Every tensor the ledger counts is tagged with :func:`.saved.named` under its
row key. Where Megatron-LM computes a value with grad and drops it at once
(the top-k of the expert-biased scores, whose indices alone are used; the
group scores that pick the groups), autograd frees that node with its saved
tensors; the recorder keeps every saved tensor, so those run on detached
values here.
"""

from __future__ import annotations

import torch

from .saved import named


def route(c, logits):
    """(probabilities in the logits' dtype, k indices) of ``logits`` (N x E)
    under ``c``'s score function, pre-softmax, groups and expert bias."""
    k = c.moe_router_topk
    if c.moe_router_score_function == "sigmoid":
        scores = named("router_scores", torch.sigmoid(logits.float()))
        if c.moe_router_enable_expert_bias:   # the bias buffer starts at zeros
            bias = torch.zeros(scores.shape[1], dtype=torch.float32)
            _, top = _topk(c, (scores + bias).detach(), k)
            picked = scores.gather(1, top)
        else:
            picked, top = _topk(c, scores, k)
        if k > 1:
            total = named("router_score_sums", picked.sum(dim=-1, keepdim=True) + 1e-20)
            picked = named("router_probs", picked) / total
        probs = picked
    elif c.moe_router_pre_softmax:
        scores = named("router_scores", torch.softmax(logits, dim=-1, dtype=torch.float32))
        probs, top = _topk(c, scores, k)
    else:
        scores, top = _topk(c, logits, k)
        probs = named("router_probs", torch.softmax(scores, dim=-1, dtype=torch.float32))
    return probs.type_as(logits), named("router_topk_indices", top)


def _topk(c, scores, k):
    """torch.topk, or group_limited_topk with ``moe_router_group_topk``."""
    chosen = c.moe_router_group_topk
    if not chosen:
        return torch.topk(scores, k, dim=1)
    n, E, groups = scores.shape[0], scores.shape[1], c.moe_router_num_groups
    with torch.no_grad():
        group_scores = scores.view(n, groups, -1).topk(k // chosen, dim=-1)[0].sum(dim=-1)
        picked = torch.topk(group_scores, k=chosen, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, picked, 1)
    score_mask = group_mask.unsqueeze(-1).expand(n, groups, E // groups).reshape(n, -1)
    masked = scores.masked_fill(named("router_group_mask", ~score_mask.bool()), float("-inf"))
    return torch.topk(masked, k=k, dim=-1)


def aux_scores(c, logits):
    """compute_routing_scores_for_aux_loss: the scores over all E the
    load-balancing loss differentiates (the sigmoid normalised by its sum)."""
    if c.moe_router_score_function == "softmax":
        return named("router_aux_scores", torch.softmax(logits, dim=-1, dtype=torch.float32))
    scores = named("router_aux_scores", torch.sigmoid(logits.float()))
    return scores / named("router_aux_sums", scores.sum(dim=-1, keepdim=True) + 1e-20)

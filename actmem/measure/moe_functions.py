"""The autograd functions of the reference MoE layer (:mod:`actmem.measure.moe`)
that save only what Megatron-LM's fused or custom functions save: SwiGLU and
the weighted SwiGLU (``fusions/fused_bias_swiglu.py``), the router's gating
linear (``moe_utils.py``: RouterGatingLinearFunction), the load-balancing
loss's scaler (MoEAuxLossAutoScaler), the Sinkhorn normalisation, and
Transformer Engine's fused permutation, unpermutation and chunk sort."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class SwiGLU(torch.autograd.Function):
    """silu(gate) * up on ``[..., 2f]`` saving only its input, as Megatron-LM's
    fused ``bias_swiglu`` (its backward recomputes silu)."""

    @staticmethod
    def forward(ctx, y):
        ctx.save_for_backward(y)
        gate, up = y.chunk(2, dim=-1)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        with torch.enable_grad():
            y = y.detach().requires_grad_()
            gate, up = y.chunk(2, dim=-1)
            (dy,) = torch.autograd.grad(F.silu(gate) * up, y, grad)
        return dy


class WeightedSwiGLU(torch.autograd.Function):
    """``swiglu(y) * w`` saving ``y`` and ``w`` only (Megatron-LM's
    WeightedSwiGLUFunction, the routing probability as ``w``)."""

    @staticmethod
    def forward(ctx, y, w):
        ctx.save_for_backward(y, w)
        gate, up = y.chunk(2, dim=-1)
        return (F.silu(gate) * up * w).to(y.dtype)

    @staticmethod
    def backward(ctx, grad):
        y, w = ctx.saved_tensors
        with torch.enable_grad():
            y, w = y.detach().requires_grad_(), w.detach().requires_grad_()
            gate, up = y.chunk(2, dim=-1)
            dy, dw = torch.autograd.grad(F.silu(gate) * up * w, (y, w), grad)
        return dy, dw


class RouterGating(torch.autograd.Function):
    """``logits = x W^T`` in the router's dtype, saving the bf16 input and
    weight only (``moe_utils.py``: RouterGatingLinearFunction; its backward
    casts them again)."""

    @staticmethod
    def forward(ctx, x, weight, dtype):
        ctx.save_for_backward(x, weight)
        return x.to(dtype) @ weight.to(dtype)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return ((grad @ weight.to(grad.dtype).T).to(x.dtype),
                (x.to(grad.dtype).T @ grad).to(weight.dtype), None)


def sinkhorn(cost, tol=1e-4):
    """Megatron-LM's Sinkhorn normalisation (``moe_utils.py``: sinkhorn),
    run without grad."""
    cost = torch.exp(cost)
    d0 = torch.ones(cost.size(0), dtype=cost.dtype)
    d1 = torch.ones(cost.size(1), dtype=cost.dtype)
    error, d1_old = 1e9, d1
    while error > tol:
        d0 = (1 / d0.size(0)) * 1 / (torch.sum(d1 * cost, 1) + 1e-8)
        d1 = (1 / d1.size(0)) * 1 / (torch.sum(d0.unsqueeze(1) * cost, 0) + 1e-8)
        error, d1_old = torch.mean(torch.abs(d1_old - d1)), d1
    return d1 * cost * d0.unsqueeze(1)


class AuxLossAutoScaler(torch.autograd.Function):
    """Attach the load-balancing loss to the probabilities: the identity,
    saving the 0-d loss so its backward can seed the loss's gradient with 1
    (``moe_utils.py``: MoEAuxLossAutoScaler)."""

    @staticmethod
    def forward(ctx, output, aux_loss):
        ctx.save_for_backward(aux_loss)
        return output

    @staticmethod
    def backward(ctx, grad):
        (aux_loss,) = ctx.saved_tensors
        return grad, torch.ones_like(aux_loss)


class FusedPermute(torch.autograd.Function):
    """Transformer Engine's ``moe_permute_with_probs`` (TE 2.6+,
    ``transformer_engine/pytorch/permutation.py``), whose Triton kernels do
    not run on a CPU: the same outputs (each expert's tokens in token order,
    and their probabilities), saving what it saves, its row map: int32 of
    N x (2E + 1) (``triton/permutation.py``: make_row_id_map: each token's
    destination row per expert, -1 where not routed, then the experts it
    went to and their count)."""

    @staticmethod
    def forward(ctx, tokens, probs, routing_map):
        n, E = routing_map.shape
        expert, token = routing_map.T.nonzero(as_tuple=True)   # expert-major, token order
        row_id_map = torch.full((n, 2 * E + 1), -1, dtype=torch.int32)
        row_id_map[token, expert] = torch.arange(token.numel(), dtype=torch.int32)
        row_id_map[:, 2 * E] = routing_map.sum(dim=1).to(torch.int32)
        ctx.save_for_backward(row_id_map)
        ctx.mark_non_differentiable(row_id_map)
        return tokens[token], probs[token, expert], row_id_map

    @staticmethod
    def backward(ctx, grad_tokens, grad_probs, _):
        (row_id_map,) = ctx.saved_tensors
        token, expert, rows = _routed(row_id_map)
        n, E = row_id_map.shape[0], (row_id_map.shape[1] - 1) // 2
        d_tokens = torch.zeros(n, grad_tokens.shape[1], dtype=grad_tokens.dtype)
        d_tokens.index_add_(0, token, grad_tokens[rows])
        d_probs = torch.zeros(n, E, dtype=grad_probs.dtype)
        d_probs[token, expert] = grad_probs[rows]
        return d_tokens, d_probs, None


class FusedUnpermute(torch.autograd.Function):
    """``moe_unpermute`` without probabilities: sums each token's copies back,
    saving the permutation's row map again (the same tensor)."""

    @staticmethod
    def forward(ctx, copies, row_id_map):
        ctx.save_for_backward(row_id_map)
        token, _, rows = _routed(row_id_map)
        out = torch.zeros(row_id_map.shape[0], copies.shape[1], dtype=copies.dtype)
        return out.index_add_(0, token, copies[rows])

    @staticmethod
    def backward(ctx, grad):
        (row_id_map,) = ctx.saved_tensors
        token, _, rows = _routed(row_id_map)
        d = torch.empty(token.numel(), grad.shape[1], dtype=grad.dtype)
        d[rows] = grad[token]
        return d, None


def _routed(row_id_map):
    """(token, expert, permuted row) of every routed copy in a row map of
    :class:`FusedPermute`."""
    E = (row_id_map.shape[1] - 1) // 2
    token, expert = (row_id_map[:, :E] >= 0).nonzero(as_tuple=True)
    return token, expert, row_id_map[token, expert].long()


class FusedSort(torch.autograd.Function):
    """``moe_sort_chunks_by_index(_with_probs)``: chunks of rows reordered,
    saving an int32 row map of one entry per row (each row's destination),
    which it returns last."""

    @staticmethod
    def forward(ctx, x, probs, sizes, order):
        starts = torch.tensor([0, *sizes[:-1]]).cumsum(0).tolist()
        source = torch.cat([torch.arange(starts[i], starts[i] + sizes[i]) for i in order])
        row_id_map = torch.empty(len(source), dtype=torch.int32)
        row_id_map[source] = torch.arange(len(source), dtype=torch.int32)
        ctx.save_for_backward(row_id_map)
        ctx.mark_non_differentiable(row_id_map)
        return x[source], None if probs is None else probs[source], row_id_map

    @staticmethod
    def backward(ctx, grad, grad_probs, _):
        (row_id_map,) = ctx.saved_tensors
        rows = row_id_map.long()
        return grad[rows], None if grad_probs is None else grad_probs[rows], None, None

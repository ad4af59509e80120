"""The autograd functions of the reference MoE layer (:mod:`actmem.measure.moe`)
that save only what Megatron-LM's fused or custom functions save: SwiGLU and
the weighted SwiGLU (``fusions/fused_bias_swiglu.py``), the router's gating
linear (``moe_utils.py``: RouterGatingLinearFunction), the load-balancing
loss's scaler (MoEAuxLossAutoScaler), and the Sinkhorn normalisation."""

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

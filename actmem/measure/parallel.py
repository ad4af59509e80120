"""Megatron-style tensor parallelism on CPU: the f/g operators and TP linears.

Shoeybi et al. 2019 (Megatron-LM) split the attention by heads and the MLP
by its inner width. Two conjugate operators make the split exact
(Korthikanti et al. 2022, sec. 4.2.1, figure 4):

* ``f``: identity in the forward pass, all-reduce of the gradient in the
  backward pass; it sits before a column-parallel linear.
* ``g``: all-reduce in the forward pass, identity in the backward pass; it
  sits after a row-parallel linear.

Neither saves a tensor for backward. With ``t == 1`` both are identities
and no process group is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class TensorParallel:
    """Where this process sits: ``rank`` in ``0..size-1`` of ``size`` ranks."""

    rank: int = 0
    size: int = 1

    def shard(self, n: int, name: str) -> int:
        """``n // size``; ValueError if ``size`` does not divide ``n``."""
        if n % self.size:
            raise ValueError(f"{name}={n} is not divisible by t={self.size}")
        return n // self.size


def _all_reduce(x: torch.Tensor, tp: TensorParallel) -> torch.Tensor:
    if tp.size == 1:
        return x
    out = x.clone()
    dist.all_reduce(out)
    return out


class _CopyToParallel(torch.autograd.Function):
    """f: identity forward, all-reduce backward."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad, ctx.tp), None


class _ReduceFromParallel(torch.autograd.Function):
    """g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x, tp):
        return _all_reduce(x, tp)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def copy_to_parallel(x: torch.Tensor, tp: TensorParallel) -> torch.Tensor:
    """The f operator (a view of ``x``: nothing new is stored)."""
    return _CopyToParallel.apply(x, tp)


def reduce_from_parallel(x: torch.Tensor, tp: TensorParallel) -> torch.Tensor:
    """The g operator: sum of ``x`` over the ranks."""
    return _ReduceFromParallel.apply(x, tp)


class ColumnParallelLinear(nn.Module):
    """``y_r = f(x) @ W_r^T + b_r``: each rank owns ``out/t`` output features.

    The input ``x`` is whole on every rank (the ledger's replicated
    ``qkv_input`` / ``fc1_input``); the output is split.
    """

    def __init__(self, full: nn.Linear, tp: TensorParallel):
        super().__init__()
        part = tp.shard(full.out_features, "out_features")
        rows = slice(tp.rank * part, (tp.rank + 1) * part)
        self.tp = tp
        self.weight = nn.Parameter(full.weight.detach()[rows].clone())
        self.bias = nn.Parameter(full.bias.detach()[rows].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(copy_to_parallel(x, self.tp),
                                    self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """``y = g(x_r @ W_r^T) + b``: each rank owns ``in/t`` input features.

    The input is split (the ledger's ``proj_input`` / ``fc2_input``); the
    output is summed over ranks, then the bias is added once.
    """

    def __init__(self, full: nn.Linear, tp: TensorParallel):
        super().__init__()
        part = tp.shard(full.in_features, "in_features")
        cols = slice(tp.rank * part, (tp.rank + 1) * part)
        self.tp = tp
        self.weight = nn.Parameter(full.weight.detach()[:, cols].clone())
        self.bias = nn.Parameter(full.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = nn.functional.linear(x, self.weight)
        return reduce_from_parallel(partial, self.tp) + self.bias

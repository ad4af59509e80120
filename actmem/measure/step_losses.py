"""The cross-entropy losses :mod:`.step` trains with, one per ``loss`` option.

Each follows a named source, so a measured byte can be traced to the code
that allocates it (:mod:`actmem.run.moments.framework` models the same bytes):

* :class:`VocabParallelCrossEntropy` is Megatron-LM's
  ``_VocabParallelCrossEntropy`` (``megatron/core/tensor_parallel/
  cross_entropy.py``) at t = 1, statement by statement, without the
  all-reduces;
* :func:`torch_cross_entropy` is ``F.cross_entropy`` on the fp32 copy of the
  logits;
* :class:`ChunkedLinearCrossEntropy` fuses the output layer with the loss
  and never keeps the logits: the algorithm of cut cross-entropy (Wijmans et
  al. 2024, arXiv 2411.09009, ``apple/ml-cross-entropy``: the forward keeps
  one fp32 log-sum-exp per token, the backward recomputes the logits), run
  in eager PyTorch over chunks of tokens, each chunk's logits materialised
  as Liger-Kernel's ``fused_linear_cross_entropy_forward``
  (``src/liger_kernel/ops/fused_linear_cross_entropy.py``) materialises
  them; the chunk size is :func:`actmem.run.moments.loss.fused_loss_chunk`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Megatron-LM's ``_VocabParallelCrossEntropy`` at t = 1 (no all-reduce,
    no label smoothing): ``.float()`` copy, in-place max subtraction, ``exp``
    and division; saves the fp32 softmax, the target mask and the masked
    targets; backward writes the gradient into the softmax in place (the
    autograd engine casts it to the logits' bf16)."""

    @staticmethod
    def forward(ctx, vocab_parallel_logits, target):
        vocab_parallel_logits = vocab_parallel_logits.float()
        logits_max = torch.max(vocab_parallel_logits, dim=-1)[0]
        vocab_parallel_logits -= logits_max.unsqueeze(dim=-1)
        partition_vocab_size = vocab_parallel_logits.size()[-1]
        target_mask = (target < 0) | (target >= partition_vocab_size)
        masked_target = target.clone() - 0
        masked_target[target_mask] = 0
        logits_2d = vocab_parallel_logits.view(-1, partition_vocab_size)
        masked_target_1d = masked_target.view(-1)
        arange_1d = torch.arange(start=0, end=logits_2d.size()[0])
        predicted_logits_1d = logits_2d[arange_1d, masked_target_1d]
        predicted_logits_1d = predicted_logits_1d.clone().contiguous()
        predicted_logits = predicted_logits_1d.view_as(target)
        predicted_logits[target_mask] = 0.0
        exp_logits = vocab_parallel_logits
        torch.exp(vocab_parallel_logits, out=exp_logits)
        sum_exp_logits = exp_logits.sum(dim=-1)
        loss = torch.log(sum_exp_logits) - predicted_logits
        exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))
        ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        softmax, target_mask, masked_target_1d = ctx.saved_tensors
        grad_input = softmax
        grad_2d = grad_input.view(-1, softmax.size()[-1])
        arange_1d = torch.arange(start=0, end=grad_2d.size()[0])
        softmax_update = 1.0 - target_mask.view(-1).float()
        grad_2d[arange_1d, masked_target_1d] -= softmax_update
        grad_input.mul_(grad_output.unsqueeze(dim=-1))
        return grad_input, None


def vocab_parallel_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-token fp32 losses, (b, s): Megatron-LM's cross-entropy."""
    return VocabParallelCrossEntropy.apply(logits, labels)


def torch_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-token fp32 losses, (b, s): ``F.cross_entropy`` on ``logits.float()``."""
    flat = logits.float().view(-1, logits.size(-1))
    return F.cross_entropy(flat, labels.view(-1), reduction="none").view_as(labels)


class ChunkedLinearCrossEntropy(torch.autograd.Function):
    """The output layer and the cross-entropy in one, ``chunk`` tokens at a
    time (module docstring). Forward: per chunk, the logits ``x W^T`` in the
    weight's dtype and their fp32 copy, the target logit, then in place the
    max subtraction and ``exp``; it keeps the fp32 log-sum-exp per token
    besides its inputs. Backward: per chunk, the logits again, in place the
    softmax ``exp(z - lse)``, minus one at the target, times the loss
    gradient, cast to the weight's dtype; that gives the chunk's input
    gradient (written into one ``(tokens, h)`` tensor) and is added into the
    weight gradient (one tensor of the weight's shape and dtype). A chunk's
    tensors are deleted before the next chunk's are made."""

    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        x, flat_target = hidden.view(-1, hidden.size(-1)), target.view(-1)
        lse = torch.empty(x.size(0), dtype=torch.float)
        predicted = torch.empty(x.size(0), dtype=torch.float)
        for start in range(0, x.size(0), chunk):
            rows = slice(start, start + chunk)
            logits = torch.matmul(x[rows], weight.t()).float()
            predicted[rows] = logits.gather(1, flat_target[rows, None]).squeeze(1)
            top = logits.max(dim=-1)[0]
            logits -= top.unsqueeze(-1)
            lse[rows] = logits.exp_().sum(dim=-1).log_() + top
            del logits, top   # one chunk's logits alive at a time
        ctx.save_for_backward(hidden, weight, target, lse)
        ctx.chunk = chunk
        return (lse - predicted).view_as(target)

    @staticmethod
    def backward(ctx, grad_loss):
        hidden, weight, target, lse = ctx.saved_tensors
        x, flat_target = hidden.view(-1, hidden.size(-1)), target.view(-1)
        scale = grad_loss.reshape(-1)
        grad_x, grad_w = torch.empty_like(x), torch.zeros_like(weight)
        for start in range(0, x.size(0), ctx.chunk):
            rows = slice(start, start + ctx.chunk)
            logits = torch.matmul(x[rows], weight.t()).float()
            logits -= lse[rows].unsqueeze(-1)
            logits.exp_()
            logits[torch.arange(logits.size(0)), flat_target[rows]] -= 1.0
            grad = logits.mul_(scale[rows].unsqueeze(-1)).to(weight.dtype)
            torch.matmul(grad, weight, out=grad_x[rows])
            grad_w.addmm_(grad.t(), x[rows])
            del logits, grad
        return grad_x.view_as(hidden), grad_w, None, None


def fused_loss(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor,
               chunk: int) -> torch.Tensor:
    """Per-token fp32 losses, (b, s), of the output layer ``hidden W^T`` and
    the cross-entropy, ``chunk`` tokens at a time, never keeping the logits
    (:class:`ChunkedLinearCrossEntropy`). hidden: (b, s, h); weight: (V, h)."""
    return ChunkedLinearCrossEntropy.apply(hidden, weight, labels, chunk)


LOSS_FUNCTIONS = {"vocab_parallel": vocab_parallel_loss, "torch": torch_cross_entropy}
"""actmem's ``loss`` option -> the per-token loss of the logits (``"fused"``
takes the output layer's input and weight instead: :func:`fused_loss`)."""



"""A small GPT trained for one step on CPU, written the way Megatron-LM writes it.

:mod:`.step` measures one optimizer step of this model; this module builds
it. Every piece follows a named source, so a measured byte can be traced to
the code that allocates it:

* model: embedding (word table, learned positions, dropout with a 1-byte
  mask), ``L`` :class:`~.layer.ReferenceLayer` s, final LayerNorm, output
  layer tied to the word table, all bfloat16 (Megatron-LM's
  ``GPTModel`` with ``share_embeddings_and_output_weights``);
* data: :func:`get_batch` makes what Megatron-LM's ``get_batch``
  (``pretrain_gpt.py``, ``megatron/core/utils.py`` ``get_batch_on_this_tp_rank``)
  puts on the device: int64 tokens, labels and position ids, the fp32 loss
  mask of ``GPTDataset`` and the ``(b, 1, s, s)`` boolean attention mask;
* loss: :class:`VocabParallelCrossEntropy` is Megatron-LM's
  ``_VocabParallelCrossEntropy`` (``megatron/core/tensor_parallel/
  cross_entropy.py``) at t = 1, statement by statement, without the
  all-reduces; :func:`torch_cross_entropy` is ``F.cross_entropy`` on the fp32
  copy of the logits; both are reduced with the loss mask as
  ``pretrain_gpt.py``'s ``loss_func`` does;
* gradients: :class:`GradientBuffer` is Megatron-LM's persistent fp32
  ``main_grad`` buffer (``megatron/core/distributed/
  distributed_data_parallel.py``: the hook ``main_grad.add_(grad); grad =
  None``); without it, ``.grad`` is created in backward (plain PyTorch);
* optimizer: :class:`MixedPrecisionAdam` keeps fp32 main parameters and
  ``torch.optim.Adam(fused=True)`` on them, like Megatron-LM's
  ``Float16OptimizerWithFloat16Params`` (``megatron/core/optimizer/
  optimizer.py``): main grads from the buffer (``.float()`` of fp32 is the
  same tensor) or, without a buffer, fp32 copies of the bf16 ``.grad`` s
  made at the step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..run.model import ModelConfig
from .layer import DropoutSeeds, ReferenceLayer, dropout


class GPT(nn.Module):
    """The whole model on one GPU (t = 1, p = 1), bfloat16.

    Args:
        model: shapes (``norm="layernorm"``, ``bias=True``,
            ``tied_embeddings=True``, ``positions="learned"``: what the
            reference layer builds).
        recompute: ``"none"``, ``"selective"`` or ``"full"``.
        seed: weights and dropout seeds.

    Raises:
        ValueError: a model the reference layer cannot build.
    """

    def __init__(self, model: ModelConfig, recompute: str = "none", seed: int = 0):
        super().__init__()
        if (model.norm, model.bias, model.tied_embeddings, model.positions) != (
                "layernorm", True, True, "learned"):
            raise ValueError("the reference GPT has LayerNorm, biases, tied embeddings and "
                             f"learned positions; got {model}")
        self.config = model
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.word = nn.Embedding(model.padded_vocab(1), model.h)
            self.position = nn.Embedding(model.max_positions or model.s, model.h)
        layer = model.layer(1, recompute=recompute)
        self.layers = nn.ModuleList(ReferenceLayer(layer, seed=seed + 1 + i, mask="bool")
                                    for i in range(model.L))
        self.norm = nn.LayerNorm(model.h)
        self.seeds = DropoutSeeds(seed, 0)
        self.to(torch.bfloat16)

    def forward(self, tokens: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """(b, s) int64 tokens and positions -> (b, s, V) bf16 logits."""
        x = self.word(tokens) + self.position(position_ids)
        if self.config.dropout:
            x = dropout(x, self.seeds.replicated(), "embedding_dropout_mask", "bool")
        for layer in self.layers:
            x = layer(x)
        return F.linear(self.norm(x), self.word.weight)


def get_batch(model: ModelConfig, microbatch: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """One micro-batch as Megatron-LM's ``get_batch`` returns it: ``tokens``,
    ``labels``, ``position_ids`` (int64, (b, s)), ``loss_mask`` (fp32, (b,
    s)) and ``attention_mask`` (bool, (b, 1, s, s), True = masked)."""
    gen = torch.Generator().manual_seed(seed * 1000 + microbatch)
    b, s = model.b, model.s
    text = torch.randint(model.vocab_size, (b, s + 1), generator=gen)
    return {"tokens": text[:, :-1].contiguous(), "labels": text[:, 1:].contiguous(),
            "position_ids": torch.arange(s).unsqueeze(0).expand(b, s).contiguous(),
            "loss_mask": torch.ones(b, s, dtype=torch.float),
            "attention_mask": torch.ones(b, 1, s, s, dtype=torch.bool).triu_(1)}


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


LOSS_FUNCTIONS = {"vocab_parallel": vocab_parallel_loss, "torch": torch_cross_entropy}
"""actmem's ``loss`` option -> the per-token loss."""


def reduce_loss(losses: torch.Tensor, loss_mask: torch.Tensor, scale: int) -> torch.Tensor:
    """``pretrain_gpt.py``'s ``loss_func``: ``sum(losses * loss_mask)``,
    divided by ``scale`` (tokens times micro-batches)."""
    loss_mask = loss_mask.view(-1).float()
    return torch.sum(losses.view(-1).float() * loss_mask) / scale


class GradientBuffer:
    """Megatron-LM's persistent fp32 gradient buffer: one flat tensor, each
    parameter's ``main_grad`` a view of its slice; a post-accumulate hook
    adds the bf16 ``.grad`` into it and frees ``.grad``."""

    def __init__(self, params: list[nn.Parameter]):
        self.data = torch.zeros(sum(p.numel() for p in params), dtype=torch.float)
        offset = 0
        for p in params:
            p.main_grad = self.data[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
            p.register_post_accumulate_grad_hook(_accumulate)


def _accumulate(param: nn.Parameter) -> None:
    param.main_grad.add_(param.grad.data)
    param.grad = None


class MixedPrecisionAdam:
    """fp32 main parameters and Adam (``torch.optim.Adam(fused=True)``) for
    bf16 model parameters, as Megatron-LM's ``Float16OptimizerWithFloat16Params``.

    Args:
        params: the bf16 model parameters. buffer: their
            :class:`GradientBuffer`, or None: then the step makes fp32
            copies of the bf16 ``.grad`` s (4 bytes per parameter, freed
            after the step) and zeroes with ``set_to_none=True``.
    """

    def __init__(self, params: list[nn.Parameter], buffer: GradientBuffer | None):
        self.params, self.buffer = params, buffer
        self.main = [p.detach().float() for p in params]
        self.adam = torch.optim.Adam(self.main, lr=1e-4, fused=True)

    def init_states(self) -> None:
        """Make Adam's states as every step after the first has them
        (``exp_avg``, ``exp_avg_sq``, ``step``): one step with zero
        gradients, which leaves the parameters unchanged."""
        for main in self.main:
            main.grad = torch.zeros_like(main)
        self.adam.step()
        for main in self.main:
            main.grad = None

    def step(self) -> None:
        """Main grads -> Adam on the main params -> copy back to bf16; then
        zero the gradients (the buffer in place, else ``.grad = None``)."""
        for main, p in zip(self.main, self.params):
            main.grad = (p.main_grad if self.buffer else p.grad).float()
        self.adam.step()
        for main, p in zip(self.main, self.params):
            main.grad = None
            p.data.copy_(main)
        if self.buffer:
            self.buffer.data.zero_()
        else:
            for p in self.params:
                p.grad = None

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor the optimizer keeps between steps."""
        states = [t for s in self.adam.state.values() for t in s.values()
                  if isinstance(t, torch.Tensor)]
        return self.main + states

"""A small GPT trained for one step on CPU, written the way Megatron-LM writes it.

:mod:`.step` measures one optimizer step of this model; this module builds
it. Every piece follows a named source, so a measured byte can be traced to
the code that allocates it:

* model: embedding (word table, learned positions, dropout with a 1-byte
  mask), ``L`` :class:`~.layer.ReferenceLayer` s, final LayerNorm, output
  layer tied to the word table, in bfloat16 (Megatron-LM's ``GPTModel``
  with ``share_embeddings_and_output_weights``) or float32 (plain PyTorch,
  in fp32 or under ``torch.autocast``); with ``mtp_num_layers``, the
  multi-token prediction modules of :mod:`.step_mtp`;
* data: :func:`get_batch` makes what Megatron-LM's ``get_batch``
  (``pretrain_gpt.py``, ``megatron/core/utils.py`` ``get_batch_on_this_tp_rank``)
  puts on the device: int64 tokens, labels and position ids, the fp32 loss
  mask of ``GPTDataset`` and the ``(b, 1, s, s)`` boolean attention mask;
* loss: :mod:`.step_losses` (Megatron-LM's, ``F.cross_entropy``'s and a
  fused one), reduced with the loss mask as ``pretrain_gpt.py``'s
  ``loss_func`` does;
* gradients: :class:`GradientBuffer` is Megatron-LM's persistent fp32
  ``main_grad`` buffer (``megatron/core/distributed/
  distributed_data_parallel.py``: the hook ``main_grad.add_(grad); grad =
  None``); without it, ``.grad`` is created in backward (plain PyTorch);
* optimizer: :class:`MixedPrecisionAdam` keeps fp32 main parameters and
  ``torch.optim.Adam(fused=True)`` on them, like Megatron-LM's
  ``Float16OptimizerWithFloat16Params`` (``megatron/core/optimizer/
  optimizer.py``): main grads from the buffer (``.float()`` of fp32 is the
  same tensor) or, without a buffer, fp32 copies of the bf16 ``.grad`` s
  made at the step; :class:`PlainAdam` is plain PyTorch's
  ``torch.optim.Adam(fused=True)`` on fp32 parameters with
  ``zero_grad(set_to_none=True)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..run.job.model import ModelConfig
from .layer import DropoutSeeds, ReferenceLayer, dropout
from .step_mtp import MTPModule


class GPT(nn.Module):
    """The whole model on one GPU (t = 1, p = 1).

    Args:
        model: shapes (``norm="layernorm"``, ``bias=True``,
            ``tied_embeddings=True``, ``positions="learned"``: what the
            reference layer builds).
        recompute: ``"none"``, ``"selective"`` or ``"full"``.
        seed: weights and dropout seeds. dtype: of the parameters
            (``torch.bfloat16``, or ``torch.float32`` for plain PyTorch).

    Raises:
        ValueError: a model the reference layer cannot build.
    """

    def __init__(self, model: ModelConfig, recompute: str = "none", seed: int = 0,
                 dtype: torch.dtype = torch.bfloat16):
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
        self.mtp = nn.ModuleList(MTPModule(model.h, layer, seed + 1 + model.L + k)
                                 for k in range(model.mtp_num_layers or 0))
        self.seeds = DropoutSeeds(seed, 0)
        self.to(dtype)

    def embed(self, tokens: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """The embedding (``LanguageModelEmbedding``): word and position
        tables, then dropout. The tables are looked up with ``F.embedding``
        (what ``nn.Embedding`` calls): MemTracker refuses a module called
        twice in one step, as multi-token prediction calls the embedding."""
        x = F.embedding(tokens, self.word.weight) + F.embedding(position_ids,
                                                                self.position.weight)
        if self.config.dropout:
            x = dropout(x, self.seeds.replicated(), "embedding_dropout_mask", "bool")
        return x

    def forward(self, tokens: torch.Tensor, position_ids: torch.Tensor,
                logits: bool = True) -> torch.Tensor:
        """(b, s) int64 tokens and positions -> (b, s, V) logits, or with
        ``logits=False`` the output layer's input, (b, s, h)."""
        x = self.embed(tokens, position_ids)
        for layer in self.layers:
            x = layer(x)
        x = self.norm(x)
        return F.linear(x, self.word.weight) if logits else x


def get_batch(model: ModelConfig, microbatch: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """One micro-batch as Megatron-LM's ``get_batch`` returns it: ``tokens``,
    ``labels``, ``position_ids`` (int64, (b, s)), ``loss_mask`` (fp32, (b,
    s)) and ``attention_mask`` (bool, (b, 1, s, s), True = masked), made on
    CPU (the data loader's side; :mod:`.step` moves them to the device)."""
    gen = torch.Generator().manual_seed(seed * 1000 + microbatch)
    b, s, cpu = model.b, model.s, torch.device("cpu")
    text = torch.randint(model.vocab_size, (b, s + 1), generator=gen, device=cpu)
    return {"tokens": text[:, :-1].contiguous(), "labels": text[:, 1:].contiguous(),
            "position_ids": torch.arange(s, device=cpu).unsqueeze(0).expand(b, s).contiguous(),
            "loss_mask": torch.ones(b, s, dtype=torch.float, device=cpu),
            "attention_mask": torch.ones(b, 1, s, s, dtype=torch.bool, device=cpu).triu_(1)}


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


class PlainAdam:
    """Plain PyTorch: ``torch.optim.Adam(fused=True)`` on the (fp32)
    parameters themselves, and ``zero_grad(set_to_none=True)`` after the
    step: no main copy, no gradient buffer (``.grad`` is made in backward)."""

    def __init__(self, params: list[nn.Parameter]):
        self.params = params
        self.adam = torch.optim.Adam(params, lr=1e-4, fused=True)

    def init_states(self) -> None:
        """Make Adam's states as every step after the first has them, with
        zero gradients (the parameters do not change)."""
        for p in self.params:
            p.grad = torch.zeros_like(p)
        self.adam.step()
        self.adam.zero_grad(set_to_none=True)

    def step(self) -> None:
        """``optimizer.step(); optimizer.zero_grad(set_to_none=True)``."""
        self.adam.step()
        self.adam.zero_grad(set_to_none=True)

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor the optimizer keeps between steps (Adam's states)."""
        return [t for s in self.adam.state.values() for t in s.values()
                if isinstance(t, torch.Tensor)]

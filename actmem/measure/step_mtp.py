"""Multi-token prediction on the small GPT of :mod:`.step_model`, written as
Megatron-LM writes it at t = 1 (``megatron/core/transformer/
multi_token_prediction.py`` at d98e8a64), so :mod:`.step` can measure what
:mod:`actmem.run.moments.mtp` counts:

* :func:`roll` is ``roll_tensor`` without context parallelism
  (``torch.roll`` by -1, the last position zeroed);
* :class:`MTPModule` is ``MultiTokenPredictionLayer``: the embedding of the
  rolled tokens (the model's own, :meth:`GPT.embed`), ``enorm`` and
  ``hnorm``, their concatenation into ``eh_proj`` (2h -> h, no bias), a
  reference layer and the final norm (``_concat_embeddings``,
  ``_proj_and_transformer_layer``, ``_postprocess``);
* :func:`mtp_hidden` is ``MultiTokenPredictionBlock.forward`` followed by
  ``process_mtp_loss``: the hidden states of all depths concatenated along
  the first dimension and chunked, each module's logits through the tied
  output weight, its cross-entropy on labels rolled once more per depth,
  ``loss_mask * mtp_loss``, the scaled loss given to ``MTPLossAutoScaler``
  on the main hidden states: Megatron-LM's is the same function as
  ``MoEAuxLossAutoScaler`` (the identity, the loss saved, ones as its
  gradient at the main loss's scale 1), so the MoE reference's
  :class:`~.moe_functions.AuxLossAutoScaler` plays it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .layer import ReferenceLayer
from .moe_functions import AuxLossAutoScaler as MTPLossAutoScaler  # the same function

MTP_LOSS_SCALING_FACTOR = 0.1
"""Megatron-LM's default ``--mtp-loss-scaling-factor``."""


def roll(tensor: torch.Tensor) -> torch.Tensor:
    """``roll_tensor(tensor, shifts=-1, dims=-1)`` at cp = 1."""
    rolled = torch.roll(tensor, shifts=-1, dims=-1)
    rolled.select(-1, -1).fill_(0)
    return rolled


class MTPModule(nn.Module):
    """One ``MultiTokenPredictionLayer`` (module docstring); ``layer``: the
    reference layer's :class:`actmem.LayerConfig`."""

    def __init__(self, h: int, layer, seed: int):
        super().__init__()
        self.enorm, self.hnorm = nn.LayerNorm(h), nn.LayerNorm(h)
        self.eh_proj = nn.Linear(2 * h, h, bias=False)
        self.layer = ReferenceLayer(layer, seed=seed, mask="bool")
        self.norm = nn.LayerNorm(h)

    def forward(self, hidden: torch.Tensor, decoder_input: torch.Tensor) -> torch.Tensor:
        x = torch.cat((self.enorm(decoder_input), self.hnorm(hidden)), -1)
        return self.norm(self.layer(self.eh_proj(x)))


def mtp_hidden(gpt, x: torch.Tensor, batch: dict, loss_function) -> torch.Tensor:
    """The main hidden states ``x`` (the final norm's output, (b, s, h))
    after the modules of ``gpt`` and their losses (module docstring): the
    first chunk of the concatenation, carrying the D scaled losses."""
    tokens, positions, states = batch["tokens"], batch["position_ids"], [x]
    for module in gpt.mtp:
        tokens, positions = roll(tokens), roll(positions)
        states.append(module(states[-1], gpt.embed(tokens, positions)))
    chunks = torch.cat(states, dim=0).chunk(len(states), dim=0)
    labels, loss_mask, main = batch["labels"].clone(), batch["loss_mask"], chunks[0]
    for chunk in chunks[1:]:
        logits = F.linear(chunk, gpt.word.weight)
        labels, loss_mask = roll(labels), roll(loss_mask)
        mtp_loss = loss_mask * loss_function(logits, labels)
        scale = MTP_LOSS_SCALING_FACTOR / len(gpt.mtp)
        main = MTPLossAutoScaler.apply(main, scale * mtp_loss / loss_mask.sum().clamp(min=1))
    return main

"""A small reference GPT layer that follows the paper's assumptions.

Korthikanti et al. 2022, sec. 4.1: pre-LayerNorm, Q/K/V projections,
explicit softmax attention with dropout on the probabilities, output
projection, GeLU MLP h -> 4h -> h, dropout on both block outputs, residual
adds, 16-bit activations (bfloat16 on CPU). Tensor parallelism is
Megatron's (sec. 4.2.1): heads and the MLP width split over ``t`` ranks
with the f/g operators of :mod:`.parallel`.

Layout is batch-first ``(b, s, h)``; the ledger writes ``(s, b, h)``, which
holds the same number of bytes. Each tensor the ledger counts is tagged
with :func:`.saved.named`, so a measurement can find it.

Options beyond the paper come from :class:`actmem.LayerConfig`:
``recompute`` (``torch.utils.checkpoint``, reentrant like Megatron's),
``flash_attention`` (PyTorch's ``scaled_dot_product_attention``),
``kv_heads`` (grouped-query attention without copying K/V per head),
``activation="swiglu"`` (eager, unfused), ``dropout=False``.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..layer.config import LayerConfig
from .parallel import ColumnParallelLinear, RowParallelLinear, TensorParallel
from .saved import block, named

DROPOUT_P = 0.1
"""Dropout probability (any 0 < p < 1 gives the same bytes)."""

MASKS = ("bool", "noise")
"""How dropout keeps its mask: ``"bool"`` 1 byte/element (as
``torch.native_dropout``, the CUDA path of ``F.dropout``); ``"noise"`` the
scaled keep/drop noise in the activation dtype (as ``F.dropout`` on CPU)."""

PARALLEL_SEED_OFFSET = 2718
"""Megatron's offset for the per-rank seed of the tensor-parallel region."""


def dropout(x, seed: int, key: str, mask: str = "bool"):
    """Inverted dropout with probability :data:`DROPOUT_P`, seeded by ``seed``.

    The mask is tagged as ledger row ``key``; ``mask`` is one of
    :data:`MASKS`. The multiplication saves only the mask for backward.
    """
    gen = torch.Generator().manual_seed(seed)
    keep = 1.0 - DROPOUT_P
    if mask == "bool":
        bits = torch.empty(x.shape, dtype=torch.bool).bernoulli_(keep, generator=gen)
        return x * named(key, bits) * (1.0 / keep)
    noise = torch.empty_like(x).bernoulli_(keep, generator=gen).div_(keep)
    return x * named(key, noise)


class DropoutSeeds:
    """Per-call dropout seeds, consistent where Megatron needs it.

    ``replicated()`` draws from the same stream on every rank (dropout on
    the block outputs, whose tensors every rank holds whole);
    ``parallel()`` from a stream seeded ``seed + 2718 + rank`` (dropout on
    each rank's own heads). Seeds are drawn outside any checkpoint, so a
    recomputation reuses the same masks.
    """

    def __init__(self, seed: int, rank: int):
        self._replicated = torch.Generator().manual_seed(seed)
        self._parallel = torch.Generator().manual_seed(
            seed + PARALLEL_SEED_OFFSET + rank)

    @staticmethod
    def _draw(gen):
        return int(torch.randint(2**62, (1,), generator=gen))

    def replicated(self) -> int:
        return self._draw(self._replicated)

    def parallel(self) -> int:
        return self._draw(self._parallel)


def causal_attention(q, k, v, seed, mask="bool"):
    """Explicit softmax attention, (b, a, s, d) queries, (b, g, s, d) keys/values.

    Each of the g key/value heads serves a/g query heads through a grouped
    matmul, so K and V are never copied per query head. Saves Q, K, the
    softmax output, the dropout mask and output, and V (sec. 4.1).
    ``seed=None`` means no dropout.
    """
    b, a, s, d = q.shape
    g = k.shape[1]
    scores = torch.matmul(q.view(b, g, a // g * s, d), k.transpose(-2, -1))
    scores = scores.view(b, a, s, s) * d**-0.5 + _causal_bias(s, q.dtype)
    probs = named("softmax_output", torch.softmax(scores, dim=-1))
    if seed is not None:
        probs = named("attn_dropout_output",
                      dropout(probs, seed, "attn_dropout_mask", mask))
    out = torch.matmul(probs.view(b, g, a // g * s, s), v)
    return out.view(b, a, s, d)


def fused_attention(q, k, v, seed, mask="bool"):
    """PyTorch's ``scaled_dot_product_attention`` (causal) on the same inputs.

    On CPU without dropout it runs a FlashAttention-style kernel; with
    dropout it falls back to the math path (``mask`` is not used: the
    kernel makes its own).
    """
    p = 0.0 if seed is None else DROPOUT_P
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed or 0)
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=p, is_causal=True, enable_gqa=k.shape[1] != q.shape[1])


def _causal_bias(s, dtype):
    return torch.full((s, s), float("-inf"), dtype=dtype).triu(1)


def _heads(x, n, contiguous):
    b, s, _ = x.shape
    x = x.view(b, s, n, -1).transpose(1, 2)
    return x.contiguous() if contiguous else x


class ReferenceLayer(nn.Module):
    """One GPT layer on tensor-parallel rank ``rank`` of ``config.t``.

    Weights are drawn from ``seed`` for the whole (t = 1) layer and then
    sliced, so every t computes the same function. ``config.t > 1`` needs
    an initialised ``torch.distributed`` process group of size t.

    Args:
        config: shapes and options; ``sequence_parallel`` is not modelled.
        rank: this process's tensor-parallel rank.
        mask: dropout mask storage, one of :data:`MASKS`.
        seed: weights and dropout seeds. dtype: activation/weight dtype.

    Raises:
        ValueError: ``sequence_parallel=True``, a bad ``rank`` or ``mask``.
    """

    def __init__(self, config: LayerConfig, rank: int = 0, *, mask="bool",
                 seed=0, dtype=torch.bfloat16):
        super().__init__()
        if config.sequence_parallel:
            raise ValueError("sequence_parallel=True is not measured here")
        if not 0 <= rank < config.t or mask not in MASKS:
            raise ValueError(f"need 0 <= rank < t and mask in {MASKS}, "
                             f"got rank={rank}, t={config.t}, mask={mask!r}")
        self.config, self.mask = config, mask
        self.tp = tp = TensorParallel(rank, config.t)
        self.seeds = DropoutSeeds(seed, rank)
        full = _full_linears(config, seed)
        col = {k: ColumnParallelLinear(full[k], tp)
               for k in full if k not in ("proj", "fc2")}
        self.linears = nn.ModuleDict(
            {**col, "proj": RowParallelLinear(full["proj"], tp),
             "fc2": RowParallelLinear(full["fc2"], tp)})
        self.norm1, self.norm2 = nn.LayerNorm(config.h), nn.LayerNorm(config.h)
        self.to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (b, s, h) layer input; returns the layer output, same shape."""
        c = self.config
        drop = c.dropout
        seeds = (self.seeds.parallel() if drop else None,
                 self.seeds.replicated() if drop else None,
                 self.seeds.replicated() if drop else None)
        if c.recompute == "full":
            return checkpoint(self._body, named("layer_input", x), seeds,
                              use_reentrant=True)
        return self._body(x, seeds)

    def _body(self, x, seeds):
        x = x + self._attention(x, *seeds[:2])
        return x + self._mlp(named("mlp_norm_input", x), seeds[2])

    def _attention(self, x, map_seed, out_seed):
        c, lin = self.config, self.linears
        with block("attn_norm"):
            y = named("qkv_input", self.norm1(named("attn_norm_input", x)))
        with block("attention"):
            explicit = not c.flash_attention
            a, g = self.tp.shard(c.a, "a"), self.tp.shard(c.g, "kv_heads")
            q = named("query", _heads(lin["q"](y), a, explicit))
            k = named("key", _heads(lin["k"](y), g, explicit))
            v = named("value", _heads(lin["v"](y), g, explicit))
            core = causal_attention if explicit else fused_attention
            args = (q, k, v, map_seed, self.mask)
            if c.recompute == "selective":
                out = checkpoint(core, *args, use_reentrant=True)
            else:
                out = core(*args)
            b, _, s, _ = out.shape
            context = named("proj_input", out.transpose(1, 2).reshape(b, s, -1))
            out = lin["proj"](context)
            if out_seed is None:
                return out
            return dropout(out, out_seed, "attn_out_dropout_mask", self.mask)

    def _mlp(self, x, seed):
        with block("mlp_norm"):
            y = named("fc1_input", self.norm2(x))
        with block("mlp"):
            out = self._mlp_inner(y)
            if seed is None:
                return out
            return dropout(out, seed, "mlp_out_dropout_mask", self.mask)

    def _mlp_inner(self, y):
        """fc1, the activation and fc2 on the normed input ``y``, naming what
        each activation saves."""
        lin = self.linears
        if self.config.activation == "gelu":
            z = F.gelu(named("gelu_input", lin["fc1"](y)), approximate="tanh")
        elif self.config.activation == "squared_relu":  # megatron/core/activations.py
            z = torch.pow(named("relu_output", F.relu(lin["fc1"](y))), 2)
        else:
            gate = named("swiglu_gate", lin["gate"](y))
            z = F.silu(gate) * named("swiglu_up", lin["up"](y))
        return lin["fc2"](named("fc2_input", z))


def _full_linears(c: LayerConfig, seed: int) -> dict[str, nn.Linear]:
    """Unsharded fp32 linears (t = 1), drawn from ``seed``."""
    kv = c.h * c.g // c.a
    shapes = {"q": (c.h, c.h), "k": (c.h, kv), "v": (c.h, kv),
              "proj": (c.h, c.h), "fc2": (c.f, c.h)}
    if c.activation != "swiglu":
        shapes["fc1"] = (c.h, c.f)
    else:
        shapes.update(gate=(c.h, c.f), up=(c.h, c.f))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return {k: nn.Linear(*io) for k, io in shapes.items()}


def layer_input(config: LayerConfig, seed=1, dtype=torch.bfloat16):
    """A (b, s, h) input that requires grad, the same on every rank."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(config.b, config.s, config.h, generator=gen)
    return x.to(dtype).requires_grad_()


def unsharded(config: LayerConfig) -> LayerConfig:
    """The same layer at t = 1 (the reference for a tensor-parallel check)."""
    return dataclasses.replace(config, t=1)

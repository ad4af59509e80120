"""Megatron-LM's own estimate, restated, to compare with actmem's (notebook 08).

Megatron-LM ships ``megatron/training/theoretical_memory_usage.py``. Its
facts and formulas are restated here (its code is not copied), for the
first pipeline stage, which it takes as the most loaded:

* weights and optimizer: per layer ``2h(f*r + n) + 2h^2(1 + g/a)`` with
  ``r = 3/2`` for SwiGLU and ``n`` the norm's weights (2 LayerNorm, 1
  RMSNorm), no linear biases; ``(L*layer + n*h)/p + h*V`` parameters, all
  divided by t (plus a second ``h*V/t`` when untied and p = 1); 18 bytes
  each, or ``6 + 12/d`` with the distributed optimizer.
* activations with sequence parallelism and selective recomputation:
  ``sbh(18 + 4f/h)`` per layer, times L (p micro-batches of L/p layers);
  plus ``8sbp`` token ids and ``sbhp`` embedding dropout mask; times
  ``1 + (p-1)/(p*v)`` when interleaved, else times ``min(1, m/p)`` when
  p > 1; plus ``4sbh(1 + V/h)`` for the output layer and fp32 logits when
  p = 1; all divided by t.
* otherwise: ``sbh(10 + 24/t)`` per layer, the same embedding terms and
  schedule factors, ``2(sbV/t + sbh)`` for the output when p = 1, and the
  whole times 1.05.

Quantities are exact fractions of bytes (Megatron-LM computes in floats).
"""

from __future__ import annotations

from fractions import Fraction

from .model import ModelConfig


def megatron_weights_and_optimizer(model: ModelConfig, t: int = 1, p: int = 1, d: int = 1,
                                   distributed_optimizer: bool = False) -> Fraction:
    """Megatron-LM's bytes of weights, gradients and optimizer states on
    the first stage (module docstring)."""
    c, h = model.layer(t), model.h
    norm = 1 if model.norm == "rmsnorm" else 2
    gated = Fraction(3, 2) if c.activation == "swiglu" else 1
    layer = 2 * h * (c.f * gated + norm) + 2 * h * h * (1 + Fraction(c.g, c.a))
    block = layer * model.L + norm * h
    embedding = h * model.padded_vocab(t)
    params = (block / p + embedding) / t
    if not model.tied_embeddings and p == 1:
        params += Fraction(embedding, t)
    per_parameter = 6 + Fraction(12, d) if distributed_optimizer else 18
    return params * per_parameter


def megatron_activations(model: ModelConfig, t: int = 1, p: int = 1, m: int = 1,
                         v: int = 1, sequence_parallel: bool = False,
                         recompute: str = "none") -> Fraction:
    """Megatron-LM's activation bytes on the first stage (module docstring)."""
    c, V = model.layer(t), model.padded_vocab(t)
    sbh = c.s * c.b * c.h
    exact = sequence_parallel and recompute == "selective"
    per_layer = sbh * (18 + Fraction(4 * c.f, c.h)) if exact else \
        sbh * (10 + Fraction(24, t))
    total = per_layer * model.L + 8 * c.s * c.b * p + sbh * p
    if v > 1:
        total *= 1 + Fraction(p - 1, p * v)
    elif p > 1:
        total *= min(1, Fraction(m, p))
    if exact:
        if p == 1:
            total += 4 * sbh * (1 + Fraction(V, c.h))
        return total / t
    if p == 1:
        total += 2 * (Fraction(c.s * c.b * V, t) + sbh)
    return total * Fraction(105, 100)


def differences(model: ModelConfig, t: int = 1, p: int = 1, sequence_parallel: bool = False,
                recompute: str = "none", **_) -> list[str]:
    """Why Megatron-LM's estimate differs from actmem's for this run, one
    reason per line (only those that apply)."""
    c = model.layer(t)
    exact = sequence_parallel and recompute == "selective"
    reasons = []
    if model.bias:
        reasons.append("Megatron-LM counts no linear-layer biases")
    if t > 1:
        reasons.append("it divides every parameter by t, norms included, and the token "
                       "ids too (every rank keeps those whole)")
    if not exact and not c.flash_attention and recompute != "selective":
        reasons.append("without sequence parallelism + selective recomputation its "
                       "per-layer term sbh(10 + 24/t) drops the attention map 5as^2b/t")
    if exact and c.g != c.a:
        reasons.append("sbh(18 + 4f/h) sizes K and V as if every head had its own "
                       "(no grouped-query attention)")
    if exact and c.activation == "swiglu":
        reasons.append("4f/h counts one f-wide input of the second linear and GeLU's input; "
                       "SwiGLU keeps gate and up (6sbf bytes in all)")
    if not c.dropout:
        reasons.append("it assumes dropout masks (the model has no dropout)")
    if recompute == "full":
        reasons.append("it ignores full recomputation (counts stored layers)")
    if not exact:
        reasons.append("it adds a fixed 5% and counts the logits at 2 bytes (fp32 in "
                       "Megatron-LM's cross-entropy and in actmem)")
    if p > 1:
        reasons.append("it leaves out the last stage, which holds the output layer")
    return reasons

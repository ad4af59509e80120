"""Megatron-LM's own estimate, restated, to compare with actmem's (notebook 09).

Megatron-LM ships ``megatron/training/theoretical_memory_usage.py``. Its
facts and formulas are restated here (its code is not copied) as they
stand at Megatron-LM commit ``d98e8a64`` (2026-08-22), the commit this
project pins; since PR #4687 (May 2026) ``compute_weight_and_optimizer_memory``
splits the parameters by how each rank holds them. For the first pipeline
stage, which it takes as the most loaded, of a dense model:

* weights and optimizer: per layer ``2h^2(1 + g/a)*(d*a/h)`` attention
  (``d`` the head width, ``--kv-channels``) and ``2hf*r`` MLP weights, with
  ``r = 3/2`` for SwiGLU and no linear biases, are *tensor-parallel sharded*
  (``tp_sharded``): ``(L*layer/p + h*V)/t``; the two norms of every layer
  (``2h*n``, ``n`` = 2 for LayerNorm, 1 for RMSNorm) and the final norm
  (``n*h``) are *replicated* (``replicated``): ``(2hn*L + n*h)/p``, not
  divided by t; a second ``h*V/t`` when untied and p = 1. Routed experts
  (``expert_sharded``, divided by ``ep*etp``, with the expert data-parallel
  size's bytes) exist only in MoE models, which are not restated here.
  18 bytes per parameter, or ``6 + 12/d`` with the distributed optimizer.
* activations with sequence parallelism and selective recomputation
  (``compute_activation_memory``): ``sbh(18 + 4f/h)`` per layer, times L
  (p micro-batches of L/p layers); plus ``8sbp`` token ids and ``sbhp``
  embedding dropout mask; times ``1 + (p-1)/(p*v)`` when interleaved, else
  times ``min(1, m/p)`` when p > 1; plus ``4sbh(1 + V/h)`` for the output
  layer and fp32 logits when p = 1; all divided by t (the token ids too).
* otherwise (``compute_activation_memory_without_sp``): ``sbh(10 + 24/t)``
  per layer, the same embedding terms and schedule factors,
  ``2(sbV/t + sbh)`` for the output when p = 1, and the whole times 1.05;
  nothing further divided by t.

Quantities are exact fractions of bytes (Megatron-LM computes in floats).
"""

from __future__ import annotations

from fractions import Fraction

from .job.model import ModelConfig


def megatron_weights_and_optimizer(model: ModelConfig, t: int = 1, p: int = 1, d: int = 1,
                                   distributed_optimizer: bool = False) -> Fraction:
    """Megatron-LM's bytes of weights, gradients and optimizer states on
    the first stage (module docstring): its tensor-parallel sharded
    parameters divided by t, its replicated ones (norms) not."""
    sharded, replicated = megatron_parameters(model, t, p)
    per_parameter = 6 + Fraction(12, d) if distributed_optimizer else 18
    return (sharded + replicated) * per_parameter


def megatron_parameters(model: ModelConfig, t: int = 1, p: int = 1) -> tuple[Fraction, Fraction]:
    """``(tp_sharded, replicated)``: the parameters Megatron-LM counts on
    the most loaded model shard (the first stage), as
    ``compute_weight_and_optimizer_memory`` splits them at commit d98e8a64:
    the attention and MLP weights and the embedding divided by t, the
    layers' norms and the final norm not (module docstring)."""
    c, h = model.layer(t), model.h
    norm = 1 if model.norm == "rmsnorm" else 2
    gated = Fraction(3, 2) if c.activation == "swiglu" else 1
    query = Fraction((c.kv_channels or h // c.a) * c.a, h)
    attention = 2 * h * h * (1 + Fraction(c.g, c.a)) * query
    mlp = 2 * h * c.f * gated
    embedding = h * model.padded_vocab(t)
    sharded = ((attention + mlp) * model.L / p + embedding) / t
    if not model.tied_embeddings and p == 1:
        sharded += Fraction(embedding, t)
    replicated = Fraction(2 * h * norm * model.L + norm * h, p)
    return sharded, replicated


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
    if t > 1 and exact:
        reasons.append("it divides the token ids by t (every rank keeps those whole)")
    if p > 1:
        reasons.append("it counts 1/p of the final norm on the first stage (the last stage holds it)")
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
    if not exact and p == 1:   # it adds the output layer's logits only without pipelining
        reasons.append("it adds a fixed 5% and counts the logits at 2 bytes (fp32 in "
                       "Megatron-LM's cross-entropy and in actmem)")
    elif not exact:
        reasons.append("it adds a fixed 5%")
    if p > 1:
        reasons.append("it leaves out the last stage, which holds the output layer")
    return reasons

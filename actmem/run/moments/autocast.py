"""The bf16 copies ``torch.autocast`` makes of fp32 parameters, bytes on one
GPU: ``cached_cast`` (``aten/src/ATen/autocast_mode.cpp``) keeps the copy of
each fp32 leaf parameter it casts until the autocast region ends, and a
linear layer saves its weight's copy for backward
(:mod:`actmem.run.moments.precision`, ``"autocast"``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..job.model import ModelConfig
from ..job.record_fields import check_fields


@dataclass(frozen=True)
class AutocastCopies:
    """bf16 copies ``cached_cast`` makes of fp32 parameters under autocast,
    bytes on one GPU (all 0 for other precisions).

    Attributes:
        weights: one layer's linear weights (saved until its backward).
        biases: one layer's column-parallel biases (cached until the
            autocast region ends; a row-parallel bias is added after the
            reduction, in fp32, and not cast).
        qkv_weights, qkv_biases: the Q, K, V projection's share of each,
            cast before the scores.
        output: the output layer's weight (the tied embedding's or its own).
    """

    weights: int = 0
    biases: int = 0
    qkv_weights: int = 0
    qkv_biases: int = 0
    output: int = 0

    def __post_init__(self):
        """Raises TypeError, ValueError: bytes that are not integers >= 0."""
        check_fields(self)


def autocast_copies(model: ModelConfig, t: int, precision: str) -> AutocastCopies:
    """The bf16 parameter copies of one autocast forward (:class:`AutocastCopies`),
    2 bytes per parameter cast; none unless ``precision="autocast"``."""
    if precision != "autocast":
        return AutocastCopies()
    c = model.layer(t)
    kv, bias = c.g * c.h // c.a, int(model.bias)
    f_in = 2 * c.f if c.activation == "swiglu" else c.f
    qkv_w, qkv_b = 2 * c.h * (c.h + 2 * kv) // c.t, 2 * bias * (c.h + 2 * kv) // c.t
    return AutocastCopies(weights=qkv_w + 2 * (c.h * c.h + c.h * f_in + c.f * c.h) // c.t,
                          biases=qkv_b + 2 * bias * f_in // c.t,
                          qkv_weights=qkv_w, qkv_biases=qkv_b,
                          output=2 * model.padded_vocab(c.t) // c.t * c.h)

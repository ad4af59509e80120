"""A whole GPT model: its layers' shape, vocabulary, embeddings, and parameters.

:class:`ModelConfig` adds to a layer's shape (:class:`actmem.LayerConfig`:
s, b, h, a, kv_heads, ffn_hidden_size, activation, dropout,
flash_attention) what a training run needs beyond one layer: ``L`` layers,
the vocabulary (padded as Megatron-LM pads it), tied or untied input and
output embeddings, learned or rotary positions, LayerNorm or RMSNorm, and
biases. :func:`parameter_count` counts the weights block by block; the
split into parts that tensor parallelism divides and parts it replicates
is what :mod:`actmem.states` puts on each GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..layer.config import LayerConfig
from ..validate import choice, flag, instance, positive_int

NORMS = ("layernorm", "rmsnorm")
"""Normalisation layers: LayerNorm (weight and bias) or RMSNorm (weight)."""
POSITIONS = ("learned", "rotary")
"""Position encodings: a learned table (GPT) or rotary (LLaMA, no weights)."""


@dataclass(frozen=True)
class ModelConfig:
    """A GPT-style model and the micro-batch it is trained on.

    Attributes:
        s, b, h, a: sequence length, micro-batch size, hidden size, heads.
        L: Transformer layers.
        vocab_size: tokens in the vocabulary (unpadded, as published).
        kv_heads, ffn_hidden_size, activation, dropout, flash_attention: as
            :class:`actmem.LayerConfig` (``ffn_hidden_size`` None means 4h, or
            Megatron-LM's SwiGLU default, :func:`actmem.default_ffn_hidden_size`).
        norm: ``"layernorm"`` or ``"rmsnorm"``. bias: linear layers have
            biases. tied_embeddings: the output layer reuses the input
            embedding. positions: ``"learned"`` (a table of
            ``max_positions`` rows, default s) or ``"rotary"``.
        make_vocab_size_divisible_by: Megatron-LM pads the vocabulary to a
            multiple of this times t (default 128).
        source: where the numbers come from (presets cite a paper or card).

    Raises:
        TypeError, ValueError: a value of the wrong kind or out of range; the
            layer's rules are those of :class:`actmem.LayerConfig`.
    """

    s: int
    b: int
    h: int
    a: int
    L: int
    vocab_size: int
    kv_heads: int | None = None
    ffn_hidden_size: int | None = None
    activation: str = "gelu"
    dropout: bool = True
    flash_attention: bool = False
    norm: str = "layernorm"
    bias: bool = True
    tied_embeddings: bool = True
    positions: str = "learned"
    max_positions: int | None = None
    make_vocab_size_divisible_by: int = 128
    source: str = ""

    def __post_init__(self) -> None:
        optional = ("max_positions", "kv_heads", "ffn_hidden_size")
        for name in ("s", "b", "h", "a", "L", "vocab_size", "make_vocab_size_divisible_by",
                     *optional):
            value = getattr(self, name)
            if value is not None or name not in optional:
                object.__setattr__(self, name, positive_int(name, value))  # plain ints
        choice("norm", self.norm, NORMS)
        choice("positions", self.positions, POSITIONS)
        flag("bias", self.bias)
        flag("tied_embeddings", self.tied_embeddings)
        instance("source", self.source, str, "'Touvron et al. 2023'")
        if self.positions == "learned" and (self.max_positions or self.s) < self.s:
            raise ValueError(f"max_positions={self.max_positions} must be at least s={self.s}: "
                             "a learned position table has one row per position")
        self.layer()

    def layer(self, t: int = 1, sequence_parallel: bool = False,
              recompute: str = "none") -> LayerConfig:
        """The layer on one GPU under tensor-parallel size ``t`` and the
        storage options of a run (validated by :class:`LayerConfig`)."""
        return LayerConfig(self.s, self.b, self.h, self.a, t,
                           sequence_parallel=sequence_parallel, recompute=recompute,
                           flash_attention=self.flash_attention, kv_heads=self.kv_heads,
                           ffn_hidden_size=self.ffn_hidden_size,
                           activation=self.activation, dropout=self.dropout)

    def padded_vocab(self, t: int = 1) -> int:
        """Megatron-LM's padded vocabulary: the smallest multiple of
        ``make_vocab_size_divisible_by * t`` not below ``vocab_size``
        (so each of the t ranks gets an equal slice)."""
        unit = self.make_vocab_size_divisible_by * positive_int("t", t)
        return -(-self.vocab_size // unit) * unit

    def with_(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


class ParameterCount(int):
    """The number of parameters of a model (an ``int``: the total), with its
    breakdown block by block as attributes (counts, not bytes).

    Attributes:
        layer_split: per layer, by block, the weights tensor parallelism
            divides by t (Q/K/V and output projection, MLP matrices, the
            column-parallel biases).
        layer_replicated: per layer, by block, the weights every tensor-
            parallel rank keeps whole (norms, row-parallel biases).
        L: layers. vocab: the vocabulary size the embedding tables use.
        embedding: input embedding (vocab x h, split over t).
        positions: learned position table (replicated), or 0.
        output_layer: untied output layer (vocab x h, split), or 0.
        final_norm: the norm after the last layer (replicated).
    """

    def __new__(cls, *, layer_split: dict[str, int], layer_replicated: dict[str, int],
                L: int, vocab: int, embedding: int, positions: int, output_layer: int,
                final_norm: int) -> "ParameterCount":
        per_layer = sum(layer_split.values()) + sum(layer_replicated.values())
        count = super().__new__(cls, L * per_layer + embedding + positions
                                + output_layer + final_norm)
        count.__dict__.update(layer_split=layer_split, layer_replicated=layer_replicated,
                              L=L, vocab=vocab, embedding=embedding, positions=positions,
                              output_layer=output_layer, final_norm=final_norm)
        return count

    @property
    def per_layer(self) -> int:
        """All parameters of one layer."""
        return sum(self.layer_split.values()) + sum(self.layer_replicated.values())

    @property
    def total(self) -> int:
        """All parameters of the model, a plain ``int``."""
        return int(self)

    def __repr__(self) -> str:
        return (f"ParameterCount({int(self)}: {self.L} layers x {self.per_layer}, "
                f"embedding {self.embedding}, positions {self.positions}, "
                f"output layer {self.output_layer}, final norm {self.final_norm})")


def parameter_count(model: ModelConfig, vocab: int | None = None) -> ParameterCount:
    """Count the parameters of ``model`` (Megatron-LM's GPT layout): an
    ``int`` carrying its breakdown (:class:`ParameterCount`).

    Per layer: Q (h x h), K and V (h x g*h/a each), the output projection
    (h x h), the MLP (``h x f`` and ``f x h``; SwiGLU has two ``h x f``
    inputs), two norms, and biases on every linear layer when ``bias``.

    Args:
        model: the model.
        vocab: the vocabulary to size the tables with; default the
            unpadded ``vocab_size`` (published counts), or pass
            ``model.padded_vocab(t)`` for what Megatron-LM allocates.

    >>> from actmem import PRESETS
    >>> parameter_count(PRESETS["llama2-7b"]) == 6_738_415_616
    True
    """
    instance("model", model, ModelConfig, "actmem.PRESETS['llama2-7b']")
    c, h = model.layer(), model.h
    kv = c.g * h // c.a
    f_in = 2 * c.f if c.activation == "swiglu" else c.f
    norm = 2 * h if model.norm == "layernorm" else h
    bias = int(model.bias)
    split = {"attention": h * (h + 2 * kv) + bias * (h + 2 * kv) + h * h,
             "mlp": h * f_in + bias * f_in + c.f * h}
    replicated = {"attention": bias * h + norm, "mlp": bias * h + norm}
    vocab = model.vocab_size if vocab is None else positive_int("vocab", vocab)
    table = vocab * h
    return ParameterCount(
        layer_split=split, layer_replicated=replicated, L=model.L, vocab=vocab,
        embedding=table,
        positions=(model.max_positions or model.s) * h if model.positions == "learned" else 0,
        output_layer=0 if model.tied_embeddings else table, final_norm=norm)

"""How many parameters a model has, block by block (counts, not bytes).

:func:`parameter_count` counts the weights of a :class:`actmem.ModelConfig`
as Megatron-LM lays out a GPT model; :class:`ParameterCount` carries the
split into what tensor parallelism divides and what every rank keeps whole,
which :mod:`actmem.run.model_states.states` puts on each GPU.
"""

from __future__ import annotations

from ...layer.head_dim import attention_parameters
from ...layer.mla import mla_attention_parameters
from ...validate import instance, lists_keywords, positive_int
from .model import ModelConfig


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
        moe_layers: how many of the L layers are MoE layers (0: dense model).
        moe_split, moe_replicated: per MoE layer, the weights tensor
            parallelism divides by t (attention, shared experts) and those
            every rank keeps whole (norms, the router's E x h weights).
        experts: per MoE layer, the routed experts' weights, E x 3 h f_e
            (SwiGLU: fc1 of 2 f_e columns, fc2), divided over ep x etp.
        mtp_layers: D, multi-token prediction modules (0: none), each a
            layer of the last layer's kind (``mtp_moe``: an MoE layer) and
            ``mtp_split`` (its ``eh_proj``, 2h x h, split over t) and
            ``mtp_replicated`` (its enorm, hnorm and final norm) more.
    """

    def __new__(cls, *, layer_split: dict[str, int], layer_replicated: dict[str, int],
                L: int, vocab: int, embedding: int, positions: int, output_layer: int,
                final_norm: int, moe_layers: int = 0, moe_split: dict[str, int] | None = None,
                moe_replicated: dict[str, int] | None = None,
                experts: int = 0, mtp_layers: int = 0, mtp_moe: bool = False,
                mtp_split: int = 0, mtp_replicated: int = 0) -> "ParameterCount":
        moe_split, moe_replicated = moe_split or {}, moe_replicated or {}
        dense = sum(layer_split.values()) + sum(layer_replicated.values())
        moe = sum(moe_split.values()) + sum(moe_replicated.values()) + experts
        mtp = mtp_layers * ((moe if mtp_moe else dense) + mtp_split + mtp_replicated)
        count = super().__new__(cls, (L - moe_layers) * dense + moe_layers * moe + embedding
                                + positions + output_layer + final_norm + mtp)
        count.__dict__.update(layer_split=layer_split, layer_replicated=layer_replicated,
                              L=L, vocab=vocab, embedding=embedding, positions=positions,
                              output_layer=output_layer, final_norm=final_norm,
                              moe_layers=moe_layers, moe_split=moe_split,
                              moe_replicated=moe_replicated, experts=experts,
                              mtp_layers=mtp_layers, mtp_moe=mtp_moe, mtp_split=mtp_split,
                              mtp_replicated=mtp_replicated)
        return count

    @property
    def per_layer(self) -> int:
        """All parameters of one dense layer."""
        return sum(self.layer_split.values()) + sum(self.layer_replicated.values())

    @property
    def per_moe_layer(self) -> int:
        """All parameters of one MoE layer (0 for a dense model)."""
        if not self.moe_layers:
            return 0
        return sum(self.moe_split.values()) + sum(self.moe_replicated.values()) + self.experts

    @property
    def total(self) -> int:
        """All parameters of the model, a plain ``int``."""
        return int(self)

    def __repr__(self) -> str:
        layers = f"{self.L} layers x {self.per_layer}"
        if self.moe_layers:
            layers = (f"{self.L - self.moe_layers} dense layers x {self.per_layer}, "
                      f"{self.moe_layers} MoE layers x {self.per_moe_layer}")
        return (f"ParameterCount({int(self)}: {layers}, "
                f"embedding {self.embedding}, positions {self.positions}, "
                f"output layer {self.output_layer}, final norm {self.final_norm}"
                + (f", {self.mtp_layers} MTP modules" if self.mtp_layers else "") + ")")


@lists_keywords
def parameter_count(model: ModelConfig, vocab: int | None = None) -> ParameterCount:
    """Count the parameters of ``model`` (Megatron-LM's GPT layout): an
    ``int`` carrying its breakdown (:class:`ParameterCount`).

    Per layer: Q (h x h), K and V (h x g*h/a each), the output projection
    (h x h), the MLP (``h x f`` and ``f x h``; SwiGLU has two ``h x f``
    inputs), two norms, and biases on every linear layer when ``bias``.
    Multi-latent attention replaces Q, K, V and the output projection by
    its down and up projections and latent norms
    (:func:`actmem.layer.mla.mla_attention_parameters`).
    An MoE layer (``moe_pattern``) has, instead of the MLP, the router
    (E x h), E experts of 3 h f_e each and the shared experts (3 h f_s),
    as Megatron-LM's ``theoretical_memory_usage.py``:
    compute_weight_and_optimizer_memory counts them for SwiGLU; GeLU
    experts have 2 h f_e each and the shared experts 2 h f_s
    (``experts.py``: linear_fc1 is h x f_e, twice as wide for a gated
    activation). Each multi-token prediction module (``mtp_num_layers``,
    ``multi_token_prediction.py``: MultiTokenPredictionLayer) adds a layer
    built from the last layer's spec (``gpt_builders.py``), enorm and hnorm,
    ``eh_proj`` (2h x h, no bias) and a final norm; it shares the
    embedding and the output layer.

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
    c, h = model.layer(moe=False), model.h
    kv = c.g * h // c.a
    f_in = 2 * c.f if c.activation == "swiglu" else c.f
    norm = 2 * h if model.norm == "layernorm" else h
    bias = int(model.bias)
    split = {"attention": h * (h + 2 * kv) + bias * (h + 2 * kv) + h * h,
             "mlp": h * f_in + bias * f_in + c.f * h}
    replicated = {"attention": bias * h + norm, "mlp": bias * h + norm}
    if c.kv_channels is not None or c.qk_layernorm:  # head width d, query/key norms
        split["attention"], whole = attention_parameters(
            h, c.a, c.g, c.h // c.a if c.kv_channels is None else c.kv_channels, model.bias,
            (norm // h) * (c.kv_channels or c.h // c.a) * c.qk_layernorm)
        replicated["attention"] = whole + norm
    if c.multi_latent_attention:
        split["attention"], replicated["attention"] = mla_attention_parameters(
            c, h, norm // h, model.bias)
    vocab = model.vocab_size if vocab is None else positive_int("vocab", vocab)
    table = vocab * h
    return ParameterCount(
        layer_split=split, layer_replicated=replicated, L=model.L, vocab=vocab,
        embedding=table,
        positions=(model.max_positions or model.s) * h if model.positions == "learned" else 0,
        output_layer=0 if model.tied_embeddings else table, final_norm=norm,
        **_experts_and_mtp(model, split["attention"], replicated["attention"], norm))


def _experts_and_mtp(model: ModelConfig, attention: int, attention_whole: int,
                     norm: int) -> dict:
    """:class:`ParameterCount`'s MoE and multi-token prediction counts (see
    :func:`parameter_count`): per MoE layer the attention (split and whole),
    the shared experts, the MLP's norm, the router and the routed experts;
    per module a layer of the last layer's kind, ``eh_proj`` and three norms."""
    h, more = model.h, {}
    if model.num_experts is not None:
        m = model.layer(moe=True)
        mats = 3 if m.activation == "swiglu" else 2   # fc1 (doubled when gated) and fc2
        more = dict(moe_layers=sum(model.moe_pattern()),
                    moe_split={"attention": attention, "shared_experts": mats * h * (
                        m.moe_shared_expert_intermediate_size or 0)},
                    moe_replicated={"attention": attention_whole, "mlp": norm,
                                    "router": m.num_experts * h},
                    experts=m.num_experts * mats * h * m.f_e)
    if model.mtp_num_layers:
        more.update(mtp_layers=model.mtp_num_layers, mtp_moe=bool(model.moe_pattern()[-1]),
                    mtp_split=2 * h * h, mtp_replicated=3 * norm)
    return more

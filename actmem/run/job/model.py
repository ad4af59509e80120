"""A whole GPT model: its layers' shape, vocabulary, embeddings, and parameters.

:class:`ModelConfig` adds to a layer's shape (:class:`actmem.LayerConfig`:
s, b, h, a, kv_heads, ffn_hidden_size, activation, dropout,
flash_attention) what a training run needs beyond one layer: ``L`` layers,
the vocabulary (padded as Megatron-LM pads it), tied or untied input and
output embeddings, learned or rotary positions, LayerNorm or RMSNorm, and
biases. :func:`actmem.parameter_count` counts the weights block by block; the
split into parts that tensor parallelism divides and parts it replicates
is what :mod:`actmem.run.model_states.states` puts on each GPU (:mod:`actmem.run.job.parameters`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ...layer.config import LayerConfig
from ...layer.moe_options import check_moe_values, refuse_without_experts
from ...layer.head_dim import kv_channels_or_default
from .model_layer import MODEL_MOE_FIELDS, model_layer
from ...validate import (choice, flag, instance, integer, lists_keywords, plain_fields,
                        positive_int)

NORMS = ("layernorm", "rmsnorm")
"""Normalisation layers: LayerNorm (weight and bias) or RMSNorm (weight)."""
POSITIONS = ("learned", "rotary")
"""Position encodings: a learned table (GPT) or rotary (LLaMA, no weights)."""
MAX_LAYERS = 10**6
"""Most layers a model may have: per-layer work stays below a second
(``training_memory`` took 0.5 s of CPU for L = 10^6), and no published
model comes near it."""
@dataclass(frozen=True)
class ModelConfig:
    """A GPT-style model and the micro-batch it is trained on.

    Attributes:
        s, b, h, a: sequence length, micro-batch size, hidden size, heads.
        L: Transformer layers.
        vocab_size: tokens in the vocabulary (unpadded, as published).
        kv_heads, ffn_hidden_size, activation, dropout, flash_attention,
            flash_output_copy: as :class:`actmem.LayerConfig`
            (``ffn_hidden_size`` None means 4h, or Megatron-LM's SwiGLU
            default, :func:`actmem.default_ffn_hidden_size`).
        apply_rope_fusion: Megatron-LM's fused rotary embedding (its default;
            ``--no-rope-fusion`` turns it off): with rotary positions and
            False, every layer keeps cos and sin (:mod:`actmem.layer.rope`).
        norm: ``"layernorm"`` or ``"rmsnorm"``. bias: linear layers have
            biases. tied_embeddings: the output layer reuses the input
            embedding. positions: ``"learned"`` (a table of
            ``max_positions`` rows, default s) or ``"rotary"``.
        make_vocab_size_divisible_by: Megatron-LM pads the vocabulary to a
            multiple of this times t (default 128).
        source: where the numbers come from (presets cite a paper or card).
        num_experts, moe_router_topk, moe_ffn_hidden_size,
        moe_shared_expert_intermediate_size, moe_expert_capacity_factor,
        moe_pad_expert_input_to_capacity, moe_aux_loss_coeff,
        moe_token_dispatcher_type, moe_router_load_balancing_type,
        moe_router_dtype, moe_router_score_function, moe_router_pre_softmax,
        moe_router_num_groups, moe_router_group_topk,
        moe_router_enable_expert_bias, moe_permute_fusion,
        moe_flex_dispatcher_backend: the MoE layers' options, as
            :class:`actmem.LayerConfig` (Megatron-LM's flags in snake_case;
            NumPy floats are stored as ``float``); without ``num_experts``
            each must keep its default.
        moe_layer_freq: which layers are MoE (``--moe-layer-freq``): an int
            N (layer i is MoE when i % N == 0, Megatron-LM's rule) or a tuple
            of L zeros and ones; only with ``num_experts`` (else 1).
        multi_latent_attention, q_lora_rank, kv_lora_rank, qk_head_dim,
        qk_pos_emb_head_dim, v_head_dim: multi-latent attention in every
            layer, as :class:`actmem.LayerConfig` (Megatron-LM's flags in
            snake_case; :mod:`actmem.layer.mla`).
        kv_channels, qk_layernorm: each head's width d (``--kv-channels``,
            None: h/a; h/a itself is stored as None) and norms on queries
            and keys (``--qk-layernorm``), as :class:`actmem.LayerConfig`
            (:mod:`actmem.layer.head_dim`).
        lora_rank, lora_targets: LoRA adapters of rank r on the named
            modules of every layer, the rest frozen (``None``: full
            training), as :class:`actmem.LayerConfig`
            (:mod:`actmem.layer.lora`; a list is kept as a tuple);
            :func:`actmem.model_states` then keeps no gradient and no
            optimizer state for the frozen weights.
        mtp_num_layers: D, Megatron-LM's multi-token prediction modules
            (``--mtp-num-layers``, DeepSeek-V3's MTP; None: none): each adds
            a layer of the last layer's kind, two norms and a 2h x h
            projection on the input side, a final norm, and a second loss
            over the same output layer (:mod:`actmem.run.moments.mtp`).

    Raises:
        TypeError, ValueError: a value of the wrong kind or out of range; the
            layer's rules are those of :class:`actmem.LayerConfig`; an MoE
            option other than its default without ``num_experts`` (checked
            after its type and range).
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
    flash_output_copy: bool = False
    apply_rope_fusion: bool = True
    norm: str = "layernorm"
    bias: bool = True
    tied_embeddings: bool = True
    positions: str = "learned"
    max_positions: int | None = None
    make_vocab_size_divisible_by: int = 128
    source: str = ""
    num_experts: int | None = None
    moe_router_topk: int = 2
    moe_ffn_hidden_size: int | None = None
    moe_shared_expert_intermediate_size: int | None = None
    moe_layer_freq: int | tuple[int, ...] = 1
    moe_expert_capacity_factor: int | float | None = None
    moe_pad_expert_input_to_capacity: bool = False
    moe_aux_loss_coeff: int | float = 0.0
    multi_latent_attention: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int = 32
    qk_head_dim: int = 128
    qk_pos_emb_head_dim: int = 64
    v_head_dim: int = 128
    kv_channels: int | None = None
    qk_layernorm: bool = False
    lora_rank: int | None = None
    lora_targets: tuple[str, ...] = ()
    moe_token_dispatcher_type: str = "alltoall"
    moe_router_load_balancing_type: str = "aux_loss"
    moe_router_dtype: str | None = None
    moe_router_score_function: str = "softmax"
    moe_router_pre_softmax: bool = False
    moe_router_num_groups: int | None = None
    moe_router_group_topk: int | None = None
    moe_router_enable_expert_bias: bool = False
    moe_permute_fusion: bool = False
    moe_flex_dispatcher_backend: str = "deepep"
    mtp_num_layers: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.lora_targets, list):  # PEFT's target_modules is a list
            object.__setattr__(self, "lora_targets", tuple(self.lora_targets))
        plain_fields(self)  # NumPy scalars stored as Python's numbers
        if isinstance(self.moe_layer_freq, list):  # Megatron-LM's pattern is a list
            object.__setattr__(self, "moe_layer_freq", tuple(self.moe_layer_freq))
        optional = ("max_positions", "kv_heads", "ffn_hidden_size", "mtp_num_layers")
        for name in ("s", "b", "h", "a", "L", "vocab_size", "make_vocab_size_divisible_by",
                     *optional):
            value = getattr(self, name)
            if value is not None or name not in optional:
                object.__setattr__(self, name, positive_int(name, value))  # plain ints
        object.__setattr__(self, "kv_channels", kv_channels_or_default(self))  # h/a: None
        check_moe_values(self, MODEL_MOE_FIELDS)  # types and ranges first, then:
        refuse_without_experts(self, MODEL_MOE_FIELDS)
        if self.L > MAX_LAYERS:  # before anything walks the layers
            raise ValueError(f"L={self.L} layers: at most {MAX_LAYERS:,} (the model keeps a "
                             "pattern of L layers and the timeline walks them; published "
                             "models have at most a few hundred)")
        choice("norm", self.norm, NORMS)
        choice("positions", self.positions, POSITIONS)
        flag("bias", self.bias)
        flag("tied_embeddings", self.tied_embeddings)
        flag("apply_rope_fusion", self.apply_rope_fusion)
        instance("source", self.source, str, "'Touvron et al. 2023'")
        if self.positions == "learned" and (self.max_positions or self.s) < self.s:
            raise ValueError(f"max_positions={self.max_positions} must be at least s={self.s}: "
                             "a learned position table has one row per position")
        self.moe_pattern()
        self.layer(moe=False)
        if self.num_experts is not None:
            self.layer(moe=True)
            if self.bias:
                raise ValueError(f"num_experts={self.num_experts} with bias=True: the MoE "
                                 "layers are counted without biases (Megatron-LM's MoE "
                                 "models use none); pass bias=False")

    def __repr__(self) -> str:
        """The dataclass's repr, printed once (frozen, it cannot change):
        :func:`actmem.memo.kept_by_repr` prints the model at every call it
        keeps, a dozen times a ``training_memory``."""
        text = self.__dict__.get("_repr")
        if text is None:
            shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}"
                              for f in fields(self) if f.repr)
            text = self.__dict__["_repr"] = f"{type(self).__qualname__}({shown})"
        return text

    def moe_pattern(self) -> tuple[int, ...]:
        """1 for each MoE layer, 0 for each dense one, first layer first
        (Megatron-LM's ``gpt_layer_specs.py``: get_gpt_decoder_block_spec).

        Raises:
            TypeError, ValueError: ``moe_layer_freq`` is not a positive int or
                a tuple of L zeros and ones, or (checked after) is not 1
                without ``num_experts``.
        """
        freq = self.moe_layer_freq
        allowed = f"a positive int or a tuple of L={self.L} zeros (dense) and ones (MoE)"
        if isinstance(freq, tuple):
            if len(freq) != self.L or any(x not in (0, 1) or isinstance(x, bool) for x in freq):
                raise ValueError(f"moe_layer_freq={freq!r} must be {allowed}")
        elif integer("moe_layer_freq", freq, allowed) < 1:
            raise ValueError(f"moe_layer_freq={freq} must be {allowed}")
        if self.num_experts is None:
            refuse_without_experts(self, ("moe_layer_freq",), {"moe_layer_freq": 1})
            return (0,) * self.L
        if isinstance(freq, tuple):
            return freq
        return tuple(int(i % freq == 0) for i in range(self.L))

    def layer(self, t: int = 1, sequence_parallel: bool = False,
              recompute: str = "none", *, moe: bool | None = None,
              etp: int | None = None, **options) -> LayerConfig:
        """The layer on one GPU under tensor-parallel size ``t`` and the
        storage options of a run (validated by :class:`LayerConfig`): a
        dense layer (``moe=False``) or an MoE layer under expert
        tensor-parallel size ``etp`` (``moe=True``; etp default t).
        ``options``: the run's other :class:`LayerConfig` options, those
        the model does not fix
        (:data:`actmem.run.job.model_layer.RUN_LAYER_OPTIONS`).

        ``moe=None`` means the kind every layer has: MoE when all layers are
        MoE layers, dense when none is. A run's ``recompute_modules`` is
        given to each layer as far as it applies, and not without
        recomputation (:func:`actmem.layer.recompute_modules.for_layer`).

        Raises:
            ValueError: ``moe=None`` for a model that mixes dense and MoE
                layers (:func:`actmem.training_memory` asks for each kind);
                ``moe=True`` for a dense model; invalid values as
                :class:`LayerConfig`; an option the model fixes or
                :class:`LayerConfig` lacks.
        """
        return model_layer(self, t, sequence_parallel, recompute, moe, etp, **options)

    def padded_vocab(self, t: int = 1) -> int:
        """Megatron-LM's padded vocabulary: the smallest multiple of
        ``make_vocab_size_divisible_by * t`` not below ``vocab_size``
        (so each of the t ranks gets an equal slice)."""
        unit = self.make_vocab_size_divisible_by * positive_int("t", t)
        return -(-self.vocab_size // unit) * unit

    def with_(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    @classmethod
    def from_hf_config(cls, config, *, s: int, b: int, flash_attention: bool = True,
                       source: str | None = None) -> "ModelConfig":
        """The model of a Hugging Face ``config.json`` (a path or its dict),
        trained on micro-batches of ``b`` sequences of ``s`` tokens:
        :func:`actmem.run.job.hf_config.model_from_hf_config`, which says what
        each key becomes and which are refused."""
        from .hf_config import model_from_hf_config
        return model_from_hf_config(config, s=s, b=b, flash_attention=flash_attention,
                                    source=source)


ModelConfig.__init__ = lists_keywords(ModelConfig.__init__)  # unknown keywords list the fields

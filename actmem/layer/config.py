"""The settings of one Transformer layer and of how a training job stores it.

A :class:`LayerConfig` holds the paper's symbols (Korthikanti et al. 2022,
section 4.1) and the storage options of sections 4.2 and 5 and later practice.
Building one validates every value, so the ledger never sees a combination
that would give a silently wrong number.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields

from ..validate import choice, divides, flag, lists_keywords, plain_fields, positive_int
from .dimensions import ACTIVATIONS, default_ffn_hidden_size, split_dimensions
from .recompute_modules import check_recompute_modules

SP_AT_T1 = ("sequence_parallel=True does nothing at t=1: there is one rank, so nothing "
            "is split (Megatron-LM turns it off with a warning)")
"""The warning a layer with sequence parallelism at t=1 gives."""

RECOMPUTE = ("none", "selective", "full")
"""Activation recomputation modes: none, selective (core attention), full."""


@dataclass(frozen=True)
class LayerConfig:
    """One GPT layer on one GPU: shapes (paper symbols) and storage options.

    Attributes:
        s: sequence length, in tokens.
        b: micro-batch size, in sequences.
        h: hidden size.
        a: number of attention heads; must divide h.
        t: tensor-parallel size; must divide a and h (and kv_heads,
            ffn_hidden_size, and s under sequence parallelism).
        sequence_parallel: split the tensors that tensor parallelism
            replicates along the sequence across the t ranks (sec. 4.2.2).
        recompute: ``"none"``, ``"selective"`` (the core attention is
            recomputed in the backward pass, sec. 5) or ``"full"`` (only
            the layer input is kept).
        flash_attention: fused attention that never stores the s x s map.
        flash_output_copy: Transformer Engine's FlashAttention backend, which
            keeps the attention output twice (:mod:`actmem.layer.flash_copy`);
            needs ``flash_attention``.
        unfused_rope: Megatron-LM's unfused rotary embedding (``--no-rope-fusion``),
            which keeps cos and sin in every layer (:mod:`actmem.layer.rope`).
        kv_heads: key/value heads g for grouped-query attention; ``None``
            means g = a (ordinary multi-head attention), 1 is multi-query.
        ffn_hidden_size: MLP inner width f; ``None`` means the default of
            :func:`default_ffn_hidden_size`: 4h for GeLU, Megatron-LM's
            ``int(4h * 2/3 / 64) * 64`` for SwiGLU (3392 for h=1280).
        activation: ``"gelu"`` (paper), ``"swiglu"`` (fused, as Megatron-LM)
            or ``"squared_relu"`` (Megatron-LM's ``--squared-relu``).
        dropout: whether the layer applies dropout (paper: yes).
        num_experts: ``None`` (a dense MLP) or the routed experts of a
            mixture-of-experts MLP (Megatron-LM's ``--num-experts``); the
            MoE rows are those of :mod:`actmem.layer.moe`.
        moe_router_topk: k, experts each token is routed to
            (``--moe-router-topk``, Megatron's default 2); 1 <= k <= E.
        moe_ffn_hidden_size: each expert's inner width f_e
            (``--moe-ffn-hidden-size``); ``None`` means f, as Megatron-LM.
        moe_shared_expert_intermediate_size: the shared experts' total inner
            width (``--moe-shared-expert-intermediate-size``), or ``None``.
        etp: expert tensor-parallel size (``--expert-tensor-parallel-size``);
            ``None`` means t, Megatron-LM's default. Must divide f_e.
        moe_expert_capacity_factor: ``None`` (dropless, Megatron-LM's
            default) or c > 0: each expert takes at most
            ceil(N_r*k/E * c) copies from each rank of N_r tokens
            (``--moe-expert-capacity-factor``).
        moe_pad_expert_input_to_capacity: pad every expert's input to that
            capacity (``--moe-pad-expert-input-to-capacity``; needs c).
        moe_aux_loss_coeff: the load-balancing loss's weight
            (``--moe-aux-loss-coeff``, Megatron-LM's default 0: off); > 0
            keeps the router's softmax over all E experts (load-balancing
            type ``"aux_loss"``).
        recompute_modules: with ``recompute="selective"``, the modules
            recomputed by name (Megatron-LM's ``--recompute-modules``:
            ``core_attn``, ``layernorm``, ``mlp``, ``moe_act``, ``moe``,
            ``shared_experts``, ``mla_up_proj``); ``None`` means Megatron's
            default ``["core_attn"]``, the paper's selective recomputation.
            Kept as a tuple in that order (:mod:`actmem.layer.recompute_modules`).
        multi_latent_attention: DeepSeek's multi-latent attention
            (``--multi-latent-attention``) in place of the Q/K/V projections;
            its rows are those of :mod:`actmem.layer.mla`. Needs
            ``kv_heads=None``.
        q_lora_rank: r_q, the Q latent's width (``--q-lora-rank``); ``None``
            (Megatron-LM's default) projects Q from h without a latent.
        kv_lora_rank: r_kv, the KV latent's width (``--kv-lora-rank``,
            default 32).
        qk_head_dim, qk_pos_emb_head_dim, v_head_dim: per head, the Q/K
            columns without and with rotary embedding (d_qk, default 128;
            d_r, default 64, even) and the value's (d_v, default 128)
            (``--qk-head-dim``, ``--qk-pos-emb-head-dim``, ``--v-head-dim``).
            MLA options are refused without ``multi_latent_attention``.
        cp: context-parallel size (``--context-parallel-size``): each of cp
            ranks keeps s/cp tokens of every activation; cp > 1 needs
            ``flash_attention`` and s divisible by 2*cp
            (:mod:`actmem.layer.context_parallel`).
        cp_comm_type: how the core attention exchanges the sequence
            (``--cp-comm-type``): ``"p2p"`` (ring, default), ``"a2a"``
            (Ulysses: all-to-all over heads; a/t and g/t divisible by cp),
            ``"allgather"`` (K and V gathered) or ``"a2a+p2p"``.
        hierarchical_context_parallel_sizes: (a2a size, p2p size), product
            cp, for ``"a2a+p2p"`` only
            (``--hierarchical-context-parallel-sizes``).
        lora_rank: ``None`` (every weight trained) or r, the rank of LoRA
            adapters on a frozen layer (:mod:`actmem.layer.lora`).
        lora_targets: the adapted modules, by Megatron-Bridge's names
            (``linear_qkv``, ``linear_proj``, ``linear_fc1``, ``linear_fc2``;
            CanonicalLoRA's ``linear_q`` ... ``linear_fc1_up``) or PEFT's
            LLaMA names (``q_proj``, ``v_proj``, ...); a tuple.
        fp8: ``None`` or Megatron-LM's ``--fp8-format``, ``"e4m3"`` or
            ``"hybrid"``: Transformer Engine's FP8 linear layers
            (:mod:`actmem.layer.fp8`). fp8_recipe: Megatron-LM's
            ``--fp8-recipe``, ``"delayed"`` (its default) or
            ``"tensorwise"`` (TE's current scaling: the output projection
            keeps its 16-bit input, not an FP8 copy); only with ``fp8``.
        kv_channels: each attention head's width d (``--kv-channels``);
            ``None`` means h/a, Megatron-LM's default (h/a itself is stored
            as None: the same layer). Q, K, V and the output projection's
            input take it (:mod:`actmem.layer.head_dim`).
        qk_layernorm: norms on each head's query and key
            (``--qk-layernorm``), which keep their inputs.
        moe_token_dispatcher_type: how tokens reach the experts
            (``--moe-token-dispatcher-type``): ``"alltoall"`` (actmem's
            default), ``"allgather"`` (Megatron-LM's default) or ``"flex"``
            (DeepEP or HybridEP: ``moe_flex_dispatcher_backend``); they keep different
            permutation tensors (:mod:`actmem.layer.moe`).
        moe_router_load_balancing_type: ``"aux_loss"`` (default),
            ``"seq_aux_loss"``, ``"global_aux_loss"`` (each with
            ``moe_aux_loss_coeff`` > 0 keeps the softmax over all E),
            ``"sinkhorn"`` (keeps the scores of all E and the routing map)
            or ``"none"`` (``--moe-router-load-balancing-type``).
        moe_router_dtype: ``None`` (the activations' bf16), ``"fp32"`` or
            ``"fp64"`` (``--moe-router-dtype``): the routing probabilities'
            precision, which the dispatcher and the experts keep.
        moe_router_score_function, moe_router_pre_softmax,
        moe_router_num_groups, moe_router_group_topk,
        moe_router_enable_expert_bias: how the router scores and picks its
            experts (Megatron-LM's flags in snake_case: ``"softmax"`` or
            ``"sigmoid"``, the softmax before top-k, group-limited routing,
            the aux-loss-free bias), which decide what it keeps
            (:mod:`actmem.layer.router`).
        moe_permute_fusion: Transformer Engine's fused permutation
            (``--moe-permute-fusion``), which keeps int32 row maps instead
            of the unfused permutation's int64 indices (all-to-all
            dispatcher only, :func:`actmem.layer.moe.dispatch_rows`).
        moe_flex_dispatcher_backend: the flex dispatcher's library
            (``--moe-flex-dispatcher-backend``): ``"deepep"`` (default,
            :mod:`actmem.layer.moe_flex`) or ``"hybridep"``
            (:mod:`actmem.layer.moe_hybridep`).
        moe_rank_load: the routed copies this rank's experts receive as a
            multiple of the balanced expectation (1; a what-if of dropless
            routing, :func:`actmem.layer.moe_copies.hot_rank_load` gives it for a
            hot expert), at most E.
        ep: the expert-parallel size (``--expert-model-parallel-size``),
            dividing E: the layer's E/ep local experts. Balanced routing
            keeps a rank's expected rows whatever ep is; FP8 keeps one scale
            inverse per local expert's GEMM input (:mod:`actmem.layer.fp8`).

    Raises:
        TypeError: a size is not an ``int``, or a flag is not a ``bool``.
        ValueError: a size is < 1, a divisibility rule is broken, or a
            mode name is unknown. The message names the argument, its value
            and what is allowed.
    """

    s: int
    b: int
    h: int
    a: int
    t: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    flash_attention: bool = False
    kv_heads: int | None = None
    ffn_hidden_size: int | None = None
    activation: str = "gelu"
    dropout: bool = True
    num_experts: int | None = None
    moe_router_topk: int = 2
    moe_ffn_hidden_size: int | None = None
    moe_shared_expert_intermediate_size: int | None = None
    etp: int | None = None
    moe_expert_capacity_factor: int | float | None = None
    moe_pad_expert_input_to_capacity: bool = False
    moe_aux_loss_coeff: int | float = 0.0
    recompute_modules: tuple[str, ...] | None = None
    multi_latent_attention: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int = 32
    qk_head_dim: int = 128
    qk_pos_emb_head_dim: int = 64
    v_head_dim: int = 128
    cp: int = 1
    cp_comm_type: str = "p2p"
    hierarchical_context_parallel_sizes: tuple[int, int] | None = None
    lora_rank: int | None = None
    lora_targets: tuple[str, ...] = ()
    fp8: str | None = None
    kv_channels: int | None = None
    qk_layernorm: bool = False
    flash_output_copy: bool = False
    unfused_rope: bool = False
    moe_token_dispatcher_type: str = "alltoall"
    moe_router_load_balancing_type: str = "aux_loss"
    moe_router_dtype: str | None = None
    moe_rank_load: int | float = 1.0
    moe_router_score_function: str = "softmax"
    moe_router_pre_softmax: bool = False
    moe_router_num_groups: int | None = None
    moe_router_group_topk: int | None = None
    moe_router_enable_expert_bias: bool = False
    moe_permute_fusion: bool = False
    moe_flex_dispatcher_backend: str = "deepep"
    fp8_recipe: str = "delayed"
    ep: int = 1

    def __post_init__(self) -> None:
        plain_fields(self)  # NumPy scalars stored as Python's numbers
        for name in ("s", "b", "h", "a", "t", "kv_heads", "ffn_hidden_size"):
            value = getattr(self, name)
            if value is not None or name not in ("kv_heads", "ffn_hidden_size"):
                object.__setattr__(self, name, positive_int(name, value))  # plain ints
        split_dimensions(self.h, self.a)
        from .head_dim import kv_channels_or_default  # head_dim builds on the ledger
        object.__setattr__(self, "kv_channels", kv_channels_or_default(self))
        self._check_options()
        if self.sequence_parallel and self.t == 1:
            warnings.warn(SP_AT_T1, UserWarning, stacklevel=3)
        divides("t", self.t, **split_dimensions(
            self.h, self.a, self.s if self.sequence_parallel else None,
            self.kv_heads, self.ffn_hidden_size, self.activation))
        from .moe_options import check_moe  # after LayerConfig: it reads its defaults
        check_moe(self)
        object.__setattr__(self, "recompute_modules", check_recompute_modules(self))
        from .mla import check_mla  # mla builds on the ledger, which imports this module
        check_mla(self)
        if isinstance(self.hierarchical_context_parallel_sizes, list):  # Megatron's is a list
            object.__setattr__(self, "hierarchical_context_parallel_sizes",
                               tuple(self.hierarchical_context_parallel_sizes))
        from .context_parallel import check_context_parallel  # builds on the ledger
        check_context_parallel(self)
        from .lora import check_lora  # lora and fp8 build on the ledger
        object.__setattr__(self, "lora_targets", check_lora(self))
        from .fp8 import check_fp8
        object.__setattr__(self, "fp8", check_fp8(self))
        from .head_dim import check_head_options  # head_dim builds on the ledger
        check_head_options(self)
        from .flash_copy import check_flash_output_copy  # flash_copy builds on the ledger
        check_flash_output_copy(self)
        from .rope import check_unfused_rope  # rope builds on the ledger
        check_unfused_rope(self)

    def _check_options(self) -> None:
        flag("sequence_parallel", self.sequence_parallel)
        flag("flash_attention", self.flash_attention)
        flag("dropout", self.dropout)
        choice("recompute", self.recompute, RECOMPUTE)
        choice("activation", self.activation, ACTIVATIONS)
        if self.kv_heads is not None:
            positive_int("kv_heads", self.kv_heads)
            divides("kv_heads", self.kv_heads, a=self.a)
        if self.ffn_hidden_size is not None:
            positive_int("ffn_hidden_size", self.ffn_hidden_size)

    @property
    def g(self) -> int:
        """Key/value heads actually used (a when ``kv_heads`` is None)."""
        return self.a if self.kv_heads is None else self.kv_heads

    @property
    def f(self) -> int:
        """MLP inner width actually used (:func:`default_ffn_hidden_size`
        when ``ffn_hidden_size`` is None)."""
        if self.ffn_hidden_size is None:
            return default_ffn_hidden_size(self.h, self.activation)
        return self.ffn_hidden_size

    @property
    def f_e(self) -> int:
        """Each routed expert's inner width (``moe_ffn_hidden_size``, or f)."""
        return self.moe_ffn_hidden_size or self.f

    @property
    def expert_t(self) -> int:
        """Expert tensor-parallel size actually used (``etp``, or t)."""
        return self.t if self.etp is None else self.etp


STORAGE_OPTIONS = tuple(f.name for f in fields(LayerConfig))[5:]
"""The keyword options of a layer beyond s, b, h, a, t (sequence_parallel,
recompute, flash_attention, kv_heads, ffn_hidden_size, activation,
dropout, and the MoE options num_experts, moe_router_topk,
moe_ffn_hidden_size, moe_shared_expert_intermediate_size, etp,
moe_expert_capacity_factor, moe_pad_expert_input_to_capacity,
moe_aux_loss_coeff, and options appended after them, such as recompute_modules)."""

LayerConfig.__init__ = lists_keywords(LayerConfig.__init__)  # unknown keywords list the fields

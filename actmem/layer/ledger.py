"""The ledger: every tensor one GPT layer saves for its backward pass.

Korthikanti et al. 2022, section 4.1, count activation memory tensor by
tensor; the paper's three terms 10sbh, 24sbh/t and 5as^2b/t are sums over
those tensors. This module writes the tensors down as rows, so the
coefficients are derived rather than typed in, and every storage option
(sequence parallelism, recomputation, FlashAttention, no dropout) is a
change to rows rather than a second formula.

The paper's conventions (section 4.1): 16-bit activations (2 bytes per
element), dropout masks 1 byte per element, the attention map stored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .config import LayerConfig
from ..validate import instance, lists_keywords

GROUPS = ("fixed", "intermediate", "attention_map")
"""The paper's three terms: replicated tensors, split activations, s x s maps."""

REPLICATED = "replicated"
"""Every tensor-parallel rank keeps the whole tensor."""
SEQUENCE_SPLIT = "sequence-split"
"""Each rank keeps s/t positions of the sequence (sequence parallelism)."""
HIDDEN_SPLIT = "hidden-split"
"""Each rank keeps a 1/t slice of the hidden (or MLP inner) dimension."""
HEAD_SPLIT = "head-split"
"""Each rank keeps a/t attention heads (g/t key/value heads), each whole."""
EXPERT_ROUTED = "expert-routed"
"""A mixture-of-experts layer's routed copies: each rank keeps the copies
its local experts receive (:mod:`actmem.layer.moe`)."""

PLACEMENTS = (REPLICATED, SEQUENCE_SPLIT, HIDDEN_SPLIT, HEAD_SPLIT, EXPERT_ROUTED)

FLASH_OUTPUT = "flash_output"
"""The row key of flash-attn's own output beside Transformer Engine's copy
(:mod:`actmem.layer.flash_copy`): part of the core attention."""


@dataclass(frozen=True)
class LedgerRow:
    """One tensor saved for the backward pass.

    Attributes:
        key: short stable identifier, e.g. ``"softmax_output"``.
        name: what the tensor is, in words.
        block: ``"LayerNorm"``, ``"attention"`` or ``"MLP"``.
        shape: logical (global) shape in the paper's symbols,
            e.g. ``("b", "a", "s", "s")``.
        elements: number of elements of the global tensor.
        bytes_per_element: 2 for 16-bit activations, 1 for dropout masks,
            4 for fp32 statistics.
        placement: one of :data:`PLACEMENTS`.
        ranks: how many ranks share the tensor (1 if replicated, else t).
        group: one of :data:`GROUPS` (the paper's three terms).
        source: where the paper (or the option's documentation) counts it.
        needed_for: which backward computation reads it (:data:`NEEDED_FOR`).
    """

    key: str
    name: str
    block: str
    shape: tuple[str, ...]
    elements: int
    bytes_per_element: int
    placement: str
    ranks: int
    group: str
    source: str
    needed_for: str

    @property
    def global_bytes(self) -> int:
        """Bytes of the whole (unsplit) tensor."""
        return self.elements * self.bytes_per_element

    @property
    def bytes(self) -> int:
        """Bytes this tensor occupies on one GPU (exact).

        Raises:
            ValueError: the tensor does not split evenly over its ranks
                (cannot happen for rows built from a valid LayerConfig).
        """
        share, remainder = divmod(self.global_bytes, self.ranks)
        if remainder:
            raise ValueError(f"{self.key}: {self.global_bytes} bytes do not split "
                             f"evenly over {self.ranks} ranks")
        return share


@lists_keywords
def ledger_rows(config: LayerConfig) -> tuple[LedgerRow, ...]:
    """Rows saved for backward by one layer, one micro-batch, on one GPU.

    Starts from the paper's layer (section 4.1, with the shapes that
    ``kv_heads``, ``ffn_hidden_size`` and ``activation`` give), replaces
    the MLP by a mixture of experts when ``num_experts`` is set
    (:func:`actmem.layer.moe.with_moe`) and applies each storage option of
    ``config`` as a change to rows.

    Raises:
        TypeError: ``config`` is not a :class:`LayerConfig` (build one to
            validate the input).
    """
    instance("config", config, LayerConfig, "actmem.LayerConfig(2048, 1, 4096, 32)")
    if config.cp > 1:  # each rank's s/cp tokens (actmem.layer.context_parallel)
        from .context_parallel import with_context_parallel
        return with_context_parallel(config)
    from .head_dim import with_head_dim  # kv_channels, qk_layernorm: head width d
    rows = with_head_dim(attention_rows(config), config) + mlp_rows(config)
    if config.num_experts is not None:
        from .moe import with_moe  # moe builds on this module's rows
        rows = with_moe(rows, config)
    if config.multi_latent_attention:
        from .mla import with_mla  # mla builds on this module's rows
        rows = with_mla(rows, config)
    if not config.dropout:
        rows = without_dropout(rows)
    if config.flash_attention:
        from .flash_copy import with_flash_output_copy  # Transformer Engine's flash backend
        rows = with_flash_output_copy(with_flash_attention(rows, config), config)
    if config.recompute == "selective":  # named modules, default core_attn (sec. 5)
        from .recompute_modules import with_recompute_modules
        rows = with_recompute_modules(rows, config)
    if config.recompute == "full":
        rows = with_full_recompute(config)
    if config.sequence_parallel:
        from .mla import with_gathered_rotary_key  # whole under SP
        rows = with_gathered_rotary_key(with_sequence_parallel(rows, config), config)
    from .lora import with_adapters_and_fp8  # LoRA's frozen weights, FP8 (Transformer Engine)
    from .rope import with_unfused_rope  # Megatron-LM's unfused rotary embedding
    return with_unfused_rope(with_adapters_and_fp8(rows, config), config)


NEEDED_FOR = {
    "attn_norm_input": "LayerNorm backward: the input is normalized again to get "
                       "the gradients of the input, scale and shift",
    "qkv_input": "weight gradient of the Q, K, V projections: dW = X^T dY",
    "query": "gradient of K: the scores are S = Q K^T, so dK = dS^T Q",
    "key": "gradient of Q: dQ = dS K",
    "value": "gradient of the attention probabilities: dP = dO V^T",
    "softmax_output": "softmax backward: dS = P * (dP - rowsum(dP * P)) needs P",
    "attn_dropout_mask": "dropout backward: the gradient is multiplied by the same mask",
    "attn_dropout_output": "gradient of V: dV = P_dropped^T dO (the matmul's other input)",
    "proj_input": "weight gradient of the output projection: dW = X^T dY",
    "attn_out_dropout_mask": "dropout backward: the gradient is multiplied by the same mask",
    "mlp_norm_input": "LayerNorm backward: the input is normalized again to get "
                      "the gradients of the input, scale and shift",
    "fc1_input": "weight gradient of the MLP's first linear: dW = X^T dY",
    "gelu_input": "GeLU backward: dX = dY * GeLU'(X) needs X",
    "relu_output": "squared ReLU backward: pow's dR = dY * 2R and relu's mask (R > 0) need "
                   "R = relu(X)",
    "swiglu_gate": "SwiGLU backward: d(up) = dY * silu(gate) and "
                   "d(gate) = dY * up * silu'(gate) need the gate",
    "swiglu_up": "SwiGLU backward: d(gate) = dY * up * silu'(gate) needs up",
    "fc2_input": "weight gradient of the MLP's second linear: dW = X^T dY",
    "mlp_out_dropout_mask": "dropout backward: the gradient is multiplied by the same mask",
    "softmax_lse": "FlashAttention backward: rebuilds P = exp(S - lse) tile by tile "
                   "from Q and K",
    "layer_input": "full recomputation: the layer's forward pass is run again from it "
                   "during the backward pass",
}
"""Why each row is kept: the backward computation that reads it (the
gradient of a product needs the other factor; a linear layer's weight
gradient needs its input; an elementwise function needs its input or
output). Keyed by :attr:`LedgerRow.key`."""


def _row(c, key, name, block, shape, elements, bpe, placement, group, source):
    ranks = 1 if placement == REPLICATED else c.t
    return LedgerRow(key, name, block, shape, elements, bpe, placement, ranks,
                     group, source, NEEDED_FOR[key])


def attention_rows(c: LayerConfig) -> tuple[LedgerRow, ...]:
    """Self-attention block, paper section 4.1 ("Attention block")."""
    sbh, map_ = c.s * c.b * c.h, c.b * c.a * c.s * c.s
    kv_shape = ("s", "b", "h") if c.g == c.a else ("s", "b", "h*g/a")
    kv = sbh * c.g // c.a
    src, smap = "Sec. 4.1, attention block", ("b", "a", "s", "s")
    return (
        _row(c, "attn_norm_input", "input of the first LayerNorm", "LayerNorm",
             ("s", "b", "h"), sbh, 2, REPLICATED, "fixed", "Sec. 4.1, LayerNorm"),
        _row(c, "qkv_input", "input of the QKV projection", "attention",
             ("s", "b", "h"), sbh, 2, REPLICATED, "fixed", src),
        _row(c, "query", "Q (query)", "attention", ("s", "b", "h"), sbh, 2,
             HEAD_SPLIT, "intermediate", src),
        _row(c, "key", "K (key)", "attention", kv_shape, kv, 2, HEAD_SPLIT,
             "intermediate", src),
        _row(c, "value", "V (value)", "attention", kv_shape, kv, 2, HEAD_SPLIT,
             "intermediate", src),
        _row(c, "softmax_output", "softmax output (attention probabilities)",
             "attention", smap, map_, 2, HEAD_SPLIT, "attention_map", src),
        _row(c, "attn_dropout_mask", "attention-dropout mask", "attention",
             smap, map_, 1, HEAD_SPLIT, "attention_map", src),
        _row(c, "attn_dropout_output", "attention-dropout output (multiplies V)",
             "attention", smap, map_, 2, HEAD_SPLIT, "attention_map", src),
        _row(c, "proj_input", "input of the output projection", "attention",
             ("s", "b", "h"), sbh, 2, HEAD_SPLIT, "intermediate", src),
        _row(c, "attn_out_dropout_mask", "dropout mask after the attention block",
             "attention", ("s", "b", "h"), sbh, 1, REPLICATED, "fixed", src),
    )


def mlp_rows(c: LayerConfig) -> tuple[LedgerRow, ...]:
    """MLP block, paper section 4.1 ("MLP"), for GeLU, fused SwiGLU or
    squared ReLU.

    GeLU keeps its input and the second linear's input (2 x 2sbf bytes).
    Squared ReLU (Megatron-LM's ``torch.pow(F.relu(x), 2)``, unfused:
    ``--squared-relu`` needs ``--no-bias-gelu-fusion``) keeps the ReLU's
    output, which ``relu``'s backward (from its result) and ``pow``'s (from
    its input) both read, and the second linear's input: 2 x 2sbf bytes too.
    Fused SwiGLU (Megatron-LM's ``bias_swiglu``) keeps the gate and up
    projections' outputs and the second linear's input (3 x 2sbf bytes);
    an unfused eager implementation also keeps ``silu(gate)``, 2sbf bytes.
    """
    sbh, sbf = c.s * c.b * c.h, c.s * c.b * c.f
    f_shape = ("s", "b", "4h") if c.f == 4 * c.h else ("s", "b", "f")
    src = "Sec. 4.1, MLP block"
    if c.activation == "gelu":
        inner = (
            _row(c, "gelu_input", "GeLU input (first linear's output)", "MLP",
                 f_shape, sbf, 2, HIDDEN_SPLIT, "intermediate", src),
        )
    elif c.activation == "squared_relu":
        inner = (
            _row(c, "relu_output", "ReLU output (squared ReLU's input to pow)", "MLP",
                 f_shape, sbf, 2, HIDDEN_SPLIT, "intermediate",
                 "squared ReLU as Megatron-LM runs it (not in the paper)"),
        )
    else:
        src_glu = "SwiGLU as fused in Megatron-LM (not in the paper)"
        inner = (
            _row(c, "swiglu_gate", "SwiGLU gate projection output", "MLP",
                 f_shape, sbf, 2, HIDDEN_SPLIT, "intermediate", src_glu),
            _row(c, "swiglu_up", "SwiGLU up projection output", "MLP",
                 f_shape, sbf, 2, HIDDEN_SPLIT, "intermediate", src_glu),
        )
    return (
        _row(c, "mlp_norm_input", "input of the second LayerNorm", "LayerNorm",
             ("s", "b", "h"), sbh, 2, REPLICATED, "fixed", "Sec. 4.1, LayerNorm"),
        _row(c, "fc1_input", "input of the MLP's first linear", "MLP",
             ("s", "b", "h"), sbh, 2, REPLICATED, "fixed", src),
        *inner,
        _row(c, "fc2_input", "input of the MLP's second linear", "MLP",
             f_shape, sbf, 2, HIDDEN_SPLIT, "intermediate", src),
        _row(c, "mlp_out_dropout_mask", "dropout mask after the MLP block",
             "MLP", ("s", "b", "h"), sbh, 1, REPLICATED, "fixed", src),
    )


DROPOUT_ROWS = ("attn_dropout_mask", "attn_dropout_output",
                "attn_out_dropout_mask", "mlp_out_dropout_mask")
"""Rows that exist only because the layer applies dropout."""


def without_dropout(rows):
    """No dropout: drop the three masks and the attention-dropout output.

    The softmax output then feeds the matmul with V directly and is kept once.
    """
    return tuple(r for r in rows if r.key not in DROPOUT_ROWS)


def with_flash_attention(rows, c: LayerConfig):
    """FlashAttention: no s x s tensor is stored.

    Removes the softmax output, the attention-dropout mask and output (the
    mask is regenerated from the random seed); adds the softmax
    log-sum-exp statistics, fp32 of shape (b, a, s). Q, K, V and the output
    (the output projection's input) are already rows.
    """
    kept = tuple(r for r in rows if r.group != "attention_map")
    lse = _row(c, "softmax_lse", "softmax log-sum-exp (fp32)", "attention",
               ("b", "a", "s"), c.b * c.a * c.s, 4, HEAD_SPLIT, "attention_map",
               "FlashAttention (Dao et al. 2022), backward statistics")
    index = next(i for i, r in enumerate(kept) if r.key == "proj_input")
    return kept[:index] + (lse,) + kept[index:]


def with_selective_recompute(rows):
    """Selective recomputation (sec. 5): the core attention is recomputed.

    Every attention-map row (softmax, dropout mask and output, or the
    FlashAttention statistics) is dropped, and flash-attn's own output
    (:data:`FLASH_OUTPUT`); Q, K, V stay as the inputs of the recomputed
    region.
    """
    return tuple(r for r in rows if r.group != "attention_map" and r.key != FLASH_OUTPUT)


def with_full_recompute(c: LayerConfig):
    """Full recomputation (sec. 5, Table 2): only the layer input, 2sbh."""
    return (
        _row(c, "layer_input", "layer input (checkpoint for recomputation)",
             "LayerNorm", ("s", "b", "h"), c.s * c.b * c.h, 2, REPLICATED,
             "fixed", "Sec. 5, full recomputation"),
    )


def with_sequence_parallel(rows, c: LayerConfig):
    """Sequence parallelism (sec. 4.2.2): replicated rows split along s."""
    return tuple(
        replace(r, placement=SEQUENCE_SPLIT, ranks=c.t)
        if r.placement == REPLICATED else r
        for r in rows
    )

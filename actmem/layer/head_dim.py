"""Attention heads wider or narrower than h/a, and norms on the queries and keys.

Two of Megatron-LM's options (``megatron/training/arguments.py``), as
:class:`actmem.LayerConfig` fields:

* ``kv_channels`` (``--kv-channels``): each head's width d (``d_h`` in the
  rows' shapes), by default h/a
  (``transformer_config.py``: TransformerConfig.__post_init__ sets
  ``kv_channels = hidden_size // num_attention_heads`` when it is None).
  The QKV projection makes a*d query and g*d key and value columns and the
  output projection takes a*d inputs (``transformer/attention.py``:
  SelfAttention, ``query_projection_size = kv_channels * num_attention_heads``),
  so the rows Q, K, V and the output projection's input are s*b*a*d,
  s*b*g*d, s*b*g*d and s*b*a*d elements (Qwen3: d = 128 with h/a = 64). The
  attention map (b*a*s*s) and FlashAttention's log-sum-exp (b*a*s) do not
  depend on d.
* ``qk_layernorm`` (``--qk-layernorm``): ``SelfAttention.get_query_key_value_tensors``
  normalises each head's query and key (``q_layernorm``, ``k_layernorm``,
  TENorm over the last dimension d) before the rotary embedding; each
  norm's backward reads its input, rows ``q_norm_input`` (s*b*a*d) and
  ``k_norm_input`` (s*b*g*d), head-split as Q and K. As for the layer's
  other norms (the paper's sec. 4.1 convention) the per-row fp32 statistics
  are left out. Their weights are d each (RMSNorm; 2d with LayerNorm's
  bias), whole on every tensor-parallel rank.

:func:`with_head_dim` is the row transformation; it returns the rows
unchanged when neither option is set.
"""

from __future__ import annotations

from dataclasses import replace

from ..validate import flag, positive_int
from .ledger import HEAD_SPLIT, LedgerRow

HEAD_OPTIONS = ("kv_channels", "qk_layernorm")
"""The :class:`actmem.LayerConfig` (and :class:`actmem.ModelConfig`) fields of this module."""

_ATTN = "megatron/core/transformer/attention.py: SelfAttention.get_query_key_value_tensors"
SOURCES = {"q_norm_input": _ATTN + " (query = self.q_layernorm(query))",
           "k_norm_input": _ATTN + " (key = self.k_layernorm(key))"}
"""Where Megatron-LM makes each row."""
NEEDED_FOR = {
    "q_norm_input": "query norm backward: the input is normalized again to get the "
                    "gradients of the input and the scale",
    "k_norm_input": "key norm backward: the input is normalized again to get the "
                    "gradients of the input and the scale",
}
"""Why each row is kept, keyed by :attr:`LedgerRow.key`."""


def head_dim(c) -> int:
    """d, each attention head's width: ``kv_channels``, or h/a."""
    return c.h // c.a if c.kv_channels is None else c.kv_channels


def kv_channels_or_default(c) -> int | None:
    """``c.kv_channels`` checked, or None where it is h/a: that is the
    default width (Megatron-LM's TransformerConfig sets ``kv_channels =
    hidden_size // num_attention_heads`` when it is None), so h/a gives the
    rows, parameters and checks of None.

    Raises:
        TypeError, ValueError: kv_channels not None nor a positive int.
    """
    if c.kv_channels is None:
        return None
    d = positive_int("kv_channels", c.kv_channels)
    return None if d * c.a == c.h else d


def check_head_options(c) -> None:
    """Refuse ``kv_channels`` / ``qk_layernorm`` values the rows cannot take.

    Raises:
        TypeError, ValueError: kv_channels not a positive int, qk_layernorm
            not a bool; either (kv_channels other than h/a) with multi-latent
            attention (its head widths are qk_head_dim and v_head_dim) or
            with cp > 1 (not modelled).
    """
    flag("qk_layernorm", c.qk_layernorm)
    if kv_channels_or_default(c) is None and not c.qk_layernorm:
        return
    given = (f"kv_channels={c.kv_channels} (not h/a={c.h // c.a})"
             if kv_channels_or_default(c) is not None else "qk_layernorm=True")
    if getattr(c, "multi_latent_attention", False):
        raise ValueError(f"{given} with multi_latent_attention=True: multi-latent attention "
                         "sets its head widths with qk_head_dim and v_head_dim")
    if getattr(c, "cp", 1) > 1:
        raise ValueError(f"{given} with cp={c.cp}: context parallelism's rows are modelled "
                         "for heads of width h/a without query/key norms; use cp=1")


def with_head_dim(rows, c):
    """Q, K, V and the output projection's input at head width d, and the
    query/key norms' inputs after V (module docstring)."""
    if c.kv_channels is None and not c.qk_layernorm:
        return rows
    d, sb = head_dim(c), c.s * c.b
    sizes = {"query": ("a", c.a), "key": ("g", c.g), "value": ("g", c.g),
             "proj_input": ("a", c.a)}
    out = []
    for r in rows:
        if r.key in sizes and c.kv_channels is not None:
            heads, n = sizes[r.key]
            r = replace(r, shape=("s", "b", f"{heads}*d_h"), elements=sb * n * d)
        out.append(r)
        if r.key == "value" and c.qk_layernorm:
            out += [_norm_row(c, "q_norm_input", "input of the query norm", "a", c.a * d),
                    _norm_row(c, "k_norm_input", "input of the key norm", "g", c.g * d)]
    return tuple(out)


def _norm_row(c, key, name, heads, width):
    return LedgerRow(key, name, "attention", ("s", "b", heads, "d_h"), c.s * c.b * width, 2,
                     HEAD_SPLIT, c.t, "intermediate", SOURCES[key], NEEDED_FOR[key])


def attention_parameters(h: int, a: int, g: int, d: int, bias: bool, qk_norm: int
                         ) -> tuple[int, int]:
    """(split over t, whole on every rank) parameters of one attention block's
    projections at head width d: Q (h x a*d), K and V (h x g*d each), the
    output projection (a*d x h) and the column-parallel biases when ``bias``
    (split); the row-parallel bias h and ``qk_norm`` weights per norm, two
    norms (whole; 0 without qk_layernorm). The layer's own norm is not
    included."""
    qkv = a * d + 2 * g * d
    return h * qkv + bias * qkv + a * d * h, bias * h + 2 * qk_norm

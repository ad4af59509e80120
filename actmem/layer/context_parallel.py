"""Context parallelism: what one layer keeps per rank when cp ranks share a sequence.

Megatron-LM's ``--context-parallel-size`` (``cp``) gives each of cp ranks
2 of the sequence's 2*cp chunks, chunks r and 2cp-1-r, so that the causal
attention's work is balanced (``megatron/core/utils.py``:
get_batch_on_this_cp_rank, _get_batch_on_this_cp_rank_per_sequence_balancing);
``megatron/training/arguments.py`` asserts
``seq_length % (2 * context_parallel_size) == 0``. Every layer then runs on
s/cp tokens per rank; only the core attention talks to the other ranks,
inside Transformer Engine (``megatron/core/extensions/transformer_engine.py``:
TEDotProductAttention passes ``cp_group``, ``cp_global_ranks``, ``cp_stream``
and ``cp_comm_type``; ``transformer_engine/pytorch/attention/
dot_product_attention/context_parallel.py``). What each ``cp_comm_type``
saves for backward (``ctx.save_for_backward`` there, bf16 without FP8):

* ``"p2p"`` (AttnFuncWithCPAndKVP2P, the ring): the local Q, the K/V buffer
  of the last ring step (one rank's K and V, concatenated: the bytes of
  the local K and V), the output (the same storage the output projection
  saves) and the merged fp32 softmax log-sum-exp of the local queries. Every
  row is the layer's at s/cp tokens.
* ``"allgather"`` (AttnFuncWithCPAndKVAllGather): the local Q, K, V, the
  output and two per-step log-sum-exps of half the local queries each: the
  same bytes as p2p. The gathered K and V (the whole sequence) live only
  inside the forward and again inside the backward.
* ``"a2a"`` (AttnFuncWithCPAndQKVOA2A, DeepSpeed-Ulysses): Q, K, V after
  the all-to-all (the whole s, a/(t*cp) heads: the same bytes as s/cp
  tokens of a/t heads), the log-sum-exp likewise, and the attention output
  *before* the all-to-all back (``out_part``), a storage of its own beside
  the output the projection saves: one row more, 2sbh/(t*cp) bytes
  (:data:`A2A_OUTPUT`).
* ``"a2a+p2p"`` (AttnFuncWithCPAndKVP2P with a list of two groups,
  ``--hierarchical-context-parallel-sizes``): all-to-all inside the first
  group, the ring over the second; it saves the pre-all-to-all output
  (``out_part``) like a2a: the same rows as a2a.

Which attention can run it: Transformer Engine's FlashAttention or cuDNN
fused attention; its UnfusedDotProductAttention does not support context
parallelism (``dot_product_attention/utils.py``: get_attention_backend),
and Megatron-LM's own DotProductAttention asserts ``context_parallel_size
== 1``, so cp > 1 needs ``flash_attention=True``.

Not rows: the transient exchange buffers inside the attention (p2p's
forward keeps all cp ring buffers of K and V in ``p2p_comm_buffers`` until
it returns; its backward double-buffers K/V and dK/dV; allgather gathers
the whole sequence's K and V in forward and again in backward; a2a's
all-to-all copies) are not alive between the passes: the timeline counts
them inside each layer's attention (:mod:`actmem.run.moments.cp_timeline`). Not
counted (left): the rng states and cu_seqlens of each ring step (a few
bytes per step).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

from ..memo import kept_by_repr, warns_at_t1
from ..validate import choice, common_divisors, divides, positive_int
from .ledger import FLASH_OUTPUT, HEAD_SPLIT, LedgerRow
from .recompute_modules import modules_of

CP_COMM_TYPES = ("p2p", "a2a", "allgather", "a2a+p2p")
"""``--cp-comm-type`` values (Megatron-LM passes them to Transformer Engine)."""

A2A_OUTPUT = "attn_output_a2a"
"""The row key of the a2a attention output kept before the all-to-all back."""

_TE = "transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py: "
SOURCES = {
    "p2p": _TE + "AttnFuncWithCPAndKVP2P.forward (saves q, the last ring step's kv, out, "
                 "softmax_lse)",
    "allgather": _TE + "AttnFuncWithCPAndKVAllGather.forward (saves q, k, v, out, "
                       "softmax_lse_per_step)",
    "a2a": _TE + "AttnFuncWithCPAndQKVOA2A.forward (saves q, k, v after the all-to-all, "
                 "out_part, softmax_lse)",
    "a2a+p2p": _TE + "AttnFuncWithCPAndKVP2P.forward with cp_size_a2a > 1 (saves q, kv after "
                     "the all-to-all, out_part before the all-to-all back, softmax_lse)",
}
"""Where Transformer Engine saves the core attention's tensors, per comm type."""

TOKENS = ("megatron/core/utils.py: get_batch_on_this_cp_rank: s/cp tokens per "
          "context-parallel rank")
"""Why every other row holds s/cp tokens."""

ATTENTION_ROWS = ("query", "key", "value", "softmax_lse", FLASH_OUTPUT)
"""Rows the context-parallel attention function itself saves."""


def check_context_parallel(c) -> None:
    """Refuse a context-parallel layer Megatron-LM or Transformer Engine would
    refuse, or the ledger cannot count (``c`` a :class:`actmem.LayerConfig`).

    Raises:
        TypeError: cp not a positive int; hierarchical sizes not ints.
        ValueError: an unknown ``cp_comm_type``; cp > 1 without
            ``flash_attention`` (no unfused attention runs context
            parallelism); s not divisible by 2*cp (Megatron-LM's
            ``arguments.py``); under sequence parallelism s/cp not divisible
            by t; a2a with a/t or g/t heads not divisible by cp (TE's assert
            in AttnFuncWithCPAndQKVOA2A.forward), a2a+p2p likewise by its
            a2a size; ``hierarchical_context_parallel_sizes`` missing for
            a2a+p2p (Megatron-LM asserts it), given for another comm type,
            or not two sizes whose product is cp.
    """
    cp = positive_int("cp", c.cp)
    kind = choice("cp_comm_type", c.cp_comm_type, CP_COMM_TYPES)
    a2a = _a2a_size(c, cp, kind)
    if cp == 1:
        return
    if not c.flash_attention:
        raise ValueError(f"cp={cp} needs flash_attention=True: Transformer Engine runs "
                         "context parallelism only in FlashAttention or fused attention "
                         "(its unfused attention and Megatron-LM's DotProductAttention "
                         "refuse cp > 1)")
    if c.s % (2 * cp):
        raise ValueError(f"s={c.s} must be divisible by 2*cp={2 * cp} (cp={cp}): Megatron-LM "
                         "splits the sequence into 2*cp chunks to balance causal attention "
                         "(arguments.py: seq_length % (2 * context_parallel_size) == 0)")
    if c.sequence_parallel and (c.s // cp) % c.t:
        raise ValueError(f"s/cp={c.s // cp} (s={c.s}, cp={cp}) must be divisible by t={c.t} "
                         "under sequence parallelism: each rank's s/cp tokens split t ways")
    if a2a > 1:
        name = "cp" if kind == "a2a" else "hierarchical_context_parallel_sizes[0]"
        divides(name, a2a, **{"a/t": c.a // c.t, "kv_heads/t": c.g // c.t})


def valid_context_parallel_sizes(s: int, a: int, t: int = 1, *, kv_heads: int | None = None,
                                 sequence_parallel: bool = False, cp_comm_type: str = "p2p"
                                 ) -> list[int]:
    """Values of cp that :class:`actmem.LayerConfig` accepts with
    ``flash_attention=True``, ascending (choices for widgets): 2*cp divides
    s, s/cp is divisible by t under sequence parallelism, and for
    ``"a2a"`` cp divides a/t and kv_heads/t. ``"a2a+p2p"`` takes the same
    cp as p2p (its a2a size is checked separately).

    >>> valid_context_parallel_sizes(8192, 32, 8, kv_heads=8, sequence_parallel=True)[-3:]
    [256, 512, 1024]
    >>> valid_context_parallel_sizes(8192, 32, 1, kv_heads=8, cp_comm_type="a2a")
    [1, 2, 4, 8]

    Raises:
        TypeError, ValueError: a size is not a positive integer, or
            ``cp_comm_type`` is unknown; s/2 cannot be factored quickly
            (:func:`actmem.common_divisors`).
    """
    s, a, t = (positive_int(n, v) for n, v in (("s", s), ("a", a), ("t", t)))
    g = a if kv_heads is None else positive_int("kv_heads", kv_heads)
    choice("cp_comm_type", cp_comm_type, CP_COMM_TYPES)
    halves = common_divisors(**{"s/2": s // 2}) if s % 2 == 0 else [1]  # 2*cp divides s
    return [cp for cp in halves
            if cp == 1 or (not (sequence_parallel and (s // cp) % t)
                           and not (cp_comm_type == "a2a" and ((a // t) % cp or (g // t) % cp)))]


def _a2a_size(c, cp: int, kind: str) -> int:
    """The all-to-all group's size: cp (a2a), the first hierarchical size
    (a2a+p2p) or 1 (p2p, allgather)."""
    sizes = c.hierarchical_context_parallel_sizes
    if kind != "a2a+p2p":
        if sizes is not None:
            raise ValueError(f"hierarchical_context_parallel_sizes={sizes!r} is for "
                             f"cp_comm_type='a2a+p2p' (got {kind!r}); leave it None")
        return cp if kind == "a2a" else 1
    if sizes is None:
        raise ValueError("cp_comm_type='a2a+p2p' needs hierarchical_context_parallel_sizes="
                         "(a2a size, p2p size), whose product is cp (Megatron-LM's "
                         "--hierarchical-context-parallel-sizes)")
    if not isinstance(sizes, tuple) or len(sizes) != 2:
        raise ValueError(f"hierarchical_context_parallel_sizes must be a tuple of two sizes "
                         f"(a2a, p2p), got {sizes!r}")
    a2a, p2p = (positive_int("hierarchical_context_parallel_sizes", n) for n in sizes)
    if a2a * p2p != cp:
        raise ValueError(f"hierarchical_context_parallel_sizes={sizes!r} must multiply to "
                         f"cp={cp}")
    return a2a


@kept_by_repr(256)  # c is frozen: its rows do not change
def with_context_parallel(c) -> tuple[LedgerRow, ...]:
    """The rows of layer ``c`` (cp > 1) on one context-parallel rank.

    Each row is the row of the same layer on s/cp tokens (every option,
    MoE routing and its capacity included, applied to the rank's own
    tokens), written as the global tensor (``elements`` of all s tokens)
    shared by t*cp ranks (``ranks``), so its :attr:`LedgerRow.bytes` are
    the rank's. The core attention's rows cite what Transformer Engine
    saves (:data:`SOURCES`); a2a and a2a+p2p add :func:`a2a_output_row`
    (before ``proj_input``) unless the core attention is recomputed.
    """
    from .ledger import ledger_rows  # ledger_rows calls this function
    with warnings.catch_warnings():  # sequence parallelism at t=1 warned once already
        warnings.simplefilter("ignore")
        local = replace(c, s=c.s // c.cp, cp=1, cp_comm_type="p2p",
                        hierarchical_context_parallel_sizes=None)
    kind, rows = c.cp_comm_type, []
    local_rows = ledger_rows(local)
    if kind in ("a2a", "a2a+p2p"):  # the output is kept before the all-to-all back instead
        from .flash_copy import without_flash_output_copy
        local_rows = without_flash_output_copy(local_rows)
    for row in local_rows:
        source = SOURCES[kind] if row.key in ATTENTION_ROWS else f"{row.source}; {TOKENS}"
        rows.append(replace(row, elements=row.elements * c.cp, ranks=row.ranks * c.cp,
                            source=source))
        if row.key == "proj_input" and kind in ("a2a", "a2a+p2p") and _attention_kept(c):
            rows.insert(len(rows) - 1, a2a_output_row(c, rows[-1]))
    return tuple(rows)


def _attention_kept(c) -> bool:
    """Whether the core attention's own saved tensors stay (it is not
    recomputed: no recomputation, or named modules without ``core_attn``)."""
    if c.recompute == "full":
        return False
    return "core_attn" not in modules_of(c)  # () without recomputation


def a2a_output_row(c, proj: LedgerRow) -> LedgerRow:
    """The core attention's output kept before the all-to-all back (a2a,
    a2a+p2p): as many elements as the output projection's input ``proj``
    (s*b*h, or s*b*a*d with other head widths), in 2 bytes over t*cp ranks:
    2sbh/(t*cp) bytes (``out_part`` in TE's save list; the output the
    projection saves is the all-to-all's result, another storage)."""
    return LedgerRow(A2A_OUTPUT, "attention output before the all-to-all back (a2a)",
                     "attention", proj.shape, proj.elements, 2, HEAD_SPLIT, c.t * c.cp,
                     "intermediate", SOURCES[c.cp_comm_type],
                     "FlashAttention backward: D = rowsum(dO * O) needs the output O of "
                     "the heads this rank computed")



@kept_by_repr(256, skip=warns_at_t1)  # frozen: training_memory and the menus ask again
def rank_model(model, t: int, sequence_parallel: bool, recompute: str, cp: int = 1,
               cp_comm_type: str = "p2p", hierarchical_context_parallel_sizes=None,
               precision: str = "bf16"):
    """The model one context-parallel rank runs (``model`` an
    :class:`actmem.ModelConfig`): the same model on s/cp tokens (a learned
    position table keeps its s rows), checked first as Megatron-LM and
    Transformer Engine check a layer (:func:`check_context_parallel`, which
    looks at the attention, the same in dense and MoE layers). Every part
    of a rank is then the model's on s/cp tokens: the layer rows
    (:func:`with_context_parallel`; a2a and a2a+p2p keep one row more,
    :func:`with_a2a_output`), the embedding's and the output layer's
    inputs, the logits and the loss (``get_batch_on_this_cp_rank`` splits
    tokens, labels and loss mask along s).

    Raises:
        TypeError, ValueError: as :class:`actmem.LayerConfig` (``cp`` and
            ``cp_comm_type`` at every cp, 1 included); cp > 1 with
            ``precision`` other than ``"bf16"`` or ``"fp16"`` (TE's FlashAttention and
            fused attention, the only ones with context parallelism, take
            16-bit inputs; the fp32 and autocast paths are modelled without
            them); a2a or a2a+p2p with cp > 1 for an MoE model (left).
    """
    options = dict(cp=positive_int("cp", cp),  # checked at every cp: an array is no comm type
                   cp_comm_type=choice("cp_comm_type", cp_comm_type, CP_COMM_TYPES),
                   hierarchical_context_parallel_sizes=hierarchical_context_parallel_sizes)
    if cp == 1 and cp_comm_type == "p2p" and hierarchical_context_parallel_sizes is None:
        return model
    model.layer(t, sequence_parallel, recompute, moe=False, **options)  # the attention's checks
    if cp == 1:
        return model
    if precision not in ("bf16", "fp16"):
        raise ValueError(f"cp={cp} with precision={precision!r}: context parallelism runs in "
                         "Transformer Engine's FlashAttention or fused attention, on 16-bit "
                         "inputs; use precision='bf16' or 'fp16'")
    if cp_comm_type in ("a2a", "a2a+p2p") and model.num_experts is not None:
        raise ValueError(f"cp_comm_type={cp_comm_type!r} with cp={cp} is modelled in "
                         f"training_memory for dense models (this one has num_experts="
                         f"{model.num_experts}); use 'p2p' or 'allgather', or "
                         "activation_memory for one MoE layer under a2a")
    positions = model.max_positions or model.s if model.positions == "learned" else None
    return model.with_(s=model.s // cp, max_positions=positions)


def with_a2a_output(moments, model, t: int, sequence_parallel: bool, recompute: str, cp: int,
                    cp_comm_type: str, hierarchical_context_parallel_sizes=None,
                    layer_options=None):
    """``moments`` (a dense layer's :class:`actmem.run.moments.timeline.LayerMoments`,
    computed on a rank's s/cp tokens by :func:`rank_model`'s model) with the
    a2a output row (:func:`a2a_output_row`) added to what the layer keeps
    under the run's recomputation and to its full rows; unchanged for p2p,
    allgather or cp = 1. ``model`` is the whole-sequence model; the row's
    bytes are read from its ledger rows (``layer_options`` as
    :meth:`actmem.ModelConfig.layer`)."""
    if cp == 1 or cp_comm_type not in ("a2a", "a2a+p2p"):
        return moments
    options = dict(layer_options or {}, cp=cp, cp_comm_type=cp_comm_type,
                   hierarchical_context_parallel_sizes=hierarchical_context_parallel_sizes)
    kept, full = (sum(r.bytes for r in with_context_parallel(
        model.layer(t, sequence_parallel, mode, moe=False, **options)) if r.key == A2A_OUTPUT)
        for mode in (recompute, "none"))
    return replace(moments, kept=moments.kept + kept, full=moments.full + full)

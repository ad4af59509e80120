"""Transformer Engine's FlashAttention backend keeps the attention output twice.

Transformer Engine (TE) runs a layer's core attention in one of three
backends (``transformer_engine/pytorch/attention/dot_product_attention/``):
FusedAttention (cuDNN), FlashAttention (the flash-attn package) or the
unfused one. Megatron-LM hands it tensors in the ``sbhd`` layout
(sequence, batch, heads, head width). cuDNN reads and writes that layout,
so the output the kernel saves for its backward and the output projection's
saved input are one tensor, the ledger's row ``proj_input``. flash-attn
works in ``bshd``: TE's ``FlashAttention.forward`` (``backends.py``)
transposes Q, K, V into contiguous ``bshd`` copies, and turns flash-attn's
output back with ``output.view(b, s, -1).transpose(0, 1)`` and
``return output.contiguous()``: a new ``sbhd`` tensor, which ``linear_proj``
saves (except at ``b = 1``: the transposed view of a ``(1, s, a*d)`` tensor
is already contiguous, since PyTorch ignores the stride of a size-1
dimension, so ``contiguous()`` returns it and nothing is copied), while
flash-attn's ``FlashAttnFunc`` keeps its own ``bshd`` output
(``ctx.save_for_backward(q, k, v, out_padded, softmax_lse, rng_state)``, the
output itself where the head width is a multiple of 8: its backward reads O
for ``D = rowsum(dO * O)``). Q, K and V are not kept twice:
nothing else keeps the ``sbhd`` originals. With context parallelism the same
holds for ``p2p`` and ``allgather`` (TE's context-parallel functions save
their ``bshd`` output and FlashAttention copies it back); ``a2a`` adds no
flash copy: what it keeps is its output before the all-to-all back, a row of
its own (:mod:`actmem.layer.context_parallel`).

:class:`actmem.LayerConfig`'s ``flash_output_copy`` adds the row
``flash_output`` (as many elements as ``proj_input``, 2 bytes each, split
over heads). It is part of the core attention: recomputing ``core_attn``
drops it. Under FP8 and under LoRA with a frozen output projection the
projection keeps no 16-bit input of its own, so the row ``proj_input``
already stands for flash-attn's output and the copy adds nothing.

Which backend runs: :func:`te_runs_flash_attn`.
"""

from __future__ import annotations

from dataclasses import replace

from ..validate import flag
from .ledger import FLASH_OUTPUT

SOURCE = ("transformer_engine/pytorch/attention/dot_product_attention/backends.py: "
          "FlashAttention.forward (flash-attn's bshd output, saved by FlashAttnFunc; "
          "linear_proj saves the sbhd copy returned by output.contiguous())")
NEEDED_FOR = ("FlashAttention backward: D = rowsum(dO * O) reads the output in flash-attn's "
              "own layout (b, s, a, d)")


def check_flash_output_copy(c) -> None:
    """Refuse ``flash_output_copy`` without ``flash_attention``.

    Raises:
        TypeError: not a bool. ValueError: set while the attention keeps
            the s x s map (``flash_attention=False``).
    """
    flag("flash_output_copy", c.flash_output_copy)
    if c.flash_output_copy and not c.flash_attention:
        raise ValueError("flash_output_copy=True needs flash_attention=True: it is "
                         "Transformer Engine's FlashAttention backend")


def with_flash_output_copy(rows, c):
    """The row ``flash_output`` before ``proj_input`` when
    ``c.flash_output_copy`` and ``c.b > 1`` (module docstring); ``rows``
    unchanged otherwise."""
    if not c.flash_output_copy or c.b == 1:
        return rows
    index = next(i for i, r in enumerate(rows) if r.key == "proj_input")
    copy = replace(rows[index], key=FLASH_OUTPUT, name="attention output in flash-attn's "
                   "layout (beside Transformer Engine's contiguous copy)",
                   source=SOURCE, needed_for=NEEDED_FOR)
    return rows[:index] + (copy,) + rows[index:]


def without_flash_output_copy(rows):
    """The rows without ``flash_output``: where the row ``proj_input`` is
    flash-attn's own output (FP8, or LoRA with a frozen projection)."""
    return tuple(r for r in rows if r.key != FLASH_OUTPUT)


def te_runs_flash_attn(backend: str, env: dict, compute_capability, deterministic: bool) -> bool:
    """Whether Transformer Engine runs a training layer's attention in
    FlashAttention (flash-attn) rather than FusedAttention (cuDNN).

    ``backend``: Megatron-LM's ``--attention-backend`` (``"flash"``,
    ``"fused"``, ``"auto"``); ``env``: ``NVTE_FLASH_ATTN`` and
    ``NVTE_FUSED_ATTN`` (``"0"`` turns one off); ``compute_capability``:
    the GPU's, e.g. ``(8, 0)``; ``deterministic``: ``NVTE_ALLOW_NONDETERMINISTIC_ALGO=0``
    or Megatron-LM's ``--deterministic-mode`` (``megatron/training/determinism.py``).

    Under ``auto`` both are allowed and TE's ``get_attention_backend``
    (``dot_product_attention/utils.py``) picks: FusedAttention on compute
    capability 9.0 and newer ("give FusedAttention preference on Hopper+"),
    FlashAttention before (flash-attn installed, as in Megatron-LM's CI
    containers); on 10.0 and newer a deterministic run has no FusedAttention
    ("Disabling FusedAttention for determinism reasons on Blackwell": TE 2.9
    to 2.11, and 2.8 with cuDNN 9.14 or older, TransformerEngine#2130; from
    TE 2.12 cuDNN 9.18.1 and newer lifts it, #2584, which this rule does not
    follow).
    """
    if backend == "flash" or env.get("NVTE_FUSED_ATTN") == "0":
        return env.get("NVTE_FLASH_ATTN") != "0"
    if backend != "auto" or env.get("NVTE_FLASH_ATTN") == "0":
        return False
    major = (compute_capability or (9, 0))[0]
    return major < 9 or (major >= 10 and deterministic)

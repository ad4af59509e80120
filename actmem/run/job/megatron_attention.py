"""Which attention a Megatron-LM launch runs, read as Megatron-LM and
Transformer Engine read it: whether an s x s map is kept, whether the
softmax keeps 16 bits whatever ``--attention-softmax-in-fp32`` says, whether
Transformer Engine runs flash-attn (which keeps the output twice), and
whether the run is deterministic. Read by :mod:`actmem.run.job.megatron_args`
(which arguments are neutral) and :mod:`actmem.run.job.megatron_fields`
(the model's fields).
"""

from __future__ import annotations


def attention_keeps_no_map(a: dict, env: dict) -> bool:
    """Whether the attention keeps no s x s map: Transformer Engine's flash,
    fused or auto backend (unless NVTE_FLASH_ATTN=0 and NVTE_FUSED_ATTN=0),
    or the local layers with ``--use-flash-attn``."""
    backend = a["attention_backend"] or "auto"   # AttnBackend.auto, Megatron-LM's default
    if a["transformer_impl"] == "local":
        return bool(a["use_flash_attn"])
    unfused = env.get("NVTE_FLASH_ATTN") == "0" and env.get("NVTE_FUSED_ATTN") == "0"
    return backend in ("flash", "fused", "auto") and not unfused


def softmax_in_16_bits(a: dict, env: dict) -> bool:
    """Whether the attention's softmax keeps 16 bits whatever
    ``--attention-softmax-in-fp32`` says: no s x s map is kept, or the fused
    masked-softmax kernel runs, which reads and writes the activations'
    dtype. Where PyTorch's softmax runs instead, the flag makes it save an
    fp32 map (``forward_torch_softmax``).

    The kernel's conditions for a causal map (s x s, b*a/t maps per rank):
    16-bit activations, ``--masked-softmax-fusion`` (the default),
    s divisible by 4 and b*a/t by 4 and by the kernel's batches per block
    (:func:`_batches_per_block`), and 16 < s < 16384 with s divisible by 8
    for Transformer Engine's unfused attention
    (``dot_product_attention/softmax.py``: FusedScaleMaskSoftmax.is_kernel_available),
    16 < s <= 4096 for Megatron-LM's local one
    (``megatron/core/fusions/fused_softmax.py``: is_kernel_available).
    """
    if attention_keeps_no_map(a, env):
        return True
    s, b, heads, t = (a[k] for k in ("seq_length", "micro_batch_size", "num_attention_heads",
                                     "tensor_model_parallel_size"))
    if None in (s, b, heads) or not (a["bf16"] or a["fp16"]) or not a["masked_softmax_fusion"]:
        return False
    maps = b * heads // t
    if a["transformer_impl"] == "local":
        size = 16 < s <= 4096 and maps % _batches_per_block(s) == 0
    else:
        size = 16 < s < 16384 and s % 8 == 0 and s % _batches_per_block(s) == 0
    return size and s % 4 == 0 and maps % 4 == 0


def _batches_per_block(s: int) -> int:
    """Rows of the map one block of the fused softmax kernel handles: 128
    threads over warps of min(32, next power of two of s) threads, two rows
    per warp up to 128 columns (``get_batch_per_block`` in both)."""
    width = 1 << (s - 1).bit_length()
    return 128 // min(width, 32) * (2 if width <= 128 else 1)


def flash_output_copy(a: dict, env: dict, gpu) -> bool:
    """Whether Transformer Engine runs flash-attn, which keeps the attention
    output twice (:func:`actmem.layer.flash_copy.te_runs_flash_attn`)."""
    from .gpus import find_gpu
    from ...layer.flash_copy import te_runs_flash_attn
    if a["transformer_impl"] != "transformer_engine" or not attention_keeps_no_map(a, env):
        return False
    found = find_gpu(gpu)
    return te_runs_flash_attn(a["attention_backend"] or "auto", env,
                              found.compute_capability if found else None, deterministic(a, env))


def deterministic(a: dict, env: dict) -> bool:
    """A deterministic run: ``NVTE_ALLOW_NONDETERMINISTIC_ALGO=0``, or
    ``--deterministic-mode``, which sets it (``megatron/training/determinism.py``:
    DETERMINISM_ENV_VAR_DEFAULTS, applied with ``setdefault``)."""
    return env.get("NVTE_ALLOW_NONDETERMINISTIC_ALGO") == "0" or bool(a["deterministic_mode"])

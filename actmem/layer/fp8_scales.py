"""The scale inverses Transformer Engine's FP8 keeps: one per tensor, or one per block.

Delayed and current (tensorwise) scaling keep one fp32 scale inverse per
FP8 tensor (``tensor/float8_tensor.py``: Float8Tensor ``_scale_inv``): one
per saved input, one per local expert's for the experts' grouped inputs
(:func:`saved_scales`).

Under blockwise scaling (Megatron-LM's ``--fp8-recipe blockwise``),
Megatron-LM builds TE's ``Float8BlockScaling`` with TE's defaults
(``megatron/core/fp8_utils.py``: get_fp8_recipe; TE 2.17's
``transformer_engine/common/recipe/__init__.py``): activations in blocks of
1 x 128 elements, weights in blocks of 128 x 128, one fp32 scale inverse
per block (``pytorch/csrc/quantizer.cpp``: Float8BlockQuantizer::create_tensor,
get_scale_shape). What it keeps beyond delayed scaling's 1 byte per element:

* a saved input [M, K] (M tokens, K features): its column-wise data (the
  transpose, 1 byte per element) and ceil(M/128) x roundup(K, 4) scales
  (``module/linear.py`` and ``layernorm_linear.py`` keep the column-wise
  usage; under sequence parallelism the local shard's): :func:`input_scales`;
* the experts' inputs: TE's GroupedLinear quantizes the E/ep splits into
  one buffer of column-wise data and scales (``csrc/extensions/cast.cpp``:
  bulk_allocate_fp8_blockwise_tensors), which ``allocate.cpp``: bulk_allocate
  pads by its 256-byte alignment (:data:`GROUPED_PAD`); the row-wise buffer
  is freed after the forward;
* a cached weight [N, K]: both usages on every GPU (``module/base.py``:
  quantize_weight; on Blackwell the GEMM converts the scales to MXFP8's only
  for its duration, ``csrc/extensions/gemm.cpp``), 2 bytes per element and
  the row-wise and column-wise 128 x 128 scales: :func:`weight_copy_bytes`;
* no recipe state (``quantization.py``: Float8BlockScalingRecipeState
  allocates no tensor).
"""

from __future__ import annotations

EXPERT_ROWS = ("expert_fc1_input", "expert_fc2_input")
"""The grouped GEMMs' inputs: one FP8 tensor per local expert."""
BLOCK = 128
"""Elements per block along each scaled dimension."""
GROUPED_PAD = 256
"""Bytes ``bulk_allocate`` adds to the experts' buffer for its 256-byte alignment."""


def fp8_align(c) -> int:
    """Rows each local expert's FP8 input is padded to a multiple of: 16
    (Megatron-LM's ``moe/moe_utils.py``: get_align_size_for_quantization;
    TE's ``quantization.py``: get_align_size_for_quantization)."""
    return 16


def _blocks(n: int) -> int:
    return -(-n // BLOCK)


def _roundup4(n: int) -> int:
    return -(-n // 4) * 4


def input_scales(M: int, K: int) -> int:
    """fp32 scales of a saved input's column-wise data, ``M`` x ``K``."""
    return _blocks(M) * _roundup4(K)


def weight_copy_bytes(N: int, K: int) -> int:
    """Bytes of a cached weight [N, K]: row-wise and column-wise data, and
    their 128 x 128 blocks' fp32 scales."""
    rowwise = _blocks(N) * _roundup4(_blocks(K))
    columnwise = _blocks(K) * _roundup4(_blocks(N))
    return 2 * N * K + 4 * (rowwise + columnwise)


SCALE_SOURCES = ("transformer_engine/pytorch/tensor/float8_tensor.py: Float8Tensor (_scale_inv)",
                 "transformer_engine/pytorch/csrc/quantizer.cpp: Float8BlockQuantizer::"
                 "get_scale_shape (column-wise, 1x128 blocks)")
"""Where the scale inverses are made: one per tensor, or per block (blockwise)."""


def saved_scales(c, row) -> int:
    """fp32 scales a quantized ``row`` keeps on one GPU: one per FP8 tensor
    (one per local expert's for the experts' inputs), or under blockwise
    scaling each tensor's 1x128 blocks
    (:func:`input_scales`; the experts' expected
    tokens per local expert, and their buffer's alignment pad)."""
    tensors = c.num_experts // c.ep if row.key in EXPERT_ROWS else 1
    if c.fp8_recipe != "blockwise":
        return tensors
    K = _input_width(c, row.key)
    tokens = -(-(row.elements // row.ranks // K) // tensors)
    pad = GROUPED_PAD // 4 if row.key in EXPERT_ROWS else 0
    return tensors * input_scales(tokens, K) + pad


def _input_width(c, key: str) -> int:
    """K, the features of a quantized input on one GPU (``key``: its row)."""
    if key in ("fc2_input", "shared_fc2_input", "expert_fc2_input"):
        f, x = {"fc2_input": (c.f, c.t), "expert_fc2_input": (c.f_e, c.expert_t),
                "shared_fc2_input": (c.moe_shared_expert_intermediate_size, c.t)}[key]
        return f // x
    return c.h

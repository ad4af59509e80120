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

Under MXFP8 (``--fp8-recipe mxfp8``, TE's ``MXFP8BlockScaling``, Blackwell
only) every block of 32 elements along a row (row-wise usage) or a column
(column-wise usage) shares one E8M0 scale of 1 byte, stored in cuBLAS's
128 x 4 tiles (``csrc/quantizer.cpp``: MXFP8Quantizer::get_scale_shape):

* a saved input [M, K] keeps its column-wise data [M, K] (not transposed:
  ``csrc/extensions/cast.cpp``) and roundup(M/32, 4) x roundup(K, 128)
  scales (``linear.py``, ``layernorm_linear.py``, ``grouped_linear.py``
  keep the column-wise usage, as under blockwise): :func:`input_scales`;
  the experts' buffer has the same 256-byte pad;
* a cached weight [N, K]: both usages (MXFP8 cannot derive one from the
  other), 2 bytes per element and roundup(N, 128) x roundup(K/32, 4) plus
  roundup(N/32, 4) x roundup(K, 128) scales: :func:`weight_copy_bytes`;
* every quantized tensor needs both dimensions divisible by 32 (``create_tensor``
  refuses others), and each local expert's tokens are padded to 32, not
  16 (:func:`fp8_align`);
* no recipe state (MXFP8BlockScalingRecipeState allocates no tensor).
"""

from __future__ import annotations

EXPERT_ROWS = ("expert_fc1_input", "expert_fc2_input")
"""The grouped GEMMs' inputs: one FP8 tensor per local expert."""
BLOCK = 128
"""Elements per block along each scaled dimension (blockwise)."""
MX_BLOCK = 32
"""Elements per block under MXFP8 (``csrc/quantizer.cpp``: MXFP8_BLOCK_SIZE)."""
PER_BLOCK = ("blockwise", "mxfp8")
"""The recipes with a scale per block rather than per tensor."""
GROUPED_PAD = 256
"""Bytes ``bulk_allocate`` adds to the experts' buffer for its 256-byte alignment."""


def fp8_align(c) -> int:
    """Rows each local expert's FP8 input is padded to a multiple of: 32
    under MXFP8, else 16 (Megatron-LM's ``moe/moe_utils.py`` and TE's
    ``quantization.py``: get_align_size_for_quantization)."""
    return MX_BLOCK if c.fp8_recipe == "mxfp8" else 16


def scale_bytes(recipe: str) -> int:
    """Bytes of one scale inverse: 1 under MXFP8 (E8M0), else 4 (fp32)."""
    return 1 if recipe == "mxfp8" else 4


def _up(n: int, m: int) -> int:
    return -(-n // m) * m


def _blocks(n: int) -> int:
    return -(-n // BLOCK)


def input_scales(M: int, K: int, recipe: str = "blockwise") -> int:
    """Scales of a saved input's column-wise data, ``M`` x ``K``: fp32 per
    1x128 block (blockwise), or E8M0 per 32x1 block in 4 x 128 tiles
    (``"mxfp8"``; M padded to 32 by the caller)."""
    if recipe == "mxfp8":
        return _up(-(-M // MX_BLOCK), 4) * _up(K, BLOCK)
    return _blocks(M) * _up(K, 4)


def weight_copy_bytes(N: int, K: int, recipe: str = "blockwise") -> int:
    """Bytes of a cached weight [N, K]: row-wise and column-wise data, and
    their scales: fp32 per 128 x 128 block (blockwise), or E8M0 per 32
    elements of a row (row-wise) and of a column (column-wise) in 128 x 4
    tiles (``"mxfp8"``)."""
    if recipe == "mxfp8":
        rowwise = _up(N, BLOCK) * _up(K // MX_BLOCK, 4)
        return 2 * N * K + rowwise + _up(N // MX_BLOCK, 4) * _up(K, BLOCK)
    rowwise = _blocks(N) * _up(_blocks(K), 4)
    columnwise = _blocks(K) * _up(_blocks(N), 4)
    return 2 * N * K + 4 * (rowwise + columnwise)


SCALE_SOURCES = {
    "delayed": "transformer_engine/pytorch/tensor/float8_tensor.py: Float8Tensor (_scale_inv)",
    "tensorwise": "transformer_engine/pytorch/tensor/float8_tensor.py: Float8Tensor (_scale_inv)",
    "blockwise": "transformer_engine/pytorch/csrc/quantizer.cpp: Float8BlockQuantizer::"
                 "get_scale_shape (column-wise, 1x128 blocks)",
    "mxfp8": "transformer_engine/pytorch/csrc/quantizer.cpp: MXFP8Quantizer::get_scale_shape "
             "(column-wise, 32x1 blocks, E8M0)"}
"""Where each recipe's scale inverses are made: one per tensor, or per block."""


def saved_scales(c, row) -> int:
    """Scale inverses a quantized ``row`` keeps on one GPU (of
    :func:`scale_bytes` each): one per FP8 tensor (one per local expert's
    for the experts' inputs), or under blockwise and MXFP8 scaling each
    tensor's blocks (:func:`input_scales`; the experts' expected tokens
    per local expert, padded to :func:`fp8_align` under MXFP8, and their
    buffer's 256-byte alignment pad)."""
    tensors = c.num_experts // c.ep if row.key in EXPERT_ROWS else 1
    if c.fp8_recipe not in PER_BLOCK:
        return tensors
    K = _input_width(c, row.key)
    tokens = -(-(row.elements // row.ranks // K) // tensors)
    if c.fp8_recipe == "mxfp8":
        tokens = _up(tokens, MX_BLOCK)
    pad = GROUPED_PAD // scale_bytes(c.fp8_recipe) if row.key in EXPERT_ROWS else 0
    return tensors * input_scales(tokens, K, c.fp8_recipe) + pad


def _input_width(c, key: str) -> int:
    """K, the features of a quantized input on one GPU (``key``: its row)."""
    if key in ("fc2_input", "shared_fc2_input", "expert_fc2_input"):
        f, x = {"fc2_input": (c.f, c.t), "expert_fc2_input": (c.f_e, c.expert_t),
                "shared_fc2_input": (c.moe_shared_expert_intermediate_size, c.t)}[key]
        return f // x
    return c.h

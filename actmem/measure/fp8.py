"""A reference layer whose linear layers save FP8 inputs, as Transformer Engine does.

:class:`ReferenceFP8Layer` is :class:`.layer.ReferenceLayer` (t = 1) with
each linear layer replaced by :class:`FP8Linear`, which does what TE's
``linear.py``: _linear_forward and ``layernorm_linear.py`` save for backward
under delayed scaling (:mod:`actmem.layer.fp8`): the input quantized to
``torch.float8_e4m3fn`` with a per-tensor scale (the column-wise copy, the
transpose Hopper's GEMM reads, 1 byte per element) and the fp32 scale
inverse (one number), quantized once per input however many projections
read it (Megatron's fused ``linear_qkv`` and ``linear_fc1``). Everything
else (norms, attention, activation function, dropout) runs in bf16 as
before, so FlashAttention still saves its bf16 output beside the output
projection's FP8 copy. Under ``fp8_recipe="tensorwise"`` the output
projection stays a bf16 linear: TE's ``save_original_input``, which
Megatron-LM sets for every recipe but delayed, saves its input as given (the
FP8 copy TE makes for the forward GEMM is not saved); ``"blockwise"`` keeps
that, and scales each block of 128 rows of a column (:class:`Quantizer`);
``"mxfp8"`` too, with one E8M0 byte per 32 rows of a column and the data
left untransposed.

The weight saved for the input gradient is the bf16 parameter here
(excluded from the recording, as every parameter); TE saves its cached FP8
copy, a model state (:func:`actmem.layer.fp8_weights.fp8_state_bytes`). CPU has no
FP8 GEMM: the products use the dequantized input, which changes values, not
saved bytes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layer.config import LayerConfig
from ..layer.ledger import ledger_rows
from .layer import ReferenceLayer
from .run import Measurement, recorded
from .saved import named

E4M3_MAX = 448.0
"""Largest finite ``float8_e4m3fn`` value: the scale maps amax onto it."""


BLOCK = 128
"""Rows per scale of blockwise scaling's column-wise data (1 x 128 blocks)."""
MX_BLOCK = 32
"""Rows per scale of MXFP8's column-wise data (32 x 1 blocks)."""
E8M0_BIAS = 127
"""The exponent bias of an E8M0 scale: the byte e stands for 2^(e - 127)."""


class Quantizer:
    """FP8 quantization of an input, once per input tensor (a cache keyed by
    identity, cleared per forward), column-wise usage as TE saves it:

    * ``"tensorwise"`` (and delayed): one fp32 scale from the tensor's amax,
      the data transposed [K, M];
    * ``"blockwise"`` (TE's Float8BlockScaling): one fp32 scale per block of
      128 rows of each column, ceil(M/128) x roundup(K, 4)
      (``csrc/quantizer.cpp``: Float8BlockQuantizer::get_scale_shape);
    * ``"mxfp8"`` (TE's MXFP8BlockScaling): one power-of-two E8M0 byte per
      block of 32 rows of each column, roundup(M/32, 4) x roundup(K, 128)
      (MXFP8Quantizer::get_scale_shape), the data untransposed [M, K]."""

    def __init__(self, key: str, recipe: str = "tensorwise"):
        self.key, self.recipe = key, recipe
        self.last: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.last is None or self.last[0] is not x:
            flat = x.detach().reshape(-1, x.shape[-1]).float()
            if self.recipe == "mxfp8":
                data, scale_inv = _mx_quantized(flat)
            else:
                blockwise = self.recipe == "blockwise"
                amax = _block_amax(flat) if blockwise else flat.abs().amax().reshape(1)
                scale = E4M3_MAX / amax.clamp(min=1e-12)
                data = (flat * _per_row(scale, flat)).to(torch.float8_e4m3fn).t().contiguous()
                scale_inv = scale.reciprocal()
            self.last = (x, named(self.key, data), named("fp8_scale_inv", scale_inv))
        return self.last[1], self.last[2]


def _block_amax(flat: torch.Tensor) -> torch.Tensor:
    """The amax of each block of 128 rows of each column of ``flat`` [M, K],
    padded to roundup(K, 4) columns (of ones) as TE pads its scales."""
    return _padded_amax(flat, BLOCK, 4)


def _padded_amax(flat: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
    """The amax of each block of ``rows`` rows of each column of ``flat``
    [M, K], in [ceil(M/rows) padded to a multiple of 4 under MXFP8,
    K padded to a multiple of ``columns``], ones in the padding."""
    M, K = flat.shape
    blocks = -(-M // rows)
    padded = torch.zeros(blocks * rows, K).index_copy_(0, torch.arange(M), flat.abs())
    amax = padded.reshape(blocks, rows, K).amax(dim=1)
    amax = torch.cat([amax, torch.ones(blocks, -K % columns)], dim=1)
    if rows == MX_BLOCK:
        amax = torch.cat([amax, torch.ones(-blocks % 4, amax.shape[1])])
    return amax


def _mx_quantized(flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """MXFP8's column-wise data [M, K] (e4m3) and E8M0 scale inverses
    (uint8, the biased exponent of the power of two that maps each block's
    amax into e4m3's range)."""
    exponent = torch.ceil(torch.log2(_padded_amax(flat, MX_BLOCK, BLOCK).clamp(min=1e-30)
                                     / E4M3_MAX))
    scale_inv = (exponent + E8M0_BIAS).clamp(0, 254).to(torch.uint8)
    data = (flat / _per_row(_e8m0(scale_inv), flat, MX_BLOCK)).to(torch.float8_e4m3fn)
    return data, scale_inv


def _e8m0(scale_inv: torch.Tensor) -> torch.Tensor:
    return torch.exp2(scale_inv.float() - E8M0_BIAS)


def _per_row(scale: torch.Tensor, flat: torch.Tensor, rows: int = BLOCK) -> torch.Tensor:
    """``scale`` (one number, or one per block of ``rows`` rows of each
    column, [>= blocks, >= K]) spread over ``flat``'s rows and columns."""
    if scale.numel() == 1:
        return scale
    M, K = flat.shape
    return scale.repeat_interleave(rows, dim=0)[:M, :K]


class _FP8LinearFunction(torch.autograd.Function):
    """``y = x W^T + b`` saving the FP8 input, its scale inverse and W."""

    @staticmethod
    def forward(ctx, x, weight, bias, x_fp8, scale_inv):
        ctx.save_for_backward(x_fp8, scale_inv, weight)
        ctx.shape = x.shape
        x_deq = _dequantized(x_fp8, scale_inv, x.dtype)
        return F.linear(x_deq, weight, bias).view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x_fp8, scale_inv, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])
        x_deq = _dequantized(x_fp8, scale_inv, grad.dtype)
        dx = (g @ weight).view(ctx.shape)
        return dx, g.t() @ x_deq, g.sum(0) if ctx.needs_input_grad[2] else None, None, None


def _dequantized(x_fp8: torch.Tensor, scale_inv: torch.Tensor, dtype) -> torch.Tensor:
    """The input from :class:`Quantizer`'s data and scales (uint8 ones are
    MXFP8's, over untransposed data)."""
    if scale_inv.dtype == torch.uint8:
        flat = x_fp8.float()
        return (flat * _per_row(_e8m0(scale_inv), flat, MX_BLOCK)).to(dtype)
    flat = x_fp8.t().float()
    return (flat * _per_row(scale_inv, flat)).to(dtype)


def fp8_matmul(x: torch.Tensor, weight: torch.Tensor, key: str) -> torch.Tensor:
    """``x @ weight`` (``weight``: in x out, no bias) as a TE FP8 linear that
    quantizes ``x`` on its own and saves it as row ``key``: an MoE layer's
    expert (TE's GroupedLinear quantizes each expert's tokens apart) or
    shared-expert linear."""
    x_fp8, scale_inv = Quantizer(key)(x)
    return _FP8LinearFunction.apply(x, weight.t(), None, x_fp8, scale_inv)


class FP8Linear(nn.Module):
    """A base linear (``weight``, ``bias``, t = 1) run as TE's FP8 linear."""

    def __init__(self, base: nn.Module, quantizer: Quantizer):
        super().__init__()
        self.base, self.quantizer = base, quantizer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_fp8, scale_inv = self.quantizer(x)
        return _FP8LinearFunction.apply(x, self.base.weight, self.base.bias, x_fp8, scale_inv)


class ReferenceFP8Layer(ReferenceLayer):
    """The reference layer with FP8 linear layers (``config.fp8`` set, t = 1).

    Raises:
        ValueError: ``config.fp8`` is None, or t > 1.
    """

    def __init__(self, config: LayerConfig, *, mask="bool", seed=0, dtype=torch.bfloat16):
        if config.fp8 is None or config.t != 1:
            raise ValueError(f"ReferenceFP8Layer needs fp8 and t = 1, got fp8={config.fp8!r}, "
                             f"t={config.t}")
        super().__init__(config, 0, mask=mask, seed=seed, dtype=dtype)
        self.quantizers = fp8_linears(self, config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for quantizer in self.quantizers.values():
            quantizer.last = None
        return super().forward(x)


def fp8_linears(layer: ReferenceLayer, config: LayerConfig) -> dict[str, Quantizer]:
    """Replace ``layer``'s linears by :class:`FP8Linear` ones (the output
    projection only under delayed scaling) and return their quantizers, one
    per input (Q, K and V share one; the MLP's gate and up too), to be
    cleared before each forward."""
    keys = {r.key for r in ledger_rows(config)}
    proj = "proj_input_fp8" if "proj_input_fp8" in keys else "proj_input"
    quantizers = {name: Quantizer(key, config.fp8_recipe) for name, key in (
        ("qkv", "qkv_input"), ("proj", proj), ("fc1", "fc1_input"), ("fc2", "fc2_input"))}
    group = {"q": "qkv", "k": "qkv", "v": "qkv", "proj": "proj", "fc1": "fc1",
             "gate": "fc1", "up": "fc1", "fc2": "fc2"}
    if config.fp8_recipe != "delayed":   # save_original_input: proj saves its bf16 input
        del quantizers["proj"], group["proj"]
    for name in list(layer.linears):
        if name in group:
            layer.linears[name] = FP8Linear(layer.linears[name], quantizers[group[name]])
    return quantizers


def measure_fp8(config: LayerConfig, mask: str = "bool") -> Measurement:
    """One forward pass of :class:`ReferenceFP8Layer`, every saved storage
    recorded (parameters excluded), as :func:`.run.measure_layer`.

    Raises:
        ValueError: see :class:`ReferenceFP8Layer`.
    """
    layer = ReferenceFP8Layer(config, mask=mask)
    return recorded(layer, config, mask)

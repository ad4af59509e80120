"""A reference MoE layer whose linear layers save FP8 inputs, as Transformer Engine does.

:class:`ReferenceMoEFP8Layer` is :class:`.moe.ReferenceMoELayer` (one rank)
with TE's FP8 linears (:mod:`.fp8`, the rows of :mod:`actmem.layer.fp8`):
the attention's as in the dense FP8 layer, each expert's fc1 and fc2
quantizing that expert's tokens on their own (TE's ``grouped_linear.py``:
_GroupedLinear.forward, ``split_quantize``: one FP8 tensor and one scale
inverse per local expert), and the shared experts' fc1 and fc2 (TE's
Linear: under delayed scaling fc1 quantizes the MoE input, which the router
keeps in 16 bits; under the other recipes it saves that 16-bit input).
The router, the permutation and the activation run in bf16 as before.
Transformer Engine's ``Fp8Padding`` (each expert's tokens padded to a
multiple of 16) is left out, as the ledger leaves it.
"""

from __future__ import annotations

import torch

from ..layer.config import LayerConfig
from ..layer.fp8_scales import PER_BLOCK
from .fp8 import fp8_linears, fp8_matmul
from .moe import ReferenceMoELayer, _activation
from .run import Measurement, recorded


class ReferenceMoEFP8Layer(ReferenceMoELayer):
    """:class:`.moe.ReferenceMoELayer` with FP8 linears (``config.fp8`` set).

    Raises:
        ValueError: ``config.fp8`` is None, blockwise or MXFP8 scaling, or as
            :class:`.moe.ReferenceMoELayer`.
    """

    def __init__(self, config: LayerConfig, *, mask="bool", seed=0, dtype=torch.bfloat16):
        if config.fp8 is None or config.fp8_recipe in PER_BLOCK:
            raise ValueError("ReferenceMoEFP8Layer needs fp8 (a format) under delayed or "
                             f"tensorwise scaling, got fp8={config.fp8!r}, fp8_recipe="
                             f"{config.fp8_recipe!r} (per-block scales of the grouped buffers "
                             "follow the routing: not measured)")
        super().__init__(config, mask=mask, seed=seed, dtype=dtype)
        self.quantizers = fp8_linears(self, config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for quantizer in self.quantizers.values():
            quantizer.last = None
        return super().forward(x)

    def _expert_linear(self, x, weight, key):
        return fp8_matmul(x, weight, key)

    def _shared_experts(self, y):
        if not self.shared:
            return None
        if self.config.fp8_recipe == "delayed":
            y = fp8_matmul(y, self.shared[0], "shared_fc1_input_fp8")
        else:   # shared_experts.py: set_save_original_input(linear_fc1), the router's input
            y = y @ self.shared[0]
        z = _activation(self.config.activation, y, "shared_fc1_output")
        return fp8_matmul(z, self.shared[1], "shared_fc2_input")


def measure_moe_fp8(config: LayerConfig, mask: str = "bool") -> Measurement:
    """One forward pass of :class:`ReferenceMoEFP8Layer`, every saved
    storage recorded (parameters excluded), as :func:`.moe.measure_moe`.

    Raises:
        ValueError: see :class:`ReferenceMoEFP8Layer`.
    """
    layer = ReferenceMoEFP8Layer(config, mask=mask)
    return recorded(layer, config, mask)

"""Is the t-rank layer the same function as the t = 1 layer?

Picotron-style check of the tensor parallelism in :mod:`.parallel`: each
rank runs its shard and the whole (t = 1) layer on the same input, in
float32 without dropout, and compares the outputs and the gradients of the
input. A misplaced f or g operator shows up as a large error (a missing
all-reduce in forward breaks the output; one in backward the gradient).
"""

from __future__ import annotations

import dataclasses

import torch

from ..layer.config import LayerConfig
from .layer import ReferenceLayer, layer_input, unsharded


def tensor_parallel_error(rank: int, config: LayerConfig) -> tuple[float, float]:
    """Max |difference| (output, input gradient) of rank ``rank`` vs t = 1.

    Run on every rank of a t-rank process group (``launch.on_ranks``).
    """
    config = dataclasses.replace(config, dropout=False)
    results = []
    for c, r in ((config, rank), (unsharded(config), 0)):
        x = layer_input(c, dtype=torch.float32)
        out = ReferenceLayer(c, r, dtype=torch.float32)(x)
        out.backward(torch.ones_like(out))
        results.append((out.detach(), x.grad))
    (out, grad), (ref_out, ref_grad) = results
    return (float((out - ref_out).abs().max()),
            float((grad - ref_grad).abs().max()))

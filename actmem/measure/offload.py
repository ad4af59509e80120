"""Activation offloading measured on CPU: which saved storages move, and
that moving them keeps the gradients.

Transformer Engine's offload (``transformer_engine/pytorch/cpu_offload.py``,
see :mod:`actmem.run.moments.offload`) is a pair of ``saved_tensors_hooks``: the
pack hook copies a saved tensor of at least 256 x 1024 elements to pinned
host memory and drops the GPU reference; the unpack hook gives back the
reloaded copy. PyTorch's own ``torch.autograd.graph.save_on_cpu`` moves every
saved tensor the same way, but on a CPU "device" its ``tensor.cpu()`` is the
tensor itself and nothing moves, so this module measures with the same
two hooks, TE's rule and a copy standing for the host buffer:

* :func:`measure_offload`: one forward of :class:`.layer.ReferenceLayer`
  under :class:`.saved.Recorder`; every saved storage (parameters excluded)
  is *moved* when its elements reach the threshold, else *kept*, by ledger
  row (extras such as LayerNorm's statistics under ``None``);
* :func:`offload_gradients_match`: forward and backward with the moved
  storages copied out at pack time and the copies given back at unpack time;
  the gradients equal those of the plain layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..layer.config import LayerConfig
from ..run.moments.offload import OFFLOAD_MIN_ELEMENTS
from .layer import ReferenceLayer, layer_input
from .saved import Recorder


@dataclass(frozen=True)
class OffloadMeasurement:
    """Bytes of one layer's saved storages by where TE's rule puts them.

    Attributes:
        moved: ledger key (None: not a ledger row) -> bytes going to the host.
        kept: ledger key -> bytes staying on the device.
    """

    moved: dict
    kept: dict


def measure_offload(config: LayerConfig, threshold: int = OFFLOAD_MIN_ELEMENTS
                    ) -> OffloadMeasurement:
    """Sort the saved storages of one forward at t = 1 by TE's rule
    (elements = bytes / element size >= ``threshold``).

    Raises:
        ValueError: as :class:`.layer.ReferenceLayer`.
    """
    layer = ReferenceLayer(config)
    with Recorder(layer.parameters()) as rec:
        out = layer(layer_input(config))
    moved, kept = {}, {}
    for st in rec.storages(out):
        side = moved if st.nbytes // st.itemsize >= threshold else kept
        side[st.key] = side.get(st.key, 0) + st.nbytes
    return OffloadMeasurement(moved, kept)


def offload_gradients_match(config: LayerConfig, threshold: int = OFFLOAD_MIN_ELEMENTS
                            ) -> tuple[bool, int]:
    """(gradients equal the plain layer's, bytes copied out): forward and
    backward of :class:`.layer.ReferenceLayer` with every saved tensor of at
    least ``threshold`` elements replaced by a copy at pack time, as TE's
    push_tensor/pop_tensor, each storage copied once; a parameter's storage
    (its transpose, which a linear saves) stays, as TE keeps its weights."""
    grads, copied, params = [], {}, set()  # params: the hooked layer's weight storages

    def pack(t):
        if t.numel() < threshold or t.untyped_storage().data_ptr() in params:
            return t
        key = t.untyped_storage().data_ptr()
        if key not in copied:  # the original is held too, so its address is not reused
            copied[key] = (t.untyped_storage(), t.untyped_storage().clone())
        host = torch.empty(0, dtype=t.dtype)
        host.set_(copied[key][1], t.storage_offset(), t.shape, t.stride())
        return ("host", host)

    def unpack(saved):
        return saved[1] if isinstance(saved, tuple) else saved

    for hooks in (False, True):
        layer = ReferenceLayer(config)
        x = layer_input(config)
        params = {w.untyped_storage().data_ptr() for w in layer.parameters()}
        if hooks:
            with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                out = layer(x)
        else:
            out = layer(x)
        out.float().square().sum().backward()
        grads.append([x.grad] + [p.grad for p in layer.parameters()])
    same = all(torch.equal(a, b) for a, b in zip(*grads))
    return same, sum(host.nbytes() for _, host in copied.values())

"""Bytes saved for backward that are alive right now, as autograd frees them.

:class:`~actmem.measure.saved.Recorder` lists what one layer saves; a
pipeline needs the running total while micro-batches come and go.
:class:`AliveBytes` uses the same ``saved_tensors_hooks``: the pack hook
wraps each saved tensor in a small holder that autograd keeps in its graph,
and a finalizer subtracts the storage's bytes when the last holder of that
storage is dropped, which happens when the backward pass (or garbage
collection of the graph) frees the saved tensors. Each storage counts once
however many operations save it; parameters are left out.
"""

from __future__ import annotations

import weakref

import torch


class _Held:
    """What autograd keeps instead of the saved tensor."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor


def _unpack(packed):
    return packed.tensor if isinstance(packed, _Held) else packed


class AliveBytes:
    """Context manager: ``.bytes`` is the bytes of saved-for-backward
    storages alive now, counting only tensors saved inside the ``with``.

    >>> with AliveBytes(model.parameters()) as alive:   # doctest: +SKIP
    ...     y = model(x); print(alive.bytes)             # what y's graph keeps
    """

    def __init__(self, parameters=()):
        self._params = {p.untyped_storage().data_ptr() for p in parameters}
        self._holders: dict[int, int] = {}
        self.bytes = 0
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)

    def __enter__(self):
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)

    def _pack(self, tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        sid = storage.data_ptr()
        if sid in self._params:
            return tensor
        if sid not in self._holders:
            self._holders[sid] = 0
            self.bytes += storage.nbytes()
        self._holders[sid] += 1
        held = _Held(tensor)
        weakref.finalize(held, self._release, sid, storage.nbytes())
        return held

    def _release(self, sid: int, nbytes: int) -> None:
        self._holders[sid] -= 1
        if not self._holders[sid]:
            del self._holders[sid]
            self.bytes -= nbytes

"""A live-storage counter: the bytes of tensor storage alive at each moment.

:class:`LiveBytes` is a ``TorchDispatchMode``: every storage an operation
returns is added once, and subtracted by a weak-reference callback when
PyTorch frees it, keyed by the C++ storage. It is the cross-check of
PyTorch's own ``MemTracker`` in :mod:`.step`, and labels the step's moments
so each can be set beside the timeline's event of the same name.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only


class LiveBytes(TorchDispatchMode):
    """Bytes of tensor storage alive now: every storage an operation
    returns (and every tensor given to :meth:`track`) is added once, and
    subtracted when PyTorch frees it.

    Attributes:
        bytes: alive now. peak: the most alive after any operation.
        phase: the moment now (set with :meth:`enter`); peaks: phase ->
            the most alive during it; marks: (label, bytes) in order;
        after_op: (phase, operator name) -> bytes alive after its first
            and after its last call in that phase (e.g. ``"_softmax"``).
    """

    def __init__(self):
        super().__init__()
        self.bytes = self.peak = 0
        self.phase, self.peak_phase = "before the step", "before the step"
        self.peaks: dict[str, int] = {}
        self.marks: list[tuple[str, int]] = []
        self.after_op: dict[tuple[str, str], list[int]] = {}
        self._live: dict[int, int] = {}

    def track(self, *tensors: torch.Tensor) -> None:
        """Count the storages of ``tensors`` (made before the step)."""
        for t in tensors:
            self._add(t)
        self._update()

    def _add(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key = storage._cdata
        if key in self._live or not storage.nbytes():
            return
        self._live[key] = storage.nbytes()
        self.bytes += storage.nbytes()
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.bytes -= self._live.pop(key)

    def _update(self) -> None:
        if self.bytes > self.peak:
            self.peak, self.peak_phase = self.bytes, self.phase
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), self.bytes)

    def enter(self, phase: str) -> None:
        """From now on the step is at moment ``phase``."""
        self.phase = phase
        self._update()

    def mark(self, label: str) -> None:
        """Record the bytes alive now as moment ``label``."""
        self.marks.append((label, self.bytes))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tree_map_only(torch.Tensor, self._add, out)
        self._update()
        seen = self.after_op.setdefault((self.phase, func.overloadpacket.__name__),
                                        [self.bytes, self.bytes])
        seen[1] = self.bytes
        return out

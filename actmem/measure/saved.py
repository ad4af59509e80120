"""Record the tensors autograd saves for backward, one storage at a time.

``torch.autograd.graph.saved_tensors_hooks`` calls a *pack* hook for every
tensor an operation saves for its backward pass. :class:`Recorder` keeps
them, and the layer under test names the tensors the ledger counts with
:func:`named` (``named("query", q)``). A saved tensor belongs to a ledger
row when it shares its storage with a tensor named after that row; the
others are *extras*, described by the block they were saved in
(:func:`block`) and the backward node that saved them.

Bytes are what the storage really holds (``untyped_storage().nbytes()``),
each storage counted once however many operations save it or views of it.
Parameters (weights, biases, LayerNorm gains) are excluded.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

_ACTIVE: list["Recorder"] = []

SAVED_AS = {"logsumexp": "softmax_lse"}
"""Ledger rows that only exist inside a fused kernel, found by the name of
the attribute that saves them (``ScaledDotProductFlashAttentionForCpu
Backward0.logsumexp`` is the FlashAttention statistic ``softmax_lse``)."""


@dataclass(frozen=True)
class SavedStorage:
    """One storage kept for backward, bytes exact.

    Attributes:
        key: the ledger row it belongs to, or ``None`` for an extra.
        block: where it was saved (``"attn_norm"``, ``"attention"`` ...).
        saved_by: backward nodes and attributes that hold it,
            e.g. ``("BmmBackward0.self",)``.
        dtype: element type, e.g. ``"bfloat16"``.
        itemsize: bytes per element of that type (torch's
            ``element_size()``: 2 for bfloat16, 1 for bool).
        shape: shape of the named tensor, else of the first saved view.
        nbytes: bytes the storage holds.
    """

    key: str | None
    block: str
    saved_by: tuple[str, ...]
    dtype: str
    itemsize: int
    shape: tuple[int, ...]
    nbytes: int


def _storage_id(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def named(key: str, tensor: torch.Tensor) -> torch.Tensor:
    """Tell the active recorder that ``tensor`` is ledger row ``key``.

    Returns ``tensor`` unchanged; does nothing when no recorder is active,
    so the layer runs the same with and without measurement.
    """
    if _ACTIVE:
        _ACTIVE[-1].names.setdefault(_storage_id(tensor), (key, tensor))
    return tensor


@contextlib.contextmanager
def block(name: str):
    """Label the tensors saved inside this ``with`` as saved in ``name``."""
    if not _ACTIVE:
        yield
        return
    stack = _ACTIVE[-1].blocks
    stack.append(name)
    try:
        yield
    finally:
        stack.pop()


class Recorder:
    """Context manager: records what autograd saves inside it.

    >>> with Recorder(layer.parameters()) as rec:   # doctest: +SKIP
    ...     out = layer(x)
    >>> rec.storages(out)                            # doctest: +SKIP
    """

    def __init__(self, parameters=()):
        self.params = {_storage_id(p) for p in parameters}
        self.names: dict[int, tuple[str, torch.Tensor]] = {}
        self.blocks: list[str] = ["layer"]
        self.saved: dict[int, tuple[str, torch.Tensor]] = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack,
                                                               _unpack)

    def __enter__(self):
        _ACTIVE.append(self)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)
        _ACTIVE.remove(self)

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        sid = _storage_id(tensor)
        if sid not in self.params:
            self.saved.setdefault(sid, (self.blocks[-1], tensor))
        return tensor

    def tensor(self, key: str) -> torch.Tensor | None:
        """The tensor named ``key`` (e.g. a dropout mask), or None."""
        return next((t for k, t in self.names.values() if k == key), None)

    def storages(self, output: torch.Tensor) -> tuple[SavedStorage, ...]:
        """Every saved storage, in the order first saved; ``output`` is the
        layer's output, whose autograd graph names the saving nodes."""
        saved_by = saving_nodes(output.grad_fn)
        return tuple(self._describe(sid, where, t, tuple(saved_by.get(sid, ())))
                     for sid, (where, t) in self.saved.items())

    def _describe(self, sid, where, saved, saved_by) -> SavedStorage:
        key, tensor = self.names.get(sid, (None, saved))
        attrs = {label.rsplit(".", 1)[-1] for label in saved_by}
        key = key or next((SAVED_AS[a] for a in attrs if a in SAVED_AS), None)
        return SavedStorage(
            key=key, block=where, saved_by=saved_by,
            dtype=str(saved.dtype).removeprefix("torch."),
            itemsize=saved.element_size(), shape=tuple(tensor.shape), nbytes=saved.untyped_storage().nbytes())


def _unpack(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def saving_nodes(root) -> dict[int, list[str]]:
    """Storage id -> ``"NodeName.attribute"`` for every tensor saved in the
    autograd graph below ``root`` (built-in nodes expose ``_saved_*``,
    custom Functions ``saved_tensors``)."""
    found: dict[int, list[str]] = {}
    seen, todo = set(), [root]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for attr, value in _saved_values(node):
            if isinstance(value, torch.Tensor):
                label = f"{node.name()}.{attr}"
                found.setdefault(_storage_id(value), []).append(label)
        todo.extend(fn for fn, _ in node.next_functions)
    return found


def _saved_values(node):
    if hasattr(node, "saved_tensors"):
        yield from (("saved_tensors", t) for t in node.saved_tensors)
    for attr in dir(node):
        if attr.startswith("_saved_"):
            value = getattr(node, attr)
            items = value if isinstance(value, (tuple, list)) else (value,)
            yield from ((attr.removeprefix("_saved_"), v) for v in items)

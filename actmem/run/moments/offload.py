"""Activation offloading: Megatron-LM's ``--cpu-offloading-num-layers``.

Megatron-LM wraps each Transformer layer's forward in Transformer Engine's
offload context (``megatron/core/transformer/transformer_block.py``:
TransformerBlock, ``get_cpu_offload_context(cpu_offloading,
cpu_offloading_num_layers, num_layers, cpu_offloading_activations, ...)``;
``megatron/training/arguments.py`` turns ``cpu_offloading`` on when
``--cpu-offloading-num-layers`` > 0). Transformer Engine's default path
(``transformer_engine/pytorch/cpu_offload.py``, NVTE_CPU_OFFLOAD_V1 unset)
decides every byte here:

* **which layers**: the first n = ``cpu_offloading_num_layers`` of the
  model's L layers (DefaultOffloadSynchronizer._init_offload_synchronization_dicts);
* **which tensors**: every tensor an offloaded layer saves for backward
  through ``saved_tensors_hooks`` with at least 256 x 1024 elements, on the
  GPU, not a Parameter, contiguous (OffloadableLayerState._check_if_offload):
  here a ledger row whose per-rank elements reach 262,144 goes to the host,
  a smaller one (and PyTorch's LayerNorm statistics, outside the ledger)
  stays;
* **what stays on the GPU**: layer i's offload starts when layer i+1's
  forward starts and its GPU copy is released when layer L-n+i starts; its
  reload starts at the backward of layer L-1-n+i. So at most L - n layers'
  offloadable tensors are on the GPU at once, the layer being computed
  included (the docstring of _init_offload_synchronization_dicts: "peak
  memory usage of saving activations is (num_layers - num_offloaded_layers)
  * T"), from the end of the forward through the backward; the rows below
  the threshold of all L layers stay. ``double_buffering`` is accepted and
  unused in this path (``# pylint: disable=unused-argument``), and
  ``offload_weights`` is deprecated there and does nothing;
* **host memory**: pinned buffers of each offloaded layer's tensors
  (``torch.empty_like(tensor, device="cpu", pin_memory=True)`` in
  start_offload), freed after that layer's backward (release_all_memory)
  unless ``retain_pinned_cpu_buffers``.

Megatron-LM's checks (``megatron/core/transformer/transformer_config.py``:
TransformerConfig.__post_init__): 0 <= n < L ("CPU offloading can be done
only for layers less than num_layers"), no pipeline parallelism, no
activation recomputation. Transformer Engine's layer count resets every L
forwards, so one micro-batch is in flight at a time: Megatron-LM's schedule
without pipelining (forward and backward of each micro-batch in turn), the
``"1f1b"`` schedule at p = 1 here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...layer.memory import activation_memory
from ..job.record_fields import check_fields
from ...validate import integer, positive_int

OFFLOAD_MIN_ELEMENTS = 256 * 1024
"""Transformer Engine offloads a saved tensor only from this many elements
(``cpu_offload.py``: OffloadableLayerState._check_if_offload)."""


@dataclass(frozen=True)
class Offload:
    """What ``cpu_offloading_num_layers`` moves, for one micro-batch on one GPU.

    Attributes:
        layers: n, the offloaded layers (the first n of L).
        L: the model's layers.
        offloaded_rows: ledger keys of the rows that go to the host.
        resident_rows: ledger keys of the rows that stay (below the threshold).
        offloadable: bytes of one layer's offloaded rows.
        resident: bytes of one layer's rows that stay.
    """

    layers: int
    L: int
    offloaded_rows: tuple[str, ...]
    resident_rows: tuple[str, ...]
    offloadable: int
    resident: int

    def __post_init__(self):
        """Raises TypeError, ValueError: bytes or counts that are not
        integers >= 0, L < 1, ``layers`` >= L, rows that are not a tuple
        of ledger keys (str)."""
        check_fields(self, {"L": positive_int})
        if self.layers >= self.L:
            raise ValueError(f"Offload.layers must be < L={self.L}, got {self.layers}")

    @property
    def gpu_activations(self) -> int:
        """Bytes of layer activations on the GPU at most (end of forward,
        backward): (L - n) layers' offloadable rows and all L layers' others."""
        return (self.L - self.layers) * self.offloadable + self.L * self.resident

    @property
    def saving(self) -> int:
        """GPU bytes the offload removes at those moments: n layers' offloadable rows."""
        return self.layers * self.offloadable

    @property
    def host(self) -> int:
        """Pinned host bytes: n layers' offloadable rows."""
        return self.layers * self.offloadable


def cpu_offload(model, t: int, layers: int, sequence_parallel: bool = False,
                layer_options: dict | None = None) -> Offload:
    """The offload of ``layers`` (``cpu_offloading_num_layers``) of a dense
    ``model`` (:class:`actmem.ModelConfig`) at tensor-parallel size ``t``,
    without recomputation (module docstring).

    Raises:
        TypeError, ValueError: ``layers`` not an int in 0..L-1; a model with
            MoE layers (their rows differ by kind; not modelled here); the
            layer's own errors (:meth:`actmem.ModelConfig.layer`).
    """
    n = _count(layers, model.L)
    if n and model.num_experts is not None:
        raise ValueError(f"cpu_offloading_num_layers={n} is modelled for dense models; this "
                         f"model has num_experts={model.num_experts}: use 0")
    moved, kept = split_rows(model.layer(t, sequence_parallel, **(layer_options or {})))
    return Offload(n, model.L, tuple(r.key for r in moved), tuple(r.key for r in kept),
                   sum(r.bytes for r in moved), sum(r.bytes for r in kept))


def split_rows(config, threshold: int = OFFLOAD_MIN_ELEMENTS):
    """(rows that go to the host, rows that stay) of one layer
    (:class:`actmem.LayerConfig`): a row goes when its per-rank elements
    reach ``threshold`` (Transformer Engine's 256 x 1024)."""
    rows = activation_memory(**{f: getattr(config, f) for f in config.__dataclass_fields__}).rows
    moved = [r for r in rows if r.bytes // r.bytes_per_element >= threshold]
    return moved, [r for r in rows if r not in moved]


def check_offload(layers, *, L: int, p: int, recompute: str, schedule: str) -> None:
    """Refuse what Megatron-LM and Transformer Engine refuse with offloading
    (module docstring), before any work.

    Raises:
        TypeError, ValueError: ``layers`` not an int in 0..L-1; p > 1;
            ``recompute`` other than ``"none"``; a schedule other than
            ``"1f1b"`` (one micro-batch in flight).
    """
    n = _count(layers, L)
    if n and p > 1:
        raise ValueError(f"cpu_offloading_num_layers={n} with p={p}: Megatron-LM has no "
                         "support for pipeline parallelism with CPU offloading; use p=1")
    if n and recompute != "none":
        raise ValueError(f"cpu_offloading_num_layers={n} with recompute={recompute!r}: "
                         "Megatron-LM: 'CPU offloading does not work when activation "
                         "recomputation is enabled'; use recompute='none'")
    if n and schedule != "1f1b":
        raise ValueError(f"cpu_offloading_num_layers={n} with schedule={schedule!r}: "
                         "Transformer Engine offloads one micro-batch at a time (its layer "
                         "count resets every L forwards); use schedule='1f1b' at p=1")


def _count(layers, L: int) -> int:
    n = integer("cpu_offloading_num_layers", layers, "an int from 0 to L-1")
    if not 0 <= n < L:
        raise ValueError(f"cpu_offloading_num_layers={n} must be between 0 and L-1={L - 1} "
                         "(Megatron-LM: 'CPU offloading can be done only for layers less than "
                         "num_layers'; Transformer Engine keeps the last layer on the GPU)")
    return n


def offloaded_timeline(timeline, saving: int):
    """``timeline`` (a p = 1 stage's :class:`actmem.StageTimeline`) with
    ``saving`` bytes fewer activations at every event that holds a pass: at
    p = 1 under ``"1f1b"`` a moment with activations holds exactly one
    micro-batch's pass, at its last layer's forward, at its loss or in its
    backward, when n layers' offloadable rows are on the host."""
    return replace(timeline, events=tuple(_less(e, saving) for e in timeline.events))


def _less(event, saving: int):
    i = list(event.by_category).index("activations")
    if not event.bytes[i]:
        return event
    return replace(event, bytes=event.bytes[:i] + (event.bytes[i] - saving,) + event.bytes[i + 1:])

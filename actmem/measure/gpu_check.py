"""Check the prediction on your GPU: one whole step measured by CUDA's allocator.

Notebook 10's "Check it on your GPU" cell. :func:`check_on_gpu` runs the
project's whole-step measurement (:func:`actmem.measure.step.measure` with
``device="cuda"``: the small GPT of :mod:`.step_model`, one optimizer step
of two micro-batches) and sets beside ``training_memory``'s prediction for
the same step (its stage-0 timeline peak, the GPU's workspaces included):

* ``torch.cuda.max_memory_allocated()``: the most bytes the caching
  allocator handed to tensors at one moment (what the timeline predicts);
* ``torch.cuda.max_memory_reserved()``: the most it held from the driver,
  the allocated bytes plus its cached, partly used blocks (PyTorch's
  "CUDA semantics" notes, Memory management); the gap is what
  ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (set before the
  first CUDA call) makes smaller;
* a memory snapshot (``torch.cuda.memory._record_memory_history`` then
  ``torch.cuda.memory._dump_snapshot``), a pickle file to drop on
  https://pytorch.org/memory_viz to see every allocation of the step on a
  timeline, with its stack.

Both peaks are taken after ``torch.cuda.reset_peak_memory_stats()``, once
the model and Adam's states exist (:func:`actmem.measure.step.run`). The
CUDA context and NCCL's buffers are outside the allocator: neither number
counts them (``nvidia-smi`` does).

Without a CUDA GPU nothing runs: :func:`check_on_gpu` returns a
:class:`GpuCheck` with ``skipped`` set, whose :meth:`GpuCheck.lines` say
what would run and that it was skipped (no number is made up). Sizes are
bytes; MiB = 2^20 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..language import tr
from ..units import format_bytes
from .step_device import device_configs

CONFIG = "megatron_flash"
"""The configuration checked by default (:data:`actmem.measure.stored_step.CONFIGS`):
Megatron-LM's mixed precision with ``scaled_dot_product_attention`` and no
dropout, one that runs on CUDA (:func:`.step_device.device_configs`)."""
ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
"""The allocator setting that narrows reserved over allocated (set it in the
environment before Python starts, or before the first CUDA call)."""


@dataclass(frozen=True)
class Comparison:
    """Measured against predicted, bytes.

    Attributes:
        predicted: the timeline's peak. allocated: ``max_memory_allocated()``.
        reserved: ``max_memory_reserved()``.
    """

    predicted: int
    allocated: int
    reserved: int

    def __post_init__(self):
        """Raises TypeError, ValueError: a value that is not an int >= 0,
        ``predicted`` 0, or ``reserved`` below ``allocated``."""
        for name in ("predicted", "allocated", "reserved"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be bytes (an int), got {value!r}")
            if value < 0:
                raise ValueError(f"{name} must be bytes >= 0, got {value}")
        if self.predicted == 0:
            raise ValueError("predicted must be > 0 bytes, got 0")
        if self.reserved < self.allocated:
            raise ValueError(f"reserved={self.reserved} is below allocated={self.allocated}: "
                             "the allocator reserves at least what it hands out")

    @property
    def difference(self) -> int:
        """``allocated - predicted``, bytes (> 0: the GPU needed more)."""
        return self.allocated - self.predicted

    @property
    def relative(self) -> float:
        """``difference / predicted``."""
        return self.difference / self.predicted

    @property
    def allocator_gap(self) -> int:
        """``reserved - allocated``: the caching allocator's blocks beyond the
        tensors' bytes, bytes."""
        return self.reserved - self.allocated


@dataclass(frozen=True)
class GpuCheck:
    """The result of :func:`check_on_gpu`.

    Attributes:
        config: the configuration's name. skipped: why nothing ran
            ("" when it ran). comparison: the numbers (None when skipped).
        snapshot: the snapshot file written ("" when none).
    """

    config: str
    skipped: str = ""
    comparison: Comparison | None = None
    snapshot: str = ""

    def lines(self) -> list[str]:
        """What ran and what it found, or what would run and that it was
        skipped, in the learner's language."""
        plan = tr("Runs one training step of '{config}' on CUDA, reads "
                  "torch.cuda.max_memory_allocated() and max_memory_reserved(), and records a "
                  "memory snapshot for https://pytorch.org/memory_viz; {conf} narrows "
                  "reserved over allocated.").format(config=self.config, conf=ALLOC_CONF)
        if self.skipped:
            return [plan, tr("Skipped: {why}").format(why=tr(self.skipped))]
        c = self.comparison
        lines = [plan, tr("predicted peak (the timeline): {bytes}").format(
                     bytes=format_bytes(c.predicted)),
                 tr("max_memory_allocated(): {bytes}, {diff:+.2%} against the prediction").format(
                     bytes=format_bytes(c.allocated), diff=c.relative),
                 tr("max_memory_reserved(): {bytes}, {gap} above allocated").format(
                     bytes=format_bytes(c.reserved), gap=format_bytes(c.allocator_gap))]
        if self.snapshot:
            lines.append(tr("snapshot written to {path}: open it on https://pytorch.org/memory_viz")
                         .format(path=self.snapshot))
        return lines


NO_CUDA = "no CUDA GPU here (torch.cuda.is_available() is False), so nothing was measured"


def check_on_gpu(config: str = CONFIG, snapshot: str | None = "step_snapshot.pickle",
                 cuda: bool | None = None) -> GpuCheck:
    """Measure one step of ``config`` on this machine's CUDA GPU against the
    timeline's prediction (module docstring), or say it was skipped.

    Args:
        config: a configuration that runs on CUDA
            (:func:`.step_device.device_configs`).
        snapshot: the file the memory snapshot is written to; None: no
            snapshot is recorded.
        cuda: whether to run on CUDA; None: ``torch.cuda.is_available()``
            (False: skipped, nothing runs).

    Raises:
        ValueError: ``config`` that does not run on CUDA, checked before
            anything runs. TypeError: ``snapshot`` not a str or None.
    """
    if config not in device_configs("cuda"):
        raise ValueError(f"config={config!r} does not run on CUDA; allowed: "
                         f"{', '.join(device_configs('cuda'))}")
    if snapshot is not None and not isinstance(snapshot, str):
        raise TypeError(f"snapshot must be a file name (str) or None, got {snapshot!r}")
    if not (torch.cuda.is_available() if cuda is None else cuda):
        return GpuCheck(config, skipped=NO_CUDA)
    from .step import measure   # the step's module: only when it runs
    if snapshot:
        torch.cuda.memory._record_memory_history(max_entries=100_000)
    try:
        measured = measure(config, device="cuda")
        reserved = torch.cuda.max_memory_reserved()
        if snapshot:
            torch.cuda.memory._dump_snapshot(snapshot)
    finally:
        if snapshot:
            torch.cuda.memory._record_memory_history(enabled=None)
    comparison = Comparison(measured["timeline_peak"], measured["cuda_max_memory_allocated"],
                            reserved)
    return GpuCheck(config, comparison=comparison, snapshot=snapshot or "")

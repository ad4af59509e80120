"""Where :mod:`.step` measures: on CPU, or on a CUDA GPU against PyTorch's allocator.

On CPU the step is tracked by MemTracker and :class:`.live_bytes.LiveBytes`,
and the timeline is asked for no device workspace. On a CUDA GPU
(``--device cuda``) the same step is also compared with
``torch.cuda.max_memory_allocated()`` after ``torch.cuda.reset_peak_memory_stats()``
(taken once the model, gradient buffer and Adam's states exist), and the
timeline includes that GPU's workspaces: PyTorch's two cuBLAS workspaces for
its compute capability, or ``CUBLAS_WORKSPACE_CONFIG`` when set
(:func:`actmem.run.moments.framework.default_cublas_workspace_config`), and no
Transformer Engine. Only configurations without dropout run there: the
reference layer (:mod:`.layer`) draws its dropout masks with a CPU generator.
"""

from __future__ import annotations

import os

import torch

from ..run.moments.framework import default_cublas_workspace_config
from .stored_step import CONFIGS

DEVICES = ("cpu", "cuda")
"""Where a step can be measured."""


def device_configs(device: str) -> list[str]:
    """The configurations that run on ``device``: all on CPU; on CUDA those
    that allocate (not under FakeTensorMode) and have no dropout."""
    return [n for n, c in CONFIGS.items()
            if device == "cpu" or not (c.fake or c.model.dropout)]


def check_device(device: str, names) -> None:
    """Refuse a ``device`` that is not here, or ``names`` it cannot run.

    Raises:
        ValueError: ``device`` not in :data:`DEVICES`, ``"cuda"`` without a
            CUDA GPU, or a configuration that does not run there; the message
            names ``--device``, its value and what is allowed.
    """
    if device not in DEVICES:
        raise ValueError(f"--device {device!r} is not allowed; choose from {', '.join(DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda needs a CUDA GPU, and torch.cuda.is_available() is "
                         "False here; allowed here: --device cpu")
    wrong = [n for n in names if n not in device_configs(device)]
    if wrong:
        raise ValueError(f"--device {device}: configuration {wrong[0]!r} does not run there "
                         f"(dropout masks come from a CPU generator, or it is a fake tensor "
                         f"run); allowed: {', '.join(device_configs(device))}")


def workspace_config(device: str) -> str:
    """``CUBLAS_WORKSPACE_CONFIG`` for the timeline: none on CPU (``":0:0"``);
    on CUDA the environment's or PyTorch's default for this GPU."""
    if device == "cpu":
        return ":0:0"
    capability = None if torch.version.hip else torch.cuda.get_device_capability()
    return (os.environ.get("CUBLAS_WORKSPACE_CONFIG")
            or default_cublas_workspace_config(capability))

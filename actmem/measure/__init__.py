"""Measure what a PyTorch GPT layer really saves, and check the ledger.

A small reference layer (:mod:`.layer`, the paper's assumptions, real
Megatron tensor parallelism over gloo, :mod:`.parallel`, :mod:`.launch`)
runs under ``torch.autograd.graph.saved_tensors_hooks`` (:mod:`.saved`);
every saved storage is set against the ledger row it belongs to
(:mod:`.compare`), for the paper's layer and each variant
(:mod:`.variants`). Notebook: ``notebooks/08_measure_it.ipynb``. Command
line: ``python -m actmem.measure --json``.

Needs PyTorch (the optional ``measure`` extra: torch==2.13.0, a CPU build
is enough; :data:`INSTALL_HINT`). ``import actmem`` itself never imports
torch.
"""

import sys

INSTALL_HINT = ("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu "
                "(the CPU build is enough)")
"""Works however actmem was installed: the ``measure`` extra only adds torch."""

try:
    import torch  # noqa: F401
except ImportError as err:  # pragma: no cover - depends on the environment
    if sys.argv[:1] == ["-m"]:  # python -m actmem.measure: one line, no traceback
        raise SystemExit(f"python -m actmem.measure: error: needs PyTorch: {INSTALL_HINT}")
    raise ImportError(f"actmem.measure needs PyTorch: {INSTALL_HINT}") from err

from .check import tensor_parallel_error
from .compare import Comparison, Extra, RowCheck, compare, explain
from .layer import ReferenceLayer, layer_input
from .run import Measurement, measure_layer
from .saved import Recorder, SavedStorage, named
from .variants import SMALL, VARIANTS, Variant, measure_variants

__all__ = [
    "SMALL", "VARIANTS", "Comparison", "Extra", "Measurement", "Recorder",
    "ReferenceLayer", "RowCheck", "SavedStorage", "Variant", "compare",
    "explain", "layer_input", "measure_layer", "measure_variants", "named",
    "tensor_parallel_error",
]

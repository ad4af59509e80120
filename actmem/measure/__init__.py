"""Measure what a PyTorch GPT layer really saves, and check the ledger.

A small reference layer (:mod:`.layer`, the paper's assumptions, real
Megatron tensor parallelism over gloo, :mod:`.parallel`, :mod:`.launch`)
runs under ``torch.autograd.graph.saved_tensors_hooks`` (:mod:`.saved`);
every saved storage is set against the ledger row it belongs to
(:mod:`.compare`), for the paper's layer and each variant
(:mod:`.variants`). Notebook: ``notebooks/07_measure_it.ipynb``. Command
line: ``python -m actmem.measure --json``.

Needs the optional extra: ``pip install -e ".[measure]"`` (torch==2.13.0,
a CPU build is enough). ``import actmem`` itself never imports torch.
"""

try:
    import torch  # noqa: F401
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "actmem.measure needs PyTorch: pip install -e \".[measure]\" "
        "(torch==2.13.0; the CPU build is enough)") from err

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

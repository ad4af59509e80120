"""actmem: activation memory of a Transformer layer, tensor by tensor.

Teaching helpers for Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models" (sections 4.1-5, Table 2).
All numbers are exact bytes; see :mod:`actmem.units` for MiB/GiB/GB.
Plotting and widgets live in :mod:`actmem.figures` and :mod:`actmem.widgets`
and are imported only when used.
"""

from .config import ACTIVATIONS, RECOMPUTE, LayerConfig, valid_tensor_parallel_sizes
from .formula import TABLE2_FORMULAS, seed_formula
from .ledger import GROUPS, PLACEMENTS, LedgerRow, ledger_rows
from .memory import TABLE2, ActivationMemory, activation_memory, table2
from .training import model_activation_memory, pipeline_stage_memory
from .units import UNITS, convert, format_bytes, format_value, to_gb, to_gib, to_mib
from .validate import common_divisors

__all__ = [
    "ACTIVATIONS", "GROUPS", "PLACEMENTS", "RECOMPUTE", "TABLE2",
    "TABLE2_FORMULAS", "UNITS", "ActivationMemory", "LayerConfig", "LedgerRow",
    "activation_memory", "common_divisors", "convert", "format_bytes",
    "format_value", "ledger_rows", "model_activation_memory", "pipeline_stage_memory", "seed_formula", "table2",
    "to_gb", "to_gib", "to_mib", "valid_tensor_parallel_sizes",
]

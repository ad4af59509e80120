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
from .model import NORMS, POSITIONS, ModelConfig, ParameterCount, parameter_count
from .peak import PARTS, StageMemory, TrainingMemory, training_memory
from .presets import PRESETS, preset
from .states import ACCOUNTINGS, ModelStates, model_states
from .pipeline_formulas import (bubble_fraction_formula, first_stage_memory_1f1b,
                                gpipe_in_flight, interleaved_factor,
                                interleaved_factor_holds, interleaved_first_stage_memory,
                                interleaved_in_flight, one_f_one_b_in_flight)
from .schedules import ORDERS, SCHEDULES, Op, PipelineSchedule, simulate_schedule
from .training import model_activation_memory, pipeline_stage_memory
from .units import (UNITS, convert, format_bytes, format_value, parse_size, to_gb, to_gib,
                    to_mib)
from .validate import common_divisors

__all__ = [
    "ACCOUNTINGS", "NORMS", "PARTS", "POSITIONS", "PRESETS", "ModelConfig", "ModelStates",
    "ParameterCount", "StageMemory", "TrainingMemory", "model_states", "parameter_count",
    "parse_size", "preset", "training_memory",
    "ACTIVATIONS", "GROUPS", "ORDERS", "PLACEMENTS", "RECOMPUTE", "SCHEDULES",
    "TABLE2", "TABLE2_FORMULAS", "UNITS", "ActivationMemory", "LayerConfig",
    "LedgerRow", "Op", "PipelineSchedule", "activation_memory",
    "bubble_fraction_formula", "common_divisors", "convert",
    "first_stage_memory_1f1b", "format_bytes", "format_value",
    "gpipe_in_flight", "interleaved_factor", "interleaved_factor_holds",
    "interleaved_first_stage_memory", "interleaved_in_flight", "ledger_rows",
    "model_activation_memory", "one_f_one_b_in_flight", "pipeline_stage_memory",
    "seed_formula", "simulate_schedule", "table2", "to_gb", "to_gib", "to_mib",
    "valid_tensor_parallel_sizes",
]

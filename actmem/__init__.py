"""actmem: activation memory of a Transformer layer, tensor by tensor.

Teaching helpers for Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models" (sections 4.1-5, Table 2), and
for the training run around it. All numbers are exact bytes; see
:mod:`actmem.units` for MiB/GiB/GB.

The package flows one way: :mod:`actmem.layer` (one layer on one GPU) ->
:mod:`actmem.run` (schedules, whole models, model states, the peak) ->
:mod:`actmem.views` (figures, widgets, tables, the command line);
:mod:`actmem.measure` checks the first two with PyTorch. The public names
are importable from ``actmem``; so are the modules by their short name
(``from actmem import figures``), each imported only when first used, so
``import actmem`` loads neither matplotlib nor ipywidgets.
"""

import importlib

from .language import LANGUAGES, get_language, set_language
from .layer.config import RECOMPUTE, LayerConfig
from .layer.dimensions import ACTIVATIONS, default_ffn_hidden_size, valid_tensor_parallel_sizes
from .layer.coefficients import coefficient_units, coefficients, row_coefficient
from .layer.context_parallel import CP_COMM_TYPES, valid_context_parallel_sizes
from .layer.formula import TABLE2_FORMULAS, paper_formula
from .layer.fp8 import FP8_FORMATS
from .layer.fp8_weights import fp8_state_bytes
from .layer.lora import LORA_TARGETS, lora_parameters
from .layer.ledger import GROUPS, PLACEMENTS, LedgerRow, ledger_rows
from .layer.recompute_modules import MODULES as RECOMPUTE_MODULES
from .layer.memory import TABLE2, ActivationMemory, activation_memory, table2
from .run.moments.framework import GRADIENT_BUFFERS, workspace_bytes
from .run.moments.loss import LOSSES, loss_bytes
from .run.job.gpus import GPU, GPUS, gpu_capacity
from .run.model_states.lora_states import adapter_parameters
from .run.job.model import NORMS, POSITIONS, ModelConfig
from .run.job.parameters import ParameterCount, parameter_count
from .run.moments.moe_dispatch import dispatch_buffers, dispatch_gradients
from .run.moments.offload import Offload, cpu_offload
from .run.job.job import Job
from .run.peak import PARTS, StageMemory, TrainingMemory, training_memory
from .run.job.presets import MOE_PRESETS, PRESETS, preset
from .run.model_states.states import ACCOUNTINGS, ModelStates, expert_data_parallel, model_states
from .run.schedule.pipeline_formulas import (bubble_fraction_formula, first_stage_memory_1f1b,
                                gpipe_in_flight, interleaved_factor,
                                interleaved_factor_holds, interleaved_first_stage_memory,
                                interleaved_in_flight, one_f_one_b_in_flight)
from .run.schedule.stage_split import split_layers
from .run.moments.timeline import CATEGORIES, Event, StageTimeline
from .run.schedule.schedules import ORDERS, SCHEDULES, Op, PipelineSchedule, simulate_schedule
from .run.schedule.training import model_activation_memory, pipeline_stage_memory
from .units import (UNITS, convert, format_bytes, format_change, format_value, parse_size,
                    to_gb, to_gib, to_mib)
from .validate import common_divisors
from .views.answers import hidden_answers, hidden_figure

__all__ = [
    "CATEGORIES", "Event", "GPU", "GPUS", "GRADIENT_BUFFERS", "LOSSES", "StageTimeline",
    "gpu_capacity", "loss_bytes", "split_layers", "workspace_bytes",
    "ACCOUNTINGS", "NORMS", "PARTS", "POSITIONS", "PRESETS", "ModelConfig", "ModelStates",
    "ParameterCount", "StageMemory", "TrainingMemory", "model_states", "parameter_count",
    "parse_size", "preset", "training_memory", "Job", "MOE_PRESETS", "expert_data_parallel",
    "ACTIVATIONS", "GROUPS", "ORDERS", "PLACEMENTS", "RECOMPUTE", "SCHEDULES",
    "TABLE2", "TABLE2_FORMULAS", "UNITS", "ActivationMemory", "LayerConfig",
    "LedgerRow", "Op", "PipelineSchedule", "activation_memory",
    "bubble_fraction_formula", "coefficient_units", "coefficients", "common_divisors",
    "convert", "default_ffn_hidden_size",
    "format_change",
    "first_stage_memory_1f1b", "format_bytes", "format_value",
    "LANGUAGES", "get_language", "set_language",
    "gpipe_in_flight", "hidden_answers", "hidden_figure", "interleaved_factor",
    "interleaved_factor_holds",
    "interleaved_first_stage_memory", "interleaved_in_flight", "ledger_rows",
    "model_activation_memory", "one_f_one_b_in_flight", "pipeline_stage_memory",
    "paper_formula", "row_coefficient", "simulate_schedule", "table2", "to_gb", "to_gib", "to_mib",
    "valid_tensor_parallel_sizes",
    "FP8_FORMATS", "LORA_TARGETS", "adapter_parameters", "fp8_state_bytes", "lora_parameters",
    "CP_COMM_TYPES", "valid_context_parallel_sizes",
    "dispatch_buffers", "dispatch_gradients",
    "RECOMPUTE_MODULES", "Offload", "cpu_offload",
]

_MODULES = {
    **dict.fromkeys(("config", "ledger", "memory", "formula", "ledger_diff", "moe", "lora",
                     "fp8", "context_parallel", "head_dim", "mla", "recompute_modules"),
                    "layer"),
    **{name: f"run.{group}" for group, names in (
        ("schedule", ("schedules", "pipeline_formulas", "training", "stage_split")),
        ("job", ("model", "presets", "gpus", "job", "megatron_args", "hf_config", "parameters")),
        ("model_states", ("states", "lora_states", "placement")),
        ("moments", ("timeline", "framework", "pass_parts", "moe_timeline", "offload")))
       for name in names},
    **dict.fromkeys(("peak", "megatron_estimate", "reserve", "features", "step_setup"), "run"),
    **dict.fromkeys(("figures", "widgets", "variant_views", "cli", "train_cli",
                     "schedule_figures", "schedule_views", "fit_figures", "fit_views",
                     "pipeline_measured"), "views"),
}
"""Short module name -> the subpackage it lives in."""


def __getattr__(name: str):
    """``actmem.figures`` and the like: the module, imported on first use."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{_MODULES[name]}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

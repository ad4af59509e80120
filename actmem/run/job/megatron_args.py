"""A Megatron-LM launch as a :class:`actmem.Job`: ``Job.from_megatron_args``.

A learner gives the arguments a ``pretrain_gpt.py`` launch receives, the
number of GPUs and the environment variables that change memory. Every
argument of Megatron-LM's ``megatron/training/arguments.py`` at one pinned
commit is classified in ``actmem/data/megatron_arguments.json`` (written by
``tools/megatron_arguments.py`` from that file, its ``add_argument`` calls
and the dataclass groups it builds): **modelled** (mapped here, with
Megatron-LM's own default when absent), **memory-neutral** (each with why)
or **refused** (a ValueError naming the flag, its value and why, whenever
the launch sets it away from its default). The launch is parsed with
:mod:`argparse` from that table, as Megatron-LM parses it.

Sizes are derived as Megatron-LM derives them (``arguments.py``:
validate_args): d = world_size / (t * p * cp), m = global batch / (micro
batch * d), v from ``--num-layers-per-virtual-pipeline-stage`` or
``--num-virtual-stages-per-pipeline-rank``; the vocabulary from
``--vocab-size`` (``NullTokenizer``) or GPT-2's 50,257 tokens
(``GPT2BPETokenizer``), padded as :class:`actmem.ModelConfig` pads it.
"""

from __future__ import annotations

import argparse
import json
import shlex
from importlib import resources

from .megatron_attention import softmax_in_16_bits
from .megatron_fields import job_options, model_fields

TABLE = "data/megatron_arguments.json"
RUNS = "data/megatron_runs.json"
SCRIPT_DEFAULTS = {"tokenizer_type": "GPT2BPETokenizer"}
"""What ``pretrain_gpt.py`` sets when the launch does not (its ``pretrain``
call's ``args_defaults``)."""
ENV = {
    "CUBLAS_WORKSPACE_CONFIG": "modelled: PyTorch's cuBLAS workspaces (cublas_workspace_config)",
    "NVTE_FLASH_ATTN": "modelled: with NVTE_FUSED_ATTN=0 too, Transformer Engine runs the "
                       "unfused attention, which keeps the s x s map",
    "NVTE_FUSED_ATTN": "modelled: as NVTE_FLASH_ATTN; with NVTE_FUSED_ATTN=0 alone, "
                       "flash-attn runs, which keeps the attention output twice",
    "NVIDIA_PYTORCH_VERSION": "modelled: NGC's PyTorch container (YY.MM); before 26.03 its "
                              "PyTorch gives compute capability 10.x and 12.x (Blackwell) the "
                              "8 MiB cuBLAS workspace of older GPUs",
    "NVTE_ALLOW_NONDETERMINISTIC_ALGO": "modelled: 0 (deterministic) turns off Transformer "
                                        "Engine's fused attention on compute capability 10.0 "
                                        "and newer, so flash-attn runs",
}
"""Environment variables that change memory, and how actmem reads them."""
NEUTRAL_ENV = {
    **dict.fromkeys(("CUDA_DEVICE_MAX_CONNECTIONS", "NVTE_FWD_LAYERNORM_SM_MARGIN",
                     "NVTE_BWD_LAYERNORM_SM_MARGIN",
                     "NVTE_NORM_FWD_USE_CUDNN", "NVTE_NORM_BWD_USE_CUDNN",
                     "NVTE_APPLY_QK_LAYER_SCALING", "NVTE_DEBUG", "NVTE_DEBUG_LEVEL",
                     "TORCH_NCCL_AVOID_RECORD_STREAMS", "CUDA_LAUNCH_BLOCKING"),
                    "chooses kernels, streams or scheduling among those that keep the same "
                    "tensors"),
    **dict.fromkeys(("NCCL_ALGO", "NCCL_NVLS_ENABLE", "NCCL_DEBUG", "NCCL_IB_SL",
                     "NCCL_IB_TIMEOUT", "NCCL_P2P_NET_CHUNKSIZE", "USE_MNNVL",
                     "TORCH_NCCL_ENABLE_MONITORING", "PYTORCH_CUDA_ALLOC_CONF"),
                    "changes memory outside PyTorch's allocated bytes (NCCL's buffers, the "
                    "allocator's reserved gap), which the peak does not count"),
    **dict.fromkeys(("N_REPEAT", "N_REPEATS", "PYTHONWARNINGS", "SKIP_PYTEST",
                     "NON_DETERMINSTIC_RESULTS", "ARTIFACTS_ROOT", "THROUGHPUT_START_STEP",
                     "HF_HOME", "HYDRA_FULL_ERROR", "RECORD_CHECKPOINTS",
                     "ENABLE_LIGHTWEIGHT_MODE", "NVTE_ALLOW_UNSAFE_PICKLE_EXTRA_STATE"),
                    "read by the test harness, the logger or checkpoint loading, not by the "
                    "training step's tensors"),
}
"""Environment variables that change no allocated byte actmem counts, with why."""


def job_from_megatron_args(argv, *, world_size: int, env: dict | None = None,
                           gpu=None):
    """The :class:`actmem.Job` of a Megatron-LM launch (module docstring).

    Args:
        argv: the arguments (a list of strings, or one string split as a
            shell splits it), without the script's name.
        world_size: the number of GPUs of the job.
        env: environment variables (name -> value): :data:`ENV` are read,
            :data:`NEUTRAL_ENV` are memory-neutral, others are refused.
        gpu: a GPU preset name (:data:`actmem.GPUS`) or size, as
            ``training_memory``'s ``gpu_memory``.

    Raises:
        ValueError: an argument Megatron-LM does not have, a value it would
            refuse, a refused argument set away from its default, a value of
            a modelled argument actmem does not model, sizes that do not
            divide, or what :class:`actmem.Job` refuses; each names it.
    """
    from .job import Job
    from .model import ModelConfig
    from ...validate import positive_int
    env = _environment(env or {})
    args = _parse(argv, env)
    world = positive_int("world_size", world_size)
    model = ModelConfig(**model_fields(args, env, gpu))
    return Job(model, **job_options(args, env, world, model, gpu), gpu_memory=gpu)


def ci_runs() -> dict[str, dict]:
    """Megatron-LM's CI runs actmem holds, by test name
    (``actmem/data/megatron_runs.json``): each run's GPU, its model and options
    in actmem's names, its ``launch`` as the CI gives it (argv, environment,
    world size) and its measured peak (``mem_max_allocated_bytes``, bytes)."""
    return json.loads(resources.files("actmem").joinpath(RUNS).read_text())["runs"]


def table() -> list[dict]:
    """The classified arguments (``actmem/data/megatron_arguments.json``)."""
    return json.loads(resources.files("actmem").joinpath(TABLE).read_text())["arguments"]


class _Refusal(argparse.ArgumentParser):
    """argparse that raises a ValueError instead of exiting."""

    def error(self, message):
        raise ValueError(f"Megatron-LM's arguments: {message}")


def _parser() -> argparse.ArgumentParser:
    """Megatron-LM's parser, from the table (types: int, float, str; the
    others are read as text and converted below)."""
    parser = _Refusal(prog="pretrain_gpt.py", allow_abbrev=False, add_help=False)
    types = {"int": int, "float": float}
    for row in table():
        kwargs = dict(dest=row["dest"], default=_default(row))
        if row["action"] in ("store_true", "store_false"):
            kwargs["action"] = row["action"]
        else:
            kwargs["type"] = types.get(row["type"], str)
            if row["nargs"] not in (None, 0):
                kwargs["nargs"] = row["nargs"]
        parser.add_argument(*row["option_strings"], **kwargs)
    return parser


def _default(row: dict):
    """The argument's default: its literal value, or None where
    Megatron-LM computes it (``2 ** 32``, an enum member), read below."""
    return row["default"] if row["default_is_literal"] else None


def _parse(argv, env: dict) -> dict:
    """The launch's arguments by dest (``pretrain_gpt.py``'s own defaults
    applied), each refused argument set away from its default (a list of
    one value, its default, is its default; a row ``neutral_when``
    ``"softmax_in_16_bits"`` is neutral where the softmax keeps 16 bits,
    :func:`actmem.run.job.megatron_attention.softmax_in_16_bits`)
    and each modelled value actmem does not model refused."""
    argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
    args = vars(_parser().parse_args(argv))
    args.update({k: v for k, v in SCRIPT_DEFAULTS.items() if args[k] is None})
    sixteen_bits = softmax_in_16_bits(args, env)
    for row in table():
        value, default = args[row["dest"]], _default(row)
        if value is None or value == default or value == [default] or (
                row.get("neutral_when") == "softmax_in_16_bits" and sixteen_bits):
            continue
        shown = " ".join(map(str, value)) if isinstance(value, list) else value
        if row["class"] == "refused":
            raise ValueError(f"{row['flag']} {shown}: refused: {row['why']}")
        allowed = row.get("values")
        values = value if isinstance(value, list) else [value]
        if row["class"] == "modelled" and allowed and any(v not in allowed for v in values):
            raise ValueError(f"{row['flag']} {shown}: actmem models {', '.join(allowed)} "
                             f"({row['why']})")
    return args


def _environment(env: dict) -> dict:
    """The environment, each variable read, neutral or refused by name."""
    for name, value in env.items():
        if name not in ENV and name not in NEUTRAL_ENV:
            raise ValueError(f"environment variable {name}={value!r} is not modelled: actmem "
                             f"reads {', '.join(ENV)} and takes {', '.join(NEUTRAL_ENV)} as "
                             "memory-neutral")
    return {name: str(value) for name, value in env.items()}

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
import ast
import json
import shlex
from importlib import resources

TABLE = "data/megatron_arguments.json"
RUNS = "data/megatron_runs.json"
SCRIPT_DEFAULTS = {"tokenizer_type": "GPT2BPETokenizer"}
"""What ``pretrain_gpt.py`` sets when the launch does not (its ``pretrain``
call's ``args_defaults``)."""
GPT2_VOCABULARY = 50257
"""Tokens of GPT-2's BPE vocabulary (``gpt2-vocab.json``), which
``--tokenizer-type GPT2BPETokenizer`` reads."""
ENV = {
    "CUBLAS_WORKSPACE_CONFIG": "modelled: PyTorch's cuBLAS workspaces (cublas_workspace_config)",
    "NVTE_FLASH_ATTN": "modelled: with NVTE_FUSED_ATTN=0 too, Transformer Engine runs the "
                       "unfused attention, which keeps the s x s map",
    "NVTE_FUSED_ATTN": "modelled: as NVTE_FLASH_ATTN",
}
"""Environment variables that change memory, and how actmem reads them."""
NEUTRAL_ENV = {
    **dict.fromkeys(("CUDA_DEVICE_MAX_CONNECTIONS", "NVTE_FWD_LAYERNORM_SM_MARGIN",
                     "NVTE_BWD_LAYERNORM_SM_MARGIN", "NVTE_ALLOW_NONDETERMINISTIC_ALGO",
                     "NVTE_NORM_FWD_USE_CUDNN", "NVTE_NORM_BWD_USE_CUDNN",
                     "NVTE_APPLY_QK_LAYER_SCALING", "NVTE_DEBUG", "NVTE_DEBUG_LEVEL",
                     "TORCH_NCCL_AVOID_RECORD_STREAMS", "CUDA_LAUNCH_BLOCKING"),
                    "chooses kernels, streams or scheduling among those that keep the same "
                    "tensors"),
    **dict.fromkeys(("NCCL_ALGO", "NCCL_NVLS_ENABLE", "NCCL_DEBUG", "NCCL_IB_SL",
                     "NCCL_IB_TIMEOUT", "NCCL_P2P_NET_CHUNKSIZE", "USE_MNNVL",
                     "TORCH_NCCL_ENABLE_MONITORING", "PYTORCH_CUDA_ALLOC_CONF",
                     "NVIDIA_PYTORCH_VERSION"),
                    "changes memory outside PyTorch's allocated bytes (NCCL's buffers, the "
                    "allocator's reserved gap), which the peak does not count, or names the "
                    "container"),
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
    from ..validate import positive_int
    env = _environment(env or {})
    args = _parse(argv, env)
    world = positive_int("world_size", world_size)
    model = ModelConfig(**_model_fields(args, env))
    return Job(model, **_job_options(args, env, world, model), gpu_memory=gpu)


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
    ``"no_attention_map"`` is neutral when the attention keeps no s x s map)
    and each modelled value actmem does not model refused."""
    argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
    args = vars(_parser().parse_args(argv))
    args.update({k: v for k, v in SCRIPT_DEFAULTS.items() if args[k] is None})
    no_map = _flash(args, env)
    for row in table():
        value, default = args[row["dest"]], _default(row)
        if value is None or value == default or value == [default] or (
                row.get("neutral_when") == "no_attention_map" and no_map):
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


def _model_fields(a: dict, env: dict) -> dict:
    """The :class:`actmem.ModelConfig` fields of the launch."""
    dropout = {a["hidden_dropout"] > 0, a["attention_dropout"] > 0}
    if len(dropout) > 1:
        raise ValueError(f"--hidden-dropout {a['hidden_dropout']} with --attention-dropout "
                         f"{a['attention_dropout']}: dropout in one place only is not modelled "
                         "(the ledger keeps its masks everywhere or nowhere)")
    rotary = a["position_embedding_type"] == "rope" or a["use_rotary_position_embeddings"]
    fields = dict(
        s=_needed(a, "seq_length"), b=_needed(a, "micro_batch_size"), h=_needed(a, "hidden_size"),
        a=_needed(a, "num_attention_heads"), L=_needed(a, "num_layers"),
        vocab_size=_vocabulary(a), ffn_hidden_size=a["ffn_hidden_size"],
        kv_heads=a["num_query_groups"] if a["group_query_attention"] else None,
        kv_channels=a["kv_channels"], activation="swiglu" if a["swiglu"] else "gelu",
        dropout=dropout.pop(), flash_attention=_flash(a, env),
        norm={"LayerNorm": "layernorm", "RMSNorm": "rmsnorm"}[a["normalization"]],
        bias=a["add_bias_linear"], tied_embeddings=not a["untie_embeddings_and_output_weights"],
        positions="rotary" if rotary else "learned",
        max_positions=None if rotary else a["max_position_embeddings"],
        make_vocab_size_divisible_by=a["make_vocab_size_divisible_by"],
        qk_layernorm=a["qk_layernorm"],
        source="a Megatron-LM launch (actmem.Job.from_megatron_args)")
    if a["num_experts"]:
        fields.update(_moe_fields(a))
    if a["multi_latent_attention"]:   # its heads' widths are its own: --kv-channels unused
        fields.update({k: a[k] for k in ("multi_latent_attention", "q_lora_rank", "kv_lora_rank",
                                         "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim")},
                      kv_channels=None)
    return fields


def _needed(a: dict, dest: str) -> int:
    if a[dest] is None:
        raise ValueError(f"--{dest.replace('_', '-')} is needed: Megatron-LM has no default")
    return a[dest]


def _vocabulary(a: dict) -> int:
    """The vocabulary before padding: ``--vocab-size`` (NullTokenizer), GPT-2's
    (GPT2BPETokenizer); other tokenizers' sizes are in files actmem does not read."""
    kind = a["tokenizer_type"]
    if a["padded_vocab_size"]:
        raise ValueError("--padded-vocab-size: give --vocab-size (padded by actmem as "
                         "Megatron-LM pads it)")
    if kind == "GPT2BPETokenizer":
        return GPT2_VOCABULARY
    if kind in (None, "NullTokenizer") and a["vocab_size"]:
        return a["vocab_size"]
    raise ValueError(f"--tokenizer-type {kind}: its vocabulary size is in the tokenizer's "
                     "files, which actmem does not read; launch with --tokenizer-type "
                     "NullTokenizer --vocab-size N (N the tokenizer's size) or give the model "
                     "with ModelConfig.from_hf_config")


def _flash(a: dict, env: dict) -> bool:
    """Whether the attention keeps no s x s map: Transformer Engine's flash,
    fused or auto backend (unless NVTE_FLASH_ATTN=0 and NVTE_FUSED_ATTN=0),
    or the local layers with ``--use-flash-attn``."""
    backend = a["attention_backend"] or "auto"   # AttnBackend.auto, Megatron-LM's default
    if a["transformer_impl"] == "local":
        return bool(a["use_flash_attn"])
    unfused = env.get("NVTE_FLASH_ATTN") == "0" and env.get("NVTE_FUSED_ATTN") == "0"
    return backend in ("flash", "fused", "auto") and not unfused


def _moe_fields(a: dict) -> dict:
    """An MoE model's fields (``--moe-token-dispatcher-type alltoall`` only:
    the dispatch buffers actmem models)."""
    if a["moe_token_dispatcher_type"] != "alltoall":
        raise ValueError(f"--moe-token-dispatcher-type {a['moe_token_dispatcher_type']}: actmem "
                         "models the alltoall dispatcher's buffers (actmem.run.moe_timeline); "
                         "Megatron-LM's default, allgather, keeps others")
    coeff = a["moe_aux_loss_coeff"]
    return dict(num_experts=a["num_experts"], moe_router_topk=a["moe_router_topk"],
                moe_ffn_hidden_size=a["moe_ffn_hidden_size"],
                moe_shared_expert_intermediate_size=a["moe_shared_expert_intermediate_size"],
                moe_layer_freq=_layer_pattern(a["moe_layer_freq"]),
                moe_expert_capacity_factor=a["moe_expert_capacity_factor"],
                moe_pad_expert_input_to_capacity=a["moe_pad_expert_input_to_capacity"],
                moe_aux_loss_coeff=coeff[0] if isinstance(coeff, list) else coeff)


def _layer_pattern(text):
    """``--moe-layer-freq`` as Megatron-LM's ``moe_freq_type`` reads it: an
    int, or a list expression of 0s and 1s with ``+`` and ``*`` (e.g.
    ``([0]*3+[1]*58)``), evaluated here without ``eval``."""
    if isinstance(text, int) or "[" not in str(text):
        return int(text)

    def value(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.List):
            return [value(n) for n in node.elts]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            left, right = value(node.left), value(node.right)
            return left + right if isinstance(node.op, ast.Add) else left * right
        raise ValueError(f"--moe-layer-freq {text}: a list of 0s and 1s built with + and * "
                         "is expected")
    try:
        return tuple(value(ast.parse(str(text), mode="eval").body))
    except (SyntaxError, TypeError):
        raise ValueError(f"--moe-layer-freq {text}: not a list expression") from None


def _job_options(a: dict, env: dict, world: int, model) -> dict:
    """The :class:`actmem.Job` options of the launch (sizes derived)."""
    t, p, cp = a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"], \
        a["context_parallel_size"]
    if world % (t * p * cp):
        raise ValueError(f"world_size={world} must be a multiple of t*p*cp={t * p * cp} "
                         f"(t={t}, p={p}, cp={cp}): d = world_size / (t*p*cp)")
    d = world // (t * p * cp)
    b, batch = a["micro_batch_size"], a["global_batch_size"] or a["micro_batch_size"] * d
    if batch % (b * d):
        raise ValueError(f"--global-batch-size {batch} must be a multiple of --micro-batch-size "
                         f"{b} times d={d}: m = global / (micro * d)")
    v = _virtual_stages(a, model.L, p)
    return dict(
        t=t, p=p, d=d, cp=cp, ep=a["expert_model_parallel_size"],
        etp=a["expert_tensor_parallel_size"] if model.num_experts else None,  # unused if dense
        sequence_parallel=a["sequence_parallel"],
        cp_comm_type=a["cp_comm_type"][0] if len(a["cp_comm_type"]) == 1 else
        tuple(a["cp_comm_type"]),
        hierarchical_context_parallel_sizes=a["hierarchical_context_parallel_sizes"] and
        tuple(a["hierarchical_context_parallel_sizes"]),
        m=batch // (b * d), schedule="interleaved" if v > 1 else "1f1b", v=v,
        decoder_first_pipeline_num_layers=a["decoder_first_pipeline_num_layers"],
        decoder_last_pipeline_num_layers=a["decoder_last_pipeline_num_layers"],
        account_for_embedding_in_pipeline_split=a["account_for_embedding_in_pipeline_split"],
        account_for_loss_in_pipeline_split=a["account_for_loss_in_pipeline_split"],
        precision="bf16" if a["bf16"] else "fp32", fp8=a["fp8"],
        **_recomputation(a), cpu_offloading_num_layers=a["cpu_offloading_num_layers"],
        distributed_optimizer=a["use_distributed_optimizer"],
        use_torch_fsdp2=a["use_torch_fsdp2"],
        reshard_after_forward=a["torch_fsdp2_reshard_after_forward"],
        gradient_accumulation_fusion=a["gradient_accumulation_fusion"],
        create_attention_mask_in_dataloader=a["create_attention_mask_in_dataloader"],
        transformer_engine=a["transformer_impl"] == "transformer_engine",
        cublas_workspace_config=env.get("CUBLAS_WORKSPACE_CONFIG"))


def _virtual_stages(a: dict, L: int, p: int) -> int:
    """v: model chunks per GPU (Megatron-LM's virtual pipeline stages)."""
    per_stage, stages = a["num_layers_per_virtual_pipeline_stage"], \
        a["num_virtual_stages_per_pipeline_rank"]
    if per_stage and stages:
        raise ValueError("--num-layers-per-virtual-pipeline-stage with "
                         "--num-virtual-stages-per-pipeline-rank: Megatron-LM takes one")
    if per_stage:
        if L % (p * per_stage):
            raise ValueError(f"--num-layers-per-virtual-pipeline-stage {per_stage}: p={p} times "
                             f"it must divide --num-layers {L}")
        return L // (p * per_stage)
    return stages or 1


def _recomputation(a: dict) -> dict:
    """recompute, recompute_num_layers, recompute_modules."""
    granularity = "selective" if a["recompute_activations"] else a["recompute_granularity"]
    modules = a["recompute_modules"]
    if a["moe_layer_recompute"]:
        modules = [*(modules or ["core_attn"]), "moe"]
    if granularity == "full":
        if a["recompute_method"] != "uniform":
            raise ValueError(f"--recompute-granularity full with --recompute-method "
                             f"{a['recompute_method']}: actmem models uniform")
        return dict(recompute="full", recompute_num_layers=a["recompute_num_layers"] or 1)
    if granularity == "selective":
        return dict(recompute="selective", recompute_modules=modules)
    return {}

"""Megatron-LM's parsed arguments as actmem's fields: the
:class:`actmem.ModelConfig` and the :class:`actmem.Job` options of a launch.

Read by :mod:`actmem.run.job.megatron_args` after it has parsed and classified
the launch. Sizes are derived as Megatron-LM derives them
(``megatron/training/arguments.py``: validate_args): d = world_size /
(t * p * cp), m = global batch / (micro batch * d), v from
``--num-layers-per-virtual-pipeline-stage`` or
``--num-virtual-stages-per-pipeline-rank``; the vocabulary from
``--vocab-size`` (``NullTokenizer``) or GPT-2's 50,257 tokens
(``GPT2BPETokenizer``). Each function raises a ValueError naming the flag
for what it does not model.
"""

from __future__ import annotations

import ast

from .megatron_container import check_compiled_loss, cublas_workspace_config
from .megatron_attention import attention_keeps_no_map, flash_output_copy
from .megatron_fsdp_args import megatron_fsdp_options
from .megatron_layout import virtual_stages

GPT2_VOCABULARY = 50257
"""Tokens of GPT-2's BPE vocabulary (``gpt2-vocab.json``), which
``--tokenizer-type GPT2BPETokenizer`` reads."""


def model_fields(a: dict, env: dict, gpu=None) -> dict:
    """The :class:`actmem.ModelConfig` fields of the launch on ``gpu`` (a
    preset name or size, as :func:`actmem.find_gpu` reads it)."""
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
        kv_channels=a["kv_channels"], activation=_activation(a),
        dropout=dropout.pop(), flash_attention=attention_keeps_no_map(a, env),
        flash_output_copy=flash_output_copy(a, env, gpu),
        norm={"LayerNorm": "layernorm", "RMSNorm": "rmsnorm"}[a["normalization"]],
        bias=a["add_bias_linear"], tied_embeddings=not a["untie_embeddings_and_output_weights"],
        positions="rotary" if rotary else "learned",
        max_positions=None if rotary else a["max_position_embeddings"],
        make_vocab_size_divisible_by=a["make_vocab_size_divisible_by"],
        qk_layernorm=a["qk_layernorm"], apply_rope_fusion=_rope_fusion(a, rotary),
        mtp_num_layers=a["mtp_num_layers"] or None,
        source="a Megatron-LM launch (actmem.Job.from_megatron_args)")
    if a["num_experts"]:
        fields.update(_moe_fields(a))
    if a["multi_latent_attention"]:
        fields.update(_mla_fields(a))
    return fields


def _mla_fields(a: dict) -> dict:
    """Multi-latent attention's fields. Its heads' widths are its own
    (--kv-channels unused), and with it --qk-layernorm builds the latents'
    norms (``mla_qk_norm_config.py``: QKNormConfigResolver fuses them into
    ``linear_q_up_proj`` and ``linear_kv_up_proj``), which
    :mod:`actmem.layer.mla` always counts: so the layer takes no per-head
    q/k norm, and MLA without --qk-layernorm, or with it but no
    --q-lora-rank (a norm fused into ``linear_q_proj`` instead), is refused."""
    if not a["qk_layernorm"] or a["q_lora_rank"] is None:
        missing = "--qk-layernorm" if not a["qk_layernorm"] else "--q-lora-rank"
        raise ValueError(f"--multi-latent-attention without {missing}: actmem counts MLA with "
                         "the latents' norms of DeepSeek's checkpoints, which Megatron-LM "
                         "builds with --qk-layernorm and --q-lora-rank (without them, "
                         "linear_q_up_proj and linear_kv_up_proj save other tensors)")
    return dict({k: a[k] for k in ("multi_latent_attention", "q_lora_rank", "kv_lora_rank",
                                   "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim")},
                kv_channels=None, qk_layernorm=False)


def _rope_fusion(a: dict, rotary: bool) -> bool:
    """``--no-rope-fusion`` with rotary positions (without them nothing
    rotates and the field keeps its default); the unfused rotation keeps cos
    and sin of the whole head width, so a partial ``--rotary-percent`` is
    refused."""
    if rotary and not a["apply_rope_fusion"] and a["rotary_percent"] != 1.0:
        raise ValueError(f"--no-rope-fusion with --rotary-percent {a['rotary_percent']}: the "
                         "unfused rotation of part of each head is not modelled")
    return a["apply_rope_fusion"] or not rotary


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


def _moe_fields(a: dict) -> dict:
    """An MoE model's fields (one load-balancing type: the table refuses
    the others). Refused: the flex dispatcher's fused multi-hot conversion
    (``--enable-experimental`` with ``--moe-permute-fusion``:
    ``token_dispatcher.py``: _DeepepManager.get_permuted_hidden_states_by_experts
    calls ``fused_indices_to_multihot``, which keeps an int32 position map)."""
    if (a["moe_token_dispatcher_type"] == "flex" and a["moe_permute_fusion"]
            and a["enable_experimental"] and a["moe_flex_dispatcher_backend"] == "deepep"):
        raise ValueError("--enable-experimental with --moe-token-dispatcher-type flex and "
                         "--moe-permute-fusion: the fused multi-hot conversion keeps another "
                         "tensor than the one actmem counts (actmem.layer.moe_flex); drop "
                         "--enable-experimental or --moe-permute-fusion")
    coeff, balancing = a["moe_aux_loss_coeff"], a["moe_router_load_balancing_type"]
    return dict(num_experts=a["num_experts"], moe_router_topk=a["moe_router_topk"],
                moe_ffn_hidden_size=a["moe_ffn_hidden_size"],
                moe_shared_expert_intermediate_size=a["moe_shared_expert_intermediate_size"],
                moe_layer_freq=_layer_pattern(a["moe_layer_freq"]),
                moe_expert_capacity_factor=a["moe_expert_capacity_factor"],
                moe_pad_expert_input_to_capacity=a["moe_pad_expert_input_to_capacity"],
                moe_aux_loss_coeff=coeff[0] if isinstance(coeff, list) else coeff,
                moe_token_dispatcher_type=a["moe_token_dispatcher_type"],
                moe_flex_dispatcher_backend=a["moe_flex_dispatcher_backend"],
                moe_router_load_balancing_type=_one(balancing),
                moe_router_dtype=a["moe_router_dtype"],
                moe_router_score_function=a["moe_router_score_function"],
                # topk_routing_with_score_function reads it in the softmax branch only
                moe_router_pre_softmax=(a["moe_router_pre_softmax"]
                                        and a["moe_router_score_function"] == "softmax"),
                moe_router_num_groups=a["moe_router_num_groups"],
                moe_router_group_topk=a["moe_router_group_topk"],
                moe_router_enable_expert_bias=a["moe_router_enable_expert_bias"],
                moe_permute_fusion=a["moe_permute_fusion"])


def _one(value):
    """A list argument of one value as that value (several are refused)."""
    if isinstance(value, list):
        if len(value) != 1:
            raise ValueError(f"--moe-router-load-balancing-type {' '.join(value)}: several "
                             "load-balancing types at once are not modelled")
        return value[0]
    return value


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


def job_options(a: dict, env: dict, world: int, model, gpu=None) -> dict:
    """The :class:`actmem.Job` options of the launch on ``gpu`` (sizes derived)."""
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
    v, stage_layers = virtual_stages(a, model, p)
    check_compiled_loss(a, env)
    return dict(
        t=t, p=p, d=d, cp=cp, ep=a["expert_model_parallel_size"],
        etp=a["expert_tensor_parallel_size"] if model.num_experts else None,  # unused if dense
        sequence_parallel=a["sequence_parallel"],
        cp_comm_type=a["cp_comm_type"][0] if len(a["cp_comm_type"]) == 1 else
        tuple(a["cp_comm_type"]),
        hierarchical_context_parallel_sizes=a["hierarchical_context_parallel_sizes"] and
        tuple(a["hierarchical_context_parallel_sizes"]),
        m=batch // (b * d), schedule="interleaved" if v > 1 else "1f1b", v=v,
        microbatch_group_size_per_vp_stage=a["microbatch_group_size_per_vp_stage"] if v > 1
        else None,   # read by the interleaved schedule only
        stage_layers=stage_layers,
        decoder_first_pipeline_num_layers=a["decoder_first_pipeline_num_layers"],
        decoder_last_pipeline_num_layers=a["decoder_last_pipeline_num_layers"],
        account_for_embedding_in_pipeline_split=a["account_for_embedding_in_pipeline_split"],
        account_for_loss_in_pipeline_split=a["account_for_loss_in_pipeline_split"],
        precision="bf16" if a["bf16"] else "fp16" if a["fp16"] else "fp32",
        accumulate_allreduce_grads_in_fp32=_grads_in_fp32(a), fp8=a["fp8"],
        fp8_recipe=a["fp8_recipe"] if a["fp8"] else "delayed",   # read with FP8 only
        fp8_param_gather=a["fp8_param_gather"],
        **_recomputation(a), cpu_offloading_num_layers=a["cpu_offloading_num_layers"],
        optimizer=_optimizer(a), distributed_optimizer=a["use_distributed_optimizer"],
        num_distributed_optimizer_instances=a["num_distributed_optimizer_instances"],
        use_torch_fsdp2=a["use_torch_fsdp2"],
        reshard_after_forward=a["torch_fsdp2_reshard_after_forward"],
        gradient_accumulation_fusion=a["gradient_accumulation_fusion"],
        cross_entropy_loss_fusion=a["cross_entropy_loss_fusion"],
        defer_embedding_wgrad_compute=a["defer_embedding_wgrad_compute"],
        wgrad_deferral_limit=a["wgrad_deferral_limit"] if a["defer_embedding_wgrad_compute"]
        else 0,   # read by the deferral only
        create_attention_mask_in_dataloader=a["create_attention_mask_in_dataloader"],
        transformer_engine=a["transformer_impl"] == "transformer_engine",
        global_memory_buffer=a["transformer_impl"] == "local",
        cublas_workspace_config=cublas_workspace_config(a, env, gpu),
        tp_comm_overlap=a["tp_comm_overlap"],
        moe_grouped_gemm=bool(model.num_experts) and a["moe_grouped_gemm"]
        and a["transformer_impl"] == "transformer_engine") | megatron_fsdp_options(a, d * cp)


def _activation(a: dict) -> str:
    """``--swiglu``, ``--squared-relu`` or GeLU, Megatron-LM's default. Squared
    ReLU runs unfused: with ``--bias-gelu-fusion`` (the default) Megatron-LM's
    MLP raises "Only support fusion of gelu and swiglu"
    (``megatron/core/transformer/mlp.py``), so the launch is refused."""
    if not a["squared_relu"]:
        return "swiglu" if a["swiglu"] else "gelu"
    if a["bias_gelu_fusion"]:
        raise ValueError("--squared-relu with --bias-gelu-fusion (Megatron-LM's default): "
                         "refused: Megatron-LM's MLP raises 'Only support fusion of gelu and "
                         "swiglu' (megatron/core/transformer/mlp.py); add --no-bias-gelu-fusion")
    return "squared_relu"


def _optimizer(a: dict) -> str:
    """``--optimizer``, Muon without ``--use-distributed-optimizer``: with it
    Megatron-LM runs a layer-wise optimizer of whole parameters per rank
    (``arguments.py``: use_layer_wise_distributed_optimizer), refused."""
    if a["optimizer"] == "muon" and a["use_distributed_optimizer"]:
        raise ValueError("--optimizer muon with --use-distributed-optimizer: refused: "
                         "Megatron-LM turns it into its layer-wise distributed optimizer "
                         "(whole Muon parameters on single ranks, layer_wise_optimizer.py), "
                         "which actmem does not model")
    return a["optimizer"]


def _grads_in_fp32(a: dict) -> bool | None:
    """Megatron-LM's ``accumulate_allreduce_grads_in_fp32`` where it differs
    from what ``arguments.py`` derives by itself (None: on for ``--bf16``,
    off for ``--fp16``): off under ``--bf16 --grad-reduce-in-bf16``, on under
    ``--fp16 --accumulate-allreduce-grads-in-fp32``."""
    if a["bf16"] and a["grad_reduce_in_bf16"]:
        return False
    if a["fp16"] and a["accumulate_allreduce_grads_in_fp32"]:
        return True
    return None


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

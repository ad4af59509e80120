"""A Hugging Face ``config.json`` as a :class:`actmem.ModelConfig`.

A learner brings the model as its users publish it: the ``config.json`` of a
Hugging Face checkpoint (transformers' ``PretrainedConfig.to_dict``), read from
a file they give (no network). Each key is either **modelled** (mapped to a
field), **memory-neutral** (:data:`NEUTRAL`, each with why), or **refused**
with a ValueError that names it; an architecture actmem does not model is
refused by its ``model_type``.

Architectures (``model_type``; the mapping follows each model's modelling
file in transformers, ``src/transformers/models/<type>/modeling_<type>.py``):

* ``gpt2``: learned positions, LayerNorm, biases, GeLU MLP of ``n_inner``
  (default 4h), tied embeddings.
* ``llama``, ``mistral``, ``qwen3``: rotary positions, RMSNorm, no biases, a
  SwiGLU MLP (``hidden_act`` ``silu`` gating ``intermediate_size``),
  grouped-query attention (``num_key_value_heads``), a head width
  ``head_dim`` (``--kv-channels``) and, in ``qwen3``, query/key norms.
* ``mixtral``, ``qwen3_moe``: the same with routed experts
  (``num_local_experts`` / ``num_experts``, top ``num_experts_per_tok``,
  softmax after top-k, :mod:`actmem.layer.moe`); Qwen3-MoE's dense layers
  (``mlp_only_layers``, ``decoder_sparse_step``) as ``moe_layer_freq``.
* ``deepseek_v2``, ``deepseek_v3``: multi-latent attention
  (:mod:`actmem.layer.mla`), the first ``first_k_dense_replace`` layers
  dense, shared experts ``n_shared_experts * moe_intermediate_size`` wide.

``qwen2`` (biases on Q, K and V only, Megatron-LM's ``--add-qkv-bias``) and
any other type are refused: their layers are not the ledger's.
"""

from __future__ import annotations

import json
from pathlib import Path

from .model import ModelConfig

DENSE = ("llama", "mistral", "qwen3")
MOE = ("mixtral", "qwen3_moe")
MLA = ("deepseek_v2", "deepseek_v3")
MODEL_TYPES = ("gpt2", *DENSE, *MOE, *MLA)
"""The ``model_type`` values :func:`model_from_hf_config` reads."""

NEUTRAL = {
    **dict.fromkeys(("architectures", "auto_map", "model_type", "transformers_version",
                     "torch_dtype", "dtype", "_name_or_path", "name_or_path"),
                    "names the checkpoint's classes and format, not the training run's "
                    "tensors (the run's precision is training_memory's precision)"),
    **dict.fromkeys(("bos_token_id", "eos_token_id", "pad_token_id", "use_cache",
                     "task_specific_params", "output_router_logits", "tokenizer_class",
                     "summary_type", "summary_use_proj", "summary_activation",
                     "summary_proj_to_labels", "summary_first_dropout"),
                    "used by generation, tokenizers or task heads, not by pre-training"),
    **dict.fromkeys(("initializer_range", "rms_norm_eps", "layer_norm_epsilon",
                     "rope_theta", "rope_scaling", "pretraining_tp", "scale_attn_weights",
                     "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
                     "routed_scaling_factor", "ep_size", "max_window_layers"),
                    "changes values, not the shapes or the number of tensors kept"),
    **dict.fromkeys(("max_position_embeddings",),
                    "rotary positions keep no table; the run's s is given (a learned "
                    "table, GPT-2's n_positions, is modelled)"),
    **dict.fromkeys(("sliding_window", "use_sliding_window"),
                    "with FlashAttention a window changes which scores are computed, not "
                    "the tensors saved for backward (Q, K, V, the output, the statistics)"),
    **dict.fromkeys(("quantization_config",),
                    "the checkpoint's storage format for inference; training's precision "
                    "is training_memory's precision and fp8"),
    **dict.fromkeys(("num_nextn_predict_layers",),
                    "the multi-token prediction modules are a choice of the training run, "
                    "Megatron-LM's --mtp-num-layers: give them as "
                    "ModelConfig.with_(mtp_num_layers=D); the model's published size "
                    "leaves them out as well"),
}
"""Keys that change no tensor actmem counts, each with why."""


def model_from_hf_config(config, *, s: int, b: int, flash_attention: bool = True,
                         source: str | None = None) -> ModelConfig:
    """The :class:`actmem.ModelConfig` of a Hugging Face ``config.json``.

    Args:
        config: the file's path (``str`` or :class:`pathlib.Path`) or its
            contents as a dict.
        s, b: the sequence length and the micro-batch size of the run.
        flash_attention: the attention keeps no s x s map (FlashAttention,
            the default of Megatron-LM's Transformer Engine layers).
        source: where the numbers come from (default: the file's name).

    Returns:
        The model (``source`` names the config it came from).

    Raises:
        TypeError: ``config`` is neither a path nor a dict.
        ValueError: a ``model_type`` not in :data:`MODEL_TYPES`, a key that
            is neither modelled nor in :data:`NEUTRAL` (named, with its
            value), a value the ledger does not model (an activation, biases
            on some linears only, dropout in attention only), or a model the
            checks of :class:`actmem.ModelConfig` refuse.
    """
    config, name = _read(config)
    kind = config.get("model_type")
    if kind not in MODEL_TYPES:
        raise ValueError(f"model_type={kind!r} is not modelled; actmem reads "
                         f"{', '.join(MODEL_TYPES)} (qwen2's biases on Q, K and V alone are "
                         "not a layer of the ledger)")
    fields = _gpt2(config) if kind == "gpt2" else _rotary(config, kind)
    used = set(fields.pop("_used"))
    unknown = sorted(k for k in config if k not in used and k not in NEUTRAL)
    if unknown:
        shown = ", ".join(f"{k}={config[k]!r}" for k in unknown)
        raise ValueError(f"{name}: {shown} not modelled for model_type={kind!r}: actmem reads "
                         f"{', '.join(sorted(used))} and takes as memory-neutral "
                         f"{', '.join(sorted(NEUTRAL))}")
    return ModelConfig(s=s, b=b, flash_attention=flash_attention, **fields,
                       source=source or f"{name} (Hugging Face config.json, {kind})")


def _read(config) -> tuple[dict, str]:
    """(the config as a dict, a name for messages)."""
    if isinstance(config, dict):
        return config, "config"
    if isinstance(config, (str, Path)):
        path = Path(config)
        try:
            return json.loads(path.read_text(encoding="utf-8")), path.name
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"config={str(config)!r} is not a readable config.json: "
                             f"{error}") from None
    raise TypeError(f"config must be a path to a config.json or its dict, got "
                    f"{type(config).__name__}")


def _gpt2(c: dict) -> dict:
    """GPT-2's fields (``modeling_gpt2.py``)."""
    activation = c.get("activation_function", "gelu_new")
    if activation not in ("gelu", "gelu_new", "gelu_pytorch_tanh"):
        raise ValueError(f"activation_function={activation!r}: the ledger's GPT-2 MLP is GeLU")
    dropout = {k: c.get(k, 0.1) for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop")}
    if len({v > 0 for v in dropout.values()}) > 1:
        raise ValueError(f"{dropout}: dropout in some places only is not modelled "
                         "(the ledger keeps its masks everywhere or nowhere)")
    return dict(h=c["n_embd"], a=c["n_head"], L=c["n_layer"], vocab_size=c["vocab_size"],
                ffn_hidden_size=c.get("n_inner"), activation="gelu",
                dropout=dropout["resid_pdrop"] > 0, norm="layernorm", bias=True,
                tied_embeddings=c.get("tie_word_embeddings", True), positions="learned",
                max_positions=c.get("n_positions", 1024),
                _used=("n_embd", "n_head", "n_layer", "vocab_size", "n_inner",
                       "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                       "tie_word_embeddings", "n_positions", "n_ctx"))


def _rotary(c: dict, kind: str) -> dict:
    """The rotary families' fields (LLaMA's layout and what each adds)."""
    if c.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act={c['hidden_act']!r}: the rotary families' MLP is "
                         "SwiGLU (silu gating)")
    for key in ("attention_bias", "mlp_bias"):
        if c.get(key):
            raise ValueError(f"{key}=True: biases on some linears only are not modelled")
    if c.get("attention_dropout", 0.0):
        raise ValueError(f"attention_dropout={c['attention_dropout']}: dropout in the "
                         "attention alone is not modelled (the ledger keeps its masks "
                         "everywhere or nowhere)")
    h, a = c["hidden_size"], c["num_attention_heads"]
    kv = c.get("num_key_value_heads", a)
    head_dim = c.get("head_dim")
    fields = dict(h=h, a=a, L=c["num_hidden_layers"], vocab_size=c["vocab_size"],
                  kv_heads=None if kv == a else kv, ffn_hidden_size=c["intermediate_size"],
                  activation="swiglu", dropout=False, norm="rmsnorm", bias=False,
                  tied_embeddings=c.get("tie_word_embeddings", False), positions="rotary",
                  kv_channels=head_dim, qk_layernorm=kind in ("qwen3", "qwen3_moe"))
    used = ["hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size",
            "num_key_value_heads", "intermediate_size", "hidden_act", "attention_bias",
            "mlp_bias", "attention_dropout", "tie_word_embeddings", "head_dim"]
    extra = {"mixtral": _mixtral, "qwen3_moe": _qwen3_moe}.get(kind)
    if kind in MLA:
        extra = _deepseek
    if extra:
        more, keys = extra(c)
        fields.update(more)
        used += keys
    return {**fields, "_used": used}


def _mixtral(c: dict):
    """Mixtral's experts (``modeling_mixtral.py``: MixtralSparseMoeBlock)."""
    return (dict(num_experts=c["num_local_experts"], moe_router_topk=c["num_experts_per_tok"],
                 moe_aux_loss_coeff=c.get("router_aux_loss_coef", 0.0)),
            ["num_local_experts", "num_experts_per_tok", "router_aux_loss_coef"])


def _qwen3_moe(c: dict):
    """Qwen3-MoE's experts (``modeling_qwen3_moe.py``: a layer i is sparse
    unless in ``mlp_only_layers``, when ``(i + 1) % decoder_sparse_step == 0``)."""
    L, step, dense = c["num_hidden_layers"], c.get("decoder_sparse_step", 1), \
        set(c.get("mlp_only_layers", []))
    pattern = tuple(int(i not in dense and (i + 1) % step == 0) for i in range(L))
    return (dict(num_experts=c["num_experts"], moe_router_topk=c["num_experts_per_tok"],
                 moe_ffn_hidden_size=c["moe_intermediate_size"],
                 moe_layer_freq=1 if all(pattern) else pattern,
                 moe_aux_loss_coeff=c.get("router_aux_loss_coef", 0.0),
                 moe_router_pre_softmax=not c.get("norm_topk_prob", False)),
            ["num_experts", "num_experts_per_tok", "moe_intermediate_size",
             "decoder_sparse_step", "mlp_only_layers", "router_aux_loss_coef",
             "norm_topk_prob"])


def _deepseek(c: dict):
    """DeepSeek-V2/V3: multi-latent attention and the experts
    (``modeling_deepseek.py``: layer i is MoE when ``n_routed_experts`` is set,
    ``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0``)."""
    L, first, freq = c["num_hidden_layers"], c.get("first_k_dense_replace", 0), \
        c.get("moe_layer_freq", 1)
    pattern = tuple(int(i >= first and i % freq == 0) for i in range(L))
    shared = c.get("n_shared_experts")
    return (dict(multi_latent_attention=True, q_lora_rank=c.get("q_lora_rank"),
                 kv_lora_rank=c["kv_lora_rank"], qk_head_dim=c["qk_nope_head_dim"],
                 qk_pos_emb_head_dim=c["qk_rope_head_dim"], v_head_dim=c["v_head_dim"],
                 kv_heads=None, kv_channels=None,
                 num_experts=c["n_routed_experts"], moe_router_topk=c["num_experts_per_tok"],
                 moe_ffn_hidden_size=c["moe_intermediate_size"],
                 moe_shared_expert_intermediate_size=shared and shared * c["moe_intermediate_size"],
                 moe_layer_freq=1 if all(pattern) else pattern,
                 moe_aux_loss_coeff=c.get("aux_loss_alpha", 0.0), **_deepseek_router(c)),
            ["q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
             "v_head_dim", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
             "n_shared_experts", "first_k_dense_replace", "moe_layer_freq", "aux_loss_alpha",
             "seq_aux", "scoring_func", "norm_topk_prob", "topk_method", "n_group",
             "topk_group"])


TOPK_METHODS = {"greedy": (False, False), "group_limited_greedy": (True, False),
                "noaux_tc": (True, True)}
"""DeepSeek's ``topk_method``: (group-limited, expert bias) in Megatron-LM's
terms (``modeling_deepseek.py``: MoEGate.forward)."""


def _deepseek_router(c: dict) -> dict:
    """DeepSeek's gate (``modeling_deepseek.py``: MoEGate) as Megatron-LM's
    router options (:mod:`actmem.layer.router`): ``scoring_func``, the
    softmax before top-k when its k probabilities are not renormalised
    (``norm_topk_prob`` false), groups and the expert bias from
    ``topk_method``, and the sequence-wise loss from ``seq_aux``."""
    score, norm = c.get("scoring_func", "softmax"), c.get("norm_topk_prob", False)
    method = c.get("topk_method", "greedy")
    if method not in TOPK_METHODS:
        raise ValueError(f"topk_method={method!r} is not modelled; actmem reads "
                         f"{', '.join(TOPK_METHODS)}")
    if score == "sigmoid" and not norm:
        raise ValueError("scoring_func='sigmoid' with norm_topk_prob=False: Megatron-LM's "
                         "sigmoid router always renormalises its k scores, so the model it "
                         "trains is not this one")
    groups, bias = TOPK_METHODS[method]
    return dict(moe_router_score_function=score,
                moe_router_pre_softmax=score == "softmax" and not norm,
                moe_router_num_groups=c.get("n_group") if groups else None,
                moe_router_group_topk=c.get("topk_group") if groups else None,
                moe_router_enable_expert_bias=bias,
                moe_router_load_balancing_type="seq_aux_loss" if c.get("seq_aux") else "aux_loss")

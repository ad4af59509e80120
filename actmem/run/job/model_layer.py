"""How a :class:`actmem.ModelConfig` builds the layer one GPU runs: the
:class:`actmem.LayerConfig` of :meth:`actmem.ModelConfig.layer`, dense or MoE,
from the model's fields and a run's storage options, kept per model."""

from __future__ import annotations

from ...layer.config import STORAGE_OPTIONS, LayerConfig
from ...layer.head_dim import HEAD_OPTIONS
from ...layer.lora import LORA_OPTIONS
from ...layer.mla import MLA_OPTIONS
from ...layer.moe_options import MOE_OPTIONS
from ...layer.recompute_modules import for_layer
from ...layer.router import ROUTER_OPTIONS
from ...memo import kept_by_repr, warns_at_t1
from ...validate import positive_int

MODEL_MOE_FIELDS = ("moe_router_topk", "moe_ffn_hidden_size",
                    "moe_shared_expert_intermediate_size", "moe_expert_capacity_factor",
                    "moe_pad_expert_input_to_capacity", "moe_aux_loss_coeff",
                    "moe_token_dispatcher_type", "moe_router_load_balancing_type",
                    "moe_router_dtype", *ROUTER_OPTIONS, "moe_permute_fusion",
                    "moe_flex_dispatcher_backend")
"""The MoE options a :class:`ModelConfig` keeps (besides num_experts and
moe_layer_freq); a model without experts takes only their defaults."""
MODEL_LAYER_OPTIONS = ("sequence_parallel", "recompute", "flash_attention", "flash_output_copy",
                       "unfused_rope", "kv_heads", "ffn_hidden_size", "activation", "dropout",
                       *MOE_OPTIONS, *MLA_OPTIONS, *HEAD_OPTIONS, *LORA_OPTIONS)
"""The :class:`LayerConfig` options :meth:`ModelConfig.layer` sets itself
(from the model's fields or its own arguments)."""
RUN_LAYER_OPTIONS = tuple(name for name in STORAGE_OPTIONS if name not in MODEL_LAYER_OPTIONS)
"""The other :class:`LayerConfig` options: a run's choices, which
:meth:`ModelConfig.layer` passes on (and :func:`actmem.training_memory` as
its ``layer_options``)."""


@kept_by_repr(1024, skip=warns_at_t1)
def model_layer(model, *args, **options) -> LayerConfig:
    """:meth:`ModelConfig.layer`, kept: one ``training_memory`` asks for the
    same few layers a dozen times, and building and checking one costs
    about 0.1 ms. Not kept: sequence parallelism at t = 1, which warns
    each time it is asked for."""
    return _new_layer(model, *args, **options)


def _new_layer(model, t, sequence_parallel, recompute, moe, etp, **options) -> LayerConfig:
    """The layer :meth:`actmem.ModelConfig.layer` describes, built and checked."""
    unknown = [name for name in options if name not in RUN_LAYER_OPTIONS]
    if unknown:
        raise TypeError(f"ModelConfig.layer() got {', '.join(unknown)}: the model or the "
                        "method's own arguments set the layer's other options; it passes "
                        f"on only {', '.join(RUN_LAYER_OPTIONS) or 'none so far'}")
    if moe is None:
        kinds = set(model.moe_pattern())
        if len(kinds) > 1:
            raise ValueError(f"moe_layer_freq={model.moe_layer_freq!r} mixes dense and MoE "
                             "layers; ask for one kind with moe=True or moe=False "
                             "(training_memory puts each layer of its kind on its stage)")
        moe = kinds == {1}
    experts = {}
    if moe:
        if model.num_experts is None:
            raise ValueError("moe=True: this model has no MoE layers (num_experts=None); "
                             "it takes moe=False or moe=None")
        experts = dict(num_experts=model.num_experts, etp=etp,
                       **{name: getattr(model, name) for name in MODEL_MOE_FIELDS})
    elif etp is not None:
        positive_int("etp", etp)  # a wrong value is named as such first
        raise ValueError(f"etp={etp} is for MoE layers; a dense layer takes etp=None")
    if "recompute_modules" in options:  # per layer, as Megatron-LM applies the names
        options["recompute_modules"] = for_layer(options["recompute_modules"], recompute,
                                                 moe, model.num_experts is not None)
    return LayerConfig(model.s, model.b, model.h, model.a, t,
                       sequence_parallel=sequence_parallel, recompute=recompute,
                       flash_attention=model.flash_attention,
                       flash_output_copy=model.flash_output_copy, kv_heads=model.kv_heads,
                       unfused_rope=model.positions == "rotary" and not model.apply_rope_fusion,
                       ffn_hidden_size=model.ffn_hidden_size,
                       activation=model.activation, dropout=model.dropout, **experts,
                       **{name: getattr(model, name) for name in (*MLA_OPTIONS, *HEAD_OPTIONS)},
                       **{name: getattr(model, name) for name in LORA_OPTIONS},
                       **options)

"""Named-module recomputation: Megatron-LM's ``--recompute-modules``.

With ``--recompute-granularity selective`` Megatron-LM recomputes, in the
backward pass, the modules named by ``--recompute-modules`` (default
``core_attn``, the paper's selective recomputation, sec. 5). Each name is a
row transformation here: the rows the module's forward would keep are
dropped, and its backward rebuilds them (the *working set*). Megatron-LM
uses two mechanisms (``megatron/core/tensor_parallel/random.py``):

* ``checkpoint`` (CheckpointFunction, for ``core_attn``, ``mlp``, ``moe``,
  ``shared_experts``): the module runs under ``torch.no_grad``, its inputs
  are saved (``ctx.save_for_backward(*args)``), and its backward runs the
  module's forward again with grad before differentiating it: every tensor
  saved *inside* the module is dropped, its inputs stay.
* ``CheckpointWithoutOutput`` (for ``layernorm``, ``moe_act``): the module
  runs under ``no_grad``, its inputs are saved, and once the next module has
  saved the output for its own backward, ``discard_output_and_register_recompute``
  frees the output's storage; a gradient hook on a later tensor recomputes
  it (``_recompute``) before the next module's backward reads it: the
  *output* row is dropped.

What each name drops (``megatron/core/transformer/``; the norms are separate
modules, as in the paper's layer and Megatron-LM's local spec and MoE
layers; Transformer Engine's dense spec fuses them into ``linear_qkv`` and
``linear_fc1``, ``gpt_layer_specs.py``, where ``input_layernorm`` and
``pre_mlp_layernorm`` are IdentityOp and ``layernorm`` recomputes nothing,
``transformer_layer.py``: TransformerLayer.__init__):

========================  ===============================================
``core_attn``             the attention-map rows (the softmax, the
                          attention-dropout mask and output, or
                          FlashAttention's log-sum-exp); Q, K, V stay as the
                          checkpoint's inputs (``attention.py``:
                          Attention._checkpointed_attention_forward)
``layernorm``             each norm's output: ``qkv_input`` (under MLA
                          ``mla_down_input``), and
                          ``fc1_input`` (dense) or ``moe_input`` (MoE);
                          the norms' inputs stay (``transformer_layer.py``:
                          _run_input_layernorm, _forward_pre_mlp_layernorm)
``mlp``                   a dense MLP's inner rows (the activation's inputs
                          and ``fc2_input``); ``fc1_input`` stays as the
                          checkpoint's input, the dropout mask after the MLP
                          is outside it (``transformer_layer.py``:
                          _forward_mlp, ``tensor_parallel.checkpoint``)
``moe``                   every MoE row but ``moe_input``, the checkpoint's
                          input (``moe/moe_layer.py``: MoELayer.forward)
``moe_act``               the experts' activation output ``expert_fc2_input``
                          (``moe/experts.py``: TEGroupedMLP.forward; Megatron
                          needs ``moe_grouped_gemm``, which the MoE rows model)
``shared_experts``        the shared experts' rows (``moe/moe_layer.py``:
                          MoELayer.shared_experts_compute)
``mla_up_proj``           multi-latent attention's up projections and
                          rotary embedding: Q, K, V and the latents' norm
                          outputs (``q_up_input``, ``kv_up_input``) go; the
                          checkpoint keeps its inputs, the Q latent and the
                          KV latent and rotary key as ``torch.split`` views
                          of the KV down projection's output, so
                          ``kv_down_output`` keeps r_kv + d_r columns, not
                          its contiguous copy of r_kv
                          (``multi_latent_attention.py``:
                          MLASelfAttention.get_query_key_value_tensors,
                          ``qkv_up_checkpoint``); needs
                          ``multi_latent_attention``; under sequence
                          parallelism (t > 1) the checkpoint also keeps
                          the rotary key gathered over the whole sequence
                          (:func:`actmem.layer.mla.with_gathered_rotary_key`)
========================  ===============================================

Validation follows ``transformer_config.py``: TransformerConfig.__post_init__
(the allowed names; ``mla_up_proj`` only with multi-latent attention) and
refuses what does not apply to the layer (MoE names on a dense layer, ``mlp``
on an MoE layer, where Megatron-LM ignores it; ``shared_experts`` without
shared experts) and ``recompute_modules`` without ``recompute="selective"``
(Megatron-LM reads it only then).
"""

from __future__ import annotations

from dataclasses import replace

MODULES = ("core_attn", "layernorm", "mlp", "moe_act", "moe", "shared_experts", "mla_up_proj")
"""Megatron-LM's ``--recompute-modules`` names modelled here, in this order."""

DEFAULT_MODULES = ("core_attn",)
"""Megatron-LM's default (``recompute_modules=None`` means ``["core_attn"]``)."""

MOE_ONLY = ("moe_act", "moe", "shared_experts")
"""Names that only an MoE layer has."""

DENSE_MLP_INNER = ("gelu_input", "relu_output", "swiglu_gate", "swiglu_up", "fc2_input")
"""A dense MLP's rows inside its checkpoint (``fc1_input`` is its input)."""

SHARED_EXPERT_ROWS = ("shared_fc1_output", "shared_fc2_input")
"""The shared experts' rows."""

_NORM_OUTPUTS = ("qkv_input", "mla_down_input", "fc1_input", "moe_input")
MLA_UP_ROWS = ("q_up_input", "kv_up_input", "query", "key", "value")
"""The rows ``mla_up_proj`` drops (its checkpoint's outputs and what they saved)."""


def check_recompute_modules(c) -> tuple[str, ...] | None:
    """Validate ``c.recompute_modules`` of a :class:`actmem.LayerConfig` and
    return it as a tuple in :data:`MODULES` order (None stays None).

    Raises:
        TypeError: not None and not a list or tuple of strings.
        ValueError: given with ``recompute`` other than ``"selective"``; an
            unknown or repeated name; a name the layer lacks: ``moe_act``,
            ``moe``, ``shared_experts`` on a dense layer, ``shared_experts``
            without ``moe_shared_expert_intermediate_size``, ``mlp`` on an
            MoE layer (use ``moe``), ``mla_up_proj`` without
            ``multi_latent_attention``.
    """
    names = c.recompute_modules
    if names is None:
        return None
    _names_type(names)
    _selective_only(names, c.recompute)
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        raise ValueError(f"recompute_modules: unknown name(s) {', '.join(map(repr, unknown))}; "
                         f"allowed: {', '.join(MODULES)}")
    twice = [n for n in MODULES if names.count(n) > 1]
    if twice:
        raise ValueError(f"recompute_modules={list(names)!r} names {', '.join(twice)} twice; "
                         f"name each module once, from those this layer takes: "
                         f"{', '.join(applicable(c))}")
    _check_applies(c, set(names))
    return tuple(n for n in MODULES if n in names)


def _names_type(names) -> None:
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"recompute_modules must be None or a list of module names from "
                        f"{', '.join(MODULES)}, got {names!r}")


def _selective_only(names, recompute: str) -> None:
    if recompute != "selective":
        raise ValueError(f"recompute_modules={list(names)!r} needs recompute='selective' "
                         f"(Megatron-LM reads --recompute-modules only with "
                         f"--recompute-granularity selective), got recompute={recompute!r}")


def applicable(c) -> tuple[str, ...]:
    """The names of :data:`MODULES` the layer ``c`` has (for messages):
    the MoE names only with ``num_experts`` (``shared_experts`` only with
    shared experts), ``mlp`` only without, ``mla_up_proj`` only with
    multi-latent attention and without sequence parallelism."""
    moe = c.num_experts is not None
    lacks = {"mlp": moe, "moe_act": not moe, "moe": not moe,
             "shared_experts": not (moe and c.moe_shared_expert_intermediate_size),
             "mla_up_proj": (not getattr(c, "multi_latent_attention", False)
                             or getattr(c, "sequence_parallel", False))}
    return tuple(n for n in MODULES if not lacks.get(n, False))


def _check_applies(c, names: set[str]) -> None:
    moe = c.num_experts is not None
    if not moe and names & set(MOE_ONLY):
        raise ValueError(f"recompute_modules: {', '.join(sorted(names & set(MOE_ONLY)))} "
                         "name(s) parts of a mixture-of-experts layer; this layer is dense "
                         f"(num_experts=None) and takes {', '.join(applicable(c))} "
                         "(recompute its MLP with 'mlp')")
    if moe and "mlp" in names:
        raise ValueError("recompute_modules: 'mlp' recomputes a dense MLP (Megatron-LM ignores "
                         "it on an MoE layer); this layer has num_experts="
                         f"{c.num_experts} and takes {', '.join(applicable(c))}: use 'moe' "
                         "for its MLP")
    if "shared_experts" in names and not c.moe_shared_expert_intermediate_size:
        raise ValueError("recompute_modules: 'shared_experts' needs shared experts "
                         "(moe_shared_expert_intermediate_size), got None")
    if "mla_up_proj" in names and not getattr(c, "multi_latent_attention", False):
        raise ValueError("recompute_modules: 'mla_up_proj' recomputes multi-latent "
                         "attention's up projections and needs multi_latent_attention=True "
                         "(Megatron-LM: 'mla_up_proj in recompute_modules is only supported "
                         "with multi_latent_attention')")


def modules_of(c) -> tuple[str, ...]:
    """The modules a layer recomputes by name: ``()`` unless
    ``recompute="selective"``, then ``recompute_modules`` or
    :data:`DEFAULT_MODULES`."""
    if c.recompute != "selective":
        return ()
    return DEFAULT_MODULES if c.recompute_modules is None else c.recompute_modules


def dropped_keys(c, rows) -> dict[str, tuple[str, ...]]:
    """Module -> keys of ``rows`` it drops (module docstring), for the
    modules of :func:`modules_of`; ``rows`` are the layer's rows before
    recomputation (no sequence parallelism needed)."""
    from .ledger import with_selective_recompute  # the paper's selective recomputation
    keys = [r.key for r in rows]
    moe = [r.key for r in rows if r.block == "MoE" and r.key != "moe_input"]
    after_core = {r.key for r in with_selective_recompute(rows)}
    which = {
        "core_attn": [k for k in keys if k not in after_core],
        "layernorm": [k for k in keys if k in _NORM_OUTPUTS],
        "mlp": [k for k in keys if k in DENSE_MLP_INNER],
        "moe": moe,
        "moe_act": [k for k in keys if k == "expert_fc2_input"],
        "shared_experts": [k for k in keys if k in SHARED_EXPERT_ROWS],
        "mla_up_proj": [k for k in keys if k in MLA_UP_ROWS],
    }
    return {m: tuple(which[m]) for m in modules_of(c)}


def with_recompute_modules(rows, c):
    """Drop the rows the layer's named modules rebuild in backward
    (:func:`dropped_keys`). With ``recompute_modules=None`` this is the
    paper's selective recomputation: the attention-map rows go."""
    gone = {k for keys in dropped_keys(c, rows).values() for k in keys}
    kept = tuple(r for r in rows if r.key not in gone)
    if "mla_up_proj" in modules_of(c):
        wide = c.s * c.b * (c.kv_lora_rank + c.qk_pos_emb_head_dim)
        shape = ("s", "b", "kv_lora_rank+qk_pos_emb_head_dim")
        kept = tuple(replace(r, elements=wide, shape=shape) if r.key == "kv_down_output"
                     else r for r in kept)
    return kept


def working_set(c) -> int:
    """Bytes one layer's backward rebuilds at once, per micro-batch, per GPU.

    The attention block's backward rebuilds the first norm's output
    (``layernorm``: its hook fires when the attention output's gradient
    arrives, and the output lives until the QKV projection's backward) and,
    inside it, the core attention's rows (``core_attn``) and MLA's up
    projections' (``mla_up_proj``: its rows and the KV up projection's
    contiguous copy of the KV latent, r_kv columns); the MLP block's
    backward, earlier, rebuilds the second norm's output and the MLP's rows
    (``mlp``), or the MoE's (``moe``: all its rows at once, nested
    checkpoints included; else the larger of ``shared_experts`` and
    ``moe_act``, differentiated one after the other). The working set is
    the larger block. Under the default (``core_attn``) it is the
    attention-map rows, as :func:`actmem.run.moments.precision.moment_parts`; under
    FP8 with FlashAttention also the attention output in 16 bits, which the
    recomputed attention returns again while only its FP8 copy is kept
    (:mod:`actmem.layer.fp8`).
    """
    from .ledger import ledger_rows
    full = ledger_rows(replace(c, recompute="none", recompute_modules=None))
    drops, size = dropped_keys(c, full), {r.key: r.bytes for r in full}

    def rebuilt(module, keys=None):
        return sum(size[k] for k in drops.get(module, ()) if keys is None or k in keys)

    core = rebuilt("core_attn")
    if "core_attn" in drops and "proj_input_fp8" in size:   # FP8 with FlashAttention
        core += size["proj_input"]   # the recomputed attention returns O in 16 bits again
    attention = (rebuilt("layernorm", ("qkv_input", "mla_down_input")) + core
                 + (rebuilt("mla_up_proj") + size["kv_down_output"] if "mla_up_proj" in drops
                    else 0))
    norm = rebuilt("layernorm", ("fc1_input", "moe_input"))
    if "moe" in drops:
        inner = rebuilt("moe")
    else:
        inner = rebuilt("mlp") + max(rebuilt("shared_experts"), rebuilt("moe_act"))
    return max(attention, norm + inner)


def for_layer(names, recompute: str, moe: bool, has_experts: bool):
    """A run's ``recompute_modules`` for one of its layers
    (:meth:`actmem.ModelConfig.layer`): None without recomputation (the
    rows a timeline reads without it); in a model with MoE layers, each layer
    takes the names it has, as Megatron-LM applies ``mlp`` to dense layers
    only (``transformer_layer.py``: ``if not self.is_moe_layer``) and the
    MoE names only inside MoE layers; else unchanged (:class:`LayerConfig`
    refuses what does not apply)."""
    if names is None or recompute == "none":
        return None
    if recompute != "selective" or not has_experts or not isinstance(names, (list, tuple)):
        return names
    return tuple(n for n in names if n not in (("mlp",) if moe else MOE_ONLY))


def named_modules(names):
    """``names`` as a run passes them on: None where they are Megatron-LM's
    default (:data:`DEFAULT_MODULES`, ``["core_attn"]``), which keeps the same
    rows and working set as None, so that what takes no named modules (fp32,
    autocast, FSDP2) takes the documented default too; else ``names``."""
    if isinstance(names, (list, tuple)) and tuple(names) == DEFAULT_MODULES:
        return None
    return names


def check_for_model(model, t: int, sequence_parallel: bool, recompute: str, names) -> None:
    """Refuse a run's ``recompute_modules`` that no layer of ``model`` (a
    :class:`actmem.ModelConfig`) takes: the rules of
    :func:`check_recompute_modules` on each kind of layer the model has,
    and ``mlp`` in a model without dense layers.

    Raises:
        TypeError, ValueError: as :func:`check_recompute_modules`.
    """
    _names_type(names)
    _selective_only(names, recompute)
    kinds = set(model.moe_pattern())
    if "mlp" in names and kinds == {1}:
        raise ValueError("recompute_modules: 'mlp' recomputes a dense MLP and every layer of "
                         "this model is an MoE layer, which takes "
                         f"{', '.join(applicable(model))}")
    for kind in sorted(kinds):
        model.layer(t, sequence_parallel, recompute, moe=bool(kind), recompute_modules=names)

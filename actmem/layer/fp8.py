"""FP8 training with Transformer Engine: the saved inputs of the linear layers in 1 byte.

Megatron-LM's ``--fp8-format`` (``megatron/core/transformer/transformer_config.py``:
``fp8: Optional[Literal['e4m3', 'hybrid']]``) runs every linear layer of a
Transformer layer (``linear_qkv`` and ``linear_fc1``, TE's LayerNormLinear;
``linear_proj`` and ``linear_fc2``, TE's Linear) with FP8 inputs and weights,
under Megatron-LM's default recipe, delayed scaling (``fp8_recipe =
"delayed"``, ``fp8_amax_history_len = 1``). ``"e4m3"`` and ``"hybrid"``
(gradients in e5m2) keep the same bytes: every FP8 element is 1 byte.
``--fp8-recipe tensorwise``, ``blockwise`` and ``mxfp8`` change the scales
and the output projection's input (:func:`with_fp8`,
:mod:`actmem.layer.fp8_scales`).

What changes in the ledger (:func:`with_fp8`), each from TE's code:

* A linear layer's saved input is its FP8 copy, 1 byte per element:
  ``transformer_engine/pytorch/module/linear.py``: _linear_forward quantizes
  ``inputmat`` with ``input_quantizer`` and saves it (``saved_inputmat =
  inputmat``), keeping only the column-wise data (the transpose that Hopper's
  TN GEMM needs for the weight gradient, ``update_usage(rowwise_usage=False,
  columnwise_usage=True)``), or, under sequence parallelism, the row-wise data
  of the local shard (FP8 column-wise data cannot be all-gathered): the same
  bytes. ``layernorm_linear.py``: _LayerNormLinear.forward saves ``ln_out``
  quantized the same way (rows ``qkv_input``, ``fc1_input``).
* Each saved FP8 tensor carries its scale inverse, one fp32 number
  (``tensor/float8_tensor.py``: Float8Tensor ``_scale_inv``): 4 bytes per
  tensor, row ``fp8_scale_inv``.
* What stays in 16 bits: the norms' inputs (``inputmat``, saved in the
  activation dtype for the norm's backward), Q, K, V and everything of the
  core attention (TE's DotProductAttention runs in bf16 unless
  ``--fp8-dot-product-attention``), the activation function's inputs
  (Megatron-LM's fused bias-GeLU/SwiGLU run outside TE), the dropout masks.
* With FlashAttention the attention output stays in 16 bits for
  FlashAttention's backward, and ``linear_proj`` saves its FP8 copy beside it
  (row ``proj_input_fp8``): Megatron-LM sets ``save_original_input`` on
  ``linear_proj`` only for recipes other than ``"delayed"``
  (``megatron/core/transformer/attention.py``: "the output of the fused
  core_attn is saved by itself, and linear_proj also saves the quantized
  tensor of this output"), and TE refuses it with delayed scaling.

**An MoE layer** (``megatron/core/transformer/moe/experts.py``:
TEGroupedMLP; ``shared_experts.py``: SharedExpertMLP, TE's Linear) keeps its
attention as above, and:

* each routed expert's GEMM input in FP8: TE's ``module/grouped_linear.py``:
  _GroupedLinear.forward quantizes the tokens of each of the E/ep local
  experts into its own tensor (``tex.split_quantize``; delayed and current
  scaling allocate each tensor alone) and keeps its column-wise data
  (``update_usage(rowwise_usage=False, columnwise_usage=True)``): rows
  ``expert_fc1_input`` and ``expert_fc2_input`` in 1 byte, one scale
  inverse per local expert each;
* the shared experts' ``linear_fc2`` input in FP8; under delayed scaling
  their ``linear_fc1`` keeps its own FP8 copy of the MoE input (row
  ``shared_fc1_input_fp8``, the local shard under sequence parallelism)
  beside the 16-bit input the router keeps (``moe_input``); under the
  other recipes Megatron-LM has it save that 16-bit input instead
  (``shared_experts.py``: SharedExpertMLP.__init__ calls
  ``set_save_original_input(linear_fc1)`` unless the shared experts are
  recomputed), so it adds nothing;
* the router, the probabilities, the activation's inputs and the
  dispatcher's tensors as without FP8.

Measured: the reference MoE layer with FP8 linears
(:mod:`actmem.measure.moe_fp8`, one rank on CPU) saves exactly these rows.
``Fp8Padding`` (``experts.py``: TEGroupedMLP.forward, TE's
``module/fp8_padding.py``) pads each local expert's tokens to a multiple of
16 before the experts and cuts them after: its copies are transients
(:func:`actmem.run.moments.moe_dispatch.fp8_padding`); not counted are the
pad rows, 0 to 15 per local expert by the routing (in the inputs, the
activation's rows and the probabilities), which an expectation of balanced
routing cannot place.

The model states gain what TE keeps per linear module
(:func:`actmem.layer.fp8_weights.fp8_state_bytes`).

Checks (:func:`check_fp8`): TE's ``utils.py``: assert_dim_for_fp8_exec needs,
for each GEMM's input and weight, the product of the leading dimensions
divisible by 8 and the last one by 16.
"""

from __future__ import annotations

from dataclasses import replace

from ..validate import shown
from .fp8_scales import MX_BLOCK, PER_BLOCK, SCALE_SOURCES, saved_scales, scale_bytes
from .ledger import REPLICATED, SEQUENCE_SPLIT, LedgerRow

FP8_FORMATS = ("e4m3", "hybrid")
"""Megatron-LM's ``--fp8-format`` values (``None``: no FP8)."""
FP8_RECIPES = ("delayed", "tensorwise", "blockwise", "mxfp8")
"""Megatron-LM's ``--fp8-recipe`` values actmem models: delayed scaling (its
default), ``"tensorwise"``, TE's Float8CurrentScaling, ``"blockwise"``,
TE's Float8BlockScaling, and ``"mxfp8"``, TE's MXFP8BlockScaling
(``megatron/core/fp8_utils.py``: get_fp8_recipe;
:mod:`actmem.layer.fp8_scales`)."""
FP8_INPUT_ROWS = ("qkv_input", "proj_input", "fc1_input", "fc2_input", "expert_fc1_input",
                  "expert_fc2_input", "shared_fc2_input")
"""The linear layers' saved inputs, kept in FP8 (dense, then MoE)."""
_TE = "transformer_engine/pytorch/module/"
SOURCES = {
    "qkv_input": _TE + "layernorm_linear.py: _LayerNormLinear.forward (ln_out quantized)",
    "proj_input": _TE + "linear.py: _linear_forward (saved_inputmat, FP8)",
    "fc1_input": _TE + "layernorm_linear.py: _LayerNormLinear.forward (ln_out quantized)",
    "fc2_input": _TE + "linear.py: _linear_forward (saved_inputmat, FP8)",
    "expert_fc1_input": _TE + "grouped_linear.py: _GroupedLinear.forward (split_quantize, "
                        "column-wise data saved per local expert)",
    "expert_fc2_input": _TE + "grouped_linear.py: _GroupedLinear.forward (split_quantize, "
                        "column-wise data saved per local expert)",
    "shared_fc2_input": _TE + "linear.py: _linear_forward (saved_inputmat, FP8)",
    "shared_fc1_input_fp8": _TE + "linear.py: _linear_forward (the MoE input quantized by "
                            "the shared experts' linear_fc1)",
}
"""Where TE saves each FP8 input."""


def fp8_format(fp8) -> str | None:
    """``fp8`` checked alone: None (``None`` or ``False``: no FP8) or one of
    :data:`FP8_FORMATS`.

    Raises:
        ValueError: anything else (``True`` too: pass the format).
    """
    if fp8 is None or fp8 is False:
        return None
    if not isinstance(fp8, str) or fp8 not in FP8_FORMATS:
        raise ValueError(f"fp8 must be None (off) or Megatron-LM's --fp8-format, one of "
                         f"{', '.join(map(repr, FP8_FORMATS))}; got {shown(fp8)}")
    return fp8


def check_fp8(c) -> str | None:
    """Validate ``fp8`` of a LayerConfig and the GEMM shapes TE accepts;
    return the format (``None`` for off: ``None`` or ``False``).

    Raises:
        ValueError: an unknown format (``True`` too: pass the format) or
            recipe; FP8 with multi-latent attention or LoRA (not modelled);
            ``moe_act`` recomputation under delayed scaling (Megatron-LM
            then saves fc2's original input, which TE's GroupedLinear
            refuses with delayed scaling); a linear layer's dimension TE's
            assert_dim_for_fp8_exec
            refuses, or under ``"mxfp8"`` one not divisible by 32 (the
            experts' widths too; the message names it and the rule); context
            parallelism under delayed scaling. Under the other recipes
            the output projection keeps its 16-bit input, so context
            parallelism's rows stand and only qkv, fc1 and fc2 take their
            inputs in FP8.
    """
    fp8 = fp8_format(c.fp8)
    if c.fp8_recipe not in FP8_RECIPES:
        raise ValueError(f"fp8_recipe must be one of {', '.join(map(repr, FP8_RECIPES))} "
                         f"(Megatron-LM's --fp8-recipe; custom is not modelled), got "
                         f"{shown(c.fp8_recipe)}")
    if fp8 is None:
        if c.fp8_recipe != "delayed":
            raise ValueError(f"fp8_recipe={c.fp8_recipe!r} needs fp8 (a format): without FP8 "
                             "there is no recipe; leave it 'delayed'")
        return None
    other = [n for n in ("lora_rank",) if getattr(c, n, None) is not None]
    other += [n for n in ("multi_latent_attention",) if getattr(c, n, False)]
    other += [f"cp={c.cp}" for _ in [0] if c.cp > 1 and c.fp8_recipe == "delayed"]
    if other:
        raise ValueError(f"fp8={fp8!r} is modelled for layers with Q/K/V projections, "
                         f"no LoRA, and cp=1 under delayed scaling; this layer sets "
                         f"{', '.join(other)}")
    if c.fp8_recipe == "delayed" and "moe_act" in (c.recompute_modules or ()):
        raise ValueError(f"fp8={fp8!r} under fp8_recipe='delayed' with recompute_modules "
                         "containing 'moe_act': Megatron-LM then has the experts' linear_fc2 "
                         "save its original input, which Transformer Engine's GroupedLinear "
                         "refuses under delayed scaling; use fp8_recipe='tensorwise' or drop "
                         "'moe_act'")
    mx = c.fp8_recipe == "mxfp8"
    for name, size, rule in _gemm_dims(c):
        if size % (MX_BLOCK if mx else rule):
            raise ValueError(f"fp8={fp8!r}: {name}={size} must be divisible by "
                             f"{MX_BLOCK if mx else rule} ({_DIM_RULES[mx]})")
    return fp8


_DIM_RULES = ("Transformer Engine's assert_dim_for_fp8_exec: FP8 GEMMs need the leading "
              "dimensions' product divisible by 8, the last by 16",
              "fp8_recipe='mxfp8': Transformer Engine's MXFP8Quantizer::create_tensor needs "
              "both dimensions of every quantized tensor divisible by 32")


def _gemm_dims(c):
    """(name, size, divisor) of every GEMM dimension TE checks on one rank."""
    from .head_dim import head_dim  # Q's a*d, K's and V's g*d columns
    q, kv, t = c.a * head_dim(c), c.g * head_dim(c), c.t
    local = c.s * c.b // (t if c.sequence_parallel else 1)
    dims = (("tokens s*b" + "/t" * c.sequence_parallel, local, 8), ("h", c.h, 16),
            ("attention width a*d/t", q // t, 16),
            ("QKV outputs (a*d+2*g*d)/t", (q + 2 * kv) // t, 8))
    if c.num_experts is None:
        return dims + _mlp_dims(c.f, t, "f/t (ffn_hidden_size/t)", "fc1", c.activation)
    fs = c.moe_shared_expert_intermediate_size  # the grouped GEMMs assert nothing
    if fs:
        dims += _mlp_dims(fs, t, "f_s/t (moe_shared_expert_intermediate_size/t)",
                          "shared experts' fc1", c.activation)
    if c.fp8_recipe == "mxfp8":   # but MXFP8's quantizer checks each expert's tensors
        dims += _mlp_dims(c.f_e, c.expert_t, "f_e/etp (moe_ffn_hidden_size/etp)",
                          "experts' fc1", c.activation)
    return dims


def _mlp_dims(f: int, t: int, width: str, fc1: str, activation: str):
    outputs = 2 * f if activation == "swiglu" else f
    return ((width, f // t, 16), (f"{fc1} outputs/t", outputs // t, 8))


def with_fp8(rows, c):
    """The rows under FP8 (module docstring), applied after sequence
    parallelism: the linear inputs in 1 byte, the attention output kept in
    16 bits beside its FP8 copy with FlashAttention, and the scale
    inverses (one fp32 per FP8 tensor; per 1x128 block under
    ``"blockwise"``; one E8M0 byte per 32 elements under ``"mxfp8"``).
    Under every recipe but ``"delayed"`` the output projection
    saves its original 16-bit input and no FP8 copy (Megatron-LM's
    ``attention.py`` calls ``set_save_original_input(linear_proj)`` for
    every recipe but delayed; TE's ``linear.py`` then saves ``inp``), so its
    rows stay as without FP8. Full recomputation keeps only the layer input."""
    if c.fp8 is None or c.recompute == "full":
        return rows
    quantized = FP8_INPUT_ROWS
    if c.fp8_recipe == "delayed":
        from .flash_copy import without_flash_output_copy  # proj_input is flash-attn's output
        rows = without_flash_output_copy(rows)
    else:
        quantized = tuple(key for key in FP8_INPUT_ROWS if key != "proj_input")
    flash_keeps_output = any(r.key == "softmax_lse" for r in rows)
    out, tensors = [], 0
    for row in rows:
        if row.key == "shared_fc1_output" and c.fp8_recipe == "delayed":  # fc1's FP8 input
            out.append(_shared_fc1_input(c))
            tensors += saved_scales(c, out[-1])
        if row.key not in quantized:
            out.append(row)
            continue
        tensors += saved_scales(c, row)
        fp8 = replace(row, bytes_per_element=1, name=row.name + " (FP8)",
                      source=SOURCES[row.key])
        if row.key == "proj_input" and flash_keeps_output:
            out.append(replace(row, needed_for="FlashAttention backward: D = rowsum(dO * O) "
                               "reads the attention output O in 16 bits"))
            fp8 = replace(fp8, key="proj_input_fp8")
        out.append(fp8)
    size = scale_bytes(c.fp8_recipe)
    out.append(LedgerRow("fp8_scale_inv", "FP8 scale inverses of the saved inputs "
                         f"({'E8M0' if size == 1 else 'fp32'})", "MLP",
                         ("n_scales" if c.fp8_recipe in PER_BLOCK else "n_fp8",),
                         tensors, size, REPLICATED, 1, "fixed", SCALE_SOURCES[c.fp8_recipe],
                         "dequantizing each saved FP8 input in backward: x = x_fp8 * scale_inv"))
    return tuple(out)


def _shared_fc1_input(c) -> LedgerRow:
    """The shared experts' ``linear_fc1`` FP8 copy of the MoE input (a
    TE Linear's saved input; under sequence parallelism the local shard's
    row-wise data, as :data:`SOURCES` says of the dense layers)."""
    placement, ranks = (SEQUENCE_SPLIT, c.t) if c.sequence_parallel else (REPLICATED, 1)
    return LedgerRow("shared_fc1_input_fp8", "input of the shared experts' first linear (FP8)",
                     "MoE", ("s", "b", "h"), c.s * c.b * c.h, 1, placement, ranks, "fixed",
                     SOURCES["shared_fc1_input_fp8"], "weight gradient of the shared "
                     "experts' first linear: dW = X^T dY (X dequantized)")

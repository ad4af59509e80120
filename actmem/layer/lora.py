"""LoRA: frozen base weights plus low-rank adapters, as ledger rows and parameters.

LoRA (Hu et al. 2021) freezes every weight of the model and adds to chosen
linear layers ``Y = X W^T`` an adapter ``(X A^T) B^T * alpha/r`` with A of
r x in and B of out x r. The names of ``lora_targets`` are a real tool's:

* Megatron-Bridge's ``LoRA`` (``src/megatron/bridge/peft/lora.py``:
  ``target_modules``): ``linear_qkv``, ``linear_proj``, ``linear_fc1``,
  ``linear_fc2``, one adapter per Megatron module (``linear_qkv`` one adapter
  over Q, K and V; ``linear_fc1`` over SwiGLU's gate and up together);
* Megatron-Bridge's ``CanonicalLoRA`` (``canonical_lora.py``): ``linear_q``,
  ``linear_k``, ``linear_v``, ``linear_proj``, ``linear_fc1_gate``,
  ``linear_fc1_up``, ``linear_fc2``, one adapter per projection;
* PEFT's ``target_modules`` for LLaMA (``q_proj``, ``k_proj``, ``v_proj``,
  ``o_proj``, ``gate_proj``, ``up_proj``, ``down_proj``): CanonicalLoRA's
  adapters under Hugging Face's module names (PEFT's default for LLaMA is
  ``["q_proj", "v_proj"]``).

What a layer saves for backward changes in two ways (:func:`with_lora`):

* A frozen linear keeps no input: PyTorch saves a matmul's input for the
  weight gradient only (``tools/autograd/derivatives.yaml``: ``mm``'s
  ``mat2: mm_mat2_backward(grad, self, ...)``), and
  ``tools/autograd/gen_variable_type.py``: ``emit_save_inputs.guard_for``
  saves a tensor used by one derivative only under
  ``grad_fn->should_compute_output(i)``; Megatron-LM's frozen linear saves
  only the weight (``megatron/core/tensor_parallel/layers.py``:
  LinearWithFrozenWeight.forward); Transformer Engine saves the input when
  ``backward_needs_input = is_grad_enabled and weight.requires_grad``
  (``transformer_engine/pytorch/module/linear.py``: _linear_forward;
  ``layernorm_linear.py`` frees ``ln_out`` when the weight is frozen). So the
  rows ``qkv_input``, ``proj_input``, ``fc1_input``, ``fc2_input`` go,
  unless an adapter reads them, or (``proj_input``) FlashAttention's
  backward keeps the attention output it produced (its row ``softmax_lse``
  is then in the ledger).
* Each adapter keeps its A's input (the base's input, one storage however
  many adapters read it) and A's output, ``s x b x r``, which B's weight
  gradient reads (Megatron-Bridge ``utils.py``: ParallelLinearAdapter: A
  all-gathered (column-parallel base) or all-reduced (row-parallel base), so
  every tensor-parallel rank keeps it whole). Under sequence parallelism the
  adapters of ``linear_qkv`` / ``linear_fc1`` read the all-gathered norm
  output (``gather_from_sequence_parallel_region``, or TE's
  ``return_layernorm_output_gathered``): a whole ``s x b x h`` on each rank.

Every other row stays: gradients still flow through the layer to the
adapters of the layers before it. Not modelled: the first layer, whose input
needs no gradient and which so keeps less; adapter dropout (both tools'
default is 0, ``nn.Identity``); LoRA on MoE experts. The scaling by alpha/r
multiplies by a Python number and saves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .ledger import REPLICATED, LedgerRow
from ..validate import divides, positive_int, shown

LORA_OPTIONS = ("lora_rank", "lora_targets")
"""The LoRA options of a layer, which a :class:`actmem.ModelConfig` fixes."""
FUSED = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")
"""Megatron-Bridge ``LoRA``'s target modules (its default: all four)."""
CANONICAL = ("linear_q", "linear_k", "linear_v", "linear_proj", "linear_fc1_gate",
             "linear_fc1_up", "linear_fc2")
"""Megatron-Bridge ``CanonicalLoRA``'s target modules (its default: all seven)."""
PEFT_NAMES = {"q_proj": "linear_q", "k_proj": "linear_k", "v_proj": "linear_v",
              "o_proj": "linear_proj", "gate_proj": "linear_fc1_gate",
              "up_proj": "linear_fc1_up", "down_proj": "linear_fc2"}
"""PEFT's LLaMA module names and the CanonicalLoRA adapter each one is."""
LORA_TARGETS = tuple(dict.fromkeys(FUSED + CANONICAL + tuple(PEFT_NAMES)))
"""Every name ``lora_targets`` accepts."""
PARTS = {"linear_qkv": ("linear_q", "linear_k", "linear_v"),
         "linear_fc1": ("linear_fc1_gate", "linear_fc1_up")}
"""A fused module and the canonical adapters that cover its parts."""
SWIGLU_ONLY = ("linear_fc1_gate", "linear_fc1_up")
"""Adapters on SwiGLU's gate and up projections (a GeLU MLP has neither)."""

INPUT_ROWS = ("qkv_input", "proj_input", "fc1_input", "fc2_input")
"""Ledger rows that are a linear layer's input (kept for its weight gradient)."""
_SOURCE = ("Megatron-Bridge src/megatron/bridge/peft/utils.py: ParallelLinearAdapter.forward "
           "(linear_in, linear_out)")


@dataclass(frozen=True)
class Adapter:
    """One LoRA adapter on one linear layer.

    Attributes:
        name: the canonical name (``linear_qkv``, ``linear_q``, ...).
        input_key: the ledger row of the base layer's input, which A reads.
        in_features, out_features: the base layer's whole (t = 1) sizes.
        column: the base is column-parallel (QKV, fc1), else row-parallel.
    """

    name: str
    input_key: str
    in_features: int
    out_features: int
    column: bool

    def parameters(self, r: int, t: int = 1) -> int:
        """A's and B's elements on one of t ranks: r*(in + out)/t (A split
        over r for a column-parallel base, over its input otherwise; B over
        its output: Megatron-Bridge's ParallelLinearAdapter)."""
        return r * (self.in_features + self.out_features) // t


def canonical(name: str) -> str:
    """The canonical adapter name of a ``lora_targets`` entry."""
    return PEFT_NAMES.get(name, name)


def adapters(c) -> tuple[Adapter, ...]:
    """The adapters of a :class:`actmem.LayerConfig` with ``lora_rank``, in
    the layer's order (empty without LoRA)."""
    return () if c.lora_rank is None else _adapters(c, c.lora_targets)


def _adapters(c, targets) -> tuple[Adapter, ...]:
    from .head_dim import head_dim  # Q's a*d, K's and V's g*d columns (d: kv_channels or h/a)
    h, q, kv, f = c.h, c.a * head_dim(c), c.g * head_dim(c), c.f
    fc1_out = 2 * f if c.activation == "swiglu" else f
    sizes = {"linear_qkv": ("qkv_input", h, q + 2 * kv, True),
             "linear_q": ("qkv_input", h, q, True), "linear_k": ("qkv_input", h, kv, True),
             "linear_v": ("qkv_input", h, kv, True), "linear_proj": ("proj_input", q, h, False),
             "linear_fc1": ("fc1_input", h, fc1_out, True),
             "linear_fc1_gate": ("fc1_input", h, f, True),
             "linear_fc1_up": ("fc1_input", h, f, True),
             "linear_fc2": ("fc2_input", f, h, False)}
    chosen = {canonical(n) for n in targets}
    return tuple(Adapter(n, *sizes[n]) for n in sizes if n in chosen)


def lora_parameters(c) -> int:
    """The adapters' parameters of one layer on one GPU (A's and B's
    elements, r*(in+out)/t per adapter, :meth:`Adapter.parameters`); 0
    without LoRA.

    >>> from actmem import LayerConfig
    >>> lora_parameters(LayerConfig(4096, 1, 4096, 32, activation="swiglu",
    ...                             lora_rank=16, lora_targets=("q_proj", "v_proj")))
    262144
    """
    return sum(a.parameters(c.lora_rank, c.t) for a in adapters(c))


def check_lora(c) -> tuple[str, ...]:
    """Validate ``lora_rank`` and ``lora_targets`` of a LayerConfig; return
    the targets as a tuple.

    Raises:
        TypeError: ``lora_targets`` is not a list or tuple of names, or
            ``lora_rank`` is not an int.
        ValueError: targets without a rank, a rank without targets, a name
            the layer lacks (unknown, gate/up projections of a GeLU MLP), a
            name twice, a fused module with one of its parts, LoRA on an MoE
            or multi-latent-attention layer, or t not dividing the rank of a
            column-parallel base's adapter (Megatron-LM's
            ColumnParallelLinear splits A's r outputs over t).
    """
    targets = c.lora_targets
    if isinstance(targets, str) or not isinstance(targets, (tuple, list)) \
            or not all(isinstance(n, str) for n in targets):
        raise TypeError(f"lora_targets must be a list or tuple of module names such as "
                        f"('q_proj', 'v_proj'), got {shown(targets)}")
    targets = tuple(targets)
    if c.lora_rank is None:
        if targets:
            raise ValueError(f"lora_targets={targets!r} given without lora_rank; pass "
                             "lora_rank (the adapters' rank r, e.g. 16)")
        return targets
    r = positive_int("lora_rank", c.lora_rank)
    if not targets:
        raise ValueError(f"lora_rank={r} needs lora_targets, the modules to adapt, e.g. "
                         "('q_proj', 'v_proj') (PEFT) or ('linear_qkv',) (Megatron-Bridge)")
    _check_names(c, targets)
    other = {"num_experts": (c.num_experts, None),
             "multi_latent_attention": (getattr(c, "multi_latent_attention", False), False),
             "cp": (getattr(c, "cp", 1), 1)}
    other = [f"{name}={value!r}" for name, (value, plain) in other.items() if value != plain]
    if other:
        raise ValueError(f"lora_rank={r}: LoRA is modelled for dense layers with Q/K/V "
                         "projections and cp=1 (num_experts=None, multi_latent_attention=False, "
                         f"cp=1); this layer has {', '.join(other)}")
    if any(a.column for a in _adapters(c, targets)):
        divides("t", c.t, lora_rank=r)
    return targets


def _check_names(c, targets: tuple[str, ...]) -> None:
    unknown = [n for n in targets if n not in LORA_TARGETS]
    if unknown:
        raise ValueError(f"lora_targets has {', '.join(map(repr, unknown))}, which this layer "
                         f"lacks; allowed: {', '.join(LORA_TARGETS)}")
    names = [canonical(n) for n in targets]
    twice = sorted({n for n in targets if names.count(canonical(n)) > 1})
    if twice:
        raise ValueError(f"lora_targets names one adapter twice: {', '.join(twice)}; name "
                         f"each adapter once, from {', '.join(LORA_TARGETS)}")
    for fused, parts in PARTS.items():
        if fused in names and set(parts) & set(names):
            raise ValueError(f"lora_targets mixes {fused!r} (Megatron-Bridge's LoRA: one "
                             f"adapter) with its parts {parts} (CanonicalLoRA): choose one")
    glu = [n for n in targets if canonical(n) in SWIGLU_ONLY]
    if glu and c.activation != "swiglu":
        raise ValueError(f"lora_targets has {', '.join(glu)}: a {c.activation!r} MLP has no "
                         "gate or up projection; adapt 'linear_fc1' (its first linear)")


def with_lora(rows, c):
    """The rows of a frozen layer with LoRA adapters (module docstring).

    Applied last (after sequence parallelism). With full recomputation the
    layer keeps only its input, unchanged. Each base input row that an
    adapter reads stays (whole on every rank under sequence parallelism for
    the column-parallel bases) and is followed by one row per adapter, A's
    output (s, b, r) in 16 bits, whole on every rank; an input row that no
    adapter reads goes, except ``proj_input`` while FlashAttention's
    backward keeps it.
    """
    if c.lora_rank is None or c.recompute == "full":
        return rows
    by_input: dict[str, list[Adapter]] = {}
    for a in adapters(c):
        by_input.setdefault(a.input_key, []).append(a)
    flash_keeps_output = any(r.key == "softmax_lse" for r in rows)
    if "proj_input" not in by_input:  # frozen projection: proj_input is flash-attn's output
        from .flash_copy import without_flash_output_copy
        rows = without_flash_output_copy(rows)
    out = []
    for row in rows:
        if row.key not in INPUT_ROWS:
            out.append(row)
        elif row.key in by_input:
            out.append(_adapter_input(row, c, by_input[row.key][0].column))
            out.extend(_a_output(c, a) for a in by_input[row.key])
        elif row.key == "proj_input" and flash_keeps_output:
            out.append(replace(row, needed_for="FlashAttention backward: D = rowsum(dO * O) "
                               "reads the attention output O (the frozen projection does not)"))
    return tuple(out)


def with_adapters_and_fp8(rows, c):
    """:func:`with_lora`, then :func:`actmem.layer.fp8.with_fp8`: the
    transformations applied after sequence parallelism (each leaves the
    rows unchanged when its option is off)."""
    from .fp8 import with_fp8
    return with_fp8(with_lora(rows, c), c)


def _adapter_input(row: LedgerRow, c, column: bool) -> LedgerRow:
    need = ("weight gradient of the LoRA adapters' A: dA = dZ^T X (the frozen base "
            "keeps nothing)")
    if column and c.sequence_parallel:
        return replace(row, name=row.name + ", all-gathered for the LoRA adapters",
                       placement=REPLICATED, ranks=1, needed_for=need,
                       source=_SOURCE + " (gather_from_sequence_parallel_region)")
    return replace(row, needed_for=need)


def _a_output(c, a: Adapter) -> LedgerRow:
    n = c.s * c.b * c.lora_rank
    return LedgerRow(f"lora_{a.name}_a_output", f"LoRA A output of {a.name} (rank r)",
                     "attention" if a.input_key in ("qkv_input", "proj_input") else "MLP",
                     ("s", "b", "r"), n, 2, REPLICATED, 1, "fixed", _SOURCE,
                     "weight gradient of the LoRA B: dB = dY^T Z, Z = X A^T")

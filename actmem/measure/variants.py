"""The layers we measure: the paper's, and each ledger variant.

Each :class:`Variant` is a set of :class:`actmem.LayerConfig` options
(the same options give the ledger and build the layer) plus how dropout
keeps its mask, and a sentence on what to expect against the ledger.
:func:`measure_variants` measures several at t = 1 in this process, or at
t > 1 on real ranks (:mod:`.launch`), and compares each with the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..layer.config import LayerConfig
from .compare import Comparison, compare
from .launch import on_ranks
from .run import measure_layer

SMALL = {"s": 32, "b": 2, "h": 64, "a": 4}
"""The default configuration: a few milliseconds per forward pass on CPU."""


@dataclass(frozen=True)
class Variant:
    """A layer to measure.

    Attributes:
        name: short identifier (CLI, widgets).
        title: what it is, in words.
        options: :class:`actmem.LayerConfig` options (ledger and layer).
        mask: dropout mask storage of the reference layer.
        expect: what the measurement shows against the ledger, and why.
    """

    name: str
    title: str
    options: dict = field(default_factory=dict)
    mask: str = "bool"
    expect: str = ""


VARIANTS = {v.name: v for v in (
    Variant("paper", "the paper's layer (sec. 4.1)", expect=(
        "Every ledger row is measured exactly; the only extras are the "
        "LayerNorm statistics.")),
    Variant("cpu_dropout", "dropout masks as F.dropout keeps them on CPU",
            mask="noise", expect=(
        "Same tensors, but each mask is the scaled noise in bfloat16: 2 "
        "bytes per element instead of the paper's 1-byte mask.")),
    Variant("selective", "selective recomputation (checkpointed core attention)",
            {"recompute": "selective"}, expect=(
        "The three s x s tensors are gone; the checkpoint keeps Q, K and V "
        "(already ledger rows) as the inputs it recomputes from.")),
    Variant("full", "full recomputation (checkpointed layer)",
            {"recompute": "full"}, expect=(
        "Only the layer input is kept: 2sbh, no extras.")),
    Variant("no_dropout", "no dropout", {"dropout": False}, expect=(
        "The masks and the dropout output go; the softmax output, saved by "
        "softmax and by the matmul with V, is one storage, counted once.")),
    Variant("sdpa", "scaled_dot_product_attention, no dropout",
            {"flash_attention": True, "dropout": False}, expect=(
        "CPU runs a FlashAttention-style kernel: no s x s tensor, an fp32 "
        "log-sum-exp per query and head; the output it keeps is the output "
        "projection's input (one storage).")),
    Variant("sdpa_dropout", "scaled_dot_product_attention with dropout",
            {"flash_attention": True}, expect=(
        "CPU has no fused kernel with dropout: the math fallback upcasts to "
        "fp32 and keeps the whole map, far above the FlashAttention ledger.")),
    Variant("gqa", "grouped-query attention, 2 key/value heads",
            {"kv_heads": 2}, expect=(
        "K and V shrink to g/a of their size; the grouped matmul never "
        "copies them per query head.")),
    Variant("swiglu", "eager (unfused) SwiGLU MLP", {"activation": "swiglu"},
            expect=(
        "The ledger counts Megatron's fused SwiGLU (gate, up, fc2 input); "
        "the eager product also keeps silu(gate), one more 2sbf.")),
)}


def measure_variants(names=tuple(VARIANTS), t: int = 1, **sizes
                     ) -> dict[str, list[Comparison]]:
    """Measure variants ``names`` at tensor-parallel size ``t``.

    Args:
        names: keys of :data:`VARIANTS`.
        t: 1 runs here; t > 1 starts t processes (one launch for all).
        **sizes: s, b, h, a (default :data:`SMALL`).

    Returns:
        ``{name: [comparison of rank 0, ..., rank t-1]}``.

    Raises:
        TypeError: ``names`` is a single string, not a list of names.
        ValueError: an unknown variant name (the message lists
            :data:`VARIANTS`).
        TypeError, ValueError: an invalid configuration (LayerConfig).
    """
    check_names(names)
    configs = [_config(VARIANTS[n], t, sizes) for n in names]
    if t == 1:
        per_rank = [_measure_rank(0, names, configs)]
    else:
        per_rank = on_ranks(_measure_rank, t, names, configs)
    return {n: [rank[i] for rank in per_rank] for i, n in enumerate(names)}


def check_names(names) -> None:
    """Raise unless ``names`` is a list (or tuple) of keys of :data:`VARIANTS`.

    Raises:
        TypeError: ``names`` is a string (write ``["paper"]``) or not iterable.
        ValueError: a name is not a variant; the message lists them all.
    """
    if isinstance(names, str):
        raise TypeError(f"names must be a list of variant names, e.g. "
                        f"[{names!r}], got the string {names!r}")
    try:
        unknown = [n for n in names if n not in VARIANTS]
    except TypeError:
        raise TypeError(f"names must be a list of variant names, got {names!r}") from None
    if unknown:
        raise ValueError(f"unknown variant {unknown[0]!r}; choose from "
                         f"{', '.join(VARIANTS)}")


def _config(v: Variant, t: int, sizes) -> LayerConfig:
    return LayerConfig(**{**SMALL, **sizes}, t=t, **v.options)


def _measure_rank(rank, names, configs) -> list[Comparison]:
    return [compare(measure_layer(c, rank, VARIANTS[n].mask))
            for n, c in zip(names, configs)]

"""Activation memory of one layer: the public entry point of the model.

``activation_memory(s, b, h, a, t)`` builds the ledger of
:mod:`actmem.ledger` and sums it into the paper's three terms (Korthikanti
et al. 2022, sections 4.1 and 4.2.1): ``fixed`` (10sbh), ``intermediate``
(24sbh/t) and ``attention_map`` (5as^2b/t).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import STORAGE_OPTIONS, LayerConfig
from .ledger import GROUPS, LedgerRow, ledger_rows


@dataclass(frozen=True)
class ActivationMemory:
    """Bytes one layer keeps for backward, per micro-batch, per GPU.

    The ledger rows (sec. 4.1) and their sums into the paper's three terms.

    Attributes:
        config: the validated inputs.
        rows: the ledger rows behind the sums.
    """

    config: LayerConfig
    rows: tuple[LedgerRow, ...]

    def group_bytes(self, group: str) -> int:
        """Bytes of the rows in ``group`` (one of ``actmem.GROUPS``).

        Raises:
            ValueError: ``group`` is not a known group.
        """
        if group not in GROUPS:
            raise ValueError(f"group must be one of {GROUPS}, got {group!r}")
        return sum(r.bytes for r in self.rows if r.group == group)

    @property
    def fixed(self) -> int:
        """The fixed term, bytes: tensors tensor parallelism replicates
        (10sbh in the paper's layer; divided by t under sequence parallelism)."""
        return self.group_bytes("fixed")

    @property
    def intermediate(self) -> int:
        """Hidden- and head-split activations (24sbh/t), bytes."""
        return self.group_bytes("intermediate")

    @property
    def attention_map(self) -> int:
        """The attention-map term, bytes: the s x s tensors (5as^2b/t), or
        FlashAttention's log-sum-exp statistics (4bas/t) that replace them."""
        return self.group_bytes("attention_map")

    @property
    def total(self) -> int:
        """All saved tensors of the layer on this GPU, bytes."""
        return sum(r.bytes for r in self.rows)


def activation_memory(s: int, b: int, h: int, a: int, t: int = 1, **options
                      ) -> ActivationMemory:
    """Activation memory of one Transformer layer, per micro-batch, per GPU.

    With default options this is the paper's formula (Korthikanti et al.
    2022, arXiv 2205.05198, sec. 4.2.1, Table 2 row 2):
    ``s*b*h*(10 + 24/t + 5*a*s/(h*t))`` bytes, derived from the ledger of
    saved tensors, not typed in. Its assumptions are the defaults: 16-bit
    activations (2 bytes per element), 1-byte dropout masks, the s x s
    attention map stored (``flash_attention=False``), a GeLU MLP of width
    4h, ``kv_heads=a``, no sequence parallelism, no recomputation.

    Args:
        s: sequence length. b: micro-batch size. h: hidden size.
        a: attention heads. t: tensor-parallel size (divides a and h).
        **options: keyword-only storage options of :class:`LayerConfig`:
            ``sequence_parallel``, ``recompute``, ``flash_attention``,
            ``kv_heads``, ``ffn_hidden_size``, ``activation``, ``dropout``.

    Returns:
        ActivationMemory with exact ``int`` bytes in ``.fixed``,
        ``.intermediate``, ``.attention_map``, ``.total`` and ``.rows``.

    Raises:
        TypeError, ValueError: invalid input, see :class:`LayerConfig`.

    >>> activation_memory(2048, 1, 4096, 32, t=8).total // 2**20
    184
    """
    _known_options("activation_memory", options, STORAGE_OPTIONS)
    config = LayerConfig(s, b, h, a, t, **options)
    return ActivationMemory(config, ledger_rows(config))


def _known_options(function: str, options: dict, known: tuple[str, ...]) -> None:
    """Refuse keyword options ``function`` does not know, listing those it does."""
    unknown = [name for name in options if name not in known]
    if unknown:
        raise TypeError(f"{function}() got unknown option{'s' * (len(unknown) > 1)} "
                        f"{', '.join(unknown)}; its options are {', '.join(known)}")


TABLE2 = {
    "no parallelism": {},
    "tensor parallel": {},
    "tensor + sequence parallel": {"sequence_parallel": True},
    "tensor parallel + selective recompute": {"recompute": "selective"},
    "tensor + sequence parallel + selective recompute":
        {"sequence_parallel": True, "recompute": "selective"},
    "full recompute": {"recompute": "full"},
}
"""The six rows of the paper's Table 2 (sec. 5) as storage options."""


def table2(s: int, b: int, h: int, a: int, t: int, **options
           ) -> dict[str, ActivationMemory]:
    """All six rows of Table 2 (sec. 5) for one configuration.

    "no parallelism" uses t=1; the others use ``t``. Extra ``options``
    (e.g. ``flash_attention=True``) apply to every row.

    Raises:
        ValueError: ``options`` sets ``sequence_parallel`` or ``recompute``
            (each row sets those itself), or the input is invalid.
        TypeError: invalid input, as :class:`LayerConfig`.
    """
    _known_options("table2", options, STORAGE_OPTIONS)
    fixed_by_rows = sorted({"sequence_parallel", "recompute"} & set(options))
    if fixed_by_rows:
        raise ValueError(f"table2 sets {', '.join(fixed_by_rows)} per row; "
                         "pass only the other storage options")
    return {
        name: activation_memory(s, b, h, a, 1 if name == "no parallelism" else t,
                                **options, **extra)
        for name, extra in TABLE2.items()
    }

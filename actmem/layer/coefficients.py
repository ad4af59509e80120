"""The coefficients 10, 24 and 5, read back exactly from the ledger.

Korthikanti et al. 2022 (sec. 4.1-4.2) write a layer's activation memory
as 10sbh + 24sbh/t + 5as^2b/t. Here the ledger's bytes are divided by each
term's unit, so the coefficients are results, not inputs, and they follow
every storage option (sequence parallelism, FlashAttention, SwiGLU, ...).
"""

from __future__ import annotations

from fractions import Fraction

from .config import LayerConfig
from .ledger import LedgerRow
from .memory import ActivationMemory
from ..validate import instance, lists_keywords


@lists_keywords
def coefficient_units(config: LayerConfig) -> dict[str, str]:
    """The unit each group's coefficient counts in, for ``config``'s options.

    ``fixed``: ``"sbh"`` (replicated on every GPU), or ``"sbh/t"`` under
    sequence parallelism (split along s). ``intermediate``: ``"sbh/t"``.
    ``attention_map``: ``"bas^2/t"`` (the stored s x s maps), or
    ``"bas/t"`` with FlashAttention, which keeps only fp32 log-sum-exp
    statistics, one per query position and head.

    Raises:
        TypeError: ``config`` is not a :class:`LayerConfig`.
    """
    instance("config", config, LayerConfig, "actmem.LayerConfig(2048, 1, 4096, 32)")
    return {"fixed": "sbh/t" if config.sequence_parallel else "sbh",
            "intermediate": "sbh/t",
            "attention_map": "bas/t" if config.flash_attention else "bas^2/t"}


def _unit_elements(config: LayerConfig, unit: str) -> Fraction:
    """Elements in ``unit`` (``sbh``, ``bas^2`` or ``bas``, optionally ``/t``)."""
    c = config
    base = {"sbh": c.s * c.b * c.h, "bas^2": c.b * c.a * c.s * c.s,
            "bas": c.b * c.a * c.s}[unit.removesuffix("/t")]
    return Fraction(base, c.t) if unit.endswith("/t") else Fraction(base)


@lists_keywords
def coefficients(result: ActivationMemory) -> dict[str, Fraction]:
    """Each group's bytes per GPU as a multiple of its unit, read back exactly.

    Units are those of :func:`coefficient_units`: for the paper's layer
    ``fixed/(sbh)``, ``intermediate/(sbh/t)`` and
    ``attention_map/(bas^2/t)``, i.e. 10, 24 and 5. Under sequence
    parallelism the fixed term is a multiple of sbh/t (still 10); with
    FlashAttention the attention-map group is a multiple of bas/t (4: fp32
    statistics, s x s never stored).

    >>> from actmem import activation_memory
    >>> coefficients(activation_memory(2048, 1, 4096, 32, t=8, flash_attention=True))
    {'fixed': Fraction(10, 1), 'intermediate': Fraction(24, 1), 'attention_map': Fraction(4, 1)}
    """
    c = instance("result", result, ActivationMemory,
                 "actmem.activation_memory(2048, 1, 4096, 32)").config
    return {group: result.group_bytes(group) / _unit_elements(c, unit)
            for group, unit in coefficient_units(c).items()}


@lists_keywords
def row_coefficient(row: LedgerRow, config: LayerConfig) -> Fraction:
    """One row's whole (unsplit) tensor as a multiple of its group's unit
    without ``/t`` (sbh, bas^2 or bas): its share of the coefficient.

    >>> from actmem import activation_memory
    >>> r = activation_memory(2048, 1, 4096, 32, t=2)
    >>> [str(row_coefficient(row, r.config)) for row in r.rows[:3]]
    ['2', '2', '2']

    Raises:
        TypeError: ``row`` is not a :class:`LedgerRow` or ``config`` not a
            :class:`LayerConfig`.
    """
    instance("row", row, LedgerRow, "activation_memory(2048, 1, 4096, 32).rows[0]")
    unit = coefficient_units(config)[row.group].removesuffix("/t")
    return row.global_bytes / _unit_elements(config, unit)

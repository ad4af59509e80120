"""Closed forms for pipeline schedules, each checked against the simulation.

:mod:`actmem.schedules` lists every stage's operations; the functions here
are the short formulas people quote, with the conditions under which they
hold. The tests compare each one with :func:`actmem.simulate_schedule` over
p up to 16, m up to 64 and v up to 4 (notebook 05 derives them from the
schedule charts). Sources: Korthikanti et al. 2022, sec. 4.2.3 (first stage
of 1F1B holds ``L*M``; interleaving multiplies it by ``1 + (p-1)/(p*v)``);
Narayanan et al. 2021, sec. 2.2 (bubble ``(p-1)/m`` and ``(p-1)/(v*m)``).

Symbols: p pipeline stages, m micro-batches per optimizer step, v model
chunks per GPU, i stage index (0 = first), L layers, M bytes one layer
keeps per micro-batch.
"""

from __future__ import annotations

from fractions import Fraction

from ...layer.memory import ActivationMemory
from .dualpipe import dualpipe_in_flight, dualpipe_parameter_copies
from .schedule_orders import interleaved_group
from .schedules import SCHEDULES, stage_index
from .training import chunk_layers, layer_bytes, pipeline_stage_memory
from ...validate import choice, lists_keywords, positive_int

__all__ = ["bubble_fraction_formula", "dualpipe_in_flight", "dualpipe_parameter_copies",
           "first_stage_memory_1f1b", "gpipe_in_flight", "interleaved_factor",
           "interleaved_factor_holds", "interleaved_first_stage_memory",
           "interleaved_in_flight", "one_f_one_b_in_flight", "zbv_in_flight",
           "zero_bubble_h1_bubble"]


def _checked(p: int, i: object) -> tuple[int, int]:
    """(p, i) as plain ints, i a stage index."""
    p = positive_int("p", p)
    return p, stage_index(i, p)


def _chunks(v: object) -> int:
    """``v`` as a plain int, checked for the interleaved schedule (v >= 2)."""
    v = positive_int("v", v)
    if v < 2:
        raise ValueError(f"v={v}: the interleaved schedule needs v >= 2 model chunks "
                         "per GPU (v=1 is 1F1B: one_f_one_b_in_flight)")
    return v


@lists_keywords
def gpipe_in_flight(p: int, m: int, i: int) -> int:
    """GPipe: every stage holds all ``m`` micro-batches at its peak
    (all forwards run before any backward)."""
    _checked(p, i)
    return positive_int("m", m)


@lists_keywords
def one_f_one_b_in_flight(p: int, m: int, i: int) -> int:
    """1F1B: stage ``i`` holds at most ``min(p - i, m)`` micro-batches:
    ``p - i - 1`` warm-up forwards plus the one in flight in the steady
    phase; with fewer micro-batches than that, all ``m``.

    >>> [one_f_one_b_in_flight(4, 8, i) for i in range(4)]
    [4, 3, 2, 1]
    """
    p, i = _checked(p, i)
    return min(p - i, positive_int("m", m))


@lists_keywords
def interleaved_in_flight(p: int, m: int, v: int, i: int, group: int | None = None
                          ) -> int:
    """Interleaved 1F1B: (micro-batch, chunk) forward passes stage ``i``
    holds at its peak: ``min(2*(p-i-1) + (v-1)*N + 1, m*v)``, the warm-up
    count plus one, with ``N`` micro-batches per group (``group``; default
    ``p``, Megatron-LM's). Each holds ``L/(p*v)`` layers.

    Raises:
        TypeError, ValueError: a value not a positive int, ``i`` not a
            stage, ``v < 2``, or a ``group`` that is neither PyTorch's
            (``m // max(1, m // p)``) nor one Megatron-LM accepts
            (:func:`actmem.simulate_schedule`).

    >>> interleaved_in_flight(4, 8, 2, 0)   # (v+1)*p - 1
    11
    """
    p, i = _checked(p, i)
    m, v = positive_int("m", m), _chunks(v)
    group = p if group is None else positive_int("group", group)
    try:
        pytorch_group = interleaved_group(p, m, v, "pytorch")
    except ValueError:  # an m PyTorch's schedule refuses: only Megatron-LM's groups
        pytorch_group = None
    if group != pytorch_group:
        interleaved_group(p, m, v, "megatron", group)
    return min(2 * (p - i - 1) + (v - 1) * group + 1, m * v)


@lists_keywords
def interleaved_factor(p: int, v: int) -> Fraction:
    """``1 + (p-1)/(p*v)``: the interleaved first stage's activations over
    ``L*M`` in the steady state (sec. 4.2.3): it holds ``(v+1)*p - 1``
    chunk passes of ``L/(p*v)`` layers each.

    >>> interleaved_factor(4, 2)
    Fraction(11, 8)
    """
    p, v = positive_int("p", p), _chunks(v)
    return 1 + Fraction(p - 1, p * v)


@lists_keywords
def interleaved_factor_holds(p: int, m: int, v: int) -> bool:
    """Whether the first stage reaches the steady-state peak behind
    :func:`interleaved_factor`: ``m*v >= (v+1)*p - 1`` (more chunk passes
    than the warm-up). With ``m`` a multiple of ``p`` (Megatron-LM): ``m >=
    2p``. At ``m = p`` every pass is warm-up and the first stage holds
    ``m*v`` chunk passes, i.e. ``L*M`` (factor 1).
    """
    p, m, v = positive_int("p", p), positive_int("m", m), _chunks(v)
    return m * v >= (v + 1) * p - 1


@lists_keywords
def first_stage_memory_1f1b(per_layer: ActivationMemory | int, L: int, p: int,
                            m: int) -> int:
    """Bytes the first stage holds at its peak under 1F1B:
    ``min(p, m) * (L/p) * M``.

    **p cancels** (sec. 4.2.3): with ``m >= p`` the first stage holds ``p``
    micro-batches of ``L/p`` layers each, ``p * (L/p) * M = L*M``, the same
    bytes as one GPU running the whole model for one micro-batch, whatever
    ``p`` is. Pipeline parallelism does not shrink the first stage's
    activations; tensor and sequence parallelism and recomputation do.

    Raises:
        TypeError, ValueError: as :func:`actmem.pipeline_stage_memory`.
    """
    return pipeline_stage_memory(per_layer, L, p, one_f_one_b_in_flight(p, m, 0))


@lists_keywords
def interleaved_first_stage_memory(per_layer: ActivationMemory | int, L: int,
                                   p: int, v: int) -> int:
    """``L*M*(1 + (p-1)/(p*v))`` bytes, exact: ``((v+1)*p - 1) * L/(p*v) * M``;
    the interleaved first stage at its peak when
    :func:`interleaved_factor_holds`.

    Raises:
        TypeError, ValueError: a value is not a positive int, ``v < 2``,
            or ``p*v`` does not divide ``L``.
    """
    p, v = positive_int("p", p), _chunks(v)
    return ((v + 1) * p - 1) * chunk_layers(L, p, v) * layer_bytes(per_layer)


@lists_keywords
def bubble_fraction_formula(schedule: str, p: int, m: int, v: int = 1) -> Fraction:
    """Narayanan et al. 2021, sec. 2.2: ``(p-1)/m`` for GPipe and 1F1B,
    ``(p-1)/(v*m)`` for interleaved 1F1B. Equal to the simulated
    :meth:`~actmem.schedules.PipelineSchedule.bubble_fraction` for GPipe
    and 1F1B at every ``m``, and for interleaving when ``p`` divides ``m``
    (PyTorch's order with ``m < p`` idles longer).

    >>> bubble_fraction_formula("interleaved", 4, 8, 2)
    Fraction(3, 16)
    """
    p, m, v = (positive_int(name, x) for name, x in (("p", p), ("m", m), ("v", v)))
    choice("schedule", schedule, SCHEDULES)
    if schedule == "interleaved":
        _chunks(v)
    elif v != 1:
        raise ValueError(f"v={v}: schedule {schedule!r} runs one model chunk per GPU (v=1)")
    return Fraction(p - 1, (v if schedule == "interleaved" else 1) * m)


def zero_bubble_h1_bubble(p: int, m: int) -> Fraction:
    """The bubble of PyTorch's interleaved zero bubble with one chunk per GPU
    (``simulate_schedule("interleaved-zb", p, m)``): ``(p-1)/(3m)``, a third
    of 1F1B's ``(p-1)/m`` when F, I and W each take one unit. Equal to the
    simulation for ``m >= p``.

    PyTorch's ``ScheduleInterleavedZeroBubble`` implements the paper's
    ZB-1p ("this is implementing the ZB1P schedule in the paper", its
    docstring), the schedule found automatically under 1F1B's activation
    memory. This function keeps the name of the paper's handcrafted ZB-H1,
    whose bubble ``(p-1)(T_F + T_B - T_W)`` (``T_B`` the input gradient
    alone; Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, arXiv
    2401.10241, sec. 3.1) is the same fraction here. With
    ``T_F = T_B = T_W`` both idle ``(p-1)/(3m)`` of the ideal time and keep
    1F1B's activation memory (the authors' README,
    github.com/sail-sg/zero-bubble-pipeline-parallelism: "ZB1P ...
    (p-1)/3m ... 1x").

    >>> zero_bubble_h1_bubble(4, 8)
    Fraction(1, 8)

    Raises:
        TypeError, ValueError: ``p`` or ``m`` not a positive int, or ``m < p``.
    """
    p, m = positive_int("p", p), positive_int("m", m)
    if m < p:
        raise ValueError(f"m={m} < p={p}: the closed form holds for m >= p; use "
                         "simulate_schedule('interleaved-zb', p, m).bubble_fraction()")
    return Fraction(p - 1, 3 * m)


def zbv_in_flight(p: int, m: int) -> int:
    """ZBV (``simulate_schedule("zbv", p, m, 2)``): every GPU holds ``2p``
    chunk passes of ``L/(2p)`` layers at its peak once ``m >= 2p``: ``L*M``
    on the first and the last stage alike (the V balances them), counting a
    pass until its W.

    >>> zbv_in_flight(4, 8)
    8

    Raises:
        TypeError, ValueError: ``p`` or ``m`` not a positive int, or ``m < 2p``.
    """
    p, m = positive_int("p", p), positive_int("m", m)
    if m < 2 * p:
        raise ValueError(f"m={m} < 2p={2 * p}: the closed form holds for m >= 2p; use "
                         "simulate_schedule('zbv', p, m, 2).peak_in_flight(i)")
    return 2 * p

"""How many routed token copies a rank sends and its experts receive: the
arithmetic the MoE rows of :mod:`actmem.layer.moe` and the dispatch buffers
of :mod:`actmem.run.moments.moe_dispatch` share (balanced routing, a
capacity factor, and a busier rank's what-if)."""

from __future__ import annotations

import math
from fractions import Fraction

from .config import LayerConfig


def routed_copies(c: LayerConfig) -> int:
    """Copies one rank sends to the experts (T before the etp all-gather):
    N_r*k for dropless routing, N_r = s*b/t the rank's tokens; with a
    capacity factor c each expert takes at most
    ``capacity = ceil(N_r*k/E * c)`` (Megatron-LM's get_capacity, in its
    floating-point arithmetic), and no more than the N_r tokens there are:
    E*capacity when padded to capacity or when the balanced share N_r*k/E
    is above the capacity (the rest are dropped), else N_r*k.
    """
    tokens, E, k = c.s * c.b // c.t, c.num_experts, c.moe_router_topk
    if c.moe_expert_capacity_factor is None:
        return tokens * k
    factor = c.moe_expert_capacity_factor
    try:
        capacity = min(math.ceil((tokens * k / E) * factor), tokens)
    except OverflowError:  # past floats (a factor of 1e308): the exact share
        capacity = min(math.ceil(Fraction(tokens * k, E) * Fraction(factor)), tokens)
    if c.moe_pad_expert_input_to_capacity or tokens * k > E * capacity:
        return E * capacity
    return tokens * k


def received_copies(c: LayerConfig) -> int:
    """Copies one rank's experts receive (before the etp all-gather): the
    :func:`routed_copies` it sends under balanced routing, times
    ``moe_rank_load`` for a busier rank, rounded up to whole copies."""
    sent = routed_copies(c)
    if c.moe_rank_load == 1:
        return sent
    return math.ceil(sent * Fraction(c.moe_rank_load))


def hot_rank_load(moe_hot_expert: int | float, num_experts: int, topk: int, ep: int) -> float:
    """The ``moe_rank_load`` of the rank that holds a hot expert.

    A hot expert receives ``moe_hot_expert`` = f times the mean copies per expert,
    mu = ep*R/E for the R copies each of the ep ranks sends; the other E-1
    experts share the rest evenly, (E-f)/(E-1) times mu each. The rank
    holding it runs l = E/ep local experts, so it receives
    f*mu + (l-1)*(E-f)/(E-1)*mu = R * (f + (l-1)*(E-f)/(E-1)) / l: f itself
    when l = 1 (one expert per rank), 1 when ep = 1 (every copy stays).
    A token picks k distinct experts, so an expert takes at most every token
    once: f <= E/k.

    >>> hot_rank_load(2, num_experts=8, topk=2, ep=8), hot_rank_load(2, 8, 2, 1)
    (2.0, 1.0)

    Raises:
        ValueError: f not a finite number from 1 to E/k; ep not a positive
            int dividing E.
    """
    from ..validate import finite_number, positive_int, shown
    from .moe_options import real
    E, k, ep = (positive_int(n, v) for n, v in (("num_experts", num_experts),
                                                ("topk", topk), ("ep", ep)))
    f = finite_number("moe_hot_expert", real(moe_hot_expert), positive=True,
                      allowed=f"a finite number from 1 (balanced) to E/k={E / k:g}")
    if not 1 <= f <= Fraction(E, k) or E % ep:
        raise ValueError(f"moe_hot_expert={shown(f)} must be from 1 (balanced) to "
                         f"E/k={E / k:g}, and ep={ep} must divide num_experts={E}")
    local = E // ep
    share = (Fraction(E) - Fraction(f)) / (E - 1) if E > 1 else Fraction(0)
    return float((Fraction(f) + (local - 1) * share) / local)

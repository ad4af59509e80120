"""The options of a mixture-of-experts layer and their checks, shared by
:class:`actmem.LayerConfig` and :class:`actmem.ModelConfig`: which options
there are, their values without experts, and what Megatron-LM (or the
ledger of :mod:`actmem.layer.moe`) refuses."""

from __future__ import annotations

import numbers
from dataclasses import fields

from ..validate import choice, divides, finite_number, flag, positive_int, shown
from .config import LayerConfig
from .router import ROUTER_OPTIONS, SCORE_FUNCTIONS, check_router

MOE_OPTIONS = ("num_experts", "moe_router_topk", "moe_ffn_hidden_size",
               "moe_shared_expert_intermediate_size", "etp", "moe_expert_capacity_factor",
               "moe_pad_expert_input_to_capacity", "moe_aux_loss_coeff",
               "moe_token_dispatcher_type", "moe_router_load_balancing_type",
               "moe_router_dtype", *ROUTER_OPTIONS, "moe_permute_fusion",
               "moe_flex_dispatcher_backend")
"""The options that only a mixture-of-experts layer takes (num_experts first)."""

DISPATCHERS = ("alltoall", "allgather", "flex")
"""Megatron-LM's token dispatchers the MoE rows follow (``--moe-token-dispatcher-type``;
flex within one node: :mod:`actmem.layer.moe_flex`, :mod:`actmem.layer.moe_hybridep`)."""
FLEX_BACKENDS = ("deepep", "hybridep")
"""The flex dispatcher's backends actmem models (``--moe-flex-dispatcher-backend``;
NCCL-EP is not)."""
LOAD_BALANCING = ("aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none")
"""Megatron-LM's router load-balancing types the MoE rows follow
(``--moe-router-load-balancing-type``)."""
ROUTER_DTYPES = {None: 2, "fp32": 4, "fp64": 8}
"""``--moe-router-dtype`` and the bytes of each routing probability it gives
(None: the activations' bf16)."""
_CHOICES = {"moe_token_dispatcher_type": DISPATCHERS,
            "moe_flex_dispatcher_backend": FLEX_BACKENDS,
            "moe_router_load_balancing_type": LOAD_BALANCING,
            "moe_router_score_function": SCORE_FUNCTIONS}
_FLAGS = ("moe_pad_expert_input_to_capacity", "moe_router_pre_softmax",
          "moe_router_enable_expert_bias", "moe_permute_fusion")


MOE_DEFAULTS = {f.name: f.default for f in fields(LayerConfig) if f.name in MOE_OPTIONS[1:]}
"""Each MoE option's value without experts (a dense layer takes only these)."""
_FLOATS = {"moe_aux_loss_coeff": (False, "a finite number >= 0 (0: no load-balancing loss)"),
           "moe_expert_capacity_factor": (True, "None (dropless) or a finite number > 0")}
"""The MoE options that take a real number: (must be > 0, what is allowed)."""


def real(value: object) -> object:
    """A NumPy floating scalar (``np.float32(1.2)``, ``np.float16``...) as
    Python's ``float``; anything else (arrays, bools, ints) unchanged, for
    the checks to judge."""
    if (isinstance(value, numbers.Real) and not isinstance(value, (numbers.Integral, float))
            and type(value).__module__ == "numpy"):
        return float(value)
    return value


def check_moe_values(c, names=MOE_OPTIONS[1:]) -> None:
    """Check the type and range of each MoE option in ``names`` on the
    frozen record ``c`` (a :class:`LayerConfig` or an
    :class:`actmem.ModelConfig`), whether or not it has experts, and store
    plain values (NumPy floats as ``float``).

    Raises:
        TypeError: moe_router_topk, moe_ffn_hidden_size,
            moe_shared_expert_intermediate_size, etp, moe_router_num_groups or
            moe_router_group_topk not an int (all but the first may be None);
            moe_pad_expert_input_to_capacity, moe_router_pre_softmax or
            moe_router_enable_expert_bias not a bool.
        ValueError: one of those ints < 1; moe_token_dispatcher_type not
            one of :data:`DISPATCHERS`, moe_router_load_balancing_type not one
            of :data:`LOAD_BALANCING`, moe_router_score_function not one of
            :data:`~actmem.layer.router.SCORE_FUNCTIONS`, moe_router_dtype not None, 'fp32' or
            'fp64'; moe_aux_loss_coeff not a finite
            number >= 0; moe_expert_capacity_factor not None or a finite
            number > 0 (arrays, bools, nan and inf are refused).
    """
    for name in names:
        value = real(getattr(c, name))
        if name == "moe_router_topk":
            value = positive_int(name, value)
        elif name in _FLOATS:
            positive, allowed = _FLOATS[name]
            if value is not None or not positive:
                value = finite_number(name, value, positive=positive, allowed=allowed)
        elif name in _FLAGS:
            flag(name, value)
        elif name in _CHOICES:
            choice(name, value, _CHOICES[name])
        elif name == "moe_router_dtype":
            if value is not None and (not isinstance(value, str) or value not in ROUTER_DTYPES):
                raise ValueError(f"moe_router_dtype must be None (the activations' bf16), "
                                 f"'fp32' or 'fp64', got {shown(value)}")
        elif value is not None:
            value = positive_int(name, value)
        object.__setattr__(c, name, value)


def refuse_without_experts(c, names=MOE_OPTIONS[1:], defaults=MOE_DEFAULTS) -> None:
    """Refuse an MoE option of ``c`` (values already checked by
    :func:`check_moe_values`) that is not its dense default while
    ``c.num_experts`` is None.

    Raises:
        ValueError: ``{name}={value} needs num_experts ...``, naming the
            value a model without experts takes.
    """
    if c.num_experts is not None:
        return
    for name in names:
        value = getattr(c, name)
        if value != defaults[name]:
            raise ValueError(f"{name}={value!r} needs num_experts (it describes the "
                             "mixture-of-experts layers); without experts (num_experts=None) "
                             f"{name} keeps its default, {defaults[name]!r}; or pass "
                             "num_experts too")


def check_moe(c: LayerConfig) -> None:
    """Refuse MoE options Megatron-LM would refuse, or the ledger cannot count.

    Raises:
        TypeError, ValueError: an option of the wrong type or range
            (:func:`check_moe_values`, checked first); an MoE option without
            ``num_experts`` (:func:`refuse_without_experts`); k not in
            1..E; the router's rules (:func:`actmem.layer.router.check_router`)
            and those of :func:`_check_routing`; t > 1 without
            sequence parallelism (``moe_layer.py``: MoELayer.forward refuses it
            in training); etp not dividing f_e; ep not dividing E; t not
            dividing the shared experts' width.
    """
    check_moe_values(c)
    refuse_without_experts(c)
    ep = positive_int("ep", c.ep)
    load = finite_number("moe_rank_load", real(c.moe_rank_load), positive=True,
                         allowed="a finite number from 1 (balanced routing) to num_experts")
    object.__setattr__(c, "moe_rank_load", load)
    if c.num_experts is None:
        if load != 1 or ep != 1:
            raise ValueError(f"moe_rank_load={load!r}, ep={ep} need num_experts: they "
                             "describe a rank's experts (without experts: 1 and 1)")
        return
    E = positive_int("num_experts", c.num_experts)
    divides("ep", ep, num_experts=E)
    k = c.moe_router_topk
    if k > E:
        raise ValueError(f"moe_router_topk={k} must be between 1 and num_experts={E}: "
                         "a token is routed to k distinct experts")
    check_router(c)
    _check_routing(c)
    _check_permute_fusion(c)
    _check_rank_load(c)
    _check_flex(c)
    if c.t > 1 and not c.sequence_parallel:
        raise ValueError(f"num_experts={E} with t={c.t} needs sequence_parallel=True "
                         "(Megatron-LM's MoELayer.forward refuses MoE with tensor "
                         "parallelism but no sequence parallelism in training)")
    divides("etp", c.expert_t, moe_ffn_hidden_size=c.f_e)
    if c.moe_expert_capacity_factor is None and c.moe_pad_expert_input_to_capacity:
        raise ValueError("moe_pad_expert_input_to_capacity=True needs "
                         "moe_expert_capacity_factor: padding is to that capacity")
    if c.moe_shared_expert_intermediate_size is not None:
        divides("t", c.t, moe_shared_expert_intermediate_size=c.moe_shared_expert_intermediate_size)


def _check_routing(c: LayerConfig) -> None:
    """Megatron-LM's own rules on the router and the capacity
    (``transformer_config.py``: TransformerConfig.__post_init__; ``router.py``:
    TopKRouter.sinkhorn_load_balancing asserts no auxiliary loss), and the
    capacity rows, which follow the all-to-all dispatcher only."""
    lb = c.moe_router_load_balancing_type
    if lb == "sinkhorn" and c.moe_aux_loss_coeff > 0:
        raise ValueError(f"moe_aux_loss_coeff={c.moe_aux_loss_coeff} with "
                         "moe_router_load_balancing_type='sinkhorn': Megatron-LM's sinkhorn "
                         "router asserts no auxiliary loss; pass moe_aux_loss_coeff=0")
    if c.moe_expert_capacity_factor is None:
        return
    if lb == "sinkhorn":
        raise ValueError(f"moe_expert_capacity_factor={c.moe_expert_capacity_factor} with "
                         "moe_router_load_balancing_type='sinkhorn': Megatron-LM's capacity "
                         "works with aux_loss, seq_aux_loss, global_aux_loss or none only")
    if c.moe_token_dispatcher_type != "alltoall":
        raise ValueError(f"moe_expert_capacity_factor={c.moe_expert_capacity_factor} with "
                         f"moe_token_dispatcher_type={c.moe_token_dispatcher_type!r}: actmem "
                         "counts token dropping with the alltoall dispatcher only")


def _check_permute_fusion(c: LayerConfig) -> None:
    """The fused permutation's rows follow the all-to-all dispatcher
    without padding to capacity (Megatron-LM's fused ``permute`` takes the
    mask-map kernel even then, and the all-gather dispatcher's row map
    depends on ep)."""
    if not c.moe_permute_fusion:
        return
    if c.moe_token_dispatcher_type == "allgather" or c.moe_pad_expert_input_to_capacity:
        raise ValueError("moe_permute_fusion=True is modelled with moe_token_dispatcher_type="
                         "'alltoall' or 'flex' and without moe_pad_expert_input_to_capacity, got "
                         f"{c.moe_token_dispatcher_type!r} and "
                         f"{c.moe_pad_expert_input_to_capacity}")


def _check_flex(c: LayerConfig) -> None:
    """The flex dispatcher's rows follow DeepEP with balanced routing
    (:mod:`actmem.layer.moe_flex`; its group's size is a job's check:
    :func:`check_flex_group`)."""
    if c.moe_token_dispatcher_type != "flex":
        if c.moe_flex_dispatcher_backend != "deepep":
            raise ValueError(f"moe_flex_dispatcher_backend={c.moe_flex_dispatcher_backend!r} "
                             "needs moe_token_dispatcher_type='flex', got "
                             f"{c.moe_token_dispatcher_type!r}")
        return
    if c.moe_rank_load != 1:
        raise ValueError(f"moe_token_dispatcher_type='flex' with moe_rank_load="
                         f"{c.moe_rank_load}: the flex dispatcher is modelled under balanced "
                         "routing (moe_rank_load=1)")


def _check_rank_load(c: LayerConfig) -> None:
    """The hot-rank what-if: 1 <= moe_rank_load <= E (a rank cannot receive
    more than the copies of all E experts' senders), and only without a
    capacity factor (a capacity caps every expert's copies)."""
    load, E = c.moe_rank_load, c.num_experts
    if not 1 <= load <= E:
        raise ValueError(f"moe_rank_load={load!r} must be from 1 (balanced routing) to "
                         f"num_experts={E}")
    if load != 1 and c.moe_expert_capacity_factor is not None:
        raise ValueError(f"moe_rank_load={load!r} with moe_expert_capacity_factor="
                         f"{c.moe_expert_capacity_factor}: the capacity caps every expert's "
                         "copies; the imbalance what-if is for dropless routing")


def check_flex_group(model, etp: int, ep: int, tokens: int) -> None:
    """The flex dispatcher's group of W = etp*ep GPUs (``model``: a
    :class:`actmem.ModelConfig` with experts; ``tokens``: N, each GPU's
    tokens at the dispatcher). DeepEP: Megatron-LM asserts
    W > 1 (``token_dispatcher.py``: MoEFlexTokenDispatcher, "DeepEP
    dispatcher requires TPxEP > 1"), and DeepEP configures 2, 4 and 8 GPUs
    in a node, which actmem models (W in 2, 4, 8). HybridEP: actmem models
    one 8-GPU NVLink domain (W <= 8), where HybridEP needs L*W divisible
    by 4 (``csrc/hybrid_ep/config.cuh``), L = E/ep, and the last chunk of
    64 tokens times W divisible by 4 (``executor/executor.cu``:
    metadata_preprocess_core, TMA's 16-byte alignment).

    Raises:
        ValueError: naming etp*ep and what is allowed.
    """
    if model.moe_token_dispatcher_type != "flex":
        return
    W = etp * ep
    if model.moe_flex_dispatcher_backend == "hybridep":
        if W > 8 or (model.num_experts // ep * W) % 4:
            raise ValueError(f"moe_flex_dispatcher_backend='hybridep' with etp*ep={W} and "
                             f"{model.num_experts // ep} local experts: actmem models HybridEP "
                             "within one 8-GPU NVLink domain (etp*ep <= 8; across domains it "
                             "adds RDMA buffers and another handle), where HybridEP needs "
                             "local experts x etp*ep divisible by 4 (csrc/hybrid_ep/config.cuh)")
        if (tokens % 64 * W) % 4:
            raise ValueError(f"moe_flex_dispatcher_backend='hybridep' with {tokens} tokens per "
                             f"GPU and etp*ep={W}: HybridEP needs (tokens mod 64) x etp*ep "
                             "divisible by 4 (csrc/hybrid_ep/executor/executor.cu: TMA's "
                             "16-byte alignment)")
        return
    if W not in (2, 4, 8):
        raise ValueError(f"moe_token_dispatcher_type='flex' with etp*ep={W}: DeepEP "
                         "needs etp*ep > 1 (Megatron-LM asserts it) and has configurations "
                         "for 2, 4 and 8 GPUs in a node (deep_ep/buffer.py: "
                         "get_dispatch_config); actmem models it within one node (across "
                         "nodes its NVSHMEM buffers and handle differ); use etp*ep = 2, 4 or "
                         "8, or another dispatcher")

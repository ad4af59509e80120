"""An MoE job's own checks: its expert groups, the hot expert, the fused
permutation and the flex dispatcher's group (each a rule of Megatron-LM or
a limit of what actmem models, named in its message)."""

from __future__ import annotations

from ...layer.moe_options import check_flex_group
from ...validate import finite_number, shown


def check_moe_job(job) -> None:
    """Check ``job``'s expert sizes
    (:func:`actmem.run.model_states.states.expert_data_parallel`), its
    ``moe_hot_expert``, ``moe_permute_fusion`` and the flex dispatcher's
    group (:func:`actmem.layer.moe_options.check_flex_group`).

    Raises:
        TypeError, ValueError: the first invalid option, named.
    """
    from ..model_states.states import expert_data_parallel
    expert_data_parallel(job.model, job.t, job.d, job.ep, job.etp, job.cp)
    _check_hot_expert(job)
    _check_permute_fusion(job)
    if job.model.num_experts is not None:
        check_flex_group(job.model, job.t if job.etp is None else job.etp, job.ep,
                         job.model.s // job.cp * job.model.b // job.t)


def _check_permute_fusion(job) -> None:
    """The fused permutation is Transformer Engine's, and its rows
    (:func:`actmem.layer.moe.fused_dispatch_rows`) include the sorts by local
    expert, which Megatron-LM skips with one expert per GPU."""
    model = job.model
    if not model.moe_permute_fusion:
        return
    if not job.transformer_engine:
        raise ValueError("moe_permute_fusion=True needs transformer_engine=True: the fused "
                         "permutation is Transformer Engine's")
    if model.num_experts == job.ep and model.moe_token_dispatcher_type != "flex":
        raise ValueError(f"moe_permute_fusion=True with ep={job.ep} = num_experts: with one "
                         "expert per GPU Megatron-LM skips the fused sorts, which actmem "
                         "counts; not modelled")


def _check_hot_expert(job) -> None:
    """``moe_hot_expert``: 1 for a dense model; from 1 to E/k for an MoE one
    (:func:`actmem.layer.moe_copies.hot_rank_load`), and 1 with a capacity factor."""
    from ...layer.moe_copies import hot_rank_load
    from ...layer.moe_options import real
    model, f = job.model, real(job.moe_hot_expert)
    object.__setattr__(job, "moe_hot_expert", f)   # a NumPy float as Python's
    if model.num_experts is None:
        needs = (f"moe_hot_expert={shown(f)} needs an MoE model (num_experts): it is the "
                 "busiest expert's share of the routed copies; a dense model takes 1")
        if type(f).__name__ in ("bool", "bool_") or finite_number(
                "moe_hot_expert", f, allowed="1 for a dense model") != 1:
            raise ValueError(needs)
        return
    hot_rank_load(f, model.num_experts, model.moe_router_topk, job.ep)
    if f != 1 and model.moe_token_dispatcher_type == "flex":
        raise ValueError(f"moe_hot_expert={shown(f)} with moe_token_dispatcher_type='flex': "
                         "the flex dispatcher is modelled under balanced routing (the tokens "
                         "a busier rank receives from each sender are not); use 1")
    if f != 1 and model.moe_expert_capacity_factor is not None:
        raise ValueError(f"moe_hot_expert={shown(f)} with moe_expert_capacity_factor="
                         f"{model.moe_expert_capacity_factor}: the capacity caps every expert's "
                         "copies; the imbalance what-if is for dropless routing")

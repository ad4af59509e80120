"""Megatron-LM's micro-batch group size N
(``--microbatch-group-size-per-virtual-pipeline-stage``) against Megatron-LM's
own code: its checks, ``get_schedule_table`` and ``get_pp_rank_microbatches``,
taken from ``megatron/core/pipeline_parallel/schedules.py`` in the local
mirror and run with stand-ins for its process groups (not re-typed). Skipped
when the mirror is absent."""

import ast
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

import actmem
from actmem.run.schedule.schedule_orders import megatron_groups

MIRROR = Path("/work/.mirror/NVIDIA+Megatron-LM/repo")
SOURCE = "megatron/core/pipeline_parallel/schedules.py"


@pytest.fixture(scope="module")
def megatron():
    """Megatron-LM's functions and its group-size checks, compiled from the
    mirror's source: ``table``, ``warmup`` and ``check(p, m, N)``."""
    if not MIRROR.exists():
        pytest.skip("Megatron-LM mirror not found at " + str(MIRROR))
    text = subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:{SOURCE}"],
                          capture_output=True, text=True, check=True).stdout
    tree = ast.parse(text)
    found = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    space: dict = {"Optional": __import__("typing").Optional, "P2PCommunicator": object,
                   "parallel_state": None}
    for name in ("get_schedule_table", "get_pp_rank_microbatches"):
        exec(compile(ast.Module([found[name]], []), SOURCE, "exec"), space)
    body = found["forward_backward_pipelining_with_interleaving"].body
    first = next(k for k, node in enumerate(body) if isinstance(node, ast.If)
                 and "microbatch_group_size_per_vp_stage" in ast.unparse(node.test))
    checks = body[first:first + 3]   # the range check, the last group's size, its check
    assert "final_microbatch_group_size" in ast.unparse(checks[2].test)
    check = ast.FunctionDef("check", ast.arguments([], [ast.arg(a) for a in (
        "config", "num_microbatches", "pipeline_parallel_size")], None, [], [], None, []),
        checks, [], lineno=1)
    exec(compile(ast.fix_missing_locations(ast.Module([check], [])), SOURCE, "exec"), space)

    def warmup(p, m, v, N, rank):
        group = SimpleNamespace(size=lambda: p, rank=lambda: rank)
        comm = SimpleNamespace(pp_group=group, virtual_pipeline_model_parallel_size=v)
        return space["get_pp_rank_microbatches"](m, v, N, p2p_communicator=comm)[2]

    def accepts(p, m, N):
        try:
            space["check"](SimpleNamespace(microbatch_group_size_per_vp_stage=N), m, p)
        except (ValueError, RuntimeError):
            return False
        return True

    return SimpleNamespace(table=space["get_schedule_table"], warmup=warmup, accepts=accepts)


def test_group_sizes_accepted_are_megatrons(megatron):
    for p in range(2, 9):
        for m in range(1, 4 * p + 1):
            assert megatron_groups(p, m) == [N for N in range(1, m + 1)
                                             if megatron.accepts(p, m, N)], (p, m)
            for N in range(1, m + 2):
                try:
                    actmem.simulate_schedule("interleaved", p, m, 2, microbatch_group_size=N)
                    ours = True
                except ValueError as error:
                    assert "microbatch_group_size" in str(error)
                    ours = False
                assert ours == megatron.accepts(p, m, N), (p, m, N)


def test_order_is_megatrons_table_and_warmup(megatron):
    for p in range(2, 7):
        for m in range(p, 3 * p + 1):
            for v in (2, 3):
                for N in megatron_groups(p, m):
                    s = actmem.simulate_schedule("interleaved", p, m, v,
                                                 microbatch_group_size=N)
                    table = megatron.table(m, v, N)
                    for i in range(p):
                        warmup = megatron.warmup(p, m, v, N, i)
                        forwards = [(op.microbatch, op.chunk) for op in s.ops[i]
                                    if op.kind == "F"]
                        backwards = [(op.microbatch, v - 1 - op.chunk) for op in s.ops[i]
                                     if op.kind == "B"]
                        assert forwards == backwards == list(table), (p, m, v, N, i)
                        kinds = "".join(op.kind for op in s.ops[i])
                        steady = "FB" if warmup < m * v else "B"
                        assert kinds.startswith("F" * warmup + steady), (p, m, v, N, i)
                        assert s.peak_in_flight(i) == min(warmup + 1, m * v) == \
                            actmem.interleaved_in_flight(p, m, v, i, group=N)


def test_default_group_is_p_and_megatron_refuses_p4_m6_only_by_default():
    assert actmem.simulate_schedule("interleaved", 4, 8, 2).microbatch_group_size == 4
    with pytest.raises(ValueError, match=r"default microbatch_group_size \(N = p\) .*"
                                         r"multiple of p=4.*e\.g\. N=6"):
        actmem.simulate_schedule("interleaved", 4, 6, 2)
    s = actmem.simulate_schedule("interleaved", 4, 6, 2, microbatch_group_size=6)
    # warm-up (v-1)N + 2(p-i-1): the first stage holds 12 chunk passes, more
    # than 1 + (p-1)/(pv) of the default group (11 at m = 8)
    assert [s.peak_in_flight(i) for i in range(4)] == [12, 11, 9, 7]
    assert s.ops == actmem.simulate_schedule("interleaved", 4, 6, 2, "pytorch").ops


@pytest.mark.parametrize("args, kwargs, message", [
    ((4, 6, 2), {"microbatch_group_size": 5},
     r"microbatch_group_size=5: m mod N = 6 mod 5 = 1; .* 0 or at least p=4"),
    ((4, 6, 2), {"microbatch_group_size": 7}, r"microbatch_group_size=7: .* 4 <= N <= 6"),
    ((4, 8, 2), {"microbatch_group_size": 3}, r"microbatch_group_size=3: .* 4 <= N <= 8"),
    ((4, 3, 2), {"microbatch_group_size": 4}, r"\(none: m < p\)"),
    ((4, 8, 2), {"microbatch_group_size": 4, "order": "pytorch"},
     r"microbatch_group_size=4: PyTorch's ScheduleInterleaved1F1B has no group size"),
])
def test_bad_group_sizes_name_the_argument(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        actmem.simulate_schedule("interleaved", *args, **kwargs)


def test_group_size_only_for_interleaved():
    with pytest.raises(ValueError, match=r"microbatch_group_size=4: only "
                                         r"schedule='interleaved'"):
        actmem.simulate_schedule("1f1b", 4, 8, microbatch_group_size=4)
    with pytest.raises(TypeError, match="microbatch_group_size must be a positive integer"):
        actmem.simulate_schedule("interleaved", 4, 8, 2, microbatch_group_size=4.0)

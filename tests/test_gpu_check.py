"""Notebook 10's "Check it on your GPU" (actmem.measure.gpu_check): the
comparison's arithmetic, and the path without CUDA, which runs nothing and
says so (tests never need a GPU). Skipped without torch unless CI is set."""

import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0 "
                        "--index-url https://download.pytorch.org/whl/cpu")

import torch  # noqa: E402

import actmem  # noqa: E402
from actmem.measure import gpu_check  # noqa: E402
from actmem.measure.gpu_check import Comparison, GpuCheck, check_on_gpu  # noqa: E402
from actmem.translations import ZH  # noqa: E402

MIB = 2**20


def test_the_comparison_sets_allocated_against_predicted_and_reserved_against_allocated():
    c = Comparison(predicted=40 * MIB, allocated=41 * MIB, reserved=44 * MIB)
    assert c.difference == MIB
    assert c.relative == 0.025           # 1 MiB over 40 MiB
    assert c.allocator_gap == 3 * MIB
    under = Comparison(predicted=8 * MIB, allocated=6 * MIB, reserved=6 * MIB)
    assert (under.difference, under.relative, under.allocator_gap) == (-2 * MIB, -0.25, 0)


@pytest.mark.parametrize("fields, error, match", [
    (dict(predicted=0, allocated=1, reserved=1), ValueError, "predicted must be > 0"),
    (dict(predicted=1, allocated=-1, reserved=1), ValueError, "allocated must be bytes >= 0"),
    (dict(predicted=1, allocated=5, reserved=4), ValueError, "reserved=4 is below allocated=5"),
    (dict(predicted=1.5, allocated=1, reserved=1), TypeError, "predicted must be bytes"),
    (dict(predicted=1, allocated=True, reserved=1), TypeError, "allocated must be bytes"),
])
def test_the_comparison_refuses_what_is_not_bytes(fields, error, match):
    with pytest.raises(error, match=match):
        Comparison(**fields)


def test_without_cuda_nothing_runs_and_it_says_skipped(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("nothing may run without CUDA")
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", never)
    result = check_on_gpu(cuda=False)
    assert result == GpuCheck("megatron_flash", skipped=gpu_check.NO_CUDA)
    plan, skipped = result.lines()
    assert "max_memory_allocated()" in plan and "max_memory_reserved()" in plan
    assert "https://pytorch.org/memory_viz" in plan and gpu_check.ALLOC_CONF in plan
    assert skipped == "Skipped: " + gpu_check.NO_CUDA
    assert not any(ch.isdigit() for ch in skipped)   # no number made up


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_on_a_machine_without_cuda_the_default_is_skipped():
    assert check_on_gpu(snapshot=None).skipped == gpu_check.NO_CUDA


def test_the_lines_of_a_run_give_the_numbers_in_both_languages():
    ran = GpuCheck("megatron_flash", comparison=Comparison(40 * MIB, 41 * MIB, 44 * MIB),
                   snapshot="step.pickle")
    assert ran.lines()[1:] == [
        "predicted peak (the timeline): 40 MiB",
        "max_memory_allocated(): 41 MiB, +2.50% against the prediction",
        "max_memory_reserved(): 44 MiB, 3 MiB above allocated",
        "snapshot written to step.pickle: open it on https://pytorch.org/memory_viz"]
    actmem.set_language("zh")
    try:
        chinese = ran.lines() + GpuCheck("megatron_flash", skipped=gpu_check.NO_CUDA).lines()
    finally:
        actmem.set_language("en")
    assert chinese[2] == ZH["max_memory_allocated(): {bytes}, {diff:+.2%} against the "
                            "prediction"].format(bytes="41 MiB", diff=0.025)
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in line) for line in chinese)


def test_bad_arguments_are_refused_before_anything_runs():
    with pytest.raises(ValueError, match=r"config='megatron' does not run on CUDA; allowed: "
                                         r"megatron_flash, megatron_flash_full"):
        check_on_gpu("megatron", cuda=False)
    with pytest.raises(TypeError, match="snapshot must be a file name"):
        check_on_gpu(snapshot=3, cuda=False)

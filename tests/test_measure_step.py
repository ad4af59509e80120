"""One training step measured on CPU (MemTracker and actmem's live-storage
counter) against training_memory's stage-0 timeline, and the stored copy.

Every difference between a measured moment and its timeline event is
written out below as the tensors that make it, in exact bytes (module
docstring of actmem.measure.step and the report): Adam's fp32 ``step``
tensors, the batch's position ids, labels and fp32 loss mask, LayerNorm's
mean and rstd on CPU (in the parameters' dtype), the cross-entropy's (b, s)
temporaries, and the fp32 gradient copies of a bf16 step without a buffer.
``--device cuda`` is refused here without a GPU (tests never need one).
Skipped without torch unless CI is set.
"""

import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

import torch  # noqa: E402

import actmem  # noqa: E402

from actmem.measure import __main__ as cli  # noqa: E402
from actmem.measure import step  # noqa: E402
from actmem.measure.step_model import GPT  # noqa: E402
from actmem.measure.stored_step import CONFIGS, stored_measurement  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return step.measurement()


def tensors(name):
    """Parameter tensors of the configuration's model (one Adam ``step``
    each: a 4-byte fp32 scalar with ``fused=True``)."""
    with torch.device("meta"):
        return len(list(GPT(CONFIGS[name].model).parameters()))


def modules(name):
    """The configuration's multi-token prediction modules (D)."""
    return CONFIGS[name].model.mtp_num_layers or 0


def per_token(name):
    """Bytes per token of the batch that the timeline does not count and
    that stay until the micro-batch's backward: int64 position ids (saved
    by the position embedding; each multi-token prediction module's rolled
    ones too) and the fp32 loss mask (saved by the multiplication in
    loss_func)."""
    return 8 + 4 + 8 * modules(name)


def norms_kept(name, *, in_loss):
    """LayerNorms whose statistics are saved at that moment: two per layer
    (none under full recomputation) and, from the loss on, the final one
    and each multi-token prediction module's five (enorm, hnorm, its
    layer's two, its final norm), which run after the final norm."""
    c = CONFIGS[name]
    return (0 if c.recompute == "full" else 2 * c.model.L) + in_loss * (1 + 5 * modules(name))


def divisors(name):
    """Each multi-token prediction module's loss is divided by its token
    count, an fp32 scalar the division saves: 4 bytes each."""
    return 4 * modules(name)


def stats(name, norms):
    """LayerNorm's mean and rstd, (b, s, 1) each, per norm, on CPU in the
    norm's input dtype: bf16, or fp32 (the fp32 residual stream) in fp32
    and under autocast."""
    m = CONFIGS[name].model
    dtype = 2 if CONFIGS[name].precision == "bf16" else 4
    return norms * 2 * dtype * m.s * m.b


def test_memtracker_and_the_counter_agree_to_the_byte(data):
    for name, c in data["configs"].items():
        assert c["memtracker_peak"] == c["counter_peak"], name


def test_peak_within_one_percent_at_the_event_the_timeline_names(data):
    """The measured peak's phase is the timeline's peak event, or the phase
    it is inside (``"backward of micro-batch 0: the last layer's MLP"``)."""
    assert set(data["configs"]) == set(CONFIGS)
    for name, c in data["configs"].items():
        assert abs(c["relative_difference"]) <= 0.01, (name, c["relative_difference"])
        phase = c["timeline_peak_event"].partition(": ")[0]
        assert c["counter_peak_moment"] == phase, name


def test_before_the_step_only_adams_step_tensors_are_extra(data):
    for name, c in data["configs"].items():
        before = c["events"][0]
        assert before["label"] == "before the step"
        assert before["measured"] - before["timeline"] == 4 * tensors(name), name
        ends = [e for e in c["events"] if e["label"].startswith("after the backward")]
        assert all(e["measured"] - e["timeline"] == 4 * tensors(name) for e in ends), name


def targets(name):
    """What the loss keeps for its targets beyond the timeline's 9 bytes
    per token: none for Megatron-LM's (int64 masked targets and the bool
    target mask); F.cross_entropy keeps the int64 labels and nll_loss's
    fp32 total_weight scalar but no mask (-1 byte per token, +4 bytes); the
    fused loss keeps the int64 labels (-1 byte per token)."""
    m = CONFIGS[name].model
    return {"vocab_parallel": 0, "torch": 4 - m.s * m.b, "fused": -m.s * m.b}[
        CONFIGS[name].loss]


def test_after_each_forward_the_extras_are_named(data):
    for name, c in data["configs"].items():
        m = CONFIGS[name].model
        # b = 1: tokens and labels are views of one (b, s + 1) int64 text tensor
        text = 8 if m.b == 1 else 0
        expected = (4 * tensors(name) + per_token(name) * m.s * m.b + targets(name)
                    + stats(name, norms_kept(name, in_loss=1)) + divisors(name)
                    + 4 + text)  # 4: the loss
        for e in c["events"]:
            if e["label"].startswith("after the forward"):
                assert e["measured"] - e["timeline"] == expected, (name, e)


def test_at_megatrons_loss_the_cross_entropy_temporaries_are_the_rest(data):
    """Inside the vocab-parallel loss, at ``loss = log(sum_exp) -
    predicted``: logits_max, sum_exp, the predicted-logit clone, log and
    loss (fp32) and arange_1d (int64): 28 bytes per token; the labels
    (int64, 8 per token, unless they are a view at b = 1) and the data
    loader's tensors above."""
    for name, c in data["configs"].items():
        if CONFIGS[name].loss != "vocab_parallel":
            continue
        m = CONFIGS[name].model
        labels = 8 if m.b == 1 else 8 * m.s * m.b
        expected = (4 * tensors(name) + (per_token(name) + 28) * m.s * m.b + labels
                    + stats(name, norms_kept(name, in_loss=1)) + divisors(name))
        loss = next(e for e in c["events"] if e["label"] == "loss of micro-batch 0")
        assert loss["measured"] - loss["timeline"] == expected, name


def test_the_optimizer_step_of_plain_pytorch_copies_the_gradients_to_fp32(data):
    """Without a persistent fp32 buffer, bf16 parameters' fp32 main copies
    need fp32 gradients at the step: 4 bytes per parameter the timeline
    lacks; fp32 parameters (fp32, autocast) step on their own gradients."""
    for name, c in data["configs"].items():
        opt = next(e for e in c["events"] if e["label"] == "optimizer step")
        copies = 0
        config = CONFIGS[name]
        if config.gradient_buffer == "backward" and config.precision == "bf16":
            with torch.device("meta"):
                copies = 4 * sum(p.numel() for p in GPT(CONFIGS[name].model).parameters())
        assert opt["measured"] - opt["timeline"] == 4 * tensors(name) + copies, name


def test_the_stored_measurement_equals_a_fresh_one(data):
    assert stored_measurement()["configs"] == data["configs"]


def test_cli_prints_the_table_and_refuses_an_unknown_configuration(data, monkeypatch,
                                                                   capsys):
    monkeypatch.setattr(step, "measurement", lambda names, device: {
        "torch": data["torch"], "configs": {n: data["configs"][n] for n in names}})
    assert cli.main(["step", "--config", "megatron"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("configuration")
    assert "megatron" in out and "loss of micro-batch 0" in out
    with pytest.raises(SystemExit, match="unknown configuration 'nope'"):
        cli.main(["step", "--config", "nope"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is here")
def test_device_cuda_without_a_gpu_names_the_option_and_what_is_allowed(capsys):
    with pytest.raises(SystemExit, match="--device cuda needs a CUDA GPU.*allowed here: "
                                         "--device cpu"):
        cli.main(["step", "--device", "cuda"])
    with pytest.raises(SystemExit):
        cli.main(["step", "--device", "tpu"])
    assert "argument --device: invalid choice: 'tpu' (choose from 'cpu', 'cuda')" in (
        capsys.readouterr().err)
    with pytest.raises(ValueError, match="--device 'tpu' is not allowed; choose from cpu, cuda"):
        step.measure("megatron", device="tpu")


def test_on_cuda_only_configurations_without_dropout_run_with_the_gpus_workspaces():
    from actmem.measure.step_device import device_configs
    assert device_configs("cuda") == ["megatron_flash", "megatron_flash_full"]
    args = CONFIGS["megatron_flash"].timeline_args("cuda", ":4096:8")
    r = actmem.training_memory(CONFIGS["megatron_flash"].model, **args)
    workspace = r.stages[0].timeline.events[0].by_category["workspace"]
    assert workspace == 2 * 32 * 2**20   # two cuBLAS handles, no Transformer Engine


def test_the_table_adds_the_allocators_peak_on_cuda():
    from actmem.measure.stored_step import step_table
    row = {"memtracker_peak": 10, "counter_peak": 10, "cuda_max_memory_allocated": 110,
           "timeline_peak": 100, "relative_difference": 0.1, "counter_peak_moment": "loss",
           "timeline_peak_event": "loss"}
    lines = step_table({"device": "cuda", "configs": {"megatron_flash": row}}).splitlines()
    assert "CUDA max allocated" in lines[0]
    assert lines[1].split()[1:6] == ["10", "10", "110", "100", "+10.0000%"]

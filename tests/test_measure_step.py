"""One training step measured on CPU (MemTracker and actmem's live-storage
counter) against training_memory's stage-0 timeline, and the stored copy.

Every difference between a measured moment and its timeline event is
written out below as the tensors that make it, in exact bytes (module
docstring of actmem.measure.step and the report): Adam's fp32 ``step``
tensors, the batch's position ids, labels and fp32 loss mask, LayerNorm's
bf16 mean and rstd on CPU, the cross-entropy's (b, s) temporaries, and the
fp32 gradient copies of a plain-PyTorch step. Skipped without torch unless
CI is set.
"""

import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

import torch  # noqa: E402

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


def per_token(name):
    """Bytes per token of the batch that the timeline does not count and
    that stay until the micro-batch's backward: int64 position ids (saved
    by the position embedding) and the fp32 loss mask (saved by the
    multiplication in loss_func)."""
    return 8 + 4


def norms_kept(name, *, in_loss):
    """LayerNorms whose statistics are saved at that moment: two per layer
    (none under full recomputation) and, from the loss on, the final one."""
    c = CONFIGS[name]
    return (0 if c.recompute == "full" else 2 * c.model.L) + in_loss


def stats(name, norms):
    """LayerNorm's mean and rstd, bf16, (b, s, 1) each, per norm (CPU)."""
    m = CONFIGS[name].model
    return norms * 2 * 2 * m.s * m.b


def test_memtracker_and_the_counter_agree_to_the_byte(data):
    for name, c in data["configs"].items():
        assert c["memtracker_peak"] == c["counter_peak"], name


def test_peak_within_one_percent_at_the_event_the_timeline_names(data):
    assert set(data["configs"]) == set(CONFIGS)
    for name, c in data["configs"].items():
        assert abs(c["relative_difference"]) <= 0.01, (name, c["relative_difference"])
        assert c["counter_peak_moment"] == c["timeline_peak_event"], name


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
    fp32 total_weight scalar but no mask (-1 byte per token, +4 bytes)."""
    m = CONFIGS[name].model
    return 0 if CONFIGS[name].loss == "vocab_parallel" else 4 - m.s * m.b


def test_after_each_forward_the_extras_are_named(data):
    for name, c in data["configs"].items():
        m = CONFIGS[name].model
        # b = 1: tokens and labels are views of one (b, s + 1) int64 text tensor
        text = 8 if m.b == 1 else 0
        expected = (4 * tensors(name) + per_token(name) * m.s * m.b + targets(name)
                    + stats(name, norms_kept(name, in_loss=1)) + 4 + text)  # 4: the loss
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
                    + stats(name, norms_kept(name, in_loss=1)))
        loss = next(e for e in c["events"] if e["label"] == "loss of micro-batch 0")
        assert loss["measured"] - loss["timeline"] == expected, name


def test_the_optimizer_step_of_plain_pytorch_copies_the_gradients_to_fp32(data):
    """Without a persistent fp32 buffer, the fp32 main parameters need fp32
    gradients at the step: 4 bytes per parameter the timeline lacks."""
    for name, c in data["configs"].items():
        opt = next(e for e in c["events"] if e["label"] == "optimizer step")
        copies = 0
        if CONFIGS[name].gradient_buffer == "backward":
            with torch.device("meta"):
                copies = 4 * sum(p.numel() for p in GPT(CONFIGS[name].model).parameters())
        assert opt["measured"] - opt["timeline"] == 4 * tensors(name) + copies, name


def test_the_stored_measurement_equals_a_fresh_one(data):
    assert stored_measurement()["configs"] == data["configs"]


def test_cli_prints_the_table_and_refuses_an_unknown_configuration(data, monkeypatch,
                                                                   capsys):
    monkeypatch.setattr(step, "measurement", lambda names: {
        "torch": data["torch"], "configs": {n: data["configs"][n] for n in names}})
    assert cli.main(["step", "--config", "megatron"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("configuration")
    assert "megatron" in out and "loss of micro-batch 0" in out
    with pytest.raises(SystemExit, match="unknown configuration 'nope'"):
        cli.main(["step", "--config", "nope"])

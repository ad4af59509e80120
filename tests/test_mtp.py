"""Multi-token prediction (issue 42: ``--mtp-num-layers``), derived by hand
from actmem/run/moments/mtp.py's docstring (Megatron-LM's
multi_token_prediction.py at d98e8a64). The whole step is measured on CPU
in tests/test_measure_step.py (configuration "mtp")."""

import pytest

from actmem import Job, ModelConfig, parameter_count, training_memory
from actmem.run.model_states.placement import stage_parameter_groups
from actmem.run.moments.moe_timeline import dense_twin
from actmem.run.moments.mtp import mtp_rows

S, B, H = 64, 2, 64
DENSE = ModelConfig(s=S, b=B, h=H, a=4, L=2, vocab_size=1000)
BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
        "--bf16"]


def test_one_module_keeps_its_embedding_norm_inputs_and_concatenation_then_its_output_rows():
    sbh = S * B * H // 2   # t = 2 with sequence parallelism
    rows = mtp_rows(DENSE, 2, True, {})
    assert rows["before"] == {"MTP token ids": 8 * S * B, "MTP embedding dropout mask": sbh,
                              "MTP enorm input": 2 * sbh, "MTP hnorm input": 2 * sbh,
                              "MTP eh_proj input": 4 * sbh}
    assert rows["after"] == {"MTP final norm input": 2 * sbh, "MTP output layer input": 2 * sbh,
                             "MTP cross-entropy targets": 9 * S * B,
                             "MTP loss mask and loss": 8 * S * B}
    whole = mtp_rows(DENSE, 2, False, {})["before"]   # without it every rank keeps s*b*h
    assert whole["MTP eh_proj input"] == 4 * S * B * H


def at_the_loss(model, **options):
    stage = training_memory(model, m=1, **options).stages[-1]
    return next(e for e in stage.timeline.events if e.label.startswith("loss of")).by_category


@pytest.mark.parametrize("d", [1, 2])
def test_at_the_loss_d_modules_hold_a_layer_and_their_rows_each_and_d_more_saved_logits(d):
    """Against the same model with d more decoder layers: the modules' own
    rows and the logits their losses saved are the difference."""
    rows = mtp_rows(DENSE, 1, False, {})
    with_mtp = at_the_loss(DENSE.with_(mtp_num_layers=d))
    deeper = at_the_loss(DENSE.with_(L=2 + d))
    saved = 4 * S * B * 1024   # fp32 softmax over the padded vocabulary
    assert with_mtp["activations"] - deeper["activations"] == d * (
        sum(rows["before"].values()) + sum(rows["after"].values()))
    assert with_mtp["logits_loss"] - deeper["logits_loss"] == d * saved


def test_the_modules_parameters_are_a_layer_eh_proj_and_three_norms_each():
    norm = 2 * H   # LayerNorm: weight and bias
    count = parameter_count(DENSE.with_(mtp_num_layers=2))
    assert count - parameter_count(DENSE) == 2 * (count.per_layer + 2 * H * H + 3 * norm)


def test_the_last_stage_builds_its_own_embedding_when_it_is_not_the_first():
    """With p > 1 the last stage builds LanguageModelEmbedding for the
    modules beside its output weight (tied: the copy Megatron-LM keeps)."""
    model, t = DENSE.with_(mtp_num_layers=1), 2
    count = parameter_count(model, vocab=model.padded_vocab(t))
    layer = sum(count.layer_split.values()) // t + sum(count.layer_replicated.values())
    module = layer + 2 * H * H // t + 3 * 2 * H
    table = 1024 * H // t + S * H   # the word table's slice and the learned positions
    one, two = (stage_parameter_groups(m, t=t, p=2) for m in (DENSE, model))
    assert two[0] == one[0]
    assert two[1][0] - one[1][0] == module + table
    assert stage_parameter_groups(model, t=t)[0][0] - stage_parameter_groups(
        DENSE, t=t)[0][0] == module   # p = 1: the embedding is already there


def test_an_moe_models_modules_take_the_last_layers_kind_and_its_experts():
    moe = ModelConfig(s=S, b=1, h=H, a=4, L=2, vocab_size=256, num_experts=4,
                      moe_layer_freq=(0, 1), bias=False, mtp_num_layers=1)
    count = parameter_count(moe)
    groups = stage_parameter_groups(moe, ep=2)[0]
    plain = stage_parameter_groups(moe.with_(mtp_num_layers=None), ep=2)[0]
    assert groups[1] - plain[1] == count.experts // 2
    assert mtp_rows(dense_twin(moe), 1, False, {})["before"]["MTP eh_proj input"] == 4 * S * H


def test_a_launch_reads_the_modules_and_refuses_what_changes_their_weights():
    job = Job.from_megatron_args(BASE + ["--mtp-num-layers", "2", "--mtp-loss-scaling-factor",
                                         "0.3"], world_size=1)
    assert job.model.mtp_num_layers == 2
    for flag, why in [("--mtp-use-repeated-layer", "one module's weights run D times"),
                      ("--mtp-detach-heads", "detached heads"),
                      ("--mtp-hsm", "hidden-state mixing")]:
        with pytest.raises(ValueError, match=f"{flag} True: refused: .*{why}"):
            Job.from_megatron_args(BASE + ["--mtp-num-layers", "2", flag], world_size=1)


@pytest.mark.parametrize("options, message", [
    (dict(fp8="hybrid"), r"mtp_num_layers=1 with fp8='hybrid': multi-token prediction with FP8"),
    (dict(recompute="full"), r"mtp_num_layers=1 with recompute='full': the modules' own "
                             r"checkpoint"),
    (dict(schedule="gpipe", m=2), r"mtp_num_layers=1 with schedule='gpipe'"),
    (dict(loss="torch"), r"precision='bf16', loss='torch': Megatron-LM's MTP runs its own"),
    (dict(precision="fp32"), r"precision='fp32', loss='vocab_parallel'"),
    (dict(optimizer="muon", accounting="megatron"), r"optimizer='muon': multi-token "
                                                    r"prediction is modelled for full training"),
])
def test_what_is_not_modelled_with_the_modules_is_refused_by_name(options, message):
    with pytest.raises(ValueError, match=message):
        Job(DENSE.with_(mtp_num_layers=1), **options)


@pytest.mark.parametrize("value", [0, -1, 1.5, "2"])
def test_the_number_of_modules_is_a_positive_int_or_none(value):
    with pytest.raises((TypeError, ValueError), match="mtp_num_layers"):
        DENSE.with_(mtp_num_layers=value)

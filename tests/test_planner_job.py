"""Notebook 09's planner: the job's s, b and reserve, the GPUs it uses
(issue 20), and its kept results (issue 19: the same numbers, computed once)."""

import pytest

from actmem import MOE_PRESETS, PRESETS, parameter_count, training_memory
from actmem.views import fit_levers
from actmem.views.fit_levers import gpus_text, job_model, sequence_choices
from actmem.views.fit_views import (MODELS, STATES, FitPlanner, planner_memory, planner_model,
                                    run_arguments, tensor_choices)
from actmem.views.train_cli import verdict

GIB = 2**30
BASE = dict(p=1, d=1, m=1, schedule="1f1b", v=1, split="even", gpu="A100 80GB",
            states=STATES["Megatron-LM (18 B/param)"], loss="vocab_parallel",
            gradient_buffer="persistent", recompute=("none", 1))


def test_sequence_menu_stops_at_the_position_table():
    """A learned table has max_positions (default s) rows: GPT-2's 1024;
    rotary positions have no table, so the menu goes to 131072."""
    assert sequence_choices(PRESETS["gpt2-large"]) == [256, 512, 1024]
    assert sequence_choices(PRESETS["175b"])[-1] == 2048
    assert sequence_choices(PRESETS["llama3-8b"]) == [256 * 2**k for k in range(10)]
    for model in MODELS.values():
        assert model.s in sequence_choices(model)


def test_a_shorter_sequence_keeps_the_learned_table():
    gpt = PRESETS["gpt2-large"]
    short = job_model(gpt, 512, 4)
    assert (short.s, short.b, short.max_positions) == (512, 4, 1024)
    assert parameter_count(short).total == parameter_count(gpt).total == 774_030_080
    assert job_model(gpt, gpt.s, gpt.b) is gpt
    assert job_model(PRESETS["llama2-7b"], 1024, 2).max_positions is None


@pytest.mark.parametrize("name", MODELS)
def test_every_offered_sequence_runs(name):
    """For the shortest and longest s offered, the t and cp then offered (at
    their ends, with and without sequence parallelism) run, at b = 1 and 16."""
    preset = MODELS[name]
    ss = sequence_choices(preset)
    for s in sorted({ss[0], ss[-1]}):
        for sp in (False, True):
            model = job_model(preset, s, 16 if sp else 1)
            ts = tensor_choices(model, sp)
            for t in sorted({ts[0], ts[-1]}):
                cps = fit_levers.cp_choices(model, t, sp)
                for cp in sorted({cps[0], cps[-1]}):
                    training_memory(model, **run_arguments(dict(
                        BASE, model=name, t=t, cp=cp, sequence_parallel=sp)))


def test_s_b_and_reserve_reach_the_readouts():
    x = FitPlanner()
    assert (x.values()["s"], x.values()["b"], x.values()["reserve"]) == (4096, 1, "default")
    x.controls["s"].value = 2048
    x.controls["b"].value = 4
    x.controls["reserve"].value = 4
    values = {**x.values(), "states": STATES[x.values()["states"]]}
    model = PRESETS["llama2-7b"].with_(s=2048, b=4)
    result = training_memory(model, **run_arguments(values))
    assert result.most_loaded.reserve == 4 * GIB
    assert result.margin == 80 * GIB - result.most_loaded.peak - 4 * GIB
    assert x.readouts["verdict"].value == verdict(result, gpu="A100 80GB")
    assert " + reserve 4 GiB, of 80 GiB" in x.readouts["verdict"].value
    assert x.result().stages[0].peak == result.stages[0].peak > FitPlanner().result(
    ).stages[0].peak  # 8192 tokens per micro-batch, not 4096


def test_the_sequence_menu_follows_the_model_and_narrows_t():
    x = FitPlanner(model="gpt2-large", t=1, p=1, d=1, m=1, sequence_parallel=True)
    assert list(x.controls["s"].options) == [256, 512, 1024]
    x.controls["model"].value = "llama3-8b"
    assert x.values()["s"] == 8192 and list(x.controls["s"].options)[-1] == 131072
    x.controls["model"].value = "gpt3-175b"  # s back to the preset's
    assert x.values()["s"] == 2048
    x.controls["s"].value = 256  # 256 tokens over t: t | 256 under sequence parallelism
    assert list(x.controls["t"].options) == [t for t in (1, 2, 4, 8, 16, 32, 64)
                                             if t in tensor_choices(PRESETS["gpt3-175b"], False)]
    assert 3 not in x.controls["t"].options


def test_the_gpus_readout_counts_t_p_cp_d():
    x = FitPlanner()
    assert x.readouts["gpus"].value == "GPUs: t·p·cp·d = 2·2·1·2 = 8"
    x.controls["cp"].value = 4
    x.controls["d"].value = 8
    assert x.readouts["gpus"].value == "GPUs: t·p·cp·d = 2·2·4·8 = 128"
    moe = FitPlanner(model="mixtral-8x7b", t=2, p=1, d=4, ep=4, etp=1, sequence_parallel=True)
    assert moe.readouts["gpus"].value == (
        "GPUs: t·p·cp·d = 2·1·1·4 = 8; the experts share them: ep·etp = 4·1, "
        "expert data-parallel 2")
    assert gpus_text(8, 4, 2, 2, 8, 2) == (  # world 128 = 2 x 8 x 4 x expert data-parallel 2
        "GPUs: t·p·cp·d = 8·4·2·2 = 128; the experts share them: ep·etp = 8·2, "
        "expert data-parallel 2")


def test_invalid_job_arguments():
    with pytest.raises(ValueError, match=r"s=3000 is not offered; choose one of 256, 512"):
        FitPlanner(s=3000)
    with pytest.raises(ValueError, match=r"s=2048 is not offered.*256, 512, 1024"):
        FitPlanner(model="gpt2-large", t=1, p=1, s=2048)
    with pytest.raises(ValueError, match=r"b=17 is not offered"):
        FitPlanner(b=17)
    with pytest.raises(ValueError, match=r"reserve=5 is not offered; choose 'default' \(the estimate\) or one of 0, 1, 2"):
        FitPlanner(reserve=5)
    with pytest.raises(ValueError, match=r"reserve=True is not offered"):
        FitPlanner(reserve=True)


def test_kept_results_are_training_memorys():
    """The planner's kept result for a setting is training_memory's for it;
    a list of modules and its tuple are one setting."""
    model = planner_model({"model": "llama2-7b", "flash_attention": True, "s": 4096, "b": 1})
    arguments = run_arguments(dict(BASE, model="llama2-7b", t=2, sequence_parallel=False,
                                   recompute=("selective", 1, ("core_attn", "mlp"))))
    kept = planner_memory(model, **arguments)
    assert kept is planner_memory(model, **{**arguments, "recompute_modules": ("core_attn",
                                                                                "mlp")})
    fresh = training_memory(model, **arguments)
    assert [(s.peak, s.parts) for s in kept.stages] == [(s.peak, s.parts) for s in fresh.stages]
    assert MOE_PRESETS["mixtral-8x7b"] is MODELS["mixtral-8x7b"]


def test_the_train_command_keeps_the_learned_table_too(capsys):
    """``actmem train -s`` takes s as the planner does: GPT-2's 1024-row
    position table stays 1024 rows at s=512 and refuses s=2048."""
    import json

    from actmem.views import cli

    assert cli.main(["train", "--preset", "gpt2-large", "-s", "512", "-b", "2", "--json"]) == 0
    planner = FitPlanner(model="gpt2-large", t=1, p=1, d=1, m=1, s=512, b=2)
    stage = json.loads(capsys.readouterr().out)["stages"][0]
    at_1024 = training_memory(PRESETS["gpt2-large"]).stages[0].parts["weights"]
    assert stage["weights"] == planner.result().stages[0].parts["weights"] == at_1024
    assert at_1024 == 2 * (774_030_080 + (50304 - 50257) * 1280)  # bf16, vocabulary padded
    with pytest.raises(SystemExit):
        cli.main(["train", "--preset", "gpt2-large", "-s", "2048"])
    assert "s=2048: the model's learned position table has 1024 rows" in capsys.readouterr().err


def test_probing_the_menus_warns_nothing():
    """Building the menus probes settings a learner has not chosen (t=1 with
    sequence parallelism when the cp menu is narrowed): their warnings must
    not appear under the planner."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        planner = FitPlanner(model="llama3-8b", t=1, p=1, d=8, sequence_parallel=True)
        for name in ("cp", "t", "p"):
            for value in planner.controls[name].options[:3]:
                planner.controls[name].value = value[1] if isinstance(value, tuple) else value

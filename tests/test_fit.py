"""Notebook 09's planner, figures and the comparison with Megatron-LM's
estimator: menus offer only valid runs, readouts state training_memory."""

from fractions import Fraction

import pytest

import actmem
from actmem import PRESETS, fit_figures, megatron_estimate, training_memory
from actmem.views import fit_views
from actmem.views.fit_views import GPUS, STATES, FitPlanner, recompute_options, \
    run_arguments, tensor_choices

GIB = 2**30
MIB = 2**20
L7 = PRESETS["llama2-7b"]
# LLaMA-2-7B, t=2, p=2, d=2, m=8 on an A100 80GB: stage 0's peak, by hand in
# tests/test_training_memory.py: 28919.25 MiB of model states, 2 micro-batches of
# 16 x 321.25 MiB (+ 32 KiB of token ids), the gradients of the last layer's
# output and of its fc2 input (32 + 43 MiB), 20.25 MiB of workspaces
PEAK0 = 41_405_710_336   # tests/test_cli.py's, TE's dummy weight gradients included


def test_default_plan_is_llama2_7b_on_8_gpus():
    x = FitPlanner()
    # the default reserve (actmem.run.reserve): 768 MiB the A100 80GB's driver keeps
    # (nvidia-smi's total less CUDA's), 512 MiB of CUDA context, NCCL's 4 communicators
    # (tensor, data, gradient norm, pipeline) x 320 MiB, the allocator's 10 % of the
    # peak (rounded up) + 20 MiB
    reserve = 768 * MIB + 512 * MIB + 4 * 320 * MIB + -(-PEAK0 // 10) + 20 * MIB
    assert reserve == 6_845_897_114
    assert x.readouts["verdict"].value == (
        "most loaded: stage 0, peak 38.56 GiB at 'backward of micro-batch 0: the last layer's MLP' "
        "+ reserve 6.38 GiB (driver 0.75, CUDA context 0.5, NCCL 1.25, allocator 3.88 GiB), "
        "of 80 GiB (A100 80GB): margin 35.06 GiB, fits")
    assert round((80 * GIB - PEAK0 - reserve) / GIB, 2) == 35.06
    x.controls["reserve"].value = 0   # the bare peak, as before the default reserve
    assert x.readouts["verdict"].value == (
        "most loaded: stage 0, peak 38.56 GiB at 'backward of micro-batch 0: the last layer's MLP', "
        "of 80 GiB (A100 80GB): margin 41.44 GiB, fits")
    assert round(PEAK0 / GIB, 2) == 38.56 and round((80 * GIB - PEAK0) / GIB, 2) == 41.44
    x.controls["gpu"].value = "L4"  # 23034 MiB
    assert x.readouts["verdict"].value.endswith(
        "of 22.49 GiB (L4): margin -16.07 GiB, DOES NOT FIT")
    stages = x.readouts["stages"].value
    assert "<tr><td>sum of the parts</td><td>38.28</td><td>33.57</td></tr>" in stages
    assert "<td><b>38.56</b></td><td><b>34.04</b></td>" in stages  # the peaks
    assert "<td>loss of micro-batch 0</td>" in stages


def test_gpu_menu_is_the_presets():
    x = FitPlanner()
    # every preset but the V100s, which run neither bf16 nor FlashAttention
    assert [name for name, _ in x.controls["gpu"].options] == [
        name for name in actmem.GPUS if not name.startswith("V100")] == [
        name for name in GPUS if not name.startswith("V100")]
    x.controls["gpu"].value = "H100 80GB SXM"
    assert "of 79.65 GiB (H100 80GB SXM)" in x.readouts["verdict"].value
    assert x.result().gpu_memory == 81559 * 2**20


def test_framework_controls_change_the_peak():
    x = FitPlanner(model="gpt2-large", t=1, p=1, d=1, m=1)
    assert x.controls["flash_attention"].value is False  # the preset's
    before = x.result().stages[0]
    x.controls["loss"].value = "fused"
    fused = x.result().stages[0]
    assert fused.peak < before.peak
    x.controls["gradient_buffer"].value = "backward"
    assert x.result().stages[0].timeline.events[0].by_category["gradients"] == 0
    x.controls["model"].value = "llama2-7b"  # trained with FlashAttention
    assert x.controls["flash_attention"].value is True
    assert x.readouts["verdict"].value == actmem.train_cli.verdict(x.result(), gpu="A100 80GB")


def test_menus_follow_the_model():
    x = FitPlanner()
    x.controls["model"].value = "llama2-70b"
    assert list(x.controls["t"].options) == [1, 2, 4, 8]  # 8 key/value heads
    assert [label for label, _ in x.controls["recompute"].options] == [
        "none", "selective", "selective: layernorm", "selective: mlp",
        "selective: core_attn + layernorm", "selective: core_attn + mlp",
        "selective: core_attn + layernorm + mlp", "full, k=1", "full, k=2", "full, k=4", "full, k=5",
        "full, k=8", "full, k=10", "full, k=20", "full, k=40"]
    x.controls["sequence_parallel"].value = True
    assert list(x.controls["t"].options) == [1, 2, 4, 8]
    x.controls["v"].value = 2
    assert x.values()["schedule"] == "interleaved"


def test_readouts_follow_every_control():
    x = FitPlanner()
    for name, value in [("model", "llama3-8b"), ("t", 4), ("p", 4), ("d", 8), ("m", 16),
                        ("recompute", ("full", 2)), ("flash_attention", False),
                        ("sequence_parallel", True), ("states", "ZeRO stage 3"),
                        ("gpu", "RTX 4090"), ("schedule", "gpipe"), ("loss", "torch"),
                        ("gradient_buffer", "backward"), ("split", "last:5"), ("p", 3)]:
        x.controls[name].value = value
        values = {**x.values(), "states": STATES[x.values()["states"]]}
        model = PRESETS[values["model"]].with_(flash_attention=values["flash_attention"])
        result = training_memory(model, **run_arguments(values))
        assert x.readouts["verdict"].value == actmem.train_cli.verdict(
            result, gpu=values["gpu"]), name


def test_every_offered_menu_entry_is_a_valid_run():
    for name, model in PRESETS.items():
        for sp in (False, True):
            for t in tensor_choices(model, sp):
                model.layer(t, sp)  # raises if invalid
        for label, (mode, k) in recompute_options(model.L):
            assert model.L % k == 0 and mode in actmem.RECOMPUTE


def test_every_offered_split_is_one_megatron_accepts():
    """p need not divide L; every split the menus offer (for every preset's
    L, every offered p and v) is valid, sums to L, and is not the even split
    under another name."""
    for L in sorted({model.L for model in PRESETS.values()}):
        for p in fit_views.pipeline_choices(L):
            for v in [1, *actmem.schedule_views.chunk_choices(L, p)]:
                keys = fit_views.split_keys(L, p, v)
                assert keys, (L, p, v)
                even = (actmem.split_layers(L, p, v) if L % (p * v) == 0 else None)
                for key in keys:
                    split = actmem.split_layers(L, p, v, **fit_views.split_arguments(key))
                    assert sum(map(sum, split)) == L
                    assert (key == "even") == (split == even), (L, p, v, key)
    assert fit_views.pipeline_choices(32) == [1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 17, 31, 32]
    assert fit_views.split_keys(32, 4)[:3] == ("even", "first:2", "first:5")


def test_a_shorter_last_stage_relieves_it():
    """LLaMA-3-8B (128256-token vocabulary), p=4: a last stage of 5 layers
    instead of 8 keeps 5/8 of the layer activations there, and the planner
    shows training_memory's numbers for the split it offers."""
    x = FitPlanner(model="llama3-8b", t=2, p=4, d=1, m=8)
    even = x.result()
    x.controls["split"].value = "last:5"
    uneven = x.result()
    assert even.stages[-1].layer_activations * 5 == uneven.stages[-1].layer_activations * 8
    assert uneven.stages[0].layer_activations * 8 == even.stages[0].layer_activations * 9
    direct = training_memory(PRESETS["llama3-8b"], t=2, p=4, m=8,
                             decoder_last_pipeline_num_layers=5, gpu_memory="A100 80GB")
    assert [s.peak for s in uneven.stages] == [s.peak for s in direct.stages]
    assert "<tr><td>Transformer layers</td><td>9</td><td>9</td><td>9</td><td>5</td></tr>" \
        in x.readouts["stages"].value
    assert [label for label, key in x.controls["split"].options if key == "last:5"] == \
        ["last stage 5 layers (3 stages of 9, 5)"]
    x.controls["p"].value = 3   # 32 layers on 3 stages: no even split, the first offered
    assert x.values()["split"] == "embedding" and "<td>10</td><td>11</td><td>11</td>" in \
        x.readouts["stages"].value


def test_invalid_planner_arguments():
    with pytest.raises(ValueError, match=r"^model must be one of .gpt2-large., "):
        FitPlanner(model="gpt5")
    with pytest.raises(ValueError, match=r"^t=3 is not offered"):
        FitPlanner(t=3)
    with pytest.raises(ValueError, match=r"^gpu='80GB' is not offered; choose one of A100 "):
        FitPlanner(gpu="80GB")
    with pytest.raises(ValueError, match=r"^loss='cce' is not offered"):
        FitPlanner(loss="cce")
    with pytest.raises(ValueError, match=r"^gradient_buffer='lazy' is not offered"):
        FitPlanner(gradient_buffer="lazy")
    with pytest.raises(ValueError, match=r"^split='even' is not offered; choose one of "):
        FitPlanner(p=3, split="even")   # 32 layers do not split evenly over 3 stages
    with pytest.raises(ValueError, match=r"^p=9 is not offered"):
        FitPlanner(p=9)


def test_stage_figure_is_to_scale():
    r = training_memory(PRESETS["llama2-7b"], t=2, p=2, d=2, m=8, gpu_memory="A100 80GB")
    ax = fit_figures.stage_memory_figure(r).axes[0]
    tops = {}
    for bar in ax.patches:
        x = round(bar.get_x() + bar.get_width() / 2)
        tops[x] = max(tops.get(x, 0), bar.get_y() + bar.get_height())
    assert [round(tops[i] * GIB) for i in (0, 1)] == [s.total for s in r.stages]
    with pytest.raises(TypeError, match="TrainingMemory"):
        fit_figures.stage_memory_figure({})


def _timeline(**run):
    return training_memory(L7, **{"t": 2, "p": 2, "d": 2, "m": 8, **run})


def test_timeline_figure_has_a_panel_per_stage_the_capacity_and_the_peak():
    r = _timeline(p=4, gpu_memory="A100 80GB", reserve=2 * GIB)
    fig = fit_figures.timeline_figure(r)
    assert len(fig.axes) == 4
    assert all(ax.get_shared_y_axes().joined(fig.axes[0], ax) for ax in fig.axes)
    for ax, stage in zip(fig.axes, r.stages):
        lines = {line.get_label(): line for line in ax.lines}
        assert list(lines["GPU: 80 GiB (fits)"].get_ydata()) == [80, 80]
        assert list(lines["capacity less the reserve"].get_ydata()) == [78, 78]
        peak = stage.timeline.peak
        assert [t.get_text().replace("\n", " ") for t in ax.texts] == [peak.label]
        marker = next(line for line in ax.lines if line.get_marker() == "v")
        assert (marker.get_xdata()[0], marker.get_ydata()[0]) == (
            stage.timeline.events.index(peak), peak.total / GIB)
        assert ax.get_title() == f"stage {stage.stage}: peak " + \
            actmem.format_bytes(stage.peak, "GiB")
    # the stacked categories (the panel's first PolyCollection; the second
    # shades the backward passes) reach each event's total
    top = max(max(p.vertices[:, 1]) for p in fig.axes[1].collections[0].get_paths())
    assert top == pytest.approx(r.stages[1].peak / GIB)


def test_timeline_figure_without_a_gpu_and_a_subset_of_stages():
    r = _timeline(p=4)
    fig = fit_figures.timeline_figure(r, stages="ends")
    assert len(fig.axes) == 2  # the first, the last and the most loaded (stage 0)
    assert not [line for ax in fig.axes for line in ax.lines if "GPU" in line.get_label()]
    assert fit_figures.timeline_stages(r, [3, 1]) == [1, 3]
    with pytest.raises(ValueError, match=r"stages must be stage numbers from 0 to 3"):
        fit_figures.timeline_figure(r, stages=[4])
    with pytest.raises(TypeError, match="TrainingMemory"):
        fit_figures.timeline_figure(r.stages[0])


def test_timeline_figure_overlays_measured_curves():
    r = _timeline(p=1, d=1, t=1, m=1, gpu_memory="H100 80GB SXM")
    events = r.stages[0].timeline.events
    measured = [e.total + 2**20 for e in events]
    ax = fit_figures.timeline_figure(r, measured=measured).axes[0]
    line = next(line for line in ax.lines if line.get_label() == "measured (stored)")
    assert list(line.get_ydata()) == [m / GIB for m in measured]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "measured (stored)" in labels
    ax = fit_figures.timeline_figure(r, measured={"MemTracker": measured, "live": measured},
                                     stored=False).axes[0]
    assert {"measured: MemTracker", "measured: live"} <= {l.get_label() for l in ax.lines}
    with pytest.raises(ValueError, match=rf"has 2 values; the stage's timeline has "
                                         rf"{len(events)} events"):
        fit_figures.timeline_figure(r, measured=[1, 2])
    with pytest.raises(TypeError, match="measured must be a sequence of bytes"):
        fit_figures.timeline_figure(r, measured=[0.5] * len(events))
    with pytest.raises(ValueError, match="measured_stage=1 is not a drawn stage"):
        fit_figures.timeline_figure(r, measured=measured, measured_stage=1)


def test_timeline_figure_redraws_in_place():
    first = fit_figures.timeline_figure(_timeline(gpu_memory="A100 80GB"))
    again = fit_figures.timeline_figure(_timeline(m=4, gpu_memory="L4"), fig=first)
    assert again is first
    assert [len(ax.texts) for ax in again.axes] == [1, 1]
    assert any("does not fit" in line.get_label() for line in again.axes[0].lines)


def _pixels(data: bytes):
    import io

    import numpy as np
    import PIL.Image
    return np.asarray(PIL.Image.open(io.BytesIO(data)))


def test_timeline_redraw_updates_its_artists_and_shows_what_a_new_figure_shows():
    """The planner's redraw: the same PolyCollection, lines and label, new
    data; the image drawn on the kept background is the image of a full
    draw, and the same as a new figure's texts, limits and legend."""
    from actmem.views.redraw import png
    plans = [_timeline(gpu_memory="A100 80GB"), _timeline(m=16, d=4, gpu_memory="A100 80GB",
                                                           loss="torch"),
             _timeline(m=4, gpu_memory="L4"), _timeline(m=4, gpu_memory="A100 80GB")]
    fig = fit_figures.timeline_figure(plans[0], "plan", stages="ends")
    png(fig)
    areas, spans = fig.axes[0].collections   # the stacked areas, the backward shading
    for r in plans[1:] + plans[:1]:
        assert fit_figures.timeline_figure(r, "plan", stages="ends", fig=fig) is fig
        assert list(fig.axes[0].collections) == [areas, spans]
        kept = png(fig)
        fig._actmem_background = {}  # no kept background: what a full draw makes
        assert (_pixels(kept) == _pixels(png(fig))).all()
        new = fit_figures.timeline_figure(r, "plan", stages="ends")
        for ax, other in zip(fig.axes, new.axes):
            assert ax.get_title() == other.get_title()
            assert [t.get_text() for t in ax.texts] == [t.get_text() for t in other.texts]
            assert ax.get_ylim() == other.get_ylim() and ax.get_xlim() == other.get_xlim()
            assert [(l.get_label(), l.get_visible(), list(l.get_ydata())) for l in ax.lines] \
                == [(l.get_label(), l.get_visible(), list(l.get_ydata())) for l in other.lines]
        assert [t.get_text() for t in fig.axes[-1].get_legend().get_texts()] == \
            [t.get_text() for t in new.axes[-1].get_legend().get_texts()]
        assert fig._suptitle.get_text() == "plan"


def test_timeline_redraw_in_another_language_relabels_the_axes():
    from actmem.translations import ZH
    fig = fit_figures.timeline_figure(_timeline(gpu_memory="A100 80GB"))
    actmem.set_language("zh")
    try:
        fit_figures.timeline_figure(_timeline(gpu_memory="A100 80GB"), fig=fig)
    finally:
        actmem.set_language("en")
    assert fig.axes[0].get_ylabel() == ZH["memory per GPU (GiB)"]
    assert {ax.get_xlabel() for ax in fig.axes} == {ZH["events of one step, in order"]}


def test_the_gradient_buffer_menu_shows_its_whole_name():
    """'gradient_buffer' is wider than the usual description width (the
    browser cut it to 'gradient_…')."""
    planner = FitPlanner()
    assert planner.controls["gradient_buffer"].style.description_width == "initial"


def test_recompute_figure_marks_the_lowest_peak():
    fig = fit_figures.recompute_figure(PRESETS["175b"].with_(flash_attention=True), t=8,
                                       sequence_parallel=True)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[-1].startswith("lowest peak: k=")


def test_megatron_estimate_agrees_under_its_own_assumptions():
    # 175B, t=8, p=8, sequence parallelism + selective recomputation: the
    # paper's own setting. Megatron-LM's activations differ from actmem's only
    # by dividing the token ids by t: 8sb x 8 in flight x (1 - 1/8).
    model = PRESETS["175b"]
    ours = training_memory(model, t=8, p=8, m=64, sequence_parallel=True,
                           recompute="selective").stages[0]
    theirs = megatron_estimate.megatron_activations(model, 8, 8, 64, 1, True, "selective")
    mine = ours.layer_activations + ours.embedding_activations
    assert mine - theirs == 8 * 2048 * 8 * Fraction(7, 8)


def test_megatron_estimate_drops_the_attention_map_without_sp():
    model = PRESETS["gpt2-large"]
    theirs = megatron_estimate.megatron_activations(model)
    ours = training_memory(model).stages[0]
    assert theirs < ours.layer_activations / 2
    reasons = megatron_estimate.differences(model)
    assert any("drops the attention map" in r for r in reasons)
    assert any("5%" in r for r in reasons)


def test_megatron_weights_are_18_bytes_per_unbiased_parameter():
    model = PRESETS["llama2-7b"]  # no biases, RMSNorm, untied
    total = actmem.parameter_count(model).total
    assert megatron_estimate.megatron_weights_and_optimizer(model) == 18 * total
    assert megatron_estimate.megatron_weights_and_optimizer(
        model, d=4, distributed_optimizer=True) == 9 * total


def test_megatron_weights_follow_d98e8a64_norms_are_not_divided_by_t():
    """Megatron-LM d98e8a64 (after PR #4687), compute_weight_and_optimizer_memory:
    attention, MLP and embedding weights divided by t, norms not.

    LLaMA-2-7B (h = 4096, f = 11008, V = 32000, L = 32, RMSNorm n = 1, untied),
    t = 2, p = 2: attention 2h^2(1 + 32/32) = 67,108,864 and SwiGLU MLP
    2hf x 3/2 = 135,266,304 per layer; sharded ((67,108,864 + 135,266,304) x 32/2
    + 4096 x 32000) / 2 = 1,684,537,344; replicated (2 x 4096 x 32 + 4096) / 2 =
    133,120 (two RMSNorms a layer and the final norm, over p only)."""
    llama = PRESETS["llama2-7b"]
    assert megatron_estimate.megatron_parameters(llama, 2, 2) == (1_684_537_344, 133_120)
    assert megatron_estimate.megatron_weights_and_optimizer(llama, 2, 2, 2) == 18 * 1_684_670_464
    assert megatron_estimate.megatron_weights_and_optimizer(
        llama, 2, 2, 2, distributed_optimizer=True) == 12 * 1_684_670_464
    # GPT-2 large (h = 1280, f = 5120, L = 36, LayerNorm n = 2, tied, V = 50257
    # padded to 50432 at t = 2), p = 1: sharded ((4h^2 + 2hf) x 36 + 1280 x 50432) / 2
    # = 386,170,880; replicated 2 x 1280 x 2 x 36 + 2 x 1280 = 186,880
    gpt2 = PRESETS["gpt2-large"]
    assert megatron_estimate.megatron_parameters(gpt2, 2, 1) == (386_170_880, 186_880)


def test_megatron_differences_name_the_token_ids_only_where_it_divides_them():
    """Only the sequence-parallel + selective path divides the whole activation
    total, the token ids included, by t; no reason says "norms included"."""
    llama, big = PRESETS["llama2-7b"], PRESETS["175b"]
    plain = megatron_estimate.differences(llama, t=2, p=2)
    assert not any("token ids" in r or "norms included" in r for r in plain)
    assert "it counts 1/p of the final norm on the first stage (the last stage holds it)" in plain
    paper = megatron_estimate.differences(big, t=8, p=8, sequence_parallel=True,
                                          recompute="selective")
    assert "it divides the token ids by t (every rank keeps those whole)" in paper


def test_megatron_counts_the_logits_only_without_pipelining():
    """theoretical_memory_usage.py at d98e8a64 adds the output layer's logits
    (step 8, "if args.pipeline_model_parallel_size == 1"), so the 2-byte logits
    are a reason at p = 1 only; the fixed 5 % at every p."""
    llama = PRESETS["llama2-7b"]
    one, two = (megatron_estimate.differences(llama, t=2, p=p) for p in (1, 2))
    assert any("logits at 2 bytes" in r for r in one)
    assert not any("logits" in r for r in two) and "it adds a fixed 5%" in two

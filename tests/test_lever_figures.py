"""Notebook 12's lever figure (issue 38, teaching-review.md (d) 9): one
stacked bar per lever setting whose bands are the most loaded GPU's bytes
at its peak, by category, as training_memory gives them; readable (titles,
labels of at least 9 pt) in English and in Chinese."""

import pytest
from matplotlib.container import BarContainer
from matplotlib.text import Text

import actmem
from actmem.language import set_language
from actmem.units import format_value, to_gib
from actmem.views.lever_figures import lever_figure, peak_parts, wrap

LONG = actmem.PRESETS["llama3-8b"].with_(s=131072)
JOB = dict(accounting="megatron", distributed_optimizer=True, sequence_parallel=True, t=8)


def runs(mask: bool, **job) -> dict:
    return {"t=8 (start)": actmem.training_memory(
                LONG, **JOB, create_attention_mask_in_dataloader=mask, **job),
            "cp=2": actmem.training_memory(
                LONG, **JOB, cp=2, create_attention_mask_in_dataloader=mask, **job)}


def bars(fig) -> dict[str, list[float]]:
    """Legend label -> bar heights (GiB), one container per band."""
    return {c.get_label(): [p.get_height() for p in c.patches]
            for c in fig.axes[0].containers if isinstance(c, BarContainer)}


def test_the_data_loaders_mask_is_the_transient_band_at_the_peak():
    """b*s*s booleans: 131072^2 B = 16 GiB at t = 8 (t does not split it),
    half the queries' rows, 8 GiB, on each rank of cp = 2; none without it."""
    masked, bare = runs(True, reserve=0), runs(False, reserve=0)
    assert [peak_parts(r)["transient"] for r in masked.values()] == [2**34, 2**33]
    assert [peak_parts(r)["transient"] for r in bare.values()] == [0, 0]
    for with_mask, without in zip(masked.values(), bare.values()):
        assert with_mask.most_loaded.peak - without.most_loaded.peak == \
            peak_parts(with_mask)["transient"]


def test_the_bands_are_the_peaks_parts_and_add_up_to_the_peak():
    results = runs(True, reserve=0)
    fig = lever_figure(results, "which part each lever moves")
    drawn = bars(fig)
    parts = [peak_parts(r) for r in results.values()]
    assert drawn["transient (inside an operation)"] == [16.0, 8.0]
    for category, label in (("weights", "weights"), ("activations", "activations"),
                            ("logits_loss", "logits and loss")):
        assert drawn[label] == [to_gib(p[category]) for p in parts]
    assert "reserve" not in drawn  # none set: nothing stacked on the peak
    tops = [t.get_text() for t in fig.axes[0].texts]
    assert tops == [format_value(r.most_loaded.peak, "GiB") for r in results.values()]
    assert sum(parts[0].values()) == results["t=8 (start)"].most_loaded.peak


def test_a_reserve_is_stacked_on_top_and_the_capacity_drawn():
    results = runs(False, reserve=2**30, gpu_memory="H100 80GB SXM")
    fig = lever_figure(results)
    assert bars(fig)["reserve"] == [1.0, 1.0]
    tops = [t.get_text() for t in fig.axes[0].texts]
    assert tops == [format_value(r.most_loaded.peak + 2**30, "GiB") for r in results.values()]
    capacity = [line for line in fig.axes[0].lines if line.get_linestyle() == "--"]
    assert [line.get_ydata()[0] for line in capacity] == [to_gib(actmem.gpu_capacity(
        "H100 80GB SXM"))]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "GPU capacity: 79.65 GiB" in legend


def test_every_text_is_readable_and_the_title_says_what_it_shows():
    fig = lever_figure(runs(False, reserve=0))
    ax = fig.axes[0]
    assert ax.get_title() == "Which part each lever moves"
    texts = [*ax.texts, *ax.get_xticklabels(), *ax.get_yticklabels(),
             *fig.legends[0].get_texts(), ax.title, ax.yaxis.label]
    assert min(t.get_fontsize() for t in texts) >= 9
    assert [t.get_text() for t in ax.get_xticklabels()] == ["t=8 (start)", "cp=2"]


def test_chinese_labels():
    set_language("zh")
    try:
        fig = lever_figure(runs(False, reserve=0))
        fig.canvas.draw()
        texts = [t.get_text() for t in fig.findobj(Text) if t.get_text()]
    finally:
        set_language("en")
    assert "t=8（起点）" in texts and "每种手段改变了哪一部分" in texts
    assert "负载最重的 GPU 在峰值时刻（GiB）" in texts


@pytest.mark.parametrize("label, lines", [
    ("core_attn, mlp, layernorm", "core_attn,\nmlp,\nlayernorm"),
    ("核心注意力、MLP、LayerNorm", "核心注意力、\nMLP、\nLayerNorm"),
    ("t=8 (start)", "t=8 (start)"),
    ("full recomputation", "full\nrecomputation"),
])
def test_bar_labels_wrap_by_display_width(label, lines):
    assert wrap(label) == lines


@pytest.mark.parametrize("runs_, title, error, message", [
    ([], "", TypeError, "runs must be a dict"),
    ({}, "", ValueError, "at least one"),
    ({"": None}, "", ValueError, "non-empty strings"),
    ({"a": 1}, "", TypeError, r"runs\['a'\] must be a TrainingMemory"),
    (None, "", TypeError, "runs must be a dict"),
])
def test_bad_runs_are_refused_naming_the_argument(runs_, title, error, message):
    with pytest.raises(error, match=message):
        lever_figure(runs_, title)


def test_runs_on_two_gpus_and_a_bad_title_are_refused():
    one = actmem.training_memory(LONG, **JOB, gpu_memory="H100 80GB SXM")
    other = actmem.training_memory(LONG, **JOB, gpu_memory="A100 80GB")
    with pytest.raises(ValueError, match="share one gpu_memory"):
        lever_figure({"H100": one, "A100": other})
    with pytest.raises(TypeError, match="title must be a str"):
        lever_figure({"H100": one}, title=3)
    with pytest.raises(TypeError, match="TrainingMemory"):
        peak_parts(one.most_loaded)


MIXTRAL_JOB = dict(t=2, p=2, d=4, m=16, ep=4, sequence_parallel=True, accounting="megatron",
                   distributed_optimizer=True, gpu_memory="H100 80GB SXM")


def test_the_imbalance_figure_draws_what_must_fit_against_the_hot_expert():
    from actmem.views.lever_figures import imbalance_figure
    mixtral = actmem.MOE_PRESETS["mixtral-8x7b"]
    points = {f: actmem.training_memory(mixtral, moe_hot_expert=f, **MIXTRAL_JOB)
              for f in (1, 2, 4)}
    fig = imbalance_figure({"ep=4": points})
    line, capacity = fig.axes[0].lines
    assert list(line.get_xdata()) == [1, 2, 4]
    assert list(line.get_ydata()) == [to_gib(r.most_loaded.peak + r.most_loaded.reserve)
                                      for r in points.values()]
    assert list(line.get_ydata()) == sorted(line.get_ydata())   # a hotter expert costs more
    assert capacity.get_ydata()[0] == to_gib(actmem.gpu_capacity("H100 80GB SXM"))
    assert fig.axes[0].get_title() == "What an uneven router costs"
    for bad in ({}, {"ep=4": {}}, {"ep=4": [1, 2]}):
        with pytest.raises(TypeError, match="curves must be a non-empty dict"):
            imbalance_figure(bad)

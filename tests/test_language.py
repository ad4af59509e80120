"""Chinese labels (issue 13): actmem.set_language, the catalog, the font.

Under ``set_language("zh")`` every figure and explorer must draw Chinese
labels with real glyphs (no missing-glyph warning, so no tofu boxes), keep
every number, and leave the English ``value`` of each readout as it was.
"""

import ast
import functools
import re
import string
import warnings
from pathlib import Path

import nbformat
import pytest
from fontTools.ttLib import TTFont
from matplotlib.text import Text

import actmem
from actmem import figures, fit_figures, schedule_figures
from actmem.language import FONT_FILE, get_language, set_language
from actmem.translations import ZH
from actmem.views import cheatsheet, fit_views, schedule_views, variant_views, widgets

ROOT = Path(__file__).resolve().parents[1]
HAN = re.compile(r"[\u3400-\u9fff]")
KEPT_IN_CHINESE = {
    # names and terms the Chinese labels keep as they are (glossary.py)
    "GPU", "GPUs", "MiB", "GiB", "KiB", "GPipe", "FlashAttention", "SwiGLU", "GeLU", "ReLU", "MLP",
    "LayerNorm", "Megatron", "LLaMA", "GPT", "GQA", "ZeRO", "QKV", "softmax", "dropout",
    "arXiv", "Korthikanti", "actmem", "recompute_num_layers", "rank", "sum", "exp", "lse",
    "log", "Adam", "bas", "sbh", "sbf", "Transformer", "kernel", "PyTorch", "cross_entropy",
    "logits", "SXM", "PCIe", "RTX", "All", "Reduce", "workspace", "peak_in_flight",
    # the default reserve's parts (actmem.run.reserve): library names
    "CUDA", "NCCL",
    # model names in the planner's menu
    "Llama", "Mixtral", "DeepSeekMoE", "DeepSeek", "Lite", "Qwen",
    # names inside the ledger's backward formulas
    "rowsum", "P_dropped", "silu", "gate",
    # schedule names the community keeps (glossary: ZBV, DualPipeV)
    "ZBV", "DualPipeV",
    # symbols kept as they are (glossary: etp, like cp and ep)
    "etp",
}


@pytest.fixture
def zh():
    """Chinese labels for one test; English again afterwards."""
    set_language("zh")
    yield
    set_language("en")


def english_words(text: str) -> list[str]:
    """Words of three or more Latin letters that the Chinese labels should
    have translated (symbols like ``s x s`` and kept names excepted)."""
    return [w for w in re.findall(r"[A-Za-z][A-Za-z_]{2,}", text) if w not in KEPT_IN_CHINESE]


def figure_texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]


def untranslated(texts) -> list[str]:
    return [t for t in texts if english_words(t)]


@pytest.mark.parametrize("bad", ["fr", "ZH", "", None, 1])
def test_set_language_refuses_what_it_does_not_offer(bad):
    with pytest.raises(ValueError, match=re.escape(f"language={bad!r} is not offered")):
        set_language(bad)
    assert get_language() == "en"


def test_english_comes_back(zh):
    assert get_language() == "zh"
    set_language("en")
    assert get_language() == "en"
    title = "Double one symbol (s=2048, b=1, h=4096, a=32, t=1)"
    assert title in figure_texts(figures.doubling_figure())


WIDTH = re.compile(r"^(?:.?[<>=^])?([+\- ]?z?#?)0?\d*")
"""A format spec's fill, alignment and width: a printed table's Chinese layout
gives its columns their own widths (a Han character takes two columns)."""


def test_every_translation_keeps_the_template_fields():
    """The same fields, conversions and number formats (``{share:.1%}``,
    ``{n:,}``), in any order; only the widths and alignment of a column may
    differ."""
    def fields(text):
        return {(name, conversion, WIDTH.sub(lambda m: m[1], spec))
                for _, name, spec, conversion in string.Formatter().parse(text)
                if name is not None}
    bad = [k for k, v in ZH.items() if fields(k) != fields(v)]
    assert not bad, bad


def test_every_literal_label_has_a_translation():
    """Each ``tr("...")`` in actmem has an entry in the catalog."""
    missing = []
    for path in sorted((ROOT / "actmem").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tr"
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value not in ZH):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.args[0].value!r}")
    assert not missing, "\n".join(missing)


def test_the_titles_the_notebooks_pass_have_translations():
    """Figure titles given as literals in the notebooks' code."""
    titles = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                titles += re.findall(r'_figure\([^,()]+, ((?:"[^"]*"\s*)+)\)', cell.source)
    texts = [ast.literal_eval(t.replace("\n", " ")) for t in titles]
    assert len(texts) >= 4, texts
    assert [t for t in texts if t not in ZH] == []


def test_the_font_has_every_han_character_of_the_catalog():
    cmap = TTFont(FONT_FILE)["cmap"].getBestCmap()
    lacking = sorted({c for v in ZH.values() for c in v if HAN.match(c) and ord(c) not in cmap})
    assert not lacking, f"run tools/subset_cjk_font.py: {''.join(lacking)}"


def test_a_chinese_label_draws_without_a_missing_glyph(zh):
    from matplotlib.figure import Figure
    fig = Figure()
    fig.subplots().set_title("每块 GPU 的激活显存（MiB）：张量并行、流水线级")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a UserWarning
        fig.canvas.draw()


def test_a_character_outside_the_bundled_subset_comes_from_a_system_font(zh):
    """昇 (GB 2312 level 2) is not in the bundled font; a system Chinese font
    listed after it draws it (WenQuanYi here; matplotlib's font cache may
    predate it, so the test registers the file the system has)."""
    from matplotlib import font_manager, rcParams
    from matplotlib.figure import Figure

    from actmem.language import FONT_FAMILY, use_chinese_font
    assert ord("昇") not in TTFont(FONT_FILE).getBestCmap()
    files = [f for f in font_manager.findSystemFonts() if "wqy-microhei" in f]
    if not files:
        pytest.skip("no WenQuanYi Micro Hei on this machine")
    font_manager.fontManager.addfont(files[0])
    use_chinese_font()
    family = list(rcParams["font.family"])
    assert family.index("WenQuanYi Micro Hei") == family.index(FONT_FAMILY) + 1
    fig = Figure()
    fig.subplots().set_title("昇腾 910B：熵")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig.canvas.draw()


def test_a_system_font_of_one_weight_draws_bold_chinese_without_a_logged_warning(
        monkeypatch, caplog):
    """matplotlib 3.11 logs "Failed to find font weight bold" for a family
    with a regular face only (WenQuanYi Micro Hei is one): nbval reads that
    stderr as a changed output. A family of one weight, registered under a
    name of this test's own, serves bold text without it."""
    import dataclasses

    from matplotlib import font_manager, rc_context
    from matplotlib.figure import Figure

    from actmem import language
    family = "Actmem Test One Weight"
    manager = font_manager.fontManager
    with rc_context({"font.family": ["DejaVu Sans"]}):
        language.use_chinese_font()   # registers the bundled font
        regular = next(f for f in manager.ttflist
                       if f.name == language.FONT_FAMILY and f.weight == 400)
        monkeypatch.setattr(manager, "ttflist",
                            [*manager.ttflist, dataclasses.replace(regular, name=family)])
        monkeypatch.setattr(language, "SYSTEM_CJK_FAMILIES", (family,))
        language.use_chinese_font()
        language.use_chinese_font()   # idempotent: one bold twin
        faces = [f.weight for f in manager.ttflist if f.name == family]
        assert sorted(faces) == [400, 700]
        fig = Figure()
        fig.subplots().set_title("张量并行", fontweight="bold")
        with caplog.at_level("WARNING", logger="matplotlib.font_manager"):
            fig.canvas.draw()
    assert not [r for r in caplog.records if "Failed to find font weight" in r.message]


def _schedule(kind, p, m, v=1):
    return actmem.simulate_schedule(kind, p, m, v)


MODEL = actmem.PRESETS["llama2-7b"]
def _timeline_with_measured_curve():
    """The timeline figure with a measured curve of one value per event
    (on stage 0, the stage the curve is drawn on)."""
    run = actmem.training_memory(MODEL, t=2, p=2, m=8, gpu_memory="A100 80GB", reserve=2**30)
    events = len(run.stages[0].timeline.events)
    return fit_figures.timeline_figure(run, measured=[10**9] * events)


FIGURES = {
    "sharding t=2": lambda: figures.sharding_figure(t=2),
    "sharding t=1": lambda: figures.sharding_figure(t=1),
    "sharding t=4": lambda: figures.sharding_figure(t=4),
    "tensor parallel": lambda: figures.tensor_parallel_figure(3),
    "bytes per GPU": lambda: figures.bytes_per_gpu_figure(),
    "doubling": lambda: figures.doubling_figure(),
    "terms vs t": lambda: figures.terms_vs_t_figure(highlight=8),
    "GPipe": lambda: schedule_figures.schedule_figure(_schedule("gpipe", 4, 8)),
    "interleaved": lambda: schedule_figures.schedule_figure(_schedule("interleaved", 4, 8, 2)),
    "first stage": lambda: schedule_figures.first_stage_figure(
        actmem.activation_memory(2048, 1, 4096, 32, 8), 32, 8),
    "fits": lambda: fit_figures.stage_memory_figure(
        actmem.training_memory(MODEL, t=2, p=2, m=8, gpu_memory=80 * 10 ** 9)),
    "does not fit": lambda: fit_figures.stage_memory_figure(
        actmem.training_memory(MODEL, t=1, p=1, m=8, gpu_memory=24 * 10 ** 9)),
    "recompute": lambda: fit_figures.recompute_figure(MODEL, t=2, p=2, m=8),
    "timeline": lambda: _timeline_with_measured_curve(),
    "timeline, map stored": lambda: fit_figures.timeline_figure(
        actmem.training_memory(MODEL.with_(flash_attention=False), p=4, v=2, m=8,
                               schedule="interleaved", recompute="selective")),
    "Table 2": lambda: variant_views.stacked_figure(
        actmem.table2(2048, 1, 12288, 96, 8), "LLaMA-style layer (s=4096, b=1, h=8192, a=64, "
        "t=8): 8 KV heads, SwiGLU f=28672, no dropout, FlashAttention"),
    "cheat sheet": lambda: cheatsheet.cheat_sheet_figure(),
}


@pytest.mark.parametrize("name", FIGURES)
def test_figures_draw_in_chinese_with_every_glyph(zh, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = FIGURES[name]()
        fig.canvas.draw()
    texts = figure_texts(fig)
    assert any(HAN.search(t) for t in texts), texts
    assert untranslated(texts) == []


def test_figures_keep_their_numbers_in_chinese(zh):
    """The same numbers, whichever the language."""
    set_language("en")
    english = figure_texts(figures.bytes_per_gpu_figure())
    set_language("zh")
    chinese_texts = figure_texts(figures.bytes_per_gpu_figure())
    def numbers(texts):
        return sorted(n for t in texts for n in re.findall(r"\d+(?:\.\d+)?", t))
    assert numbers(chinese_texts) == numbers(english)


EXPLORERS = {
    "LayerExplorer": lambda: widgets.LayerExplorer(t=2, figure=True),
    "LedgerExplorer": lambda: widgets.LedgerExplorer(t=2),
    "ShardingExplorer": lambda: widgets.ShardingExplorer(),
    "VariantExplorer": lambda: variant_views.VariantExplorer(recompute="full"),
    "ScheduleExplorer": lambda: schedule_views.ScheduleExplorer(schedule="interleaved", v=2),
    "FitPlanner": lambda: fit_views.FitPlanner(),
    "FitPlanner, PyTorch-style": lambda: fit_views.FitPlanner(
        model="gpt2-large", t=1, p=1, d=1, m=1, gpu="H100 80GB SXM", loss="torch",
        gradient_buffer="backward"),
}


@pytest.mark.parametrize("name", EXPLORERS)
def test_explorers_show_chinese_but_keep_their_english_value(zh, name):
    chinese_explorer = EXPLORERS[name]()
    set_language("en")
    english_explorer = EXPLORERS[name]()
    for key, readout in chinese_explorer.readouts.items():
        shown = re.sub(r"<[^>]+>", " ", readout.shown)
        assert readout.value == english_explorer.readouts[key].value, key
        assert HAN.search(shown) and untranslated([shown]) == [], (key, shown)
        assert english_explorer.readouts[key].shown == english_explorer.readouts[key].value
    descriptions = [c.description for c in chinese_explorer.controls.values()]
    assert untranslated(descriptions) == [], descriptions
    labels = [label for c in chinese_explorer.controls.values()  # not names like llama2-7b
              for label, value in zip(getattr(c, "_options_labels", ()),
                                      getattr(c, "_options_values", ())) if label != value]
    assert untranslated(labels) == [], labels


def test_the_answers_summary_is_chinese_and_the_answers_are_not(zh, monkeypatch):
    import IPython.display
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw: shown.append(data))
    with actmem.hidden_answers():
        print("1. 80 MiB")
    assert shown[0]["text/plain"] == "1. 80 MiB\n"
    assert shown[0]["text/html"] == ("<details><summary>显示答案背后的数字</summary>"
                                     "<pre>1. 80 MiB\n</pre></details>")


def _strings_in(folder: Path) -> set[str]:
    """Every string constant in the modules of ``folder`` (or in the module
    ``folder`` names; read, not imported: ``actmem.measure`` needs torch to
    import)."""
    paths = [folder] if folder.suffix == ".py" else folder.glob("*.py")
    return {node.value for path in paths
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


@functools.cache  # two tests read it; building it runs about 90 training_memory calls
def event_templates() -> frozenset[str]:
    """The labels of the timeline's events (actmem.run.moments.timeline) with the
    micro-batch replaced by ``{name}``, over runs that reach every kind of
    event: attention map stored or not, each recomputation, one and two
    chunks, with and without the data loader's mask."""
    import itertools
    templates = set()

    def add(result):
        templates.update(re.sub(r"micro-batch \d+(, chunk \d+)?", "{name}", e.label)
                         for s in result.stages for e in s.timeline.events)
    for flash, recompute, (p, v), mask in itertools.product(
            (False, True), actmem.RECOMPUTE, ((1, 1), (2, 1), (2, 2)), (True, False)):
        result = actmem.training_memory(
            MODEL.with_(flash_attention=flash), p=p, v=v, m=4, recompute=recompute,
            schedule="interleaved" if v > 1 else "1f1b",
            create_attention_mask_in_dataloader=mask)
        add(result)
    for flash in (False, True):   # full recomputation: an earlier, whole group sets the peak
        result = actmem.training_memory(MODEL.with_(flash_attention=flash, L=4),
                                        recompute="full", recompute_num_layers=3)
        add(result)
    moe = actmem.MOE_PRESETS["mixtral-8x7b"].with_(s=256, L=4)  # the MoE layers' moments
    for recompute in actmem.RECOMPUTE:
        result = actmem.training_memory(moe, t=2, sequence_parallel=True, p=2, m=4,
                                        recompute=recompute)
        add(result)
        result = actmem.training_memory(moe, t=2, sequence_parallel=True, recompute=recompute,
                                        recompute_num_layers=3)
        add(result)
    for recompute in actmem.RECOMPUTE:   # the context-parallel attention's moments
        result = actmem.training_memory(MODEL.with_(flash_attention=True), cp=2,
                                        recompute=recompute)
        add(result)
        result = actmem.training_memory(MODEL.with_(flash_attention=True, L=4), cp=2,
                                        recompute=recompute, recompute_num_layers=3)
        add(result)
    for layers, reshard in itertools.product((1, 2, 3, 5), (True, False)):  # FSDP2's moments
        result = actmem.training_memory(
            MODEL.with_(flash_attention=True, L=layers), d=2, m=2, use_torch_fsdp2=True,
            gradient_buffer="backward", reshard_after_forward=reshard)
        add(result)
    for model in (MODEL, moe):   # Megatron-FSDP's moments
        add(actmem.training_memory(model.with_(flash_attention=True), t=2, d=2, m=2,
                                   sequence_parallel=True, use_megatron_fsdp=True,
                                   distributed_optimizer=True))
    return frozenset(templates)


def test_every_event_of_the_timeline_has_a_translation():
    missing = sorted(t for t in event_templates() if t not in ZH)
    assert not missing, missing
    assert fit_figures.event_label("loss of micro-batch 3, chunk 1", actmem.language.chinese) \
        == "模型块 1 上的微批次 3 的损失"
    assert fit_figures.event_label("loss of micro-batch 3") == "loss of micro-batch 3"
    assert fit_figures.event_label("something new of micro-batch 3",
                                   actmem.language.chinese) == "something new of micro-batch 3"


def _labels_from_data() -> set[str]:
    """Labels that reach ``tr`` from data rather than literals: ledger rows,
    placements, groups, diff kinds, Table 2 rows, measured variants and the
    summary template, model states and parts, schedule titles, the figures'
    label tables, readout templates."""
    from actmem.layer.ledger_diff import KINDS
    from actmem.views import timeline_marks
    from actmem.views.answers import SUMMARY
    model = actmem.PRESETS["llama2-7b"]
    labels = {SUMMARY, variant_views.BASELINE, *_strings_in(ROOT / "actmem" / "measure"),
              # printed by notebook 09: Megatron-LM's differences, a pass's parts, the
              # timeline's categories (dict keys)
              *_strings_in(ROOT / "actmem" / "run" / "megatron_estimate.py"),
              *actmem.pass_parts.embedding_activations(model),
              *actmem.pass_parts.output_activations(model), *actmem.CATEGORIES,
              *actmem.PLACEMENTS, *actmem.GROUPS, *KINDS,
              *actmem.RECOMPUTE, *actmem.RECOMPUTE_MODULES, *fit_views.STATES,
              *actmem.job.GROUPS,   # notebook 13 prints a job's options by group
              *schedule_figures.TITLES.values(),
              *fit_figures.CATEGORY_LABELS.values(), *fit_views.LOSS_LABELS.values(),
              # the timeline's transients, named from their events (views.timeline_marks)
              *(name for _, name in timeline_marks.TRANSIENT_NAMES),
              *fit_views.GRADIENT_LABELS.values(), *event_templates(), *fit_views.MODEL_NAMES.values(),
              *actmem.table2(2048, 1, 12288, 96, 8), "paper's layer", "chosen",
              *(p.replace("_", " ") for p in actmem.PARTS), "total: {size}",
              *widgets.LEDGER_COLUMNS, *schedule_views.STAGE_COLUMNS,
              *variant_views.DIFF_COLUMNS, *variant_views.ACTIVATION_NAMES.values(),
              *("s", "b", "h", "a", "t", "MLP", "schedule", "model", "states", "gpu",
                "kv_heads", "loss", "gradient_buffer")}
    for table in (figures.TERM_LABELS, figures.GROUP_LABELS, figures.PLACEMENT_LABELS,
                  fit_figures.PART_LABELS, variant_views.GROUP_NAMES):
        labels |= set(table.values())
    for category, parts in figures.TRAINING_MEMORY_PARTS:
        labels |= {category, *parts}
    for group in actmem.GROUPS:
        name = group.replace("_", " ")  # the readouts name groups readably
        labels |= {f"{name}: {{size}}", f"{name} per GPU: {{size}}"}
    options = [{}, {"sequence_parallel": True}, {"flash_attention": True},
               {"activation": "swiglu"}, {"activation": "squared_relu"}, {"recompute": "full"},
               {"flash_attention": True, "fp8": "e4m3"},   # notebook 12 prints FP8 rows by name
               {"flash_attention": True, "flash_output_copy": True}, {"unfused_rope": True}]
    for extra in options:   # the flash-attn copy exists for b > 1 only (actmem.layer.flash_copy)
        b = 2 if extra.get("flash_output_copy") else 1
        for row in actmem.activation_memory(2048, b, 4096, 32, 8, **extra).rows:
            labels |= {row.name, row.block, row.needed_for}
    return labels


def test_every_entry_is_used():
    literals = set()
    for path in sorted((ROOT / "actmem").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tr" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                literals.add(node.args[0].value)
    notebook_titles = {k for k in ZH if k not in literals and k not in _labels_from_data()}
    # what is left must be a title a notebook passes in
    code = " ".join(cell.source.replace("\n", " ") for path in (ROOT / "notebooks").glob("*.ipynb")
                    for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code")
    code = re.sub(r'"\s+"', "", code)
    assert [k for k in notebook_titles if k not in code and k.replace("\n", "\\n") not in code] == []

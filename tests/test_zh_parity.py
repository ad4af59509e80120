"""The Chinese track (issue 13): every notebook in notebooks/ has a twin in
notebooks/zh/ with the same cells, the same code, the same printed numbers and
its prose in Chinese.

The one declared difference in code: the set-up cell (the first that imports
actmem) ends with :data:`LANGUAGE_LINE`, which switches figure and widget
labels to Chinese (:func:`actmem.set_language`); comments may be Chinese (the
Colab cell's are). Everything a cell prints
(stream text, ``text/plain``) carries the same numbers in both tracks; its words
may be Chinese (takeaways and expectations go through :mod:`actmem.language`),
and nbval checks each track against its own outputs. Markdown cells are "mostly Chinese": after code
spans, links' targets, HTML tags and maths are removed, Han characters
outnumber Latin letters; the structure a reader navigates by (headings,
answers in ``<details>``, code spans, numbers, links) is the English one.
"""

import io
import re
import tokenize
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

ROOT = Path(__file__).resolve().parents[1]
ENGLISH = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHINESE = ROOT / "notebooks" / "zh"
LANGUAGE_LINE = 'actmem.set_language("zh")'
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
LATIN = re.compile(r"[A-Za-z]")
CODE_SPAN = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
METADATA = ("slideshow", "jupyter", "tags")
"""Cell metadata that must match: slide place, collapsed parts, nbval tags."""


def twin(path: Path) -> Path:
    return CHINESE / path.name


def pairs():
    return [(nbformat.read(p, as_version=4), nbformat.read(twin(p), as_version=4))
            for p in ENGLISH if twin(p).exists()]


def prose(markdown: str) -> str:
    """``markdown`` without fenced code, code spans, link targets, HTML tags
    and maths: the words a reader reads."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    text = CODE_SPAN.sub("", text)
    text = LINK.sub("]", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"https?://\S+", "", text)
    return re.sub(r"\$[^$]*\$", "", text)


def mostly_chinese(markdown: str) -> bool:
    words = prose(markdown)
    return len(HAN.findall(words)) >= len(LATIN.findall(words))


@pytest.mark.parametrize("markdown, expected", [
    ("Per micro-batch, per GPU, in MiB:", False),
    ("每个微批次、每块 GPU 的激活显存（MiB）：", True),
    ("张量并行大小 `t = 8` 与 `activation_memory(s, b, h, a, t)`", True),
    ("更多细节见[说明文档](../../README.zh.md)。", True),
])
def test_mostly_chinese_detector(markdown, expected):
    assert mostly_chinese(markdown) is expected


def test_every_english_notebook_has_its_chinese_twin():
    missing = [p.name for p in ENGLISH if not twin(p).exists()]
    extra = sorted({p.name for p in CHINESE.glob("*.ipynb")} - {p.name for p in ENGLISH})
    assert not missing and not extra, f"missing: {missing}; without an English one: {extra}"


@pytest.fixture(params=[p.name for p in ENGLISH])
def pair(request):
    path = ROOT / "notebooks" / request.param
    if not twin(path).exists():
        pytest.fail(f"notebooks/zh/{request.param} is missing")
    return nbformat.read(path, as_version=4), nbformat.read(twin(path), as_version=4)


def test_same_cells_in_the_same_order(pair):
    en, zh = pair
    assert [c.cell_type for c in zh.cells] == [c.cell_type for c in en.cells]
    for i, (e, z) in enumerate(zip(en.cells, zh.cells)):
        for key in METADATA:
            assert z.metadata.get(key) == e.metadata.get(key), f"cell {i}: metadata {key}"
    assert zh.metadata.get("actmem") == en.metadata.get("actmem")


def without_comments(source: str) -> str:
    """``source`` with its comments and the blank space they leave removed
    (IPython's magics read as Python first)."""
    python = TransformerManager().transform_cell(source)
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(python).readline)
              if t.type != tokenize.COMMENT]
    lines = tokenize.untokenize(tokens).splitlines()
    return "\n".join(line.rstrip() for line in lines if line.strip())


def test_code_is_identical_but_for_the_language_line(pair):
    """The code, that is: its comments may be in the reader's language
    (issue 41: the Colab cell's are Chinese)."""
    en, zh = pair
    code = [(e.source, z.source) for e, z in zip(en.cells, zh.cells) if e.cell_type == "code"]
    setup = next(i for i, (e, _) in enumerate(code) if "import actmem" in e)
    for i, (e, z) in enumerate(code):
        want = e + "\n" + LANGUAGE_LINE if i == setup else e
        assert without_comments(z) == without_comments(want), \
            f"code cell {i} differs:\n{z}\n---- English:\n{e}"


def test_the_colab_cell_speaks_chinese(pair):
    _, zh = pair
    colab = next(c.source for c in zh.cells if "google.colab" in c.source)
    comments = " ".join(line for line in colab.splitlines() if line.lstrip().startswith("#"))
    english = re.sub(r"\b(?:actmem|Colab|numpy|matplotlib|pillow|ipywidgets)\b", "", comments)
    assert len(HAN.findall(comments)) >= 20 and not re.search(r"[A-Za-z]{3,}", english), \
        comments


def text_outputs(cell) -> list[str]:
    """What nbval compares: stream text and ``text/plain`` of each output."""
    return [o.get("text") or o.get("data", {}).get("text/plain", "") for o in cell.outputs]


def test_printed_numbers_are_identical(pair):
    """Printed words may be Chinese (takeaways, expectations go through
    actmem.language) and in Chinese order; the numbers they carry, counted
    with repeats, may not differ."""
    en, zh = pair
    for i, (e, z) in enumerate(zip(en.cells, zh.cells)):
        if e.cell_type == "code" and "nbval-ignore-output" not in e.metadata.get("tags", []):
            numbers = sorted(NUMBER.findall("\n".join(text_outputs(e))))
            assert sorted(NUMBER.findall("\n".join(text_outputs(z)))) == numbers, \
                f"cell {i}:\n{e.source}"


PUNCTUATION = re.compile(r"[\s\u2000-\u206f\u3000-\u303f\uff00-\uffef!-/:-@\[-`{-~]")


def flanking(text: str, at: int) -> tuple[bool, bool]:
    """CommonMark's rule for the ``**`` at ``at``: (can open, can close).
    Left-flanking: not followed by whitespace, and not followed by
    punctuation unless preceded by whitespace or punctuation; right-flanking
    is the mirror image."""
    before = text[at - 1] if at else " "
    after = text[at + 2] if at + 2 < len(text) else " "
    space = str.isspace
    left = not space(after) and (not PUNCTUATION.match(after) or space(before)
                                 or bool(PUNCTUATION.match(before)))
    right = not space(before) and (not PUNCTUATION.match(before) or space(after)
                                   or bool(PUNCTUATION.match(after)))
    return left, right


def broken_bold(markdown: str) -> list[str]:
    """Bold spans that CommonMark (JupyterLab) shows as literal asterisks:
    in each paragraph, every odd ``**`` must open and every even one close."""
    found = []
    for line in prose_lines(markdown):
        runs = [m.start() for m in re.finditer(r"(?<!\*)\*\*(?!\*)", line)]
        for k, at in enumerate(runs):
            if not flanking(line, at)[k % 2]:
                found.append(line[max(0, at - 12):at + 14])
    return found


def prose_lines(markdown: str) -> list[str]:
    """Paragraphs (blank-line separated) on one line each; code replaced."""
    text = re.sub(r"```.*?```", "", CODE_SPAN.sub("x", markdown), flags=re.S)
    return [" ".join(p.splitlines()) for p in re.split(r"\n\s*\n", text)]


@pytest.mark.parametrize("markdown, broken", [
    ("**讲师提示：**约 15 分钟", True), ("**讲师提示**：约 15 分钟", False),
    ("**你将学到：** 激活显存", False), ("**Speaker notes.** About", False),
    ("的**固定项**中", False), ("一列**“needed for”**的", True),
])
def test_broken_bold_detector(markdown, broken):
    assert bool(broken_bold(markdown)) is broken


@pytest.mark.parametrize("path", [*ENGLISH, *sorted(CHINESE.glob("*.ipynb"))],
                         ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_bold_renders_under_commonmark(path):
    nb = nbformat.read(path, as_version=4)
    broken = [b for c in nb.cells if c.cell_type == "markdown" for b in broken_bold(c.source)]
    assert not broken, broken


def test_markdown_is_mostly_chinese(pair):
    _, zh = pair
    english = [c.source[:80] for c in zh.cells
               if c.cell_type == "markdown" and not mostly_chinese(c.source)]
    assert not english, "cells still mostly in English:\n" + "\n".join(english)


def headings(markdown: str) -> list[int]:
    return [len(m) for m in re.findall(r"^(#+) ", markdown, re.M)]


def test_markdown_keeps_the_structure_symbols_and_numbers(pair):
    """Same heading levels, same answers in <details>, the same code spans,
    and every number of the English cell (so no number drifts in translation)."""
    en, zh = pair
    for i, (e, z) in enumerate(zip(en.cells, zh.cells)):
        if e.cell_type != "markdown":
            continue
        where = f"cell {i} ({e.source[:50]!r})"
        assert headings(z.source) == headings(e.source), where
        assert z.source.count("<details>") == e.source.count("<details>"), where
        assert sorted(CODE_SPAN.findall(z.source)) == sorted(CODE_SPAN.findall(e.source)), where
        lacking = set(NUMBER.findall(prose(e.source))) - set(NUMBER.findall(z.source))
        assert not lacking, f"{where}: numbers {sorted(lacking)} missing"


def test_links_point_to_the_chinese_track(request, pair):
    """Colab and Binder open this Chinese notebook (its learner version,
    learner/zh/NAME); relative links resolve."""
    _, zh = pair
    name = request.node.callspec.params["pair"]
    first = zh.cells[0].source
    assert f"/learner/zh/{name})" in first and f"labpath=learner%2Fzh%2F{name})" in first
    for cell in zh.cells:
        if cell.cell_type != "markdown":
            continue
        for target in LINK.findall(cell.source):
            if "://" in target or target.startswith("#"):
                continue
            assert (CHINESE / target.split("#")[0]).resolve().exists(), target
    assert "/learner/zh/" in first and "labpath=learner%2Fzh%2F" in first


def test_readme_zh_has_the_same_two_commands_and_is_linked():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    chinese = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    commands = [line.strip() for line in readme.splitlines()
                if line.startswith("    python3 -m venv .venv")]
    assert len(commands) == 2 and all(c in chinese for c in commands)
    assert "(README.zh.md)" in readme.split("\n## ", 1)[0]
    assert mostly_chinese(chinese)


# ---------------------------------------------------------------- issue 40: what is printed
# goes through the translator in the Chinese track; the numbers must not move.

def printed_lines(cell) -> list[str]:
    """A code cell's printed text, its outputs joined as they show, line by line."""
    return "".join(text_outputs(cell)).splitlines()


def test_every_printed_line_carries_the_same_numbers(pair):
    """Line by line, not only cell by cell: a Chinese line holds the numbers of
    its English line (in any order), so a table's rows, a verdict's margin or a
    plan line's sizes cannot drift from one line to another in translation."""
    en, zh = pair
    for i, (e, z) in enumerate(zip(en.cells, zh.cells)):
        if e.cell_type != "code" or "nbval-ignore-output" in e.metadata.get("tags", []):
            continue
        english, chinese = printed_lines(e), printed_lines(z)
        assert len(chinese) == len(english), f"cell {i}: {len(chinese)} lines, not {len(english)}"
        for a, b in zip(english, chinese):
            assert sorted(NUMBER.findall(b)) == sorted(NUMBER.findall(a)), f"cell {i}:\n{a}\n{b}"


def numbers(text: str) -> list[str]:
    return sorted(NUMBER.findall(text))


@pytest.fixture
def both():
    """A function's text in English, then in Chinese (the language set back after)."""
    import actmem

    def run(make):
        english = make()
        actmem.set_language("zh")
        try:
            chinese = make()
        finally:
            actmem.set_language("en")
        return english, chinese
    return run


def _printed_helpers():
    import actmem
    from actmem.layer.ledger_diff import changed, diff_ledgers
    from actmem.layer.ledger_diff import format_changes as english_changes
    from actmem.views import train_cli, variant_views
    from actmem.views.pipeline_measured import measurement_table, stored_measurement

    llama = actmem.PRESETS["llama2-7b"]
    fits = actmem.training_memory(llama, t=2, p=2, d=2, m=8, gpu_memory="A100 80GB")
    short = actmem.training_memory(actmem.PRESETS["llama2-70b"], t=8, p=4, d=2, m=16,
                                   gpu_memory="A100 40GB")
    offload = actmem.training_memory(llama, cpu_offloading_num_layers=8, gpu_memory="H100 80GB SXM")
    base = actmem.activation_memory(2048, 1, 12288, 96, 8)
    full = actmem.activation_memory(2048, 1, 12288, 96, 8, recompute="full")
    return {
        "table, fits": (lambda: train_cli.table(fits, "A100 80GB"), None),
        "table, does not fit": (lambda: train_cli.table(short, "A100 40GB"), None),
        "table, offloaded layers": (lambda: train_cli.table(offload, "H100 80GB SXM"), None),
        "timeline": (lambda: train_cli.timeline_text(fits.stages[1]), None),
        "Table 2": (lambda: variant_views.results_table(actmem.table2(2048, 1, 12288, 96, 8)),
                    None),
        "ledger diff": (lambda: variant_views.format_changes(changed(diff_ledgers(base, full))),
                        lambda: english_changes(changed(diff_ledgers(base, full)))),
        "pipeline measurement": (lambda: measurement_table(stored_measurement()), None),
    }


@pytest.mark.parametrize("name", ["table, fits", "table, does not fit", "table, offloaded layers",
                                  "timeline", "Table 2", "ledger diff", "pipeline measurement"])
def test_the_printed_helpers_keep_their_numbers_and_lines_in_chinese(both, name):
    """train_cli's table and verdict, the Table 2 and ledger-diff tables, the pipeline
    measurement: in the language the notebook set, with the English numbers line by
    line; the English text is what it was (ledger_diff.format_changes' own, where the
    views re-implement it)."""
    make, reference = _printed_helpers()[name]
    english, chinese = both(make)
    if reference is not None:
        assert english == reference()
    assert HAN.search(chinese) and chinese != english
    assert len(chinese.splitlines()) == len(english.splitlines())
    for a, b in zip(english.splitlines(), chinese.splitlines()):
        assert numbers(b) == numbers(a), f"{a}\n{b}"


def test_the_verdict_reads_chinese_with_the_same_numbers(both):
    import actmem
    from actmem.views import train_cli

    for gpu in ("A100 80GB", "A100 40GB", None):
        run = actmem.training_memory(actmem.PRESETS["llama2-13b"], t=2, p=2, m=8, gpu_memory=gpu)
        english, chinese = both(lambda: train_cli.verdict(run, gpu=gpu))
        assert numbers(chinese) == numbers(english)
        assert ("放得下" in chinese) == english.endswith(", fits")
        assert ("放不下" in chinese) == english.endswith("DOES NOT FIT")
        assert not re.search(r"\b(most loaded|stage|peak|margin)\b", chinese), chinese
        assert "））" not in chinese, chinese   # no parentheses inside parentheses (review L17)


def test_the_command_line_speaks_chinese_with_lang_zh(capsys):
    """``--lang zh``: the worked example's table (with the source article's column
    names) and the training table, same numbers as in English, line by line."""
    from actmem.views.cli import main

    for argv in ([], ["-L", "32"], ["train", "--preset", "llama2-7b", "--t", "2", "--p", "2",
                                    "--d", "2", "--m", "8", "--gpu-memory", "A100 80GB",
                                    "--timeline"]):
        assert main(argv) == 0
        english = capsys.readouterr().out
        assert main([*argv, "--lang", "zh"]) == 0
        chinese = capsys.readouterr().out
        assert HAN.search(chinese)
        assert len(chinese.splitlines()) == len(english.splitlines())
        for a, b in zip(english.splitlines(), chinese.splitlines()):
            assert numbers(b) == numbers(a), f"{a}\n{b}"
    main(["--lang", "zh"])
    assert "中间态" in capsys.readouterr().out   # the article's own column name


def test_a_message_is_read_back_into_chinese():
    """Errors and explanations written in English come out in Chinese with the same
    values (actmem.views.printed.message); an unknown text stays as it is."""
    import actmem
    from actmem.views.printed import message, translate

    try:
        actmem.LayerConfig(s=2048, b=1, h=6656, a=52, t=8)
    except ValueError as error:
        text = str(error)
    actmem.set_language("zh")
    try:
        chinese = translate(text)
        assert message("no such message") == "no such message"
        assert translate("loss of micro-batch 3") == "微批次 3 的损失"
    finally:
        actmem.set_language("en")
    assert HAN.search(chinese) and numbers(chinese) == numbers(text)
    assert translate(text) == text   # English: as it is

"""Conventions every notebook in notebooks/ must follow (CRAFT.md, issue 3).

These are checks about form, not content, so they hold for notebooks other
helpers add: kernelspec, stored outputs that nbval can replay, widget cells
tagged, the Colab cell pointing at the one repository URL in pyproject.toml,
a closing exercise block, and no formula retyped in code.
"""

import ast
import re
import tomllib
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
COEFFICIENTS = {5, 10, 24, 34}
"""The paper's coefficients (Table 2: 10, 24, 5, and 34 = 10 + 24)."""


def repository_url() -> str:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["urls"]["Repository"]


def release_tag() -> str:
    """The released version the Colab and Binder links pin, e.g. ``v0.1.0``."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return "v" + tomllib.load(f)["project"]["version"]


def load(path):
    return nbformat.read(path, as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def retyped_formula(source: str) -> list[str]:
    """Expressions in ``source`` that look like the formula typed by hand.

    Flags a coefficient (5, 10, 24, 34) multiplying or dividing anything
    that is not a constant (``10 * s``, ``s*b*h*10``, ``24/t``, ``5 * (a)``),
    and a symbol squared (``s**2``), whatever the spacing or order.
    Constant arithmetic such as ``2**20`` or ``100 * x / y`` is allowed.
    """
    python = TransformerManager().transform_cell(source)
    found = []
    for node in ast.walk(ast.parse(python)):
        if not isinstance(node, ast.BinOp):
            continue
        sides = (node.left, node.right)
        if isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv)) and any(
            isinstance(x, ast.Constant) and x.value in COEFFICIENTS
            and not isinstance(y, ast.Constant) for x, y in (sides, sides[::-1])
        ):
            found.append(ast.unparse(node))
        if isinstance(node.op, ast.Pow) and isinstance(node.left, ast.Name) \
                and isinstance(node.right, ast.Constant) and node.right.value == 2:
            found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("source, expected", [
    ("x = 10 * s * b * h", True), ("x = s*b*h*10", True), ("y = 24/t", True),
    ("y = sbh * (24 / t)", True), ("z = 5 * a * s", True), ("z = b * a * s**2", True),
    ("%matplotlib inline\nz = (5*a)", True),
    ("mib = 2**20", False), ("pct = round(100 * (m4 - m8) / m4, 1)", False),
    ("w = 4 * h // t", False), ("print(f'{x:>10}')", False),
])
def test_retyped_formula_detector(source, expected):
    assert bool(retyped_formula(source)) is expected


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 5, NOTEBOOKS


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def nb(request):
    return load(request.param)


def test_kernelspec_is_python3(nb):
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_execution_counts_run_1_to_n(nb):
    counts = [c.execution_count for c in code_cells(nb)]
    assert counts == list(range(1, len(counts) + 1)), counts


def test_no_error_or_svg_output(nb):
    for cell in code_cells(nb):
        for out in cell.outputs:
            assert out.output_type != "error", cell.source
            assert "Traceback" not in out.get("text", ""), cell.source
            assert "image/svg+xml" not in out.get("data", {}), cell.source


def test_no_trailing_semicolon(nb):
    for cell in code_cells(nb):
        for line in cell.source.splitlines():
            assert not line.split("#")[0].rstrip().endswith(";"), line


def test_widget_cells_are_tagged_ignore_output(nb):
    for cell in code_cells(nb):
        if any(WIDGET_VIEW in out.get("data", {}) for out in cell.outputs):
            assert "nbval-ignore-output" in cell.metadata.get("tags", []), cell.source


def test_opens_with_h1_title(nb):
    first = nb.cells[0]
    assert first.cell_type == "markdown" and re.match(r"# \S", first.source)
    assert sum(1 for c in nb.cells if c.cell_type == "markdown"
               for line in c.source.splitlines() if re.match(r"# \S", line)) == 1


def test_colab_cell_installs_from_pyproject_url(nb):
    cells = [c for c in code_cells(nb) if "google.colab" in c.source]
    assert len(cells) == 1
    source = cells[0].source
    assert 'if "google.colab" in sys.modules:' in source
    installs = re.findall(r"pip install (.+)", source)
    assert len(installs) == 1
    args = installs[0].split()
    assert "--no-deps" in args
    assert not {"-e", "--editable", "ipywidgets", "matplotlib"} & set(args)
    assert [a for a in args if not a.startswith("-")] == [
        f"git+{repository_url()}@{release_tag()}"]
    first_import = next(i for i, c in enumerate(code_cells(nb)) if "import actmem" in c.source)
    assert code_cells(nb).index(cells[0]) < first_import


def test_ends_with_summary_and_exercises_in_details(nb):
    """The last markdown cell holds 2-4 exercises with <details> answers.

    Code cells may follow it only to print the answers' numbers for nbval.
    """
    markdown = [c for c in nb.cells if c.cell_type == "markdown"]
    last = markdown[-1]
    assert all(c.cell_type == "code" for c in nb.cells[nb.cells.index(last):][1:])
    assert re.search(r"^#+ Exercises", last.source, re.MULTILINE)
    exercises = last.source.split("Exercises", 1)[1]
    assert 2 <= exercises.count("<details>") == exercises.count("</details>") <= 4
    assert re.search(r"^#+ Summary", "\n".join(c.source for c in markdown[-2:]), re.MULTILINE)


def test_no_formula_retyped_in_code(nb):
    for cell in code_cells(nb):
        assert retyped_formula(cell.source) == [], cell.source


def test_first_cell_links_colab_and_binder_at_the_release(request, nb):
    """Both open the learner version (learner/, issue 41) at the release's
    tag, and say beside the links that the release is not published yet."""
    name = request.node.callspec.id
    repo = repository_url().removeprefix("https://github.com/")
    first = nb.cells[0].source
    assert (f"(https://colab.research.google.com/github/{repo}/blob/{release_tag()}"
            f"/learner/{name})") in first
    assert (f"(https://mybinder.org/v2/gh/{repo}/{release_tag()}"
            f"?labpath=learner%2F{name})") in first
    assert (ROOT / "learner" / name).is_file()
    links = next(line for line in first.splitlines() if "colab.research.google.com" in line)
    assert f"release {release_tag()}: until that release is published" in links


RANDOM_SEED = re.compile(r"(random|dropout|per-rank) seeds?|manual_seed", re.I)


def seed_mentions(text: str) -> list[str]:
    """Lines of ``text`` that say "seed" for anything but a random seed.

    The source article is "the source article", its formula "the paper's
    formula", its numbers "the worked example" (issue 10 item 16).
    """
    return [line for line in text.splitlines()
            if re.search(r"seed", RANDOM_SEED.sub("", line), re.I)]


@pytest.mark.parametrize("text, expected", [
    ("Work the seed's example", ["Work the seed's example"]),
    ("seed_formula(2048)", ["seed_formula(2048)"]),
    ("regenerated from the random seed", []),
    ("f, g and the dropout seeds", []),
    ("torch.manual_seed(0)", []),
])
def test_seed_mentions_detector(text, expected):
    assert seed_mentions(text) == expected


def test_seed_means_only_a_random_seed(nb):
    text = "\n".join(c.source for c in nb.cells)
    assert seed_mentions(text) == []


def test_readme_names_the_paper_and_its_assumptions():
    readme = (ROOT / "README.md").read_text()
    assert seed_mentions(readme) == []
    assert "https://arxiv.org/abs/2205.05198" in readme
    for assumption in ("16-bit activations", "1-byte", "attention map stored"):
        assert assumption in readme.replace("\n", " ")


def hidden(cell, part: str) -> bool:
    return cell.metadata.get("jupyter", {}).get(f"{part}_hidden") is True


def test_the_answers_stay_closed(nb):
    """Issue 11 item 1: the last code cell computes the exercises' answers;
    its code opens collapsed and it prints inside ``actmem.hidden_answers``
    (a closed <details>, which running the cell does not open)."""
    answers = code_cells(nb)[-1]
    assert hidden(answers, "source")
    assert answers.source.startswith("with actmem.hidden_answers():\n")
    assert [o.output_type for o in answers.outputs] == ["display_data"]
    assert answers.outputs[0].data["text/html"].startswith("<details><summary>")
    assert "collapsed" in nb.cells[nb.cells.index(answers) - 1].source


CLOSED = re.compile(r"^(?:with actmem\.hidden_answers\(\"Show the result\"\):\n"
                    r"|(?:.*\n)+actmem\.hidden_figure\(\w+\)$)")
"""A "predict first" cell: it prints inside ``hidden_answers("Show the
result")`` or ends by showing its figure with ``hidden_figure``."""


def test_a_predict_prompt_closes_the_result_below_it(nb):
    """Issue 41 item 1: the result under a "predict first" prompt stays
    closed after Run All (a <details> that running writes closed again),
    not collapsed with the output flag that running clears."""
    answers = code_cells(nb)[-1]
    prompts = 0
    for before, cell in zip(nb.cells, nb.cells[1:]):
        if before.cell_type == "markdown" and re.search(r"\bpredict", before.source, re.I) \
                and cell.cell_type == "code" and cell is not answers:
            prompts += 1
            assert CLOSED.match(cell.source), cell.source
            assert 'click "Show the result"' in before.source, before.source[-120:]
            assert [o.output_type for o in cell.outputs] == ["display_data"]
            assert cell.outputs[0].data["text/html"].startswith("<details><summary>")
    closed = [c for c in code_cells(nb) if CLOSED.match(c.source)]
    assert len(closed) == prompts


ALL_NOTEBOOKS = [*NOTEBOOKS, *sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))]


def test_there_are_predict_first_cells_of_both_kinds():
    sources = [c.source for path in NOTEBOOKS for c in code_cells(load(path))]
    assert sum("hidden_answers(\"Show the result\")" in s for s in sources) >= 3
    assert sum("hidden_figure(" in s for s in sources) >= 1


@pytest.mark.parametrize("path", ALL_NOTEBOOKS,
                         ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_no_answer_relies_on_the_collapsed_output_flag(path):
    """JupyterLab clears ``outputs_hidden`` when the cell runs (and autosave
    then changes the file): no cell of either language may carry it."""
    flagged = [i for i, c in enumerate(load(path).cells)
               if "outputs_hidden" in c.metadata.get("jupyter", {}) or "collapsed" in c.metadata]
    assert flagged == []


@pytest.mark.parametrize("path", ALL_NOTEBOOKS,
                         ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_the_kernelspec_is_the_same_in_every_notebook(path):
    """One kernelspec, as ipykernel names it, so that JupyterLab's save and
    a refresh leave it alone (issue 41 item 3)."""
    assert load(path).metadata["kernelspec"] == {
        "display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def test_widget_checks_are_tagged_test_check(nb):
    """A cell that drives a widget and asserts what it shows, for the tests,
    is tagged ``test-check`` (the learner version leaves it out), and only
    such a cell or the prose that introduces it is."""
    for cell in nb.cells:
        tagged = "test-check" in cell.metadata.get("tags", [])
        if cell.cell_type == "code":
            check = ("nbval-ignore-output" in cell.metadata.get("tags", [])
                     and "assert " in cell.source and "display(" not in cell.source)
            assert tagged == check, cell.source[:80]
        elif tagged:
            assert re.search(r"for the tests|automated tests|as a person would", cell.source)


def unused_imports(sources: list[str]) -> list[str]:
    """Names a notebook's code cells import but never use (issue 11 item 5)."""
    trees = [ast.parse(TransformerManager().transform_cell(s)) for s in sources]
    imported, used = [], set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imported += [(a.asname or a.name).split(".")[0] for a in node.names]
            elif isinstance(node, ast.Name):
                used.add(node.id)
    return [name for name in imported if name not in used]


@pytest.mark.parametrize("sources, expected", [
    (["from fractions import Fraction\nimport actmem", "actmem.table2()"], ["Fraction"]),
    (["import sys\nif 'google.colab' in sys.modules: pass"], []),
])
def test_unused_import_detector(sources, expected):
    assert unused_imports(sources) == expected


def test_no_unused_imports(nb):
    assert unused_imports([c.source for c in code_cells(nb)]) == []


def slide_type(cell) -> str | None:
    return cell.metadata.get("slideshow", {}).get("slide_type")


def test_every_cell_has_its_place_in_the_slideshow(nb):
    """Issue 12: the title and every ## section start a slide; the set-up
    cells and the answer cell are skipped; each notebook has speaker notes."""
    kinds = [slide_type(c) for c in nb.cells]
    assert None not in kinds and kinds[0] == "slide" and "notes" in kinds
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## ") \
                and not cell.source.startswith("## Set up"):
            assert slide_type(cell) == "slide", cell.source[:40]
    setup = [c for c in nb.cells if c.source.startswith("## Set up")]
    assert [slide_type(c) for c in setup] == ["skip"]
    assert slide_type(code_cells(nb)[0]) == slide_type(code_cells(nb)[-1]) == "skip"

"""The README's Python examples run as written and print what the README shows
(doctest on each ```python block, in order, sharing one namespace as a reader's
session does)."""

import doctest
import re
from pathlib import Path

from actmem import Job
from actmem.views.job_cli import read_launch

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_examples_print_what_the_readme_shows(monkeypatch):
    monkeypatch.chdir(ROOT)   # the Hugging Face example reads tests/hf_configs/
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner()
    namespace = {}
    for i, block in enumerate(blocks):
        test = parser.get_doctest(block, namespace, f"README.md python block {i}", "README.md", 0)
        runner.run(test, clear_globs=False)
        namespace = test.globs
    result = runner.summarize(verbose=False)
    assert len(blocks) == 4 and result.attempted >= 16
    assert result.failed == 0
    # the launch file the README's command line reads is the Python example's job
    launch = read_launch("tests/launches/llama3-8b.txt")
    assert "tests/launches/llama3-8b.txt" in text
    assert Job.from_megatron_args(launch, world_size=8, gpu="H100 80GB SXM") == namespace["job"]


def test_the_readme_command_lines_give_the_python_example_s_peak(monkeypatch, capsys):
    """The README's two `train` command lines (a launch file, a config with the
    launch's options) print the Python example's job: the same stages."""
    import json
    import shlex

    from actmem.views.cli import main
    monkeypatch.chdir(ROOT)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = re.findall(r"^ {4}\.venv/bin/python -m actmem (train --(?:megatron-args|hf-config) .*)$",
                       text, re.M)
    assert len(lines) == 2
    outputs = []
    for line in lines:
        assert main(shlex.split(line) + ["--json"]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0]["stages"] == outputs[1]["stages"]
    assert "39.89 GiB" in text

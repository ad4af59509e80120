"""Every notebook in a real browser: Run All, then every control.

For each notebook in notebooks/ (discovered, so new notebooks are covered):

* ``test_run_all``: open it in JupyterLab, Run > Run All Cells, wait for the
  kernel to be idle; every code cell ran, no cell has an error output, the
  page shows no "Error displaying widget" and no traceback; screenshot.
* ``test_controls``: for every widget control in every widget output
  (dropdown, checkbox, slider, toggle buttons, radio, number box), change
  it with the mouse or keyboard; the control shows the new value, every
  readout (found by its CSS class ``actmem-readout-<name>``) shows what
  actmem's pure functions give for the new setting (oracles.py), and the
  figure's PNG bytes changed when what it is drawn from changed. One
  subtest per control; a screenshot of each output once all its controls
  were driven, and of the output at a change that failed (one per change
  cost about a quarter of the suite's time).
  A menu that offers one value under the settings reached so far (the
  planner's FP8 menu at cp > 1) is opened first as a learner would, by
  picking other controls' options (``oracles.SETUPS``), each pick checked
  like any change.

Screenshots go to artifacts/screenshots/ (printed at the end of the run).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

import oracles
from jlab import NOTEBOOKS as NOTEBOOK_DIR
from jlab import (UNSUPPORTED, VISIBLE_NOTEBOOK, change_control, file_stem, notebook_names,
                  wait_settled)

NOTEBOOKS = notebook_names()

TRACEBACK = "Traceback (most recent call last)"
WIDGET_ERROR = "Error displaying widget"


def _page_problems(nb) -> list[str]:
    text = nb.notebook_text()
    problems = []
    if WIDGET_ERROR in text:
        problems.append(f"the page shows {WIDGET_ERROR!r}")
    if TRACEBACK in text:
        i = text.index(TRACEBACK)
        problems.append("the page shows a traceback: " + text[max(0, i - 200):i + 400])
    problems += [f"uncaught page error: {e}" for e in nb.page_errors]
    return problems


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_run_all(runs, notebook):
    nb, rec = runs.get(notebook)
    if rec["error"] is not None:
        pytest.fail(f"{notebook}: {rec['traceback']}\n"
                    f"server log:\n{nb.server.log_tail()}", pytrace=False)
    problems = [f"error output in {e}" for e in rec["errors"]]
    # from the saved notebook: a collapsed cell shows no prompt in the page
    code = [c for c in rec["saved"]["cells"] if c["cell_type"] == "code"]
    unrun = [i for i, c in enumerate(code) if c.get("execution_count") is None]
    if unrun:
        problems.append(f"code cells not run: {unrun}")
    problems += _page_problems(nb)
    assert not problems, f"{notebook} after Run All:\n" + "\n".join(problems)
    print(f"{notebook}: Run All {rec['run_s']:.1f}s, screenshot {rec['screenshot']}")


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_answers_stay_collapsed_after_run_all(runs, notebook):
    """The last code cell computes the exercises' answers: after Run All its
    code is still collapsed and the answers are inside a closed <details>
    (issue 11 item 1)."""
    nb, rec = runs.get(notebook)
    if rec["error"] is not None:
        pytest.fail(f"{notebook}: Run All failed ({rec['error']}); see test_run_all",
                    pytrace=False)
    cell = nb.page.locator(VISIBLE_NOTEBOOK + " .jp-CodeCell").last
    cell.scroll_into_view_if_needed()
    assert cell.locator(".jp-OutputArea-output").count(), f"{notebook}: the answers did not run"
    assert not cell.locator(".jp-InputArea-editor").is_visible(), f"{notebook}: code shown"
    details = cell.locator(".jp-OutputArea-output details")
    assert details.count() == 1 and details.first.is_visible(), f"{notebook}: no closed answers"
    assert not details.first.locator("pre").is_visible(), f"{notebook}: the answers are shown"


CLOSED_CELL = re.compile(r"hidden_answers\(|hidden_figure\(")
"""Code that shows its result inside a closed <details> (actmem.views.answers)."""


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_no_answer_is_open_after_run_all(runs, notebook):
    """Issue 41: after Run All every answer and every "predict first" result
    is a closed <details> (one per cell that prints inside hidden_answers or
    draws with hidden_figure); none is open."""
    nb, rec = runs.get(notebook)
    if rec["error"] is not None:
        pytest.fail(f"{notebook}: Run All failed ({rec['error']}); see test_run_all",
                    pytrace=False)
    expected = sum(bool(CLOSED_CELL.search("".join(c["source"])))
                   for c in rec["saved"]["cells"] if c["cell_type"] == "code")
    details = nb.page.locator(VISIBLE_NOTEBOOK + " .jp-OutputArea-output details")
    assert details.count() == expected, f"{notebook}: {details.count()} of {expected} closed"
    opened = [i for i in range(details.count()) if details.nth(i).evaluate("d => d.open")]
    assert not opened, f"{notebook}: answers {opened} are open after Run All"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_saving_after_run_all_changes_only_outputs(runs, notebook):
    """Issue 41 item 3: what Run All and a save (autosave does the same) write
    differs from the file only in outputs: no cell's metadata (a collapsed
    flag that running clears) and not the kernelspec."""
    nb, rec = runs.get(notebook)
    if rec["error"] is not None:
        pytest.fail(f"{notebook}: Run All failed ({rec['error']}); see test_run_all",
                    pytrace=False)
    original = json.loads((NOTEBOOK_DIR / notebook).read_text(encoding="utf-8"))
    saved = rec["saved"]
    assert saved["metadata"]["kernelspec"] == original["metadata"]["kernelspec"]
    changed = [i for i, (a, b) in enumerate(zip(saved["cells"], original["cells"], strict=True))
               if a["metadata"] != b["metadata"] or a["source"] != b["source"]]
    assert not changed, f"{notebook}: Run All and save changed cells {changed}"


MISSING_GLYPHS_JS = r"""
(selector) => {
  // Han and full-width characters on the page that the browser draws as a
  // missing glyph: drawn in the page's font, pixel for pixel the same as a
  // character no font has (U+E000, U+0378).
  const root = document.querySelector(selector);
  const chars = [...new Set(root.innerText.match(/[\u3000-\u303f\u3400-\u9fff\uff01-\uff5e]/g) || [])];
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 48;
  const g = canvas.getContext('2d', {willReadFrequently: true});
  const fonts = ['.jp-RenderedMarkdown p', '.actmem-readouts', '.widget-label']
    .map(s => root.querySelector(s)).filter(Boolean)
    .map(e => { const c = getComputedStyle(e); return `${c.fontSize} ${c.fontFamily}`; });
  const missing = new Set();
  for (const font of fonts) {
    const draw = ch => {
      g.clearRect(0, 0, 48, 48); g.font = font; g.fillText(ch, 4, 36);
      return g.getImageData(0, 0, 48, 48).data.join(',');
    };
    const none = new Set([draw('\ue000'), draw('\u0378')]);
    if (none.has(draw('A'))) return {fonts: fonts.length, broken: true, missing: []};
    chars.filter(ch => none.has(draw(ch))).forEach(ch => missing.add(ch));
  }
  return {fonts: fonts.length, broken: false, missing: [...missing], chars: chars.length};
}
"""


@pytest.mark.parametrize("notebook", [n for n in NOTEBOOKS if n.startswith("zh/")])
def test_chinese_text_has_its_glyphs(runs, notebook):
    """After Run All, every Chinese character of the prose, the readouts and
    the controls is drawn with a real glyph, not a missing-glyph box
    (issue 13; the CI machine gets Debian's fonts-wqy-microhei)."""
    nb, rec = runs.get(notebook)
    if rec["error"] is not None:
        pytest.fail(f"{notebook}: Run All failed ({rec['error']}); see test_run_all",
                    pytrace=False)
    found = nb.page.evaluate(MISSING_GLYPHS_JS, VISIBLE_NOTEBOOK)
    assert found["fonts"] >= 1, f"{notebook}: no text element to take a font from"
    assert not found["broken"], "a Latin letter draws like a missing glyph: detector broken"
    assert found["chars"] > 100, f"{notebook}: only {found['chars']} Chinese characters"
    missing = found["missing"]
    assert not missing, (f"{notebook}: {len(missing)} characters drawn as boxes, e.g. "
                         f"{''.join(missing[:20])}; install a Chinese font "
                         "(apt-get install fonts-wqy-microhei)")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:40] or "control"


def _options(nb, root, index) -> tuple[list[str], int] | None:
    """A dropdown's option labels as the page shows them and the selected
    one's place (None for another kind of control)."""
    el = nb.control_handle(root, index)
    select = el.query_selector("select") if el is not None else None
    if select is None:
        return None
    options = [oracles._spaces(o.text_content()) for o in select.query_selector_all("option")]
    shown = oracles._spaces(select.evaluate("s => s.selectedOptions[0].textContent"))
    return options, options.index(shown)


def _open_menu(nb, root, index, info, shots: Path, stem: str) -> list[str]:
    """Make the menu ``index``, which offers one value, offer more, by the
    picks :data:`oracles.SETUPS` lists for it (each checked by
    :func:`_check_change`); the picks made."""
    if info is None:
        return []
    names = {c["description"]: c["name"] for c in info["controls"]}
    places = {names.get(c["description"]): i for i, c in enumerate(root.controls)}
    name = names.get(root.controls[index]["description"])
    tr = oracles.translator(info.get("language", "en"))
    done = []
    for other, label in oracles.SETUPS.get(info["cls"], {}).get(name, []):
        if len(_options(nb, root, index)[0]) > 1:
            break
        options, current = _options(nb, root, places[other])
        target = options.index(oracles._spaces(tr(label)))
        if target != current:
            done.append(_check_change(nb, root, places[other], info, shots, stem,
                                      step=target - current))
    return done


def _check_change(nb, root, index, info, shots: Path, stem: str, step: int = 1) -> str:
    """Change control ``index`` of ``root`` (a menu: to the option ``step``
    places on); assert the DOM followed."""
    before = nb.state(root)
    exp_before = oracles.expected(info, before["controls"]) if info else None
    action = change_control(nb, root, index, step=step)
    value_before = before["controls"][index]["value"]
    if action is None:   # the menu offers only the current value (the rules allow no other)
        opened = _open_menu(nb, root, index, info, shots, stem)
        if opened and len(_options(nb, root, index)[0]) > 1:
            return " then ".join([*opened, _check_change(nb, root, index, info, shots, stem)])
        ctl = root.controls[index]
        warnings.warn(f"{ctl['kind']} {ctl['description']!r} offers only {value_before!r} "
                      "here: not driven")
        return f"{ctl['kind']} {ctl['description']!r} offers one value only"

    def done(state):
        if state["controls"][index]["value"] == value_before:
            return False
        if info is None:
            return (state["readouts"] != before["readouts"]
                    or state["images"] != before["images"])
        try:  # mid-update the DOM can show a combination actmem refuses
            exp = oracles.expected(info, state["controls"])
        except (ValueError, TypeError, LookupError):
            return False
        if oracles.mismatches(info, exp, state["named"]):
            return False
        return exp.figure == exp_before.figure or state["images"] != before["images"]

    after = wait_settled(nb, root, done)
    ctl = root.controls[index]
    label = f"{ctl['kind']} {ctl['description']!r} ({action})"
    try:
        _assert_followed(nb, info, label, index, value_before, before, after, exp_before)
    except AssertionError:
        _screenshot(nb, root, shots / f"{stem}__{root.name}__FAILED-{index:02d}-"
                    f"{_slug(ctl['description'] or ctl['kind'])}.png")
        raise
    return label


def _screenshot(nb, root, path: Path) -> None:
    """The widget output ``root`` as a PNG at ``path`` (a failure to take it
    is a warning: not the widget's fault)."""
    try:
        nb.root_locator(root).screenshot(path=str(path), timeout=10_000)
    except Exception as e:
        warnings.warn(f"screenshot {path.name} failed: {e}")


def _assert_followed(nb, info, label, index, value_before, before, after, exp_before) -> None:
    """The DOM after a change shows the new value, the readouts actmem
    computes for the controls shown, and a new PNG where the figure's inputs
    changed; no problem on the page."""
    assert not after.get("timed_out") or after.get("controls"), f"{label}: output vanished"
    assert after["controls"][index]["value"] != value_before, \
        f"{label}: the control still shows {value_before!r}"
    if info is None:
        assert (after["readouts"] != before["readouts"]
                or after["images"] != before["images"]), \
            f"{label}: no readout and no figure changed"
    else:
        assert after.get("explorer"), \
            f"{info['cls']} {label}: no element with class actmem-explorer in the output"
        exp = oracles.expected(info, after["controls"])
        bad = oracles.mismatches(info, exp, after["named"])
        assert not bad, (f"{info['cls']} {label}: readouts do not show what actmem "
                         f"computes for {oracles.control_values(info, after['controls'])}:\n"
                         + "\n".join(bad))
        if exp.figure != exp_before.figure:
            assert after["images"] and after["images"] != before["images"], \
                f"{info['cls']} {label}: the figure's inputs changed but its PNG did not"
    problems = _page_problems(nb)
    assert not problems, f"{label}:\n" + "\n".join(problems)


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_controls(runs, notebook, subtests, screenshot_dir):
    nb, rec = runs.get(notebook)
    if rec["error"] is not None:
        pytest.fail(f"{notebook}: Run All failed ({rec['error']}); see test_run_all",
                    pytrace=False)
    roots = nb.roots()
    controls = [(r, i) for r in roots for i, c in enumerate(r.controls)
                if c["kind"] not in UNSUPPORTED]
    if not controls:
        pytest.skip(f"{notebook} has no widget controls")
    if not rec["explorers"]:
        pytest.fail(f"{notebook}: the kernel probe found no actmem explorer "
                    f"behind {len(roots)} widget outputs", pytrace=False)
    stem = file_stem(notebook)
    for root in roots:
        model_id = rec["model_ids"].get((root.cell, root.output))
        info = rec["explorers"].get(model_id)
        if info is None:
            warnings.warn(f"{notebook} {root.name}: not an actmem explorer; "
                          "only checking that something changed")
        elif info["cls"] not in oracles.ORACLES:
            with subtests.test(msg=f"{root.name} {info['cls']}"):
                pytest.fail(f"{info['cls']} has no oracle in tests/browser/oracles.py")
            continue
        for index, ctl in enumerate(root.controls):
            if ctl["kind"] in UNSUPPORTED:
                warnings.warn(f"{notebook} {root.name}: {ctl['kind']} "
                              f"{ctl['description']!r} not driven")
                continue
            with subtests.test(msg=f"{root.name} {ctl['kind']} {ctl['description']!r}"):
                label = _check_change(nb, root, index, info, screenshot_dir, stem)
                print(f"{notebook} {root.name}: {label} ok")
        _screenshot(nb, root, screenshot_dir / f"{stem}__{root.name}__driven.png")

"""Drive JupyterLab in Debian's Chromium with Playwright (sync API).

Shared by the browser tests (tests/browser/) and the latency benchmark
(benchmarks/widget_latency.py). Nothing here knows actmem's formulas: this
module starts one ``jupyter lab`` on 127.0.0.1, one Chromium, opens a
notebook, runs all cells through the menu as a person would, finds the
widget controls, readouts (an actmem explorer's by their CSS classes
``actmem-readout-<name>``) and figures that ipywidgets put in the DOM and
changes controls with the mouse or keyboard. Expected values come from
``oracles.py``.

Every wait is bounded; ``LabServer.stop`` and ``Browser.close`` always end
the processes they started.
"""

from __future__ import annotations

import ast
import atexit
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_port import served_port

CHROMIUM = os.environ.get("ACTMEM_CHROMIUM", "/usr/bin/chromium")
"""The browser Playwright drives (``playwright install`` cannot download here)."""

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
"""Flags known to work on a closed network as root (no sandbox)."""

HERE = Path(__file__).resolve().parent
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = ROOT / "artifacts"

VISIBLE_NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"
"""The notebook in the current tab (hidden tabs stay in the DOM)."""

SERVER_START_S = 90
RUN_ALL_S = 900
"""A wait, not a speed assert: the pipeline notebook's Run All (it measures) was still busy
after 300 s in a fresh-clone run of the whole suite (two workers) at load 10-19 on 2 cores."""
SETTLE_S = 20

# JupyterLab user settings for the temporary server: every cell in the DOM
# (no virtual windowing), no news or update toasts, no autosave.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
        {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings":
        {"autosave": False},
}


def missing_requirements(path: Path) -> list[str]:
    """Optional modules the notebook's metadata requires
    (``"actmem": {"requires": [...]}``) that cannot be imported."""
    metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    needs = metadata.get("actmem", {}).get("requires", [])
    return [m for m in needs if importlib.util.find_spec(m) is None]


def notebook_paths(folder: Path = NOTEBOOKS) -> list[Path]:
    """Every notebook in ``folder``, in name order, then those of its
    language folders (``zh/``); checkpoints excluded."""
    return [*sorted(p for p in folder.glob("*.ipynb") if p.is_file()),
            *sorted(p for p in folder.glob("*/*.ipynb")
                    if p.is_file() and ".ipynb_checkpoints" not in p.parts)]


def notebook_names(folder: Path = NOTEBOOKS) -> list[str]:
    """:func:`notebook_paths` as paths relative to ``folder``
    (``01_variables.ipynb``, ``zh/01_variables.ipynb``): what the server
    and the tests call them."""
    return [p.relative_to(folder).as_posix() for p in notebook_paths(folder)]


def file_stem(name: str) -> str:
    """A notebook name as a file-name stem: ``zh/01_variables.ipynb`` ->
    ``zh-01_variables``."""
    return name.removesuffix(".ipynb").replace("/", "-")


# --------------------------------------------------------------- the server

class LabServer:
    """``jupyter lab`` on 127.0.0.1, token and password off, on ``root_dir``.

    Settings, workspaces, runtime (kernel connection files) and IPython
    profile live in a private temporary folder, so nothing of the user's
    configuration leaks in.
    """

    def __init__(self, root_dir: Path, tcp_nodelay: bool = True):
        self.root_dir = Path(root_dir)
        self.tcp_nodelay = tcp_nodelay  # kernel websockets without Nagle (nodelay.py)
        self.home = Path(tempfile.mkdtemp(prefix="actmem-lab-"))
        self.port: int | None = None  # chosen by the server (jupyter_port.py)
        self.url = ""
        self.log_path = self.home / "server.log"
        self.runtime_dir = self.home / "runtime"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "LabServer":
        settings = self.home / "settings"
        for name, value in LAB_SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        env = dict(os.environ,
                   JUPYTER_RUNTIME_DIR=str(self.runtime_dir),
                   JUPYTER_CONFIG_DIR=str(self.home / "config"),
                   JUPYTER_PLATFORM_DIRS="1",
                   IPYTHONDIR=str(self.home / "ipython"),
                   PYDEVD_DISABLE_FILE_VALIDATION="1")
        if self.tcp_nodelay:  # the server imports nodelay.py from this folder
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser",
               "--allow-root", "--ip=127.0.0.1", "--port=0",
               "--IdentityProvider.token=", "--ServerApp.password=",
               "--ServerApp.disable_check_xsrf=True",
               f"--ServerApp.root_dir={self.root_dir}",
               f"--LabApp.user_settings_dir={settings}",
               f"--LabApp.workspaces_dir={self.home / 'workspaces'}",
               "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        if self.tcp_nodelay:
            cmd.append("--ServerApp.kernel_websocket_connection_class="
                       "nodelay.NoDelayConnection")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        deadline = time.monotonic() + SERVER_START_S
        self.port = served_port(self.runtime_dir, self.proc, SERVER_START_S)
        self.url = f"http://127.0.0.1:{self.port}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.proc.returncode}):\n"
                                   + self.log_tail())
            try:
                with urllib.request.urlopen(self.url + "/api/status", timeout=2):
                    return self
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise TimeoutError(f"jupyter lab not up after {SERVER_START_S}s:\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-n:])
        except OSError:
            return ""

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(self.url + path, method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def kernel_for(self, notebook_name: str) -> dict | None:
        """The session's kernel (id, execution_state) for a notebook path."""
        for s in self.api("/api/sessions"):
            if s.get("path") == notebook_name and s.get("kernel"):
                return s["kernel"]
        return None

    def shutdown_kernel_for(self, notebook_name: str) -> None:
        for s in self.api("/api/sessions"):
            if s.get("path") == notebook_name:
                try:
                    self.api(f"/api/sessions/{s['id']}", method="DELETE")
                except OSError:
                    pass

    def stop(self) -> None:
        """Terminate the server's process group (kernels included), bounded."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        if getattr(self, "_log", None):
            self._log.close()
        shutil.rmtree(self.home, ignore_errors=True)


def copy_notebooks(dest: Path, source: Path = NOTEBOOKS) -> Path:
    """A temporary copy of ``notebooks/`` (the server never writes the repo)."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(
        ".ipynb_checkpoints", "__pycache__"), dirs_exist_ok=True)
    return dest


# --------------------------------------------------------------- the browser

_PLAYWRIGHT = []  # the process's one Playwright, once started


def playwright():
    """The process's one Playwright (sync API), started on first use and
    stopped at exit. A second ``sync_playwright()`` in a process that has one
    running fails ("Sync API inside the asyncio loop"), so the browser suite
    and tests/test_lite_kernel.py, which can share an xdist worker, share it."""
    if not _PLAYWRIGHT:
        from playwright.sync_api import sync_playwright
        _PLAYWRIGHT.append(sync_playwright().start())
        atexit.register(_PLAYWRIGHT[0].stop)
    return _PLAYWRIGHT[0]


class Browser:
    """One headless Chromium (fresh user-data-dir) through Playwright."""

    def __init__(self, viewport=(1280, 900)):
        self.user_data = tempfile.mkdtemp(prefix="actmem-chromium-")
        self.context = playwright().chromium.launch_persistent_context(
            self.user_data, executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": viewport[0], "height": viewport[1]},
            timeout=60_000)
        self.context.set_default_timeout(30_000)
        self.viewport = viewport

    def new_page(self):
        return self.context.new_page()

    def close(self) -> None:
        try:
            self.context.close()
        finally:
            shutil.rmtree(self.user_data, ignore_errors=True)


# ------------------------------------------------------------- the notebook

# In-page helpers, installed once per page. ``roots`` are top-level cell
# outputs that hold widgets; controls, readouts and images are found inside.
PAGE_JS = r"""
(() => {
  if (window.__actmem) return;
  const CONTROL_SELECTOR = [
    '.widget-dropdown', '.widget-checkbox', '.widget-slider',
    '.widget-toggle-buttons', '.widget-radio', '.widget-select',
    '.widget-text', '.widget-toggle-button', '.widget-textarea',
    '.widget-colorpicker', '.widget-datepicker', '.widget-button'].join(',');
  const READOUT_SELECTOR = 'div.widget-label, .widget-html-content, .widget-htmlmath-content';
  function codeCells() { return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')]; }
  function roots() {
    const out = [];
    codeCells().forEach((cell, ci) => {
      const area = cell.querySelector(':scope .jp-Cell-outputWrapper .jp-OutputArea');
      if (!area) return;
      [...area.children].forEach((child, oi) => {
        if (child.querySelector('.jupyter-widgets')) out.push({cell: ci, output: oi, el: child});
      });
    });
    return out;
  }
  function describe(el) {
    const lab = el.querySelector(':scope > label.widget-label');
    let d = lab ? lab.textContent.replace(/\u200b/g, '').trim() : '';
    if (!d) { const s = el.querySelector('.widget-label-basic span'); d = s ? s.textContent.trim() : ''; }
    if (!d && el.tagName === 'BUTTON') d = el.textContent.trim();
    return d.replace(/\u200b/g, '');
  }
  function kind(el) {
    const c = el.classList;
    if (c.contains('widget-dropdown')) return 'dropdown';
    if (c.contains('widget-checkbox')) return 'checkbox';
    if (c.contains('widget-slider')) return 'slider';
    if (c.contains('widget-toggle-buttons')) return 'toggle-buttons';
    if (c.contains('widget-radio')) return 'radio';
    if (c.contains('widget-select')) return 'select';
    if (c.contains('widget-toggle-button')) return 'toggle-button';
    if (c.contains('widget-text')) return el.querySelector('input[type=number]') ? 'number' : 'text';
    if (c.contains('widget-button')) return 'button';
    return [...c].filter(x => x.startsWith('widget-')).join(' ');
  }
  function value(el) {
    const k = kind(el);
    if (k === 'dropdown' || k === 'select') { const s = el.querySelector('select'); const o = s && s.selectedOptions[0]; return o ? o.textContent : null; }
    if (k === 'checkbox') return el.querySelector('input').checked;
    if (k === 'slider') { const r = el.querySelector('.widget-readout'); return r ? r.textContent.trim() : null; }
    if (k === 'toggle-buttons') { const b = el.querySelector('.mod-active'); return b ? b.textContent.trim() : null; }
    if (k === 'radio') { const i = el.querySelector('input:checked'); return i ? i.value : null; }
    if (k === 'toggle-button') return el.classList.contains('mod-active');
    if (k === 'number' || k === 'text') return el.querySelector('input, textarea').value;
    return null;
  }
  function controls(root) {
    // outermost matches only (a toggle-button inside toggle-buttons is not its own control)
    return [...root.querySelectorAll(CONTROL_SELECTOR)].filter(el =>
      !el.parentElement.closest(CONTROL_SELECTOR) || !root.contains(el.parentElement.closest(CONTROL_SELECTOR)));
  }
  function readouts(root) {
    return [...root.querySelectorAll(READOUT_SELECTOR)].filter(el => !el.closest(CONTROL_SELECTOR));
  }
  // Readouts an actmem explorer names with the CSS class actmem-readout-<name>
  // (name -> innerText of every element carrying it, normally one).
  const NAMED_PREFIX = 'actmem-readout-';
  function namedReadouts(root) {
    const out = {};
    root.querySelectorAll('[class*="' + NAMED_PREFIX + '"]').forEach(el => {
      const cls = [...el.classList].find(c => c.startsWith(NAMED_PREFIX));
      if (!cls) return;
      const text = el.matches(READOUT_SELECTOR) ? el : (el.querySelector(READOUT_SELECTOR) || el);
      (out[cls.slice(NAMED_PREFIX.length)] ||= []).push(text.innerText);
    });
    return out;
  }
  function images(root) { return [...root.querySelectorAll('img')]; }
  async function digest(src) {
    if (!src) return '';
    let buf;
    if (src.startsWith('data:')) buf = new TextEncoder().encode(src);
    else buf = await (await fetch(src)).arrayBuffer();
    const h = await crypto.subtle.digest('SHA-256', buf);
    return [...new Uint8Array(h)].map(b => b.toString(16).padStart(2, '0')).join('');
  }
  function rootAt(ci, oi) { const r = roots().find(r => r.cell === ci && r.output === oi); return r && r.el; }
  window.__actmem = {
    roots: () => roots().map(r => ({cell: r.cell, output: r.output,
        controls: controls(r.el).map(c => ({kind: kind(c), description: describe(c), value: value(c)})),
        readouts: readouts(r.el).map(e => e.innerText),
        images: images(r.el).length})),
    state: async (ci, oi) => {
      const root = rootAt(ci, oi);
      if (!root) return null;
      return {controls: controls(root).map(c => ({kind: kind(c), description: describe(c), value: value(c)})),
              readouts: readouts(root).map(e => e.innerText),
              named: namedReadouts(root),
              explorer: root.querySelector('.actmem-explorer') !== null,
              images: await Promise.all(images(root).map(i => digest(i.getAttribute('src'))))};
    },
    controlEl: (ci, oi, k) => controls(rootAt(ci, oi))[k],
    rootEl: (ci, oi) => rootAt(ci, oi),
    prompts: () => codeCells().filter(c => c.classList.contains('jp-CodeCell'))
        .map(c => { const p = c.querySelector('.jp-InputPrompt'); return p ? p.textContent.trim() : ''; }),
    // Latency probe: timestamps (performance.now) of the user's input event on
    // a control and of the last change of each readout's text / image's src.
    // textContent, not innerText: reading innerText lays the page out, work
    // a learner's browser would not do at each change.
    arm: (ci, oi) => {
      const root = rootAt(ci, oi);
      const rs = readouts(root), is = images(root);
      const probe = {t0: null, readout: rs.map(() => null), image: is.map(() => null),
                     texts: rs.map(e => e.textContent), srcs: is.map(i => i.getAttribute('src'))};
      const onInput = () => { if (probe.t0 === null) probe.t0 = performance.now(); };
      for (const ev of ['change', 'input', 'keydown', 'pointerdown', 'mousedown', 'click'])
        root.addEventListener(ev, onInput, {capture: true});
      probe.last = performance.now();
      probe.observer = new MutationObserver(() => {
        const now = performance.now();
        probe.last = now;
        rs.forEach((e, i) => { const t = e.textContent; if (t !== probe.texts[i]) { probe.texts[i] = t; probe.readout[i] = now; } });
        is.forEach((e, i) => { const s = e.getAttribute('src'); if (s !== probe.srcs[i]) { probe.srcs[i] = s; probe.image[i] = now; } });
      });
      probe.observer.observe(root, {subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['src']});
      probe.detach = () => { probe.observer.disconnect(); for (const ev of ['change', 'input', 'keydown', 'pointerdown', 'mousedown', 'click']) root.removeEventListener(ev, onInput, {capture: true}); };
      window.__actmem.probe = probe;
    },
    // Resolves with disarm()'s answer once the input was seen, every readout
    // (and image) changed, and nothing changed for quietMs; unseenMs of quiet
    // when some never changed; timeoutMs at most. Waited for in the page: a
    // poll from outside would take CPU from the kernel and the page it measures.
    settle: (quietMs, unseenMs, timeoutMs) => new Promise(resolve => {
      const start = performance.now();
      const check = () => {
        const p = window.__actmem.probe, now = performance.now();
        const seen = [p.readout, p.image].every(xs => !xs.length || xs.some(x => x !== null));
        if ((p.t0 !== null && now - p.last >= (seen ? quietMs : unseenMs))
            || now - start >= timeoutMs) resolve(window.__actmem.disarm());
        else setTimeout(check, 50);
      };
      setTimeout(check, 50);
    }),
    disarm: () => { const p = window.__actmem.probe; if (!p) return null; p.detach();
      window.__actmem.probe = null;
      return {t0: p.t0, readout: p.readout, image: p.image}; },
  };
})();
"""


@dataclass
class Root:
    """A top-level cell output that holds widgets (an explorer box, say)."""
    cell: int          # index among all cells of the notebook
    output: int        # index of the output in that cell
    controls: list     # [{kind, description, value}]
    readouts: list     # innerText of every Label/HTML readout
    images: int        # number of <img> inside

    @property
    def name(self) -> str:
        return f"cell{self.cell}-out{self.output}"


@dataclass
class NotebookPage:
    """A notebook opened in JupyterLab in its own tab."""
    server: LabServer
    page: object
    name: str
    page_errors: list = field(default_factory=list)

    # -- opening and running -------------------------------------------
    @classmethod
    def open(cls, server: LabServer, browser: Browser, name: str) -> "NotebookPage":
        page = browser.new_page()
        nb = cls(server, page, name)
        page.on("pageerror", lambda e: nb.page_errors.append(str(e)))
        # ?reset: start from an empty workspace (no tabs of earlier notebooks)
        page.goto(f"{server.url}/lab/tree/{name}?reset", timeout=60_000)
        page.wait_for_selector(VISIBLE_NOTEBOOK + " .jp-Cell", timeout=60_000)
        nb._wait_kernel_idle(60)
        page.add_init_script(PAGE_JS)
        page.evaluate(PAGE_JS)
        # hide the file browser: the notebook gets the whole width
        if page.locator("#jp-left-stack:not(.lm-mod-hidden)").count():
            page.keyboard.press("Control+b")
        return nb

    def _wait_kernel_idle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            k = self.server.kernel_for(self.name)
            if k and k.get("execution_state") == "idle" and self.page.locator(
                    ".jp-Notebook-ExecutionIndicator[data-status='idle']").count():
                return
            time.sleep(0.2)
        raise TimeoutError(f"{self.name}: kernel not idle after {timeout_s}s")

    def run_all(self, timeout_s: float = RUN_ALL_S) -> float:
        """Run > Run All Cells with the mouse; wait until every code cell ran
        and the kernel is idle. Returns the seconds it took."""
        page = self.page
        t0 = time.monotonic()
        n_code = len(page.evaluate("window.__actmem.prompts()"))
        for attempt in range(3):
            page.locator(VISIBLE_NOTEBOOK).first.click(position={"x": 5, "y": 5})
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
            try:  # the run has started once some prompt shows [*] or a number
                page.wait_for_function(
                    "() => window.__actmem.prompts().some(p => p !== '[ ]:' && p !== '')",
                    timeout=10_000)
                break
            except Exception:
                page.keyboard.press("Escape")
                if attempt == 2:
                    raise
        deadline = t0 + timeout_s
        while True:
            prompts = page.evaluate("window.__actmem.prompts()")
            busy = any("*" in p for p in prompts)
            k = self.server.kernel_for(self.name)
            if not busy and k and k.get("execution_state") == "idle" and page.locator(
                    ".jp-Notebook-ExecutionIndicator[data-status='idle']").count():
                time.sleep(0.5)  # let widget views finish rendering
                prompts = page.evaluate("window.__actmem.prompts()")
                if not any("*" in p for p in prompts):
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: Run All not finished after {timeout_s}s; "
                                   f"prompts {prompts}")
            time.sleep(0.25)
        self.n_code = n_code
        return time.monotonic() - t0

    def save(self) -> dict:
        """Save from the browser (Ctrl+S) and return the notebook JSON on disk."""
        path = self.server.root_dir / self.name
        before = path.stat().st_mtime_ns
        self.page.locator(VISIBLE_NOTEBOOK).first.click(position={"x": 5, "y": 5})
        self.page.keyboard.press("Control+s")
        deadline = time.monotonic() + 20
        while path.stat().st_mtime_ns == before:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: Ctrl+S did not save within 20s")
            time.sleep(0.1)
        while True:  # the server may still be writing
            try:
                time.sleep(0.2)
                return json.loads(path.read_text())
            except ValueError:
                if time.monotonic() > deadline:
                    raise

    # -- what the person sees --------------------------------------------
    def notebook_text(self) -> str:
        return self.page.locator(VISIBLE_NOTEBOOK).first.inner_text()

    def screenshot(self, path: Path, full: bool = True) -> Path:
        """The whole notebook: grow the viewport to the notebook's height."""
        page = self.page
        path.parent.mkdir(parents=True, exist_ok=True)
        size = page.viewport_size
        if full:
            height = page.evaluate("""() => {
                const n = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
                if (!n) return 0;
                n.scrollTop = 0;
                return n.scrollHeight; }""")
            tall = min(max(size["height"], height + 250), 16000)
            page.set_viewport_size({"width": size["width"], "height": tall})
            time.sleep(0.4)
        try:
            page.screenshot(path=str(path))
        finally:
            if full:
                page.set_viewport_size(size)
        return path

    def roots(self) -> list[Root]:
        return [Root(**r) for r in self.page.evaluate("window.__actmem.roots()")]

    def state(self, root: Root) -> dict:
        """What the output shows now: ``controls`` [{kind, description,
        value}], ``readouts`` (innerText of every Label/HTML, in page order),
        ``named`` (readout name -> [innerText] for elements with the CSS
        class ``actmem-readout-<name>``), ``explorer`` (whether an element
        has the class ``actmem-explorer``) and ``images`` (SHA-256 of each
        image's src)."""
        return self.page.evaluate("([c, o]) => window.__actmem.state(c, o)", [root.cell, root.output])

    def root_locator(self, root: Root):
        return self.page.locator(VISIBLE_NOTEBOOK + " .jp-Cell").nth(
            root.cell).locator(".jp-Cell-outputWrapper .jp-OutputArea").first.locator(
            ":scope > *").nth(root.output)

    def control_handle(self, root: Root, index: int):
        return self.page.evaluate_handle("([c, o, k]) => window.__actmem.controlEl(c, o, k)",
                                         [root.cell, root.output, index]).as_element()

    def close(self) -> None:
        try:
            self.server.shutdown_kernel_for(self.name)
        finally:
            self.page.close()


# ------------------------------------------------------------ the controls

UNSUPPORTED = ("text", "button")
"""Control kinds that have no 'next value' to set (skipped, with a note)."""


def change_control(nb: NotebookPage, root: Root, index: int, step: int = 1) -> str | None:
    """Change control ``index`` of ``root`` as a person would; return a
    description of what was done, or None for a dropdown that offers one
    value only (nothing to change). ``step`` picks the option ``step`` places
    further on (wrapping), so repeated calls walk through the options."""
    ctl = root.controls[index]
    el = nb.control_handle(root, index)
    if el is None:
        raise LookupError(f"control {index} of {root.name} is gone")
    el.scroll_into_view_if_needed()
    kind = ctl["kind"]
    if kind in ("dropdown", "select"):
        select = el.query_selector("select")
        options = [o.text_content() for o in select.query_selector_all("option")]
        current = options.index(select.evaluate("s => s.selectedOptions[0].textContent"))
        if len(options) < 2:   # a coupled menu narrowed to one value: nothing to pick
            return None
        target = (current + step) % len(options)
        select.select_option(index=target)  # a mouse pick from the list
        return f"picked {options[target]!r} (was {options[current]!r})"
    if kind == "checkbox":
        el.query_selector("input").click()
        return "clicked the checkbox"
    if kind == "toggle-button":
        el.click()
        return "clicked the toggle"
    if kind == "slider":
        handle = el.query_selector(".noUi-handle")
        now, top = (float(handle.get_attribute(a)) for a in ("aria-valuenow", "aria-valuemax"))
        key = "ArrowLeft" if now >= top else "ArrowRight"
        handle.focus()
        nb.page.keyboard.press(key)
        return f"pressed {key} on the slider"
    if kind in ("toggle-buttons", "radio"):
        items = el.query_selector_all("button" if kind == "toggle-buttons" else "input")
        active = [i for i, b in enumerate(items) if b.evaluate(
            "b => b.classList.contains('mod-active') || b.checked === true")]
        current = active[0] if active else 0
        target = (current + step) % len(items)
        items[target].click()
        return f"clicked option {target}"
    if kind == "number":
        box = el.query_selector("input")
        box.focus()
        nb.page.keyboard.press("ArrowUp")
        nb.page.keyboard.press("Enter")
        return "pressed ArrowUp, Enter in the number box"
    raise NotImplementedError(f"cannot drive a {kind!r} control")


def wait_settled(nb: NotebookPage, root: Root, done, timeout_s: float = SETTLE_S,
                 quiet_s: float = 0.3) -> dict:
    """Poll ``state(root)`` until ``done(state)`` is true and the kernel is
    idle and the state has not changed for ``quiet_s``; return the state
    (the last one seen on timeout, with ``timed_out`` set)."""
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while True:
        state = nb.state(root)
        if state != last:
            last, since = state, time.monotonic()
        k = nb.server.kernel_for(nb.name)
        idle = k is not None and k.get("execution_state") == "idle"
        if state is not None and idle and done(state) and time.monotonic() - since >= quiet_s:
            return state
        if time.monotonic() > deadline:
            return dict(state or {}, timed_out=True)
        time.sleep(0.05)


# ------------------------------------------------------------- the kernel

PROBE_CODE = r"""
def __actmem_probe():
    import json, gc
    def jsonable(x):
        try:
            json.dumps(x)
            return x
        except TypeError:
            return repr(x)
    out = {}
    for o in gc.get_objects():
        try:
            if not type(o).__module__.startswith("actmem"):
                continue
            box, controls, readouts = o.box, o.controls, o.readouts
        except Exception:
            continue
        if not (isinstance(controls, dict) and isinstance(readouts, dict)
                and getattr(box, "model_id", None)):
            continue
        layer = getattr(o, "layer", None)
        ctl = []
        for name, c in controls.items():
            labels = getattr(c, "_options_labels", None)
            values = getattr(c, "_options_values", None)
            ctl.append({"name": name, "description": getattr(c, "description", ""),
                        "options": ({str(k): jsonable(v) for k, v in zip(labels, values)}
                                    if labels is not None and values is not None else None)})
        out[box.model_id] = {
            "cls": type(o).__name__,
            "language": getattr(o, "language", "en"),
            "layer": {k: jsonable(v) for k, v in layer.items()} if isinstance(layer, dict) else None,
            "controls": ctl,
            "readouts": list(readouts),
            "image": getattr(o, "image", None) is not None,
        }
    return json.dumps(out)
"""


def probe_explorers(server: LabServer, notebook_name: str, timeout_s: float = 20) -> dict:
    """Ask the notebook's kernel (a second, silent client) which actmem
    explorers exist: box model id -> class, fixed layer sizes, control and
    readout names in display order. Only what the constructor was given
    and how the box is laid out; never a computed number."""
    from jupyter_client import BlockingKernelClient
    kernel = server.kernel_for(notebook_name)
    if not kernel:
        return {}
    cf = server.runtime_dir / f"kernel-{kernel['id']}.json"
    if not cf.exists():
        return {}
    client = BlockingKernelClient(connection_file=str(cf))
    client.load_connection_file()
    client.start_channels()
    try:
        msg_id = client.execute(PROBE_CODE, silent=True, store_history=False,
                                user_expressions={"r": "__actmem_probe()"})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            reply = client.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") != msg_id:
                continue
            expr = reply["content"].get("user_expressions", {}).get("r", {})
            if expr.get("status") != "ok":
                return {}
            return json.loads(ast.literal_eval(expr["data"]["text/plain"]))
        return {}
    finally:
        client.stop_channels()


def widget_model_ids(nb_json: dict) -> dict:
    """(cell index, output index) -> widget model id, from a saved notebook."""
    ids = {}
    for ci, cell in enumerate(nb_json.get("cells", [])):
        for oi, out in enumerate(cell.get("outputs", []) or []):
            view = (out.get("data") or {}).get("application/vnd.jupyter.widget-view+json")
            if view:
                ids[(ci, oi)] = view.get("model_id")
    return ids


def error_outputs(nb_json: dict) -> list[str]:
    """'cell N: EName: value' for every error output in a saved notebook."""
    errors = []
    for ci, cell in enumerate(nb_json.get("cells", [])):
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "error":
                errors.append(f"cell {ci}: {out.get('ename')}: {out.get('evalue')}")
    return errors


def percentile(values, q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in [0, 100]."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

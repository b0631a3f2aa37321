"""`rmlib lab` in a real browser: headless Chromium (the system's, by path; Playwright drives it)
opens 05_results in JupyterLab over a finished run, runs every cell, and finds no error output
and at least one figure, and no notification asking about Jupyter news (the lab's own settings
answer it; the user's settings folder is a fresh one). The screenshot is kept in the test's tmp
folder; its path is printed.

The run is the scripted one of tests/results_run.py (real demo pairs, every table a finished
run's 04 leaves, built in seconds), not a fresh pipeline run. Outside CI the test skips when no
Chromium is installed; in CI (CI=true) a missing browser fails it (.ci/run installs Debian's).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright
from results_run import build_run

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "05_results.ipynb"
# Run All of 05: ~30 s on an idle 2-core CPU, under a minute with both cores loaded; the limit
# only catches a hang (then the prompts, outputs, screenshot and JupyterLab's log say where)
CELL_TIMEOUT_MS = 300_000
# Chromium's Debian binary; RMLIB_CHROMIUM names another one
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
IN_CI = os.environ.get("CI", "").lower() == "true"
# JupyterLab's announcements plugin asks this on first open unless fetchNews is set
NEWS_QUESTION = re.compile("official Jupyter news", re.IGNORECASE)


@pytest.fixture
def chromium() -> str:
    """The system Chromium's path; skips outside CI when there is none, fails in CI (asked
    before the lab starts: a skip costs nothing)."""
    named = os.environ.get("RMLIB_CHROMIUM")
    found = named or next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    if found:
        return found
    if IN_CI:
        pytest.fail("no Chromium on PATH in CI: .ci/run installs Debian's `chromium`")
    pytest.skip("no Chromium installed (apt-get install chromium, or set RMLIB_CHROMIUM)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    """`rmlib lab` on a finished run, with its own settings (autosave off: the test must not
    write the notebook source) and a token; yields the notebook's URL."""
    run = build_run(tmp_path / "run")
    # a fresh user: only autosave is set here; the news question is answered by the lab's own
    # settings (rmlib/workbook/lab_settings), which the test checks
    plugin = tmp_path / "lab-settings" / "@jupyterlab" / "docmanager-extension"
    plugin.mkdir(parents=True)
    (plugin / "plugin.jupyterlab-settings").write_text('{"autosave": false}')
    port, token = free_port(), "rmlib-browser-test"
    args = [
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--LabApp.user_settings_dir={tmp_path / 'lab-settings'}",
        f"--LabApp.workspaces_dir={tmp_path / 'lab-workspaces'}",
        "--allow-root",
        # window.jupyterapp, as JupyterLab's own Playwright tests (Galata) drive it
        "--LabApp.expose_app_in_browser=True",
    ]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "rmlib", "lab", "--run", str(run.path), "--", *args],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(f"{base}/api/status?token={token}", server, tmp_path / "lab.log")
        yield f"{base}/lab/tree/{NOTEBOOK}?token={token}"
    finally:
        server.terminate()  # JupyterLab shuts its kernels down on SIGTERM
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _wait_for(url: str, server: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"rmlib lab exited ({server.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer in {timeout} s:\n{log.read_text()[-3000:]}")


# the prompts of 05's panel only: another document opened in the lab must not count
PROMPTS = (
    "() => [...window.jupyterapp.shell.currentWidget.node"
    ".querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]"
)
# Run All has finished: no cell queued or running ("[*]"), the first one has run ("[1]"); after
# an error JupyterLab leaves the cells below unrun ("[ ]")
FINISHED = f"""() => {{
    const prompts = ({PROMPTS})().map(p => p.textContent);
    const ran = prompts.length > 0 && /\\[\\d+\\]/.test(prompts[0]);
    return ran && !prompts.some(t => t.includes('*'));
}}"""


APP_READY = "() => window.jupyterapp !== undefined && window.jupyterapp.shell.currentWidget"
RUN_ALL = """async () => {
    const app = window.jupyterapp;
    await app.started;
    await app.restored;
    const panel = app.shell.currentWidget;
    if (!panel.context.path.endsWith('NOTEBOOK')) throw new Error('current: ' + panel.context.path);
    await panel.context.ready;
    await panel.sessionContext.ready;
    // not awaited: it resolves when every cell has run, and a hang shows in FINISHED's wait
    void app.commands.execute('notebook:run-all-cells');
}""".replace("NOTEBOOK", NOTEBOOK)


@pytest.mark.slow
def test_05_results_runs_in_jupyterlab_with_figures_and_no_errors(chromium, lab, tmp_path, capsys):
    with sync_playwright() as p:
        # as root Chromium needs --no-sandbox; a container's small /dev/shm crashes its tabs
        flags = ["--no-sandbox", "--disable-dev-shm-usage"]
        browser = p.chromium.launch(executable_path=chromium, args=flags)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(lab)
        page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=120_000)
        # Run All through JupyterLab's own command once the notebook's kernel session is ready,
        # as Galata does. Clicking the Run menu once the status read "Idle" passed here but
        # timed out once in CI with no cell finished (not reproduced, even under load): the
        # command leaves no focus or menu state to race, and a failure now lists the prompts
        page.wait_for_function(APP_READY, timeout=120_000)
        page.evaluate(RUN_ALL)
        shot = tmp_path / "05_results.png"
        try:
            page.wait_for_function(FINISHED, timeout=CELL_TIMEOUT_MS, polling=1000)
        except PlaywrightTimeout:
            page.screenshot(path=str(shot))
            log = (tmp_path / "lab.log").read_text()[-3000:]
            prompts = page.evaluate(f"() => ({PROMPTS})().map(p => p.textContent)")
            outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
            pytest.fail(
                f"Run All did not finish (screenshot: {shot}); the cells' prompts: {prompts}; "
                f"their last outputs: {[o[-300:] for o in outputs[-5:]]}; "
                f"JupyterLab's log:\n{log}"
            )
        prompts = page.evaluate(f"() => ({PROMPTS})().map(p => p.textContent)")
        errors = page.locator(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
        ).all_inner_texts()
        figures = page.locator(".jp-OutputArea-output img")
        n_figures = figures.count()
        if n_figures:
            figures.first.scroll_into_view_if_needed()
            # JupyterLab renders the cells a scroll brings into view a frame later: without
            # this wait the screenshot caught an empty notebook panel
            try:
                figures.first.wait_for(state="visible", timeout=30_000)
                page.wait_for_timeout(1_000)
            except PlaywrightTimeout:
                pass  # the screenshot is evidence, not a check: the assertions below decide
        page.screenshot(path=str(shot))
        # asked, if at all, once the app is restored (long before Run All ends): as a toast and
        # in the notification centre's list, both in the page's text
        news = page.get_by_text(NEWS_QUESTION).all_inner_texts()
        browser.close()
    with capsys.disabled():
        print(f"\nJupyterLab screenshot of {NOTEBOOK}: {shot}")
    assert not news, f"the lab asked about Jupyter news: {news} (screenshot: {shot})"
    assert not errors, "error output in the lab:\n" + "\n---\n".join(e[:2000] for e in errors)
    unrun = [i for i, t in enumerate(prompts) if not re.search(r"\[\d+\]", t)]
    assert not unrun, f"code cells {unrun} did not run (screenshot: {shot})"
    assert n_figures >= 1, f"no figure displayed (screenshot: {shot})"

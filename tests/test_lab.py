"""`rmlib lab`'s parts without a browser: the run folder its kernels open and lock, the lab's
command, notebooks saved without outputs, and its kernels' private folder
(tests/test_lab_browser.py drives the whole in a browser)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from rmlib.generation.servers import free_ports
from rmlib.run import lock
from rmlib.run.folder import ENV_PARAMS, ENV_RUN_DIR, open_run
from rmlib.workbook import kernels, lab

ROOT = Path(__file__).resolve().parents[1]


def test_the_lab_opens_the_demo_run_folder_by_default():
    assert lab.run_folder_of(lab.DEFAULT_PARAMS) == Path("outputs") / "demo"


def test_the_lab_points_its_kernels_at_the_run_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = lab.lab_environment(Path("outputs/x"), Path("p.yaml"))
    assert env[ENV_RUN_DIR] == str(tmp_path / "outputs" / "x")  # absolute: kernels start elsewhere
    assert env[ENV_PARAMS] == str(tmp_path / "p.yaml")
    cmd = lab.lab_command(["--no-browser"])
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"] and cmd[-1] == "--no-browser"
    assert f"--ServerApp.root_dir={ROOT / 'notebooks'}" in cmd
    assert "--FileContentsManager.pre_save_hook=rmlib.workbook.lab.strip_outputs" in cmd
    # as root (containers, these machines) Jupyter starts only with --allow-root, given once
    monkeypatch.setattr(lab.os, "geteuid", lambda: 0)
    assert lab.lab_command(["--no-browser"]).count("--allow-root") == 1
    assert lab.lab_command(["--allow-root"]).count("--allow-root") == 1
    monkeypatch.setattr(lab.os, "geteuid", lambda: 1000)
    assert "--allow-root" not in lab.lab_command(["--no-browser"])


def test_the_lab_never_asks_about_jupyter_news():
    """The lab's own settings defaults (not the user's) answer the announcements plugin's
    question: fetchNews "false" ("Never"), so no "Would you like to get notified about official
    Jupyter news?" toast; values checked against the installed JupyterLab's schema (the browser
    test checks that none shows)."""
    import json

    import jsonschema
    from jupyterlab.commands import get_app_dir

    assert f"--LabApp.app_settings_dir={lab.LAB_SETTINGS}" in lab.lab_command()
    overrides = json.loads((lab.LAB_SETTINGS / "overrides.json").read_text())
    plugin = "@jupyterlab/apputils-extension:notification"
    assert overrides == {plugin: {"fetchNews": "false", "checkForUpdates": False}}
    schema_file = Path(get_app_dir(), "schemas", *plugin.split(":")).with_suffix(".json")
    schema = json.loads(schema_file.read_text())
    jsonschema.validate(overrides[plugin], schema)


def test_a_notebook_is_saved_without_outputs():
    cell = {"cell_type": "code", "source": "1", "outputs": [{"x": 1}], "execution_count": 3}
    text = {"cell_type": "markdown", "source": "# t"}
    model = {"type": "notebook", "content": {"cells": [cell, dict(text)]}}
    lab.strip_outputs(model=model, path="05_results.ipynb", contents_manager=None)
    assert model["content"]["cells"] == [{**cell, "outputs": [], "execution_count": None}, text]
    other = {"type": "file", "content": "outputs"}
    lab.strip_outputs(model=other, path="x.txt", contents_manager=None)
    assert other == {"type": "file", "content": "outputs"}


def test_a_kernel_opening_the_run_from_the_environment_holds_its_lock(tmp_path):
    """What a lab's kernel does: open_run() with no injected run_dir locks the folder until the
    process ends (an `rmlib run` on it is refused meanwhile, naming the kernel's pid)."""
    folder = tmp_path / "run"
    code = textwrap.dedent(
        f"""
        import os, sys
        os.environ[{ENV_RUN_DIR!r}] = {str(folder)!r}
        os.environ[{ENV_PARAMS!r}] = {str(ROOT / "params" / "smoke.yaml")!r}
        from rmlib.run.folder import open_run
        cfg, run = open_run(None, None)
        open_run(None, None)  # a second open in the same kernel (a rerun cell) is no conflict
        print(cfg.run.name, flush=True)
        sys.stdin.read()  # a live kernel, until the test closes stdin
        """
    )
    kernel = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert kernel.stdout.readline().strip() == "smoke"  # params.yaml written from $PARAMS
        busy = pytest.raises(lock.RunFolderBusy, match=rf"pid {kernel.pid};.*Shut Down Kernel")
        with busy, lock.holding(folder):
            pass
    finally:
        kernel.stdin.close()
        kernel.wait(timeout=60)
    with lock.holding(folder):  # the kernel's exit released it
        pass


def test_a_child_forked_by_the_kernel_does_not_keep_its_lock(tmp_path):
    """A kernel's forked child (a DataLoader worker) shares the lock's open file; once the kernel
    has exited, the folder is free though the child still runs."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "params.yaml").write_text((ROOT / "params" / "smoke.yaml").read_text())
    code = textwrap.dedent(
        f"""
        import os, sys, time
        from rmlib.run.lock import hold_until_exit
        hold_until_exit(__import__("pathlib").Path({str(folder)!r}))
        child = os.fork()
        if child == 0:  # outlives its parent, off the parent's pipes (run() waits for them)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 1)
            os.dup2(null, 2)
            time.sleep(60)
            os._exit(0)
        print(child, flush=True)
        """
    )
    kernel = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert kernel.returncode == 0, kernel.stderr[-2000:]
    child = int(kernel.stdout)
    try:
        os.kill(child, 0)  # alive
        with lock.holding(folder):  # and holding nothing
            pass
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_notebook_run_by_rmlib_run_leaves_the_lock_to_the_runner(tmp_path):
    """Papermill injects run_dir; the runner holds the lock, so the kernel must not take it."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "params.yaml").write_text((ROOT / "params" / "smoke.yaml").read_text())
    open_run(folder, None)
    with lock.holding(folder):
        pass


def _api(base: str, token: str, path: str, method: str = "GET", body: dict | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}{path}", data=data, method=method)
    req.add_header("Authorization", f"token {token}")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"null")


def _kill_processes_naming(text: str) -> None:
    """SIGKILL every process whose command line holds `text` (a killed lab's orphaned kernel)."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_text():
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, UnicodeDecodeError):
            continue


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_labs_kernels_keep_their_connection_files_in_a_private_folder(tmp_path, stop):
    """A kernel started in the real JupyterLab of `rmlib lab` writes its connection file (its
    signing key) in a private folder of that lab, not Jupyter's runtime folder: the folder goes
    when the lab stops (SIGTERM), and a killed lab's (SIGKILL) is swept by the next run."""
    tmp, runtime = tmp_path / "tmp", tmp_path / "runtime"
    tmp.mkdir()
    port, token = free_ports(1)[0], "rmlib-lab-test"
    args = ["--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}"]
    env = {**os.environ, "TMPDIR": str(tmp), "JUPYTER_RUNTIME_DIR": str(runtime)}
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "rmlib", "lab", "--run", str(tmp_path / "run"), "--", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    folder = None
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                _api(base, token, "/api/status")
                break
            except OSError:
                time.sleep(0.5)
        kernel = _api(base, token, "/api/kernels", "POST", {"name": "python3"})["id"]
        (folder,) = tmp.glob(f"{kernels.PREFIX}*")
        assert folder.name.startswith(f"{kernels.PREFIX}{server.pid}-")  # the lab's own pid
        assert (folder / f"kernel-{kernel}.json").is_file()
        assert not list(runtime.glob("kernel-*.json"))  # not in Jupyter's shared folder
        os.killpg(server.pid, stop)
        server.wait(timeout=120)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        if folder is not None:
            _kill_processes_naming(str(folder))
    if stop == signal.SIGTERM:
        assert not folder.exists(), list(folder.iterdir())
    else:
        assert (folder / f"kernel-{kernel}.json").is_file()  # what a killed lab leaves
        assert kernels.sweep(tmp) == [folder] and not folder.exists()

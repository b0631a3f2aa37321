"""Runs that cannot meet: each `rmlib run`'s kernels take their connection files and IPC sockets
in a private folder of that run (rmlib.workbook.kernels), never the source notebooks/ folder;
the folder goes when the run ends, and a killed run's is swept by the next. No kernel starts
here: jupyter_client's own connection-file writer is called, as at a kernel's start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmlib.workbook import kernels
from rmlib.workbook.execute import _kernel_manager


def test_two_runs_kernels_get_sockets_in_their_own_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where jupyter_client's default put the sockets
    with kernels.private_folder(tmp_path) as one, kernels.private_folder(tmp_path) as two:
        assert one != two and oct(one.stat().st_mode & 0o777) == "0o700"
        files = []
        for folder in (one, two):
            km = _kernel_manager(folder)(kernel_name="python3")
            km.write_connection_file()
            info = json.loads(Path(km.connection_file).read_text())
            assert Path(km.connection_file).parent == folder
            assert info["transport"] == "ipc" and info["ip"].startswith(f"{folder}/kernel-")
            files.append(km.connection_file)
        assert files[0] != files[1]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([one.name, two.name])
    assert not one.exists() and not two.exists()


def test_a_runs_socket_paths_fit_a_unix_socket_address():
    """A Unix socket's path holds about 107 bytes: the folder is under the temporary directory,
    not the run folder (whose path may be long)."""
    with kernels.private_folder() as folder:
        km = _kernel_manager(folder)(kernel_name="python3")
        assert len(f"{km.ip}-65535") < 100, km.ip
    assert not folder.exists()


def test_the_folder_goes_when_the_run_fails(tmp_path):
    with pytest.raises(RuntimeError), kernels.private_folder(tmp_path) as folder:
        (folder / "kernel-x-ipc-1").write_text("a socket's name")
        raise RuntimeError("a notebook failed")
    assert not folder.exists()


def test_a_killed_runs_folder_is_swept_and_a_live_ones_kept(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    killed = tmp_path / f"{kernels.PREFIX}{dead.stdout.strip()}-abcdefgh"
    live = tmp_path / f"{kernels.PREFIX}{os.getpid()}-ijklmnop"
    for folder in (killed, live):
        folder.mkdir()
        (folder / "kernel-1-ipc-1").write_text("")
    (tmp_path / "unrelated").mkdir()
    assert kernels.sweep(tmp_path) == [killed]
    assert live.exists() and (tmp_path / "unrelated").exists()


def test_sigterm_while_a_notebook_runs_kills_its_kernel_at_once(monkeypatch):
    """SIGTERM marks the run interrupted, as Ctrl-C (the kernel is killed, not shut down
    gracefully while busy), and the command line's own handler still decides what is raised."""
    import signal
    import time

    from rmlib.cli import Terminated, stopping_on_sigterm
    from rmlib.workbook import execute

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated), stopping_on_sigterm(), execute._interruptible():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises at once: the sleep is cut short
    assert execute._INTERRUPTED.is_set()
    assert signal.getsignal(signal.SIGTERM) is before
    execute._INTERRUPTED.clear()

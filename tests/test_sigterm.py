"""SIGTERM to an rmlib command ends what it started: the command line turns it into an exception
where the command is (as Ctrl-C), so `finally` blocks and exit handlers run. Before, Python's
default ended the process at once and a vLLM engine core (a spawned child stopped by an exit
handler) and its resource tracker were left running. Here a spawned child stopped by a
`weakref.finalize` at exit stands in for the engine core: no engine starts (about 5 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

HELPER = """
import multiprocessing as mp, sys, time, weakref
from pathlib import Path

import rmlib.cli as cli

def child():
    time.sleep(600)

def judge(args):
    # as vLLM's engine core: a spawned process its owner stops from an exit handler
    ctx = mp.get_context("spawn")
    proc = ctx.Process(target=child, daemon=False)
    proc.start()
    weakref.finalize(proc, proc.terminate)
    Path(sys.argv[1]).write_text(str(proc.pid))
    time.sleep(600)

cli._judge = judge
if __name__ == "__main__":
    sys.exit(cli.main(["judge", "pairs.jsonl", "-o", "out.jsonl"]))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie not yet reaped by init counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_sigterm_to_a_command_stops_the_process_it_started(tmp_path):
    script = tmp_path / "helper.py"
    script.write_text(HELPER)
    pid_file = tmp_path / "child.pid"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(pid_file)],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
        child = int(pid_file.read_text())
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert err.strip().splitlines() == ["rmlib: terminated (SIGTERM); what it started was stopped"]
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(child)

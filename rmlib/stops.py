"""How a command or script stops on SIGTERM and Ctrl-C: raised where it is, so every `finally`
and exit handler runs and what it started (engines, servers, kernels) is stopped with it, then
one line and the shell's status (143, 130). Python's default for SIGTERM ends the process at once,
leaving a vLLM engine core, its worker and its resource tracker running.

`rmlib.cli.main` uses it for every command; `run_script` gives a script of benchmarks/ the same
ending (`python benchmarks/x.py` is not an `rmlib` command, but starts the same engines).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

EXIT_INTERRUPTED = 130  # 128 + SIGINT: the shell's status for a command stopped by Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill PID`, a scheduler's stop), raised where the command is, as Ctrl-C is."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def stopping_on_sigterm() -> Iterator[None]:
    """SIGTERM raises Terminated while the block runs (main thread only: elsewhere Python
    allows no handler); the earlier handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def stopped_line(stop: KeyboardInterrupt, prog: str) -> tuple[str, int]:
    """The one line a stopped command prints, and its exit status. A stop with a message (`rmlib
    run`'s: how to resume) says it."""
    if isinstance(stop, Terminated):
        hint = f": {stop}" if str(stop) else "; what it started was stopped"
        return f"{prog}: terminated (SIGTERM){hint}", EXIT_TERMINATED
    hint = f": {stop}" if str(stop) else ""
    return f"{prog}: interrupted{hint}", EXIT_INTERRUPTED


def run_script(main: Callable[[], Any], prog: str | None = None) -> int:
    """A script's entry: `main()` with SIGTERM raised where it is; stopped, one line on stderr
    and 143 (SIGTERM) or 130 (Ctrl-C). An int that main returns is the exit status, anything
    else 0."""
    prog = prog or sys.argv[0]
    try:
        with stopping_on_sigterm():
            status = main()
    except KeyboardInterrupt as stop:
        line, code = stopped_line(stop, prog)
        print(line, file=sys.stderr)
        return code
    return status if isinstance(status, int) else 0

"""Each trained model's GRPO in a process of its own.

Why: the colocated vLLM engine does not give its GPU memory back when it is deleted (vllm#21073),
so the second model trained in one process finds its engine's share taken and cannot start; and
a process that trained holds a CUDA context for as long as it lives. A child process per model
releases everything when it exits, on CUDA and CPU alike; the notebook's kernel never touches
the GPU for training.

The parent writes the job to `<output>/launch.json` and runs `python -m rmlib.training.grpo
--spec <that file>` (the same entry point a user can run by hand), relaying the child's output
to its own, so progress still shows in the notebook. `processes` > 1 starts the same command
under `accelerate launch` (one process per GPU, data parallel).
"""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rmlib.training.grpo_config import GRPOSettings

SPEC_JSON = "launch.json"
# what a failed child's error shows of its output
TAIL_CHARS = 4000


@dataclass
class TrainJob:
    """Everything `train_grpo` needs, as plain data a child process can read back."""

    mix: str
    output: str
    backbone: str
    settings: dict[str, Any]
    precision: str = "nf4"
    trust_remote_code: bool = False
    seed: int = 0
    enable_thinking: bool = False

    @classmethod
    def of(cls, settings: GRPOSettings, **kw: Any) -> TrainJob:
        return cls(settings=json.loads(json.dumps(asdict(settings), default=str)), **kw)

    def grpo_settings(self) -> GRPOSettings:
        from pydantic import TypeAdapter

        return TypeAdapter(GRPOSettings).validate_python(self.settings)

    def save(self) -> Path:
        path = Path(self.output) / SPEC_JSON
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path) -> TrainJob:
        return cls(**json.loads(Path(path).read_text()))


def command(spec: Path, processes: int = 1) -> list[str]:
    """The child's command line: one process, or `processes` under accelerate."""
    entry = ["-m", "rmlib.training.grpo", "--spec", str(spec)]
    if processes == 1:
        return [sys.executable, *entry]
    launcher = [sys.executable, "-m", "accelerate.commands.launch"]
    return [*launcher, "--multi_gpu", "--num_processes", str(processes), *entry]


def run_job(job: TrainJob, processes: int = 1) -> int:
    """Train `job` in a child process (or `processes` of them); returns the child's pid.

    The child's output is relayed as it comes (tqdm's carriage returns included); a failure
    raises with the command and the end of that output. Interrupted, the child is stopped too.
    """
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    cmd = command(job.save(), processes)
    # unbuffered: a pipe would otherwise hold the child's progress lines until ~8 KB piled up
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # chunks split characters
    tail = ""
    try:
        assert child.stdout is not None
        while chunk := os.read(child.stdout.fileno(), 65536):
            text = decoder.decode(chunk)
            sys.stdout.write(text)
            sys.stdout.flush()
            tail = (tail + text)[-TAIL_CHARS:]
        code = child.wait()
    except BaseException:
        child.kill()
        child.wait()
        raise
    if code != 0:
        raise RuntimeError(
            f"GRPO for {job.output} failed in its own process (exit {code}): "
            f"{' '.join(cmd)}\n--- its last output ---\n{tail}"
        )
    return child.pid

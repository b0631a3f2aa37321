"""Each trained model's GRPO in a process of its own.

Why: the colocated vLLM engine does not give its GPU memory back when it is deleted (vllm#21073),
so the second model trained in one process finds its engine's share taken and cannot start; and
a process that trained holds a CUDA context for as long as it lives. A child process per model
releases everything when it exits, on CUDA and CPU alike; the notebook's kernel never touches
the GPU for training.

The parent writes the job to `<output>/launch.json` and runs `python -m rmlib.training.grpo
--spec <that file>` (the same entry point a user can run by hand), relaying the child's output
to its own, so progress still shows in the notebook. `processes` > 1 (run.gpus) starts the same
command under `accelerate launch` (torchrun underneath: one process per GPU, data parallel, each
with its own colocated vLLM engine when grpo.use_vllm; on a machine without CUDA, gloo over the
CPU): the job file carries every setting, so the processes train with the profile's own.

Stopping: torchrun stops every rank when one fails and exits non-zero, which raises here. An
interrupted parent stops the launcher with SIGTERM (torchrun passes it to the ranks), then
SIGKILL after STOP_GRACE_S; and since torchrun starts each rank in a session of its own, which a
kill of the notebook kernel's process group does not reach, every rank asks the kernel to kill
it when its launcher dies (`follow_launcher`), so no rank outlives a killed run holding a GPU.
"""

from __future__ import annotations

import codecs
import ctypes
import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rmlib.training.grpo_config import GRPOSettings, batch_plan, per_process
from rmlib.writes import write_text

SPEC_JSON = "launch.json"
# what a failed child's error shows of its output
TAIL_CHARS = 4000
# seconds an interrupted launcher gets to stop its ranks (torchrun's own grace is 30 s) before
# it is killed; its ranks then die with it (follow_launcher)
STOP_GRACE_S = 35
# Linux prctl(2) option: the signal a process gets when its parent dies
PR_SET_PDEATHSIG = 1
# torch.distributed's rendezvous variables: TRL's colocate mode writes them into any process that
# builds a trainer, so a kernel may hold stale ones; the child gets torchrun's own, or none
DISTRIBUTED_ENV = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
    "MASTER_PORT",
)  # fmt: skip


def _plain(settings: GRPOSettings) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(settings), default=str))


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
    # set in the child's environment (vLLM's model runner for the colocated engine: it reads
    # it from there, in the child's process)
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: GRPOSettings, **kw: Any) -> TrainJob:
        return cls(settings=_plain(settings), **kw)

    def grpo_settings(self) -> GRPOSettings:
        from pydantic import TypeAdapter

        return TypeAdapter(GRPOSettings).validate_python(self.settings)

    def save(self) -> Path:
        path = Path(self.output) / SPEC_JSON
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path) -> TrainJob:
        return cls(**json.loads(Path(path).read_text()))


def command(spec: Path, processes: int = 1) -> list[str]:
    """The child's command line: one process, or `processes` under accelerate's launcher (its
    module form, as `accelerate launch` runs it). Every launcher option is given, so a user's
    `accelerate config` file changes none of them: a free port (0: several runs on one node do
    not collide), no mixed precision of accelerate's own (the job's grpo.bf16 decides), one node."""
    entry = ["-m", "rmlib.training.grpo", "--spec", str(spec)]
    if processes == 1:
        return [sys.executable, *entry]
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu"]
    options = {
        "--num_processes": processes,
        "--num_machines": 1,
        "--main_process_port": 0,
        "--mixed_precision": "no",
        "--dynamo_backend": "no",
    }
    return [*launcher, *(str(x) for kv in options.items() for x in kv), *entry]


def run_job(job: TrainJob, processes: int = 1) -> int:
    """Train `job` in a child process (or `processes` of them); returns the child's pid.

    The batch is checked for `processes` first (one line, before anything starts). The child's
    output is relayed as it comes (tqdm's carriage returns included); a failure raises with the
    command and the end of that output. Interrupted, the child and its ranks are stopped too.
    """
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    settings = per_process(job.grpo_settings(), processes)  # the job file carries TRL's sizes
    job = replace(job, settings=_plain(settings))
    plan = batch_plan(settings, processes)  # raises ValueError
    cmd = command(job.save(), processes)
    if processes > 1:
        print(f"GRPO on {processes} processes (accelerate launch): {plan.line(settings)}")
    # unbuffered: a pipe would otherwise hold the child's progress lines until ~8 KB piled up
    env = {k: v for k, v in os.environ.items() if k not in DISTRIBUTED_ENV}
    env.update(job.env)
    env["PYTHONUNBUFFERED"] = "1"
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
        _stop(child)
        raise
    if code != 0:
        raise RuntimeError(
            f"GRPO for {job.output} failed in its own process (exit {code}): "
            f"{' '.join(cmd)}\n--- its last output ---\n{tail}"
        )
    return child.pid


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM (torchrun stops its ranks on it), then SIGKILL if it is still there."""
    child.terminate()
    try:
        child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def follow_launcher() -> None:
    """In a rank started by torchrun (LOCAL_RANK set): die when the launcher dies (Linux's
    parent-death signal; elsewhere nothing). torchrun puts each rank in a session of its own, so
    a kill of the launcher's process group (a notebook kernel killed after Ctrl-C) misses it."""
    if "LOCAL_RANK" not in os.environ or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the launcher died before the line above: follow it now
        os.kill(os.getpid(), signal.SIGKILL)

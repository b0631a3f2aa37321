"""GRPO's progress table: one row per logged step (reward, parse failures, per-task accuracy, KL,
loss, learning rate, lengths, importance sampling) in progress.jsonl and progress.csv, cut back
to the checkpoint on a resume.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from rmlib import status
from rmlib.data._io import jsonl_rows
from rmlib.training.importance import IS_KEYS
from rmlib.writes import open_append, own_text, write_text

PROGRESS_CSV = "progress.csv"


PROGRESS_JSONL = "progress.jsonl"


PROGRESS_KEYS: tuple[str, ...] = (
    "reward",
    "reward_std",
    "parse_failure_rate",
    "accuracy/pref",
    "accuracy/refl",
    "kl",
    "loss",
    "learning_rate",
    "grad_norm",
    "entropy",
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/clipped_ratio",
    "step_time",
    "num_tokens",
    *IS_KEYS,  # use_vllm: TRL's importance-sampling ratio and gap, and the share it cut
)


class ProgressTable:
    """Logs each training log as a row of progress.csv (and progress.jsonl) in the run folder.

    On a resumed run, rows past the checkpoint's step (written by the killed run) are dropped
    first, so the table has one row per step as if the run had never stopped. Use
    `progress_callback` to get it as a transformers TrainerCallback.
    """

    def __init__(self, output_dir: Path, verbose: bool = True) -> None:
        self.output_dir = Path(output_dir)
        self.verbose = verbose

    @property
    def jsonl(self) -> Path:
        return self.output_dir / PROGRESS_JSONL

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero or own_text(self.jsonl) is None:
            return
        rows = [r for r in _read_jsonl(self.jsonl) if r["step"] <= state.global_step]
        write_text(self.jsonl, "".join(json.dumps(r) + "\n" for r in rows))
        self._write_csv(rows)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        status.report(f"GRPO {self.output_dir.name} steps", state.global_step, state.max_steps)

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return  # only training-step logs carry a reward (the final summary does not)
        row = {"step": state.global_step, "epoch": logs.get("epoch", state.epoch)}
        row.update({k: _number(logs.get(k)) for k in PROGRESS_KEYS})
        with open_append(self.jsonl) as fh:
            fh.write(json.dumps(row) + "\n")
        self._write_csv(_read_jsonl(self.jsonl))
        if self.verbose:
            print(progress_line(row, state.max_steps), flush=True)

    def _write_csv(self, rows: list[dict[str, Any]]) -> None:
        table = pd.DataFrame(rows, columns=["step", "epoch", *PROGRESS_KEYS])
        write_text(self.output_dir / PROGRESS_CSV, table.to_csv(index=False))


def progress_callback(output_dir: str | Path, verbose: bool = True) -> Any:
    """A TrainerCallback writing the progress table (transformers imported only when needed)."""
    from transformers import TrainerCallback

    class ProgressTableCallback(ProgressTable, TrainerCallback):
        pass

    return ProgressTableCallback(Path(output_dir), verbose=verbose)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The progress records; a line cut by a kill is dropped (the next log step rewrites it)."""
    return [r.data for r in jsonl_rows(path) if r.error is None and isinstance(r.data, dict)]


def progress_line(row: dict[str, Any], max_steps: int) -> str:
    """One human line per logged step: step, reward, parse failures, KL."""

    def f(key: str, fmt: str = ".3f") -> str:
        v = row.get(key)
        return "—" if v is None else format(v, fmt)

    return (
        f"step {row['step']}/{max_steps}  reward {f('reward')} ± {f('reward_std')}  "
        f"parse-fail {f('parse_failure_rate', '.2f')}  kl {f('kl', '.2e')}  "
        f"loss {f('loss', '.4f')}"
    )


def progress_table(output_dir: str | Path) -> pd.DataFrame:
    """The progress table of a training run folder (for the notebooks' plots)."""
    path = Path(output_dir) / PROGRESS_CSV
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: the run has not logged a step yet")
    return pd.read_csv(path)

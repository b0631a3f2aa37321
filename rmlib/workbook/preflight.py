"""`rmlib run PARAMS --preflight`: a few items of every notebook at the profile's longest lengths,
in minutes, before a night.

The preflight is the profile itself with sizes overridden (`preflight_overrides`), run by the
same runner (`rmlib.workbook.execute.execute`) into its own folder `<run>-preflight`, never the real
run's store: every pair padded past the longest prompt budget (data.pad_to_budget), so each prompt
is cut to exactly its budget; GRPO's completions forced to max_completion_length (TRL's
generation_kwargs) for a step or two at the profile's micro-batch and generation batch; the
profile's engines, precisions, memory shares and paths unchanged. An out-of-memory, a wrong path
or a missing download shows in minutes instead of at hour three.

Not forced: the lengths of rollout and evaluation judgments (the store keys on the sampling
settings, so an ignore-EOS switch there would key every generation anew). vLLM reserves its KV
cache for the longest sequence at start, so its peak does not depend on them; backend 'hf'
sizes its batches for prompt + max_new_tokens either way.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmlib.run.config import RunConfig, load_config
from rmlib.run.lock import LOCK_FILE
from rmlib.training.grpo_config import batch_plan, per_process
from rmlib.writes import write_text

SUFFIX = "-preflight"
# A file in the preflight's folder: only a folder holding it is emptied before a preflight.
MARKER = "PREFLIGHT"
# Training pairs per prompt of a GRPO generation batch: only non-easy pairs (a wrong rollout)
# enter the mix, and TRL drops a generation batch it cannot fill (no step at all). 2 assumes
# about half are non-easy; the summary says when the mix was still too short.
TRAIN_PAIRS_PER_PROMPT = 2
# The trained model a preflight keeps, in this order of preference: unified's mix holds Refl.
# items at the reflection budget (the longest prompts); every model trains with the same settings.
TRAINED_PREFERENCE = ("unified", "refl_only", "same_volume", "rft")
# Bootstrap resamples of 05's intervals: the code path is checked, not the figures.
BOOTSTRAP = 10


@dataclass
class NotebookCheck:
    notebook: str
    status: str  # "pass" | "FAIL" | "not run"
    seconds: float | None
    note: str = ""


def preflight_name(cfg: RunConfig) -> str:
    return f"{cfg.run.name}{SUFFIX}"


def _generation_batch(cfg: RunConfig) -> int:
    """GRPO's generation batch in completions, global (all processes together) as TRL counts it."""
    gpus = cfg.run.gpus
    return batch_plan(per_process(cfg.grpo, gpus), gpus).generation_batch


def preflight_overrides(cfg: RunConfig, items: int, steps: int) -> dict[str, Any]:
    """The dotted-key overrides that turn a profile into its preflight: `items` pairs of every
    evaluation set (and warm-up examples), enough training pairs for one generation batch, every
    prompt at its budget, `steps` GRPO steps with completions at their cap, one trained model."""
    grpo = cfg.grpo
    prompts = _generation_batch(cfg) // grpo.num_generations
    train = {**_spec(cfg.data.train), "n": max(items, TRAIN_PAIRS_PER_PROMPT * prompts)}
    # vLLM's SamplingParams and transformers' GenerationConfig name the floor differently
    floor = "min_tokens" if grpo.use_vllm else "min_new_tokens"
    kwargs = {**dict(grpo.trl.get("generation_kwargs") or {}), floor: grpo.max_completion_length}
    return {
        "run.name": preflight_name(cfg),
        "data.pad_to_budget": True,
        "data.train": train,
        "data.eval": [{**_spec(s), "n": items} for s in cfg.data.eval],
        "warmup.n_examples": max(items, cfg.warmup.batch_size),
        "warmup.epochs": 1,
        "grpo.max_steps": steps,
        "grpo.save_steps": 1,  # a checkpoint is written (and its path checked) at once
        "grpo.trl": {**grpo.trl, "generation_kwargs": kwargs},
        **_models(cfg),
        "eval.n_bootstrap": BOOTSTRAP,
    }


def _spec(spec: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(spec)


def _models(cfg: RunConfig) -> dict[str, Any]:
    """eval.models cut to the base and one trained model (TRAINED_PREFERENCE), with the model a
    refl_only judge reflects on."""
    models = cfg.eval.models
    trained = next((m for m in TRAINED_PREFERENCE if m in models), None)
    keep = {"base"} & set(models)
    if trained:
        keep.add(trained)
        if trained == "refl_only":
            keep.add(cfg.eval.refl_only_stage1)
    return {"eval.models": [m for m in models if m in keep]}


def run_preflight(
    params_file: str | Path,
    *,
    items: int,
    steps: int,
    name: str | None = None,
    overrides: dict[str, Any] | None = None,
    progress: bool = True,
) -> tuple[Path, list[NotebookCheck]]:
    """Run the preflight of a profile into a fresh `<run>-preflight` folder; one check a notebook.

    A preflight folder of an earlier preflight (it holds MARKER) is emptied first, so every
    generation is made again at this run's memory settings; any other folder is refused. It is
    emptied under the folder's lock: a preflight still running in it is refused (RunFolderBusy),
    its store untouched."""
    from rmlib.workbook import execute as runner

    overrides = dict(overrides or {})
    if name:
        overrides["run.name"] = name
    cfg = load_config(params_file, overrides)
    over = {**overrides, **preflight_overrides(cfg, items, steps)}
    pcfg = load_config(params_file, over)  # validated before the folder is touched
    folder = Path(pcfg.run.output_root) / pcfg.run.name
    _refuse_foreign(folder)  # before the runner makes or locks anything in it
    try:
        runner.execute(params_file, overrides=over, progress=progress, prepare=_fresh)
        failure = ""
    except runner.NotebookFailed as e:
        failure = str(e)
    return folder, checks(pcfg, folder, failure)


def _refuse_foreign(folder: Path) -> None:
    """A folder holding anything (but a lock and empty folders, as the runner makes them) and no
    MARKER is not a preflight's: refused, since a preflight empties its folder."""
    if not folder.exists():
        return
    if not folder.is_dir() or (
        not (folder / MARKER).is_file() and any(_holds(e) for e in folder.iterdir())
    ):
        raise ValueError(
            f"{folder} exists and is no preflight folder (no {MARKER} file): a preflight "
            "empties its folder first; choose another --name"
        )


def _holds(entry: Path) -> bool:
    """Whether a folder's entry holds something to lose: not the lock, nor an empty folder."""
    if entry.name == LOCK_FILE:
        return False
    return entry.is_symlink() or not entry.is_dir() or any(entry.iterdir())


def _fresh(folder: Path) -> None:
    """Empty a preflight folder, its lock held (`execute`'s prepare): every entry but the lock
    removed, links unlinked (never followed), and MARKER written. Checked again under the lock:
    the folder may have changed since `run_preflight` looked."""
    _refuse_foreign(folder)
    for entry in folder.iterdir():
        if entry.name == LOCK_FILE:
            continue  # held by this process: removing it would let a second preflight in
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    write_text(folder / MARKER, "made by `rmlib run --preflight`; emptied by the next one\n")


def checks(cfg: RunConfig, folder: Path, failure: str = "") -> list[NotebookCheck]:
    """Pass / FAIL / not run per notebook from the run's state.json; a 03 that trained no step
    (its mix shorter than one generation batch) is a failure too."""
    path = folder / "state.json"
    state = json.loads(path.read_text()) if path.exists() else {}
    out = []
    for nb in cfg.run.notebooks:
        done = state.get(nb, {})
        status = {"completed": "pass", "failed": "FAIL"}.get(done.get("status"), "not run")
        note = failure if status == "FAIL" else ""
        if status == "pass" and nb == "03_training":
            note = _untrained(cfg, folder)
            status = "FAIL" if note else status
        out.append(NotebookCheck(nb, status, done.get("seconds"), note))
    return out


def _untrained(cfg: RunConfig, folder: Path) -> str:
    """Why 03 checked nothing ('' when every trained model made at least one optimizer step)."""
    from rmlib.run.models import trained_models
    from rmlib.training.grpo import SETTINGS_JSON

    for model in trained_models(cfg):
        meta = folder / "training" / model / SETTINGS_JSON
        steps = json.loads(meta.read_text()).get("global_step") if meta.is_file() else None
        if not steps:
            return (
                f"{model} made no optimizer step (its mix is shorter than one generation batch "
                f"of {_generation_batch(cfg)} completions): raise --preflight-items"
            )
    return ""


def format_checks(folder: Path, rows: list[NotebookCheck]) -> str:
    """The summary `rmlib run --preflight` prints: one line a notebook, then the failure."""
    lines = [f"preflight in {folder}:"]
    for r in rows:
        took = f"{r.seconds:7.1f} s" if r.seconds is not None else " " * 9
        lines.append(f"  {r.status:7s} {r.notebook:22s} {took}")
    lines += [f"  {r.notebook}: {r.note}" for r in rows if r.note]
    verdict = "PASSED" if all(r.status == "pass" for r in rows) else "FAILED"
    lines.append(f"preflight {verdict}")
    return "\n".join(lines)

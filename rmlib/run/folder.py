"""The run folder: where every step of a run reads and writes (outputs/<run>/).

Layout:
    params.yaml        the params with every default resolved (what notebooks read)
    manifest.json      params, library versions, git commit, data hashes, prompt version, hardware
    state.json         which notebooks completed, with the params hash they ran under
    run.log            the runner's log
    notebooks/         executed copies of the notebooks
    tables/*.parquet   every rollout, reflection and prediction: the interface between steps
    metrics.json       headline figures, merged section by section
    figures/           PNG + SVG of every figure
    adapters/<name>/   trained LoRA adapters (PEFT format, with a model card)
    generations.sqlite the generation store (a killed run resumes from it)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from rmlib.config import project_root
from rmlib.data.pair import Pair
from rmlib.run.config import RunConfig, config_from_dict, load_config
from rmlib.run.lock import hold_until_exit
from rmlib.writes import own_text, refuse_link, replacing, write_text

ENV_RUN_DIR = "RMLIB_RUN_DIR"
ENV_PARAMS = "RMLIB_PARAMS"


class RunFolder:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        for sub in ("tables", "figures", "notebooks", "adapters"):
            (self.path / sub).mkdir(parents=True, exist_ok=True)

    # ---- config -------------------------------------------------------------------------------
    @property
    def params_file(self) -> Path:
        return self.path / "params.yaml"

    def write_params(self, cfg: RunConfig) -> None:
        # a link here is most likely the user's own params file: refused, never replaced
        refuse_link(self.params_file, "the run folder's params")
        write_text(self.params_file, yaml.safe_dump(cfg.to_dict(), sort_keys=False))

    def config(self) -> RunConfig:
        data = yaml.safe_load(self.params_file.read_text())
        return config_from_dict(data, source=str(self.params_file))

    # ---- tables -------------------------------------------------------------------------------
    def table_path(self, name: str) -> Path:
        return self.path / "tables" / f"{name}.parquet"

    def pairs(self, name: str) -> list[Pair]:
        """A pairs table (pairs_train, pairs_eval) as `Pair`s."""
        return [Pair.from_row(r) for r in self.read_table(name).to_dict("records")]

    def predictions(self, models: Sequence[str]) -> pd.DataFrame:
        """The predictions of `models` (those with a table) in one table, with a `model` column."""
        frames = []
        for m in models:
            if self.has_table(f"predictions_{m}"):
                frames.append(self.read_table(f"predictions_{m}").assign(model=m))
        if not frames:
            raise FileNotFoundError(f"{self.path}: no predictions yet: run 04_inference first")
        out = pd.concat(frames, ignore_index=True)
        return out[["model", *[c for c in out.columns if c != "model"]]]

    def model_tables(self, model: str) -> dict[str, pd.DataFrame]:
        """One model's evaluation tables (rollouts, greedy, reflections, predictions) present."""
        names = ("rollouts", "greedy", "reflections", "predictions")
        return {n: self.read_table(f"{n}_{model}") for n in names if self.has_table(f"{n}_{model}")}

    def has_table(self, name: str) -> bool:
        return self.table_path(name).exists()

    def write_table(self, name: str, df: pd.DataFrame) -> Path:
        path = self.table_path(name)
        with replacing(path) as tmp:  # atomic: a killed run never leaves half a table
            df.to_parquet(tmp, index=False)
        return path

    def read_table(self, name: str) -> pd.DataFrame:
        path = self.table_path(name)
        if not path.exists():
            raise FileNotFoundError(
                f"{path} does not exist: run the notebook that writes '{name}' first"
            )
        return pd.read_parquet(path)

    # ---- metrics, figures, adapters -----------------------------------------------------------
    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.json"

    def metrics(self) -> dict[str, Any]:
        text = own_text(self.metrics_file)  # a link planted there is not the run's
        return json.loads(text) if text is not None else {}

    def update_metrics(self, section: str, values: dict[str, Any]) -> None:
        data = self.metrics()
        data[section] = values
        write_text(self.metrics_file, json.dumps(data, indent=2, default=_json_default))

    def figure_path(self, name: str) -> Path:
        return self.path / "figures" / name

    def adapter_dir(self, name: str) -> Path:
        return self.path / "adapters" / name

    # ---- provenance ---------------------------------------------------------------------------
    def record_data_file(self, path: str | Path) -> None:
        """Hash a local data file/folder read by this run into data_hashes.json."""
        hashes_file = self.path / "data_hashes.json"
        text = own_text(hashes_file)
        hashes = json.loads(text) if text is not None else {}
        p = Path(path)
        if p.exists():
            hashes[str(p.resolve())] = hash_path(p)
        else:  # a hub id: the name is all we can record offline
            hashes[str(path)] = "hub id (not hashed)"
        write_text(hashes_file, json.dumps(hashes, indent=2, sort_keys=True))


def hash_path(p: Path) -> str:
    """sha256 of a file, or of a folder's files (names and contents, sorted)."""
    h = hashlib.sha256()
    files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())
    for f in files:
        h.update(str(f.relative_to(p if p.is_dir() else p.parent)).encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if isinstance(o, set | tuple):
        return list(o)
    return str(o)


def open_run(run_dir: str | Path | None = None, params_file: str | Path | None = None):
    """What a notebook's first cell calls: the run's config and folder.

    Papermill passes `run_dir` (the runner has already written params.yaml there and holds the
    folder's lock). Opened by hand, in JupyterLab (`rmlib lab`) or by nbval with no parameters,
    the notebook falls back to $RMLIB_RUN_DIR / $RMLIB_PARAMS, then to the smoke profile in
    outputs/smoke-interactive, creating params.yaml if needed; its kernel then holds the folder's
    lock itself until it exits, so an `rmlib run` cannot write the same folder meanwhile.
    """
    injected = run_dir is not None
    run_dir = run_dir or os.environ.get(ENV_RUN_DIR)
    params_file = params_file or os.environ.get(ENV_PARAMS)
    root = project_root()
    if run_dir is None:
        run_dir = root / "outputs" / "smoke-interactive"
        params_file = params_file or root / "params" / "smoke.yaml"
    run = RunFolder(run_dir)
    if not injected:
        hold_until_exit(run.path)
    if not run.params_file.exists():
        cfg = load_config(params_file or root / "params" / "smoke.yaml")
        run.write_params(cfg)
    return run.config(), run

"""The chapters' exercises: predict, change, rerun, compare, on the run's own work.

Each exercise changes one setting and shows the run's result beside the changed one. Nothing is
redone that the change does not touch: a changed inference setting reuses the run's stored
generations (sample i of a prompt is keyed by seed, prompt and i, not by N, so N = 2 reuses
samples 0 and 1) and its trained models, and generates only the calls the run never made; a
changed vote rule generates nothing. The run's own tables are never rewritten: a student
can try a setting and come back to the run as it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmlib.config import ConfigError
from rmlib.run.config import RunConfig, load_config
from rmlib.run.folder import RunFolder


def changed(run: RunFolder, settings: dict[str, Any], *, section: str | None = None) -> RunConfig:
    """The run's config with `settings` (dotted keys as `rmlib run --set` takes them:
    {'inference.n_samples': 2}) applied and validated as a params file's are: a mistake is one
    ConfigError line. `section` ('inference', 'eval') refuses keys outside it, so an exercise
    cannot change what would make the stored generations someone else's (the model, the
    prompts, the data)."""
    if section is not None:
        outside = [k for k in settings if k.split(".", 1)[0] != section]
        if outside:
            raise ConfigError(
                f"{', '.join(outside)}: this exercise changes '{section}.*' settings only"
            )
    return load_config(run.params_file, overrides=dict(settings))


def rerun_inference(
    cfg: RunConfig, run: RunFolder, settings: dict[str, Any], model: str | None = None
) -> pd.DataFrame:
    """04's exercise: two-stage inference again for `model` (default: the run's headline
    model) with changed `inference.*` settings, on the run's stored generations and models.

    Returns one row per method: the run's accuracy and the changed run's (parse failures at the
    run's failure credit, both orders pooled), their difference, and on how many judged pairs
    the verdict changed. A line says how many generations came from the store and how many were
    made now (stored too, so a second try generates nothing). A run folder without the model's
    adapter (its tables copied elsewhere) says so in one line and gives an empty table."""
    from rmlib.judge.prompts import PromptFormat
    from rmlib.reflect import run_reflectrm
    from rmlib.run import models as run_models
    from rmlib.run.backends import backend, model_ref

    new = changed(run, settings, section="inference")
    model = model or run_models.headline_model(run_models.evaluated_models(cfg, run))
    if run_models.stage1_model(cfg, model) != model:
        raise ValueError(f"{model}: reflects on another model's stage 1; pick one with its own")
    try:
        ref = model_ref(cfg, run, model)
    except FileNotFoundError as e:  # a run folder without its trained models (copied tables)
        print(f"this exercise reruns the run's own models, and {e}")
        return pd.DataFrame(columns=["method", "run", "changed", "difference"])
    gen, tokenizer = backend(cfg, run, ref, with_adapters=True)
    result = run_reflectrm(
        run.pairs("pairs_eval"), gen, PromptFormat.of(tokenizer, cfg), new.inference
    )
    table = compare_predictions(
        run.read_table(f"predictions_{model}"),
        result.tables()["predictions"],
        cfg.eval.failure_credit,
    )
    print(
        f"{model}, {', '.join(f'{k}={v}' for k, v in settings.items()) or 'as run'}: "
        f"{gen.stats.hits} generations from the run's store, {gen.stats.misses} generated now "
        "(stored: trying it again generates nothing)"
    )
    return table


def compare_predictions(before: pd.DataFrame, after: pd.DataFrame, credit: float) -> pd.DataFrame:
    """Accuracy per method of two predictions tables over the same judged pairs (`key`):
    before, after, after - before, and the judged pairs whose verdict changed. A method only
    one side has (the random winners without a full stage 2) shows NaN on the other."""
    rows = []
    for method in dict.fromkeys([*before["method"], *after["method"]]):
        b = before[before["method"] == method].set_index("key")
        a = after[after["method"] == method].set_index("key")
        row: dict[str, Any] = {"method": method}
        row["run"] = _accuracy(b, credit)
        row["changed"] = _accuracy(a, credit)
        row["difference"] = row["changed"] - row["run"]
        both = b.index.intersection(a.index)
        vb, va = b.loc[both, "verdict"].astype("Int64"), a.loc[both, "verdict"].astype("Int64")
        # a parse failure on one side only is a change; on both sides it is not
        moved = (vb != va).fillna(False) | (vb.isna() != va.isna())
        row["verdicts changed"] = int(moved.sum())
        row["judged pairs"] = len(a) if len(a) else len(b)
        rows.append(row)
    return pd.DataFrame(rows)


def _accuracy(rows: pd.DataFrame, credit: float) -> float:
    from rmlib.scoring import credited

    return float(np.mean(credited(rows, credit))) if len(rows) else float("nan")

"""`score_predictions`: each method's official score with its interval and parts; the rule a
benchmark name selects (its data-registry entry); `score_file` for `rmlib score`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmlib.data import find_source
from rmlib.data.pair import DataError, Pair
from rmlib.scoring import (  # noqa: F401  (their rules register themselves)
    judgebench,
    ppe,
    rewardbench,
    rewardbench2,
    rmb,
    rmbench,
)
from rmlib.scoring.aggregate import (
    Aggregate,
    credited,
    failure_counts,
    select_order,
)
from rmlib.scoring.bootstrap import scored
from rmlib.scoring.consistency import consistency
from rmlib.scoring.predictions import (
    PREDICTIONS,
    attach_pairs,
    bad_row,
    load_predictions,
    validate_predictions,
)
from rmlib.scoring.rules import RULES, Rule, get_rule

__all__ = ["RULES", "aggregate", "score_file", "score_predictions", "scoring_of"]


def official_credit(rule: str, failure_credit: float) -> float:
    """The credit a parse failure gets under `rule`'s official score."""
    return 0.0 if get_rule(rule).no_failure_credit else failure_credit


def credit_note(rule: str, failure_credit: float) -> dict[str, Any]:
    """What the output says when the official rule overrides the requested credit."""
    if official_credit(rule, failure_credit) == failure_credit:
        return {}
    return {
        "failure_credit_note": f"the official {rule} rule credits a parse failure nothing; "
        f"the requested credit {failure_credit:g} is not applied"
    }


def scoring_of(benchmark: str) -> str:
    """The scoring rule a benchmark name selects (its `rmlib.data` registry entry: source names
    and aliases); any other name gets plain accuracy."""
    spec = find_source(benchmark)
    return spec.scoring if spec else "accuracy"


def score_predictions(
    pred_df: pd.DataFrame,
    benchmark: str,
    pairs: Iterable[Pair] | None = None,
    *,
    failure_credit: float = 0.0,
    order: str = "given",
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    file: str | None = None,
    **opts: Any,
) -> dict[str, Any]:
    """Official score of every method in `pred_df` (JSON-ready dict).

    Returns {benchmark, scoring, failure_credit, order, bootstrap: {...}, methods: {method:
    {score, ci, n, n_rows, n_parse_failures, parse_failure_rate, <parts with their n, failures
    and intervals>, partial, consistency (when both orders are present)}}}. `pairs` fills labels
    and subsets the table lacks. Scorer options are the rule's own keyword arguments
    (RewardBench `weights`, RM-Bench `require_complete`, RMB `average`). `file` names the
    predictions' file in errors (rows are that table's rows).
    """
    try:
        return _score_all(
            pred_df, benchmark, pairs, failure_credit, order, n_boot, seed, alpha, opts
        )
    except DataError as e:
        if file is None or e.file != PREDICTIONS:
            raise
        raise _in_file(e, file) from None


def _in_file(err: DataError, file: str) -> DataError:
    """A predictions-table error located in the predictions file (JSON lines: its line)."""
    line = str(file).endswith((".jsonl", ".jsonl.gz", ".json"))  # rows there are lines
    return DataError(file, err.row, err.field, err.reason, err.kind, line=line)


def _score_all(
    pred_df: pd.DataFrame,
    benchmark: str,
    pairs: Iterable[Pair] | None,
    failure_credit: float,
    order: str,
    n_boot: int,
    seed: int,
    alpha: float,
    opts: dict[str, Any],
) -> dict[str, Any]:
    df = validate_predictions(pred_df)
    if pairs is not None:
        df = attach_pairs(df, pairs)
    if df["label"].isna().any():
        r = int(np.flatnonzero(df["label"].isna())[0])
        raise bad_row(df, r, "label", "label missing: pass the benchmark's pairs", "missing")
    rule = scoring_of(benchmark)
    methods = {}
    for method, g in df.groupby("method", sort=True):
        methods[str(method)] = _score_method(
            g.reset_index(drop=True), rule, failure_credit, order, n_boot, seed, alpha, opts
        )
    return {
        "benchmark": benchmark,
        "scoring": rule,
        "failure_credit": official_credit(rule, failure_credit),
        **credit_note(rule, failure_credit),
        "order": get_rule(rule).order_note or order,
        "bootstrap": {"n_boot": n_boot, "seed": seed, "alpha": alpha},
        "methods": methods,
    }


def _score_method(
    df: pd.DataFrame,
    rule: str,
    credit: float,
    order: str,
    n_boot: int,
    seed: int,
    alpha: float,
    opts: dict[str, Any],
) -> dict[str, Any]:
    agg = aggregate(df, rule, failure_credit=credit, order=order, **opts)
    out = scored(agg, n_boot=n_boot, seed=seed, alpha=alpha)
    if set(df["order"]) == {"given", "swapped"}:
        out["consistency"] = consistency(df, n_boot=n_boot, seed=seed, alpha=alpha)
    return out


def aggregate(
    df: pd.DataFrame, rule: str, *, failure_credit: float = 0.0, order: str = "given", **opts: Any
) -> Aggregate:
    """The official aggregate of one method's predictions, as a function of resampled units."""
    spec = get_rule(rule)
    if spec.reads_all_orders:  # its own treatment of orders and failures
        agg = spec.aggregate(df, **opts)
        agg.details["failure_credit"] = spec.failure_note
        return agg
    rows = select_order(df, order)
    credit = official_credit(rule, failure_credit)
    rows = rows.assign(value=credited(rows, credit))
    agg = spec.aggregate(rows, **opts)
    agg.details.update(failure_counts(rows), failure_credit=credit, order=order)
    agg.details.update(credit_note(rule, failure_credit))
    return agg


def score_file(
    path: str | Path,
    benchmark: str,
    data_path: str | None = None,
    load_options: dict[str, Any] | None = None,
    **opts: Any,
) -> dict[str, Any]:
    """`rmlib score`: score a predictions file. The benchmark's pairs are loaded with
    `rmlib.data.load(benchmark, data_path, **load_options)` when `data_path` is given (every id
    is then checked against them) or when rows lack labels (or the subsets/meta the scoring
    needs); placement seeds etc. go in `load_options` and must match the run that made the
    predictions (a label mismatch raises). Unchecked ids are said in the result (`ids_checked`,
    `warning`): such a score is not an official one."""
    rule = get_rule(scoring_of(benchmark))
    if rule.score_file is not None:  # a file of the rule's own kind (None: predictions)
        own = rule.score_file(path, benchmark, data_path, load_options or {}, **opts)
        if own is not None:
            return own
    df = load_predictions(path)
    pairs = None
    if data_path is not None or _needs_pairs(df, rule):
        from rmlib import data

        pairs = data.load(benchmark, data_path, **(load_options or {})).pairs
        try:
            df = attach_pairs(df, pairs)
        except DataError as e:
            raise _in_file(e, str(path)) from None
    result = score_predictions(df, benchmark, file=str(path), **opts)
    checked = {"ids_checked": pairs is not None}
    if pairs is None:
        checked["warning"] = (
            "ids and labels were not checked against the benchmark data (pass --path): "
            "not an official score"
        )
    return {"file": str(path), **checked, **result}


def _needs_pairs(df: pd.DataFrame, rule: Rule) -> bool:
    return bool(df["label"].isna().any()) or rule.needs_pairs(df)

"""Pairs → prompts → (stored) generations → parsed verdicts, as tables.

Two entry points, each one batched backend call for everything it is given (never one call per
pair), so a backend can pack its batches and a CachedBackend can look everything up at once:

- `judge_pairs`: the response-preference task ("Pref."), n samples per pair → the rollout table
  (one row per sample; columns in docs/architecture.md, plus `logprobs` as a list column so the
  confidence can be recomputed later under another rule);
- `judge_reflections`: the analysis-preference task ("Refl.") for a list of `ReflectionRequest`s
  → one row per call, with `other_wins` (did the non-anchor critique win).

All generation goes through the backend passed in; callers pass a CachedBackend so every output
is stored before it is used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from rmlib.data.pair import Pair
from rmlib.generation.base import Backend, Generation, SamplingParams
from rmlib.judge import prompts
from rmlib.judge.verdict import parse_verdict, verdict_token

ROLLOUT_COLUMNS: tuple[str, ...] = (
    "key",
    "id",
    "source",
    "subset",
    "order",
    "label",
    "sample",
    "text",
    "choice",
    "failure",
    "correct",
    "confidence",
    "n_tokens",
    "finish_reason",
    "prompt_tokens",
    "truncated_prompt",
    "logprobs",
)
REFLECTION_COLUMNS: tuple[str, ...] = (
    "key",
    "id",
    "source",
    "subset",
    "order",
    "method",
    "i",
    "anchor",
    "anchor_slot",
    "text",
    "choice",
    "failure",
    "other_wins",
    "n_tokens",
    "finish_reason",
    "prompt_tokens",
    "truncated_prompt",
)


@dataclass(frozen=True)
class ReflectionRequest:
    """One stage-2 call: rollout i's critique against the anchor's, the anchor in `anchor_slot`.

    `critique_i` / `critique_anchor` are the full judgment texts; the prompt format decides
    (critique_with_result) whether the <Result> line is shown. `method` tags which procedure
    asked for the call (e.g. 'reflectrm', 'random_anchor').
    """

    pair: Pair
    i: int
    anchor: int
    anchor_slot: int
    critique_i: str
    critique_anchor: str
    method: str = "reflectrm"

    def __post_init__(self) -> None:
        if self.anchor_slot not in (1, 2):
            raise ValueError(f"anchor_slot must be 1 or 2, got {self.anchor_slot!r}")
        if self.i == self.anchor:
            raise ValueError("a rollout cannot be compared with itself")

    @property
    def critiques(self) -> tuple[str, str]:
        """(Critique 1, Critique 2) as shown in the prompt."""
        if self.anchor_slot == 1:
            return self.critique_anchor, self.critique_i
        return self.critique_i, self.critique_anchor


def confidence(logprobs: Sequence[float], fraction: float = 0.10) -> float:
    """Mean of the lowest ceil(fraction * T) token log-probs; higher = more confident.

    T = 0 (nothing generated) gives -inf: such a judgment is never more confident than one with
    tokens. The product fraction * T is rounded to 9 decimals before the ceiling so that float
    noise (0.1 * 30 = 3.0000000000000004) does not add a token.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    t = len(logprobs)
    if t == 0:
        return -math.inf
    k = max(1, math.ceil(round(fraction * t, 9)))
    lowest = np.partition(np.asarray(logprobs, dtype=float), k - 1)[:k]
    return float(lowest.mean())


def judge_pairs(
    pairs: Sequence[Pair],
    backend: Backend,
    fmt: prompts.PromptFormat,
    *,
    n: int,
    params: SamplingParams,
    confidence_fraction: float = 0.10,
    verdict_logprobs: bool = False,
) -> pd.DataFrame:
    """n judgments of every pair, parsed: the rollout table (one row per pair and sample).

    `fmt` renders each Pref. prompt (its budget's Pref. limit applies). `correct` is False on a
    parse failure; `confidence` is `confidence` (above) with `confidence_fraction`.
    `verdict_logprobs` adds the column `verdict_logprob`: the log-prob of
    the token that decides the verdict (`rmlib.judge.verdict.verdict_token`; NaN without a verdict
    or token ids), for a soft reward, and `logprobs_kind` (raw / processed / unknown: what the
    backend says its log-probs are, rmlib.generation.http); off by default (a few decodes a row).
    """
    built = [fmt.pref(p) for p in pairs]
    outputs = _generate(backend, [b.text for b in built], params, n)
    rows: list[dict[str, Any]] = []
    for pair, prompt, gens in zip(pairs, built, outputs, strict=True):
        for s, g in enumerate(gens):
            row = _parse_row(g, "pref", prompt)
            row.update(
                key=pair.key,
                id=pair.id,
                source=pair.source,
                subset=pair.subset,
                order=pair.order,
                label=pair.label,
                sample=s,
                correct=row["choice"] == pair.label,
                confidence=confidence(g.logprobs, confidence_fraction),
                logprobs=list(g.logprobs),
            )
            if verdict_logprobs:
                row["verdict_logprob"] = _verdict_logprob(g, fmt.tokenizer)
                row["logprobs_kind"] = g.meta.get("logprobs_kind", "unknown")
            rows.append(row)
    extra = ("verdict_logprob", "logprobs_kind") if verdict_logprobs else ()
    return _frame(rows, ROLLOUT_COLUMNS + extra)


def _verdict_logprob(g: Generation, tokenizer: Any) -> float:
    t = verdict_token(g.text, g.token_ids, tokenizer.decode)
    return math.nan if t is None else float(g.logprobs[t])


def judge_reflections(
    requests: Sequence[ReflectionRequest],
    backend: Backend,
    fmt: prompts.PromptFormat,
    *,
    params: SamplingParams,
    failure_policy: Literal["anchor_wins", "other_wins"] = "anchor_wins",
) -> pd.DataFrame:
    """One reflection per request, parsed (task 'refl'): one row per call.

    `fmt` renders each Refl. prompt, fitted to its budget's reflection limit.

    `choice` is the critique slot judged better; `other_wins` is True when that slot holds rollout
    i's critique. An unparseable reflection gives `other_wins` per `failure_policy` (method.md:
    the anchor wins), and keeps its `failure` kind so it is counted.
    """
    if failure_policy not in ("anchor_wins", "other_wins"):
        raise ValueError(f"unknown failure_policy {failure_policy!r}")
    built = [fmt.refl(r.pair, *r.critiques) for r in requests]
    outputs = _generate(backend, [b.text for b in built], params, 1)
    rows: list[dict[str, Any]] = []
    for r, prompt, gens in zip(requests, built, outputs, strict=True):
        row = _parse_row(gens[0], "refl", prompt)
        p = r.pair
        if row["choice"] is None:
            other_wins = failure_policy == "other_wins"
        else:
            other_wins = row["choice"] != r.anchor_slot
        row.update(
            key=p.key,
            id=p.id,
            source=p.source,
            subset=p.subset,
            order=p.order,
            method=r.method,
            i=r.i,
            anchor=r.anchor,
            anchor_slot=r.anchor_slot,
            other_wins=other_wins,
        )
        rows.append(row)
    return _frame(rows, REFLECTION_COLUMNS)


def _generate(
    backend: Backend, texts: list[str], params: SamplingParams, n: int
) -> list[list[Generation]]:
    if not texts:
        return []
    outputs = backend.generate(texts, params, n=n)
    if len(outputs) != len(texts) or any(len(o) != n for o in outputs):
        raise RuntimeError(
            f"backend {getattr(backend, 'identity', backend)!r} returned "
            f"{[len(o) for o in outputs][:5]}… generations for {len(texts)} prompts × {n}"
        )
    return outputs


def _parse_row(g: Generation, task: Literal["pref", "refl"], prompt: Any) -> dict[str, Any]:
    v = parse_verdict(g.text, task=task, finish_reason=g.finish_reason)
    return {
        "text": g.text,
        "choice": v.choice,
        "failure": v.failure,
        "n_tokens": g.n_tokens,
        "finish_reason": g.finish_reason,
        # the backend's count is authoritative; the builder's is the fallback for backends
        # that do not report it
        "prompt_tokens": g.prompt_tokens or prompt.n_tokens,
        "truncated_prompt": bool(prompt.truncated),
    }


def _frame(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(columns))
    df["choice"] = df["choice"].astype("Int64")  # 1, 2 or <NA> (parse failure)
    for col in ("correct", "other_wins", "truncated_prompt"):
        if col in df:
            df[col] = df[col].astype(bool)
    return df

"""Judging pairs without a run folder: `judge` (Python) and `rmlib judge` (command line).

Pairs come from a benchmark loader (`rmlib.data.load`) or a plain pairs file (`read_pairs`);
the judge is a `JudgeConfig` (the model, generation, prompt and inference sections a params file
has, plus what only this command needs) and a backend built from it alone (`judge_backend`): no
RunConfig, no run folder. The two stages and the votes are `rmlib.reflect`'s, generation goes
through `rmlib.judge.judgments`, and every sample through a `GenerationStore`, so an interrupted
call resumes where it stopped.

Output: one row per (method, pair id, order), the columns `rmlib score` reads (id, order, method,
verdict, label, subset) plus confidence, anchor, winners and each order's verdict (`verdict_given`,
`verdict_swapped`: the same on both rows of a pair id, so one row says whether the judge held its
verdict when the responses were swapped).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from rmlib.config import PARAMS, ConfigError, build_section, doc, set_dotted
from rmlib.data._io import Row, collect, read_file, user
from rmlib.data.pair import DataError, LoadResult, OnError, Pair
from rmlib.generation.backends import build_backend, vllm_engine_settings
from rmlib.generation.registry import Needs, Weights
from rmlib.generation.settings import GenerationSection, ModelSection
from rmlib.generation.store import GenerationStore
from rmlib.judge.settings import PromptSection
from rmlib.reflect.registry import BY_NAME, METHODS
from rmlib.reflect.settings import ReflectConfig

# Any registered method (rmlib.reflect.registry): a vote added there is one here too
JUDGE_METHODS: tuple[str, ...] = METHODS
Orders = Literal["given", "both"]

# A pairs file's source name (what the store keys and the predictions' `source` say)
PAIRS_SOURCE = "pairs"
# meta flag of a pair read without a label: it is judged, never scored (its `label` is a
# placeholder Pair needs; the predictions write it as null)
UNLABELLED = "unlabelled"
# labels a pairs file may give, as its 1/2 slots
PAIR_LABELS: dict[Any, int] = {1: 1, 2: 2, "1": 1, "2": 2, "a": 1, "b": 2, "A": 1, "B": 2}

OUTPUT_COLUMNS: tuple[str, ...] = (
    "id",
    "order",
    "method",
    "verdict",
    "label",
    "correct",
    "source",
    "subset",
    "confidence",
    "anchor",
    "winners",
    "n_parsed",
    "parse_failure",
    "truncated_prompt",
    "verdict_given",
    "verdict_swapped",
)


# ---------------------------------------------------------------- pairs files


def read_pairs(
    path: str | Path, *, on_error: OnError = "raise", source: str = PAIRS_SOURCE
) -> LoadResult:
    """A plain pairs file (.jsonl, .json or .parquet): one record per pair with `prompt` (a
    string) or `messages` (role/content list ending with the user's turn), `response_a`,
    `response_b`, optional `label` (1/2 or "a"/"b"), `id` (default: the 1-based line or row
    number) and `subset`. A bad record raises a DataError naming file, line and field, or with
    on_error="skip" is counted in the result's `skipped`."""
    rows = read_file(Path(path))
    result = LoadResult(source, str(path), None, [])
    return collect(result, rows, lambda row: [_pair_of(row, source)], on_error)


def _pair_of(row: Row, source: str) -> Pair:
    if row.opt("messages") is not None:
        context = row.context("messages", row.messages("messages"))
    elif row.opt("prompt") is not None:
        context = user(row.text("prompt", kind="empty_prompt"))
    else:
        raise row.fail("prompt", "needs 'prompt' (a string) or 'messages' (a list)", "missing")
    meta: dict[str, Any] = {}
    if row.opt("label") is None:
        label, meta[UNLABELLED] = 1, True
    else:
        label = row.label("label", PAIR_LABELS)
    pid = row.ident("id") if row.opt("id") is not None else str(row.index + 1)
    response1, response2 = row.text("response_a"), row.text("response_b")
    if response1 == response2:
        raise row.fail("response_b", IDENTICAL, "identical")
    return Pair(
        id=pid,
        source=source,
        subset=row.opt_text("subset", "default"),
        context=context,
        response1=response1,
        response2=response2,
        label=label,
        meta=meta,
    )


# why a pair of two identical responses is not judged: any verdict is a coin flip
IDENTICAL = (
    "the two responses are identical: no verdict can prefer one (skip such pairs with "
    "--on-error skip, or remove them)"
)


def drop_identical(result: LoadResult, on_error: OnError) -> LoadResult:
    """A benchmark's pairs whose two responses are identical: refused in one line naming the
    first, or with on_error="skip" left out and counted in `skipped` ('identical')."""
    same = [p for p in result.pairs if p.response1 == p.response2]
    if not same:
        return result
    if on_error == "raise":
        first = same[0]
        raise DataError(
            result.path, None, None, f"pair {first.id!r} (and {len(same) - 1} more): {IDENTICAL}",
            "identical",
        )  # fmt: skip
    result.pairs = [p for p in result.pairs if p.response1 != p.response2]
    result.skipped["identical"] += len(same)
    return result


# ---------------------------------------------------------------- the judge's settings


@dataclass
class JudgeSection:
    __pydantic_config__ = PARAMS

    """What only `rmlib judge` needs besides the sections a params file has."""

    methods: list[str] = doc(
        "Inference methods to run, any of rmlib.reflect.METHODS: 'greedy' (one greedy "
        "judgment), 'majority' (majority of inference.n_samples sampled judgments), "
        "'reflectrm' (the two stages), and the ablations 'anchor', 'random_anchor', "
        "'random_winners'. Methods share stage 1's samples and stage 2's calls; greedy alone or "
        "with majority runs no stage 2.",
        ["reflectrm"],
    )
    orders: Orders = doc(
        "'given': each pair as given; 'both': also with the responses swapped (each order "
        "through the whole method; the predictions say each order's verdict).",
        "both",
    )
    adapter: str | None = doc(
        "A PEFT adapter folder on the model (vLLM: by LoRA, or merged once into a cached "
        "checkpoint: generation.adapters, 'auto' = merged without CUDA).",
        None,
    )
    served_model: str | None = doc(
        "backend 'http': the name the servers serve the judge under; None = model.backbone.", None
    )


# Where a tool's defaults differ from a run's: vLLM in process, precision 'auto', and the random
# anchor only when asked for by name
JUDGE_DEFAULTS: dict[str, dict[str, Any]] = {
    "model": {"precision": "auto"},
    "generation": {"backend": "vllm"},
    "prompts": {},
    "inference": {"run_random_anchor": False},
    "judge": {},
}


@dataclass
class JudgeConfig:
    """Everything a judging call depends on, without a run: the params file's `model`,
    `generation`, `prompts` and `inference` sections (their documented defaults) and `judge`.
    Defaults differ from a run's where a tool should: vLLM in process, precision 'auto'."""

    model: ModelSection = field(default_factory=lambda: ModelSection(**JUDGE_DEFAULTS["model"]))
    generation: GenerationSection = field(
        default_factory=lambda: GenerationSection(**JUDGE_DEFAULTS["generation"])
    )
    prompts: PromptSection = field(default_factory=PromptSection)
    inference: ReflectConfig = field(
        default_factory=lambda: ReflectConfig(**JUDGE_DEFAULTS["inference"])
    )
    judge: JudgeSection = field(default_factory=JudgeSection)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.judge.methods) - set(JUDGE_METHODS))
        if unknown or not self.judge.methods:
            raise ValueError(f"methods must be among {JUDGE_METHODS}, got {self.judge.methods}")

    def reflect_config(self) -> ReflectConfig:
        """The inference section as `run_reflectrm` takes it: orders and baselines from here."""
        ablation = "random_anchor" in self.judge.methods
        return replace(
            self.inference,
            both_orders=self.judge.orders == "both",
            swapped_pairs=None,
            run_greedy="greedy" in self.judge.methods,
            # asked for by name: on every source, not only the paper's two
            run_random_anchor=ablation,
            random_anchor_sources=None if ablation else self.inference.random_anchor_sources,
        )

    def reflects(self) -> bool:
        """Whether stage 2 runs: any method but greedy and majority needs the two stages' run."""
        return any(BY_NAME[m].stage == 2 for m in self.judge.methods)

    def longest_prompt_tokens(self) -> int:
        """The longest prompt this call sends: the reflection budget only with stage 2."""
        if self.reflects():
            return self.prompts.longest_prompt_tokens()
        return self.prompts.max_prompt_tokens

    def context_tokens(self) -> int:
        """What an engine's or server's context must hold: longest prompt + longest generation."""
        new = self.inference.max_new_tokens
        if self.reflects():
            new = max(new, self.inference.reflection_max_new_tokens)
        return self.longest_prompt_tokens() + new


# ---------------------------------------------------------------- the backend, without a run


def judge_weights(cfg: JudgeConfig) -> Weights:
    """The judge's weights as the backend builder takes them (`rmlib.generation.backends`): the
    model with its adapter, served under `judge.served_model` (http). An adapter the vLLM backend
    merges ('merged' adapter mode; 'auto' without CUDA, as a run's) is merged once into the
    model cache (`rmlib.generation.backends.merged_checkpoint`)."""
    from rmlib.generation.models import resolve_precision

    return Weights(
        checkpoint=cfg.model.backbone,
        precision=resolve_precision(cfg.model.precision)[0],
        adapter=cfg.judge.adapter,
        served_name=cfg.judge.served_model,
        trust_remote_code=cfg.model.trust_remote_code,
    )


def judge_backend(cfg: JudgeConfig, store: str | Path) -> tuple[Any, Any]:
    """(stored backend, tokenizer) for the judge `cfg` describes; every sample goes through the
    SQLite store at `store`. The engine (or server handshake, or adapter merge) starts on the
    first sample the store cannot answer: a fully stored call starts none."""
    needs = Needs(context_tokens=cfg.context_tokens(), seed=cfg.inference.seed, source="judge")
    return build_backend(cfg.generation, judge_weights(cfg), store, needs)


def engine_settings(cfg: JudgeConfig, *, max_model_len: int | None = None) -> Any:
    """The vLLM engine `cfg`'s judge runs on: in this process (backend 'vllm') and behind
    `rmlib serve --checkpoint` (rmlib.tools.serve.checkpoint_spec), from the one builder's rules
    (rmlib.generation.backends: its weights, merged or by LoRA, and its fields), so the two
    engines cannot drift. max_model_len: None = what this call needs (cfg.context_tokens())."""
    needs = Needs(context_tokens=max_model_len or cfg.context_tokens(), seed=cfg.inference.seed)
    return vllm_engine_settings(cfg.generation, judge_weights(cfg), needs)


# ---------------------------------------------------------------- the model's window

# The budgets a call's context is made of: dotted key -> the option that sets it
BUDGET_OPTIONS: dict[str, str] = {
    "prompts.max_prompt_tokens": "--max-prompt-tokens",
    "prompts.max_reflection_prompt_tokens": "--max-reflection-prompt-tokens",
    "inference.max_new_tokens": "--max-new-tokens",
    "inference.reflection_max_new_tokens": "--max-new-tokens",
}


def fit_context(
    cfg: JudgeConfig, window: int | None, given: Collection[str] = (), model: str | None = None
) -> tuple[JudgeConfig, str | None]:
    """`cfg` fitted to a model whose context holds `window` tokens (None: unknown, unchanged):
    budgets left at their defaults are clipped so the longest prompt plus its completion fits,
    and the one line that says so is returned; a budget the caller set (`given`: its dotted
    keys, as `given_keys` reads them from the command line) that does not fit is refused in one
    ConfigError line naming its option. Nothing loads a model here."""
    need = cfg.context_tokens()
    if window is None or need <= window:
        return cfg, None
    model = model or cfg.model.backbone
    stage2 = cfg.reflects()
    used = ["prompts.max_prompt_tokens", "inference.max_new_tokens"]
    if stage2:
        used += ["prompts.max_reflection_prompt_tokens", "inference.reflection_max_new_tokens"]
    news = {k: getattr(cfg.inference, k.partition(".")[2]) for k in used if "new_tokens" in k}
    room = window - max(news.values())
    prompts = cfg.prompts
    over = [k for k in used if k.startswith("prompts.") and _value(prompts, k) > room]
    if room < MIN_PROMPT_TOKENS:  # the completion caps leave a prompt no room: lower them
        refused = [k for k in news if k in given] or list(news)
    else:  # a prompt budget the user chose is theirs to lower; a default is clipped
        refused = [k for k in over if k in given]
    if refused:
        options = sorted({_option(k, given) for k in refused})
        raise ConfigError(
            f"{model} holds {window:,} tokens (its context window), but this call's longest "
            f"prompt and completion need up to {need:,}: lower {', '.join(options)} so the "
            f"prompt budget plus the completion cap fit in {window:,}"
        )
    clipped = replace(prompts, **{k.partition(".")[2]: room for k in over})
    changes = [f"{k} {_value(prompts, k):,} -> {room:,}" for k in over]
    note = (
        f"{model} holds {window:,} tokens: prompt budgets clipped to fit it with "
        f"{max(news.values()):,} new tokens ({'; '.join(changes)})"
    )
    return replace(cfg, prompts=clipped), note


# the least room a prompt budget clipped to a window may keep (a judgment prompt's instructions
# alone take a few hundred tokens)
MIN_PROMPT_TOKENS = 512


def _value(section: Any, key: str) -> int:
    return int(getattr(section, key.partition(".")[2]))


def _option(key: str, given: Collection[str]) -> str:
    """The option that sets a budget (`--set KEY=...` where only --set reaches it)."""
    if isinstance(given, dict) and key in given:
        return str(given[key])
    return BUDGET_OPTIONS.get(key, f"--set {key}=...")


def check_model(cfg: JudgeConfig, given: Collection[str] = ()) -> tuple[JudgeConfig, str | None]:
    """Before any weights load: the adapter checked against the model (a folder with its
    adapter_config.json or a hub id, its weights of the model's shapes: one line, not a
    state-dict traceback) and `fit_context` with the window the model's config.json says (read
    offline; an unknown window leaves `cfg` as it is)."""
    from rmlib.generation.models import check_adapter, context_window

    if cfg.judge.adapter is not None:
        check_adapter(cfg.judge.adapter, cfg.model.backbone)
    return fit_context(cfg, context_window(cfg.model.backbone), given)


# ---------------------------------------------------------------- judging


def cost(pairs: Sequence[Pair], cfg: JudgeConfig) -> dict[str, int]:
    """Generations a call asks for at most (before the store answers any): pairs x orders x
    samples for stage 1 and greedy, and up to N-1 reflections per pair and order for stage 2."""
    orders = 2 if cfg.judge.orders == "both" else 1
    judged = len(pairs) * orders
    n = cfg.inference.n_samples
    methods = set(cfg.judge.methods)
    plans = 2 if "random_anchor" in methods else 1  # the ablation's anchor: N-1 calls more
    out = {"pairs": len(pairs), "orders": orders, "greedy": judged if "greedy" in methods else 0}
    out["samples"] = judged * n if methods - {"greedy"} else 0
    out["reflections_at_most"] = judged * (n - 1) * plans if cfg.reflects() else 0
    out["total_at_most"] = out["greedy"] + out["samples"] + out["reflections_at_most"]
    return out


def judge(
    pairs: Sequence[Pair], backend: Any, tokenizer: Any, cfg: JudgeConfig | None = None
) -> pd.DataFrame:
    """Judge `pairs` with every method of `cfg.judge.methods`: the predictions table
    (OUTPUT_COLUMNS, one row per method, pair id and order). `backend` is any Backend (pass a
    CachedBackend, e.g. from `judge_backend`, so every sample is stored); `tokenizer` the
    judge's, which renders the prompts as `cfg`'s prompts and model sections say."""
    from rmlib.judge.prompts import PromptFormat
    from rmlib.reflect import run_reflectrm

    cfg = cfg or JudgeConfig()
    fmt = PromptFormat.of(tokenizer, cfg)
    # one path for every method: stage 2 only when a method needs it (Method.stage), and the N
    # samples unless greedy, the one method without them, is all that was asked for
    result = run_reflectrm(
        pairs,
        backend,
        fmt,
        cfg.reflect_config(),
        stages=2 if cfg.reflects() else 1,
        samples=set(cfg.judge.methods) != {"greedy"},
    )
    unlabelled = {p.id for p in pairs if p.meta.get(UNLABELLED)}
    return predictions_table(result, cfg.judge.methods, unlabelled)


def predictions_table(
    result: Any, methods: Sequence[str], unlabelled: Collection[str] = ()
) -> pd.DataFrame:
    """One row per (method, pair, order) from a ReflectResult (or stage 1 alone). Pair ids in
    `unlabelled` (read without a label) get label and correct null: judged, never scored."""
    rows: list[dict[str, Any]] = []
    for method in methods:
        if method == "greedy":
            rows += _greedy_rows(result.greedy)
        elif method == "majority":
            rows += _majority_rows(result.rollouts, result.config)
        else:
            rows += _method_rows(result, method)
    df = pd.DataFrame(rows, columns=[c for c in OUTPUT_COLUMNS if "verdict_" not in c])
    blank = df["id"].isin(set(unlabelled))
    df["label"] = df["label"].astype(object).where(~blank, None)
    df["correct"] = (df["verdict"] == df["label"]).astype(object).where(~blank, None)
    return _with_each_order(df)


def _row(r: Any, method: str, verdict: Any, **fields: Any) -> dict[str, Any]:
    verdict = None if verdict is None or pd.isna(verdict) else int(verdict)
    return {
        "id": r.id,
        "order": r.order,
        "method": method,
        "verdict": verdict,
        "label": int(r.label),
        "source": r.source,
        "subset": r.subset,
        "parse_failure": verdict is None,
        **fields,
    }


def _confidence(value: Any) -> float | None:
    """A judgment's confidence; None for one with no tokens (-inf)."""
    value = float(value)
    return None if math.isinf(value) or math.isnan(value) else value


def _greedy_rows(greedy: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        _row(
            r,
            "greedy",
            r.choice,
            confidence=_confidence(r.confidence),
            n_parsed=int(pd.notna(r.choice)),
            truncated_prompt=bool(r.truncated_prompt),
        )
        for r in greedy.itertuples()
    ]


def _majority_rows(rollouts: pd.DataFrame, infer: ReflectConfig) -> list[dict[str, Any]]:
    """The majority of each pair's samples (the registry's vote, the run's tie rule); the
    confidence is that of the most confident sample voting for the verdict."""
    from rmlib.reflect.registry import PairVotes

    rows = []
    for key, g in rollouts.groupby("key", sort=False):
        g = g.sort_values("sample")
        choices = [None if pd.isna(c) else int(c) for c in g["choice"]]
        votes = PairVotes(
            key=str(key), source=str(g["source"].iat[0]), choices=choices, anchor=None
        )
        verdict, _, _ = BY_NAME["majority"].vote(votes, infer)  # type: ignore[misc]
        voting = [c for c, ch in zip(g["confidence"], choices, strict=True) if ch == verdict]
        rows.append(
            _row(
                next(g.itertuples()),
                "majority",
                verdict,
                confidence=_confidence(max(voting)) if verdict is not None else None,
                n_parsed=sum(c is not None for c in choices),
                truncated_prompt=bool(g["truncated_prompt"].any()),
            )
        )
    return rows


def _method_rows(result: Any, method: str) -> list[dict[str, Any]]:
    """A method's verdict per pair and order from the run's predictions, with its anchor (and
    the anchor's confidence) and, for a stage-2 plan (ReflectRM, the random anchor), the
    winners: the samples whose critique beat that anchor's."""
    from rmlib.reflect.method import STAGE2_PLANS

    preds = result.predictions[result.predictions["method"] == method]
    refl = result.reflections
    won = refl[(refl["method"] == method) & refl["other_wins"].astype(bool)]
    winners = {k: sorted(int(i) for i in g["i"]) for k, g in won.groupby("key")}
    ro = result.rollouts
    conf = {
        (k, int(s)): c for k, s, c in zip(ro["key"], ro["sample"], ro["confidence"], strict=True)
    }
    rows = []
    for r in preds.itertuples():
        anchor = None if pd.isna(r.anchor) else int(r.anchor)
        rows.append(
            _row(
                r,
                method,
                r.verdict,
                confidence=None if anchor is None else _confidence(conf[(r.key, anchor)]),
                anchor=anchor,
                winners=None
                if anchor is None or method not in STAGE2_PLANS
                else winners.get(r.key, []),
                n_parsed=int(r.n_parsed),
                truncated_prompt=bool(r.truncated_prompt),
            )
        )
    return rows


def _with_each_order(df: pd.DataFrame) -> pd.DataFrame:
    """Each row gets the verdict of both orders of its pair id (None where not judged)."""
    for order in ("given", "swapped"):
        mine = df[df["order"] == order].set_index(["method", "id"])["verdict"].to_dict()
        df[f"verdict_{order}"] = [
            mine.get((m, i)) for m, i in zip(df["method"], df["id"], strict=True)
        ]
    # the same dtypes whichever methods ran (a greedy-only table has no winners at all)
    df["winners"] = pd.Series(
        [w if isinstance(w, list) else None for w in df["winners"]], dtype=object
    )
    df["confidence"] = df["confidence"].astype(float)
    for col in ("verdict", "label", "anchor", "verdict_given", "verdict_swapped"):
        df[col] = pd.array([None if pd.isna(v) else int(v) for v in df[col]], dtype="Int64")
    return df[list(OUTPUT_COLUMNS)]


# ---------------------------------------------------------------- from inputs to a file


def load_pairs(
    source: str | None,
    path: str | None,
    *,
    n: int | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    split: str | None = None,
) -> LoadResult:
    """The pairs to judge: a benchmark through its loader (`source`, `path` its local copy or
    None for the hub), else the pairs file at `path`; `n` keeps a seeded draw of about n pairs
    (whole groups, as a run's subsample)."""
    from rmlib.data.settings import DatasetSpec, load_split

    if source is None:
        if path is None:
            raise ValueError("give a pairs file or a benchmark source")
        result = read_pairs(path, on_error=on_error)
        if n is not None and n < len(result.pairs):
            from rmlib.data.pair import subsample

            result.pairs = subsample(result.pairs, n, seed)
        return result
    spec = DatasetSpec(source=source, path=path, split=split, n=n, on_error=on_error)
    return drop_identical(load_split(spec, seed), on_error)


def default_store(output: str | Path) -> Path:
    """The store beside the predictions file: `preds.jsonl` -> `preds.generations.sqlite`."""
    return Path(output).with_suffix(".generations.sqlite")


def write_predictions(df: pd.DataFrame, output: str | Path) -> Path:
    """Predictions as JSON lines (.jsonl) or parquet (.parquet), written whole then renamed (an
    interrupted write never leaves half a file that `rmlib score` would read)."""
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    if out.suffix == ".parquet":
        df.to_parquet(tmp, index=False)
    elif out.suffix == ".jsonl":
        records = json.loads(df.to_json(orient="records", force_ascii=False))
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    else:
        raise ValueError(f"{out}: predictions are written as .jsonl or .parquet")
    tmp.replace(out)
    return out


def summary(df: pd.DataFrame) -> dict[str, Any]:
    """Per method: rows, share parsed, accuracy where labelled, and the share of pair ids whose
    two orders agree (both judged and parsed)."""
    out: dict[str, Any] = {}
    for method, g in df.groupby("method", sort=False):
        parsed = ~g["parse_failure"].astype(bool)
        labelled = g["correct"].notna()
        both = g[(g["order"] == "given") & g["verdict_swapped"].notna() & g["verdict"].notna()]
        out[str(method)] = {
            "rows": len(g),
            "parsed": round(float(parsed.mean()), 4) if len(g) else None,
            "accuracy": round(float(g.loc[labelled, "correct"].astype(bool).mean()), 4)
            if labelled.any()
            else None,
            # consistent: the swapped order picks the same response (its slot is the other one)
            "consistent": round(float((both["verdict"] != both["verdict_swapped"]).mean()), 4)
            if len(both)
            else None,
        }
    return out


def judge_file(
    loaded: LoadResult,
    cfg: JudgeConfig,
    output: str | Path,
    *,
    store: str | Path | None = None,
    log: Any = print,
    note: str | None = None,
) -> dict[str, Any]:
    """`rmlib judge`: say the cost, judge `loaded.pairs` through the store (default: beside
    `output`), write the predictions; returns what it did (counts, store hits and misses, the
    per-method summary). A second call with the same inputs generates nothing. Every path is
    checked before the model loads (`check_paths`), and the store is held (a lock beside it)
    for the call: a second call on the same store is refused, naming the first's pid."""
    from rmlib.run.lock import holding_file

    pairs = loaded.pairs
    if not pairs:
        raise ValueError(f"{loaded.path}: no pairs to judge")
    store = Path(store) if store is not None else default_store(output)
    check_paths(output, store, [loaded.path])
    advice = "wait for it to end, or give this call another --store (and -o)"
    with holding_file(store, f"generation store {store}", advice):
        if note:  # what was fitted to the model (check_model), said once the paths are good
            log(f"rmlib: {note}")
        return _judge_file(loaded, cfg, output, store, log)


def check_paths(output: str | Path, store: str | Path, inputs: Sequence[str | Path]) -> None:
    """Before the first generation: the predictions file is .jsonl or .parquet and can be
    written where it is asked for (its folder made, a file created and removed there), and the
    output, the store and every input are different files (a predictions file written over the
    pairs or the store would lose them), and an existing store is one (`GenerationStore.check`).
    One ValueError line each."""
    out, db = Path(output), Path(store)
    if out.suffix not in (".jsonl", ".parquet"):
        raise ValueError(f"{out}: predictions are written as .jsonl or .parquet")
    named = {"the output (-o)": out, "the store (--store)": db}
    named.update({f"the input {p}": Path(p) for p in inputs if p and Path(p).exists()})
    seen: dict[Path, str] = {}
    for what, path in named.items():
        key = path.expanduser().resolve()
        if key in seen:
            raise ValueError(
                f"{path}: {what} and {seen[key]} are the same file: give each its own path"
            )
        seen[key] = what
    for path, what in ((out, "predictions file"), (db, "generation store")):
        if path.is_dir():
            raise ValueError(f"{path}: the {what} is a folder; give a file name")
        above = next(a for a in path.absolute().parents if a.exists())
        if not above.is_dir():
            raise ValueError(
                f"{path}: the {what} cannot be written there ({above} is not a folder)"
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            os.close(fd)
            os.unlink(probe)
        except OSError as err:
            raise ValueError(
                f"{path}: the {what} cannot be written there ({err.strerror or err}); "
                "nothing was generated"
            ) from None
    GenerationStore.check(db)  # another program's database: refused before it is written to


def _judge_file(
    loaded: LoadResult, cfg: JudgeConfig, output: str | Path, store: Path, log: Any
) -> dict[str, Any]:
    import time

    pairs = loaded.pairs
    plan = cost(pairs, cfg)
    per = f" ({cfg.inference.n_samples} per pair and order)" if plan["samples"] else ""
    log(
        f"judging {plan['pairs']} pairs x {plan['orders']} order(s) with "
        f"{', '.join(cfg.judge.methods)}: {plan['greedy']} greedy judgments, {plan['samples']} "
        f"sampled{per}, up to {plan['reflections_at_most']} reflections; store {store} "
        "(stored ones are not redone)"
    )
    backend, tokenizer = judge_backend(cfg, store)
    start = time.perf_counter()
    df = judge(pairs, backend, tokenizer, cfg)
    seconds = time.perf_counter() - start
    write_predictions(df, output)
    stats = {"hits": backend.stats.hits, "generated": backend.stats.misses}
    backend.store.close()
    return {
        "output": str(output),
        "store": str(store),
        "input": {
            "source": loaded.source,
            "path": loaded.path,
            "pairs": len(pairs),
            "skipped": dict(loaded.skipped),
            "dropped": dict(loaded.dropped),
        },
        "cost": plan,
        "generations": stats,
        "seconds": round(seconds, 1),
        "methods": summary(df),
    }


# The sections a judge reads, by their params-file names (a `--set KEY=VALUE` names one of them).
JUDGE_SECTIONS: dict[str, type] = {
    "model": ModelSection,
    "generation": GenerationSection,
    "prompts": PromptSection,
    "inference": ReflectConfig,
    "judge": JudgeSection,
}
# `rmlib judge`'s options that set section fields: option -> the dotted keys it sets. The command
# line makes each option from its field (type, allowed values, the field's doc as its help) and
# `config_from_args` sets what was given; `--set KEY=VALUE` reaches every other field.
FIELD_OPTIONS: dict[str, tuple[str, ...]] = {
    "--model": ("model.backbone",),
    "--precision": ("model.precision",),
    "--adapter": ("judge.adapter",),
    "--adapter-mode": ("generation.adapters",),
    "--api-key-env": ("generation.api_key_env",),
    "--served-model": ("judge.served_model",),
    "--orders": ("judge.orders",),
    "--samples": ("inference.n_samples",),
    "--max-new-tokens": ("inference.max_new_tokens", "inference.reflection_max_new_tokens"),
    "--max-prompt-tokens": ("prompts.max_prompt_tokens",),
    "--max-reflection-prompt-tokens": ("prompts.max_reflection_prompt_tokens",),
}


def judge_field(key: str) -> tuple[type, dataclasses.Field, Any]:
    """The section class, the field and the judge's default of a dotted key of its sections."""
    section, _, name = key.partition(".")
    cls = JUDGE_SECTIONS[section]
    default = getattr(getattr(JudgeConfig(), section), name)
    return cls, next(f for f in dataclasses.fields(cls) if f.name == name), default


def judge_config(data: dict[str, Any], source: str = "rmlib judge") -> JudgeConfig:
    """A JudgeConfig from a mapping of its sections (dotted keys set with `set_dotted`), each
    validated as a params file's section is: a wrong value is one ConfigError line."""
    unknown = sorted(set(data) - set(JUDGE_SECTIONS))
    if unknown:
        raise ConfigError(
            f"{source}: unknown section '{unknown[0]}' (a judge's: {', '.join(JUDGE_SECTIONS)})"
        )
    sections = {
        name: build_section(cls, data.get(name), name, source)
        for name, cls in JUDGE_SECTIONS.items()
    }
    try:
        return JudgeConfig(**sections)
    except ValueError as e:
        raise ConfigError(f"{source}: {e}") from None


def config_from_args(args: Any) -> JudgeConfig:
    """`rmlib judge`'s options as a JudgeConfig: an option not given keeps its section's
    documented default (the judge's own where a tool's should differ from a run's: vLLM in
    process, precision 'auto', no random anchor unless asked for by name)."""
    backend = args.backend or ("http" if args.endpoint else "vllm")
    if args.endpoint and backend != "http":
        raise ValueError(f"--endpoint goes with the http backend, not --backend {backend}")
    if args.adapter_mode and backend != "vllm":
        raise ValueError(f"--adapter-mode goes with the vllm backend, not {backend}")
    if backend == "http" and not args.endpoint:
        raise ValueError("--backend http needs the servers: give --endpoint URL")
    for option in HTTP_OPTIONS:
        if getattr(args, option.lstrip("-").replace("-", "_")) is not None and backend != "http":
            raise ValueError(f"{option} goes with --endpoint (the http backend), not {backend}")
    data = copy.deepcopy(JUDGE_DEFAULTS)
    data["generation"].update(backend=backend, endpoints=list(args.endpoint))
    data["inference"]["seed"] = args.seed
    for option, keys in FIELD_OPTIONS.items():
        value = getattr(args, option.lstrip("-").replace("-", "_"))
        for key in keys if value is not None else ():
            set_dotted(data, key, value)
    if args.no_progress:
        data["generation"]["progress"] = False
    if args.method:
        data["judge"]["methods"] = list(dict.fromkeys(args.method))
    for key, value in getattr(args, "overrides", None) or []:
        set_dotted(data, key, value)
    cfg = judge_config(data)
    _refuse_idle_options(args, cfg)
    return cfg


# options only the http backend reads
HTTP_OPTIONS = ("--served-model", "--api-key-env")


def _refuse_idle_options(args: Any, cfg: JudgeConfig) -> None:
    """Options given that this call would not read, refused in one line: the number of samples
    when no method samples (greedy alone), the reflection prompt's budget without stage 2."""
    methods = ", ".join(cfg.judge.methods)
    if args.samples is not None and set(cfg.judge.methods) == {"greedy"}:
        raise ValueError(
            f"--samples goes with a method that samples (majority, reflectrm, ...): {methods} "
            "alone makes one judgment per pair and order"
        )
    if args.max_reflection_prompt_tokens is not None and not cfg.reflects():
        raise ValueError(
            f"--max-reflection-prompt-tokens goes with a two-stage method (reflectrm, ...): "
            f"{methods} writes no reflection prompt"
        )


def given_keys(args: Any) -> dict[str, str]:
    """The dotted keys `rmlib judge`'s command line set, each with the option that set it (a
    budget the user chose is refused when it does not fit, never clipped: `fit_context`)."""
    given: dict[str, str] = {}
    for option, keys in FIELD_OPTIONS.items():
        if getattr(args, option.lstrip("-").replace("-", "_"), None) is not None:
            given.update(dict.fromkeys(keys, option))
    for key, _ in getattr(args, "overrides", None) or []:
        given[key] = f"--set {key}=..."
    return given

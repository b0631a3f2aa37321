"""The judge as the reward of someone else's GRPO: a TRL `reward_funcs` callable (`JudgeReward`)
and a verl custom reward function (`compute_score`, `compute_score_batch`).

Not the reward of our own training (`rmlib.training.reward` scores a judgment against its label):
here the judge scores a *policy's* completions, by comparing each with an opponent:

- `opponent="reference"`: the completion against the dataset column `reference_column` (e.g. a
  chosen answer); the reward is the share of its comparisons the completion wins;
- `opponent="group"`: against every other completion of its group (TRL's `num_generations`
  completions of one prompt): G(G-1)/2 comparisons per group, G-1 for each completion;
- `opponent="round_robin"`: against its two neighbours in a ring of the group: G comparisons per
  group, 2 for each completion (cheaper for large G; the same for G <= 3).

With `both_orders` (default) every comparison is judged with the completion first and second, so
the judge's position bias cancels (a judge that always says "Response 1" gives every completion
0.5). Every comparison of a call goes to the judge in one batched call
(`rmlib.judge.judgments.judge_pairs`, or ReflectRM's two stages,
`rmlib.reflect.method.run_reflectrm`, with `method="reflectrm"`), through the backend given: pass a
`CachedBackend` so each judgment is stored and a restarted training re-scores a batch from the
store. `soft=True` rewards with the verdict's probability, exp of the log-prob of the token that
decides it (`rmlib.judge.verdict.verdict_token`): P(completion wins), from a judge whose log-probs
are the raw distribution's (module `rmlib.generation.http` on `logprobs_kind`; each comparison
records what the backend declared).

TRL (1.16) calls a reward function in each process with that process's slice of the generation
batch, as `f(prompts=, completions=, completion_ids=, **dataset_columns, trainer_state=, ...)`,
and awaits it when it is a coroutine function (in parallel with the other async rewards, on its
own event loop): `JudgeReward.__call__` is async and runs the (blocking) judge in a worker
thread. A group can span processes: group opponents are refused under more than one process
(one process, or `opponent="reference"`, which needs no group).

verl: `compute_score(data_source, solution_str, ground_truth, extra_info=None, **reward_kwargs)`
as verl documents a custom reward function: the interface of verl 0.4 (mid-2025; its
docs/preparation/reward_function.rst "last updated 06/02/2025": `custom_reward_function.path` /
`.name`; verl/trainer/ppo/reward.py `get_custom_reward_fn` passes
`custom_reward_function.reward_kwargs` as keyword arguments). The ground truth is the reference
completion; the prompt is `extra_info[prompt_key]`; the judge is named by the reward kwargs
(`http_judge`'s arguments) and made once per process. `compute_score_batch` is the same over
lists, as verl's batch reward manager calls it (`data_sources=, solution_strs=, ground_truths=,
extra_infos=`; one judge call per batch). verl's later Reward Loop (an async compute_score given
the router of a judge verl serves) is `rmlib.tools.reward_loop`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from rmlib.config import PARAMS, Count, Finite, build_section, check_built, doc
from rmlib.data.pair import Pair
from rmlib.generation.base import Backend
from rmlib.generation.settings import GenerationSection
from rmlib.judge import judgments as judge
from rmlib.judge.prompts import PromptBudget, PromptFormat
from rmlib.reflect.settings import ReflectConfig

Opponent = Literal["reference", "group", "round_robin"]
Method = Literal["greedy", "reflectrm"]
COMPARISON_COLUMNS: tuple[str, ...] = (
    "comparison",
    "order",
    "first",
    "second",
    "verdict",
    "winner",
    "p_first",
    "logprobs_kind",
    "text",
)
REFERENCE = -1  # the `first`/`second` index of a reference completion in the comparison table


@dataclass
class RewardJudgeConfig:
    """How the judge turns comparisons into rewards (module docstring)."""

    __pydantic_config__ = PARAMS

    opponent: Opponent = doc(
        "What each completion is judged against: 'reference' (the dataset column "
        "`reference_column`), 'group' (every other completion of its group) or 'round_robin' "
        "(its two neighbours in a ring of the group).",
        "reference",
    )
    reference_column: str = doc(
        "The dataset column holding the reference completion (opponent 'reference').", "reference"
    )
    both_orders: bool = doc(
        "Judge each comparison with the completion first and second, so the judge's position "
        "bias cancels in the reward.",
        True,
    )
    method: Method = doc(
        "'greedy' (one greedy judgment per comparison and order) or 'reflectrm' (the two stages: "
        "`inference.n_samples` sampled judgments, the anchor and its reflections).",
        "greedy",
    )
    soft: bool = doc(
        "Reward with the verdict's probability (exp of its deciding token's log-prob) instead "
        "of 0/1 wins; method 'greedy' only.",
        False,
    )
    unparsed_reward: Finite | None = doc(
        "The reward of a completion none of whose comparisons gave a verdict: 0.5 is no "
        "preference; None hands TRL a missing reward (NaN).",
        0.5,
    )
    group_size: Count | None = doc(
        "Completions per prompt (TRL's num_generations) for the group opponents; None = runs of "
        "equal consecutive prompts (TRL keeps a group's completions together).",
        None,
    )
    inference: ReflectConfig = doc(
        "The judge's settings (rmlib.reflect.settings): max_new_tokens for 'greedy'; n_samples, "
        "temperature, reflection_max_new_tokens, seed for 'reflectrm' (orders and baselines are "
        "this config's, not the inference section's).",
        ReflectConfig(n_samples=4, run_greedy=False, run_random_anchor=False),
    )

    def __post_init__(self) -> None:
        if self.soft and self.method != "greedy":
            raise ValueError("soft rewards read one verdict's log-prob: method 'greedy' only")
        # built in Python, validated as a params section is: the fields' types and ranges (a
        # group size of 0, an unknown opponent, inference.n_samples 0) are one ConfigError line
        check_built(self, "RewardJudgeConfig", "rmlib.tools.reward")


@dataclass(frozen=True)
class _Comparison:
    """One judged order: `pair.response1` is completion `first`, `response2` is `second`."""

    pair: Pair
    index: int  # the comparison (both orders share it)
    first: int
    second: int


class JudgeReward:
    """A TRL reward function (async, batched) scoring completions with the judge.

    backend: the judge (a CachedBackend over rmlib's vLLM, transformers or HTTP backend).
    fmt: how the judge is shown its prompts, as it was trained (`rmlib.judge.prompts.PromptFormat`:
    the judge's tokenizer, `ChatMessagesTokenizer(tok)` with an `api="chat"` HTTP backend; the
    budget; its run's model.enable_thinking and prompts.critique_with_result, as
    `PromptFormat.of(tokenizer, run_config)` reads them). reflection_backend: stage 2 on
    another model (method 'reflectrm'). After each call, `last` holds the comparison table
    (`COMPARISON_COLUMNS`) and `rewards` the rewards returned.
    """

    def __init__(
        self,
        backend: Backend,
        fmt: PromptFormat,
        config: RewardJudgeConfig | None = None,
        *,
        reflection_backend: Backend | None = None,
        name: str = "reflectrm_judge",
    ) -> None:
        if not callable(getattr(backend, "generate", None)):
            raise TypeError(f"backend must be a Backend (with generate()), got {_kind(backend)}")
        if not isinstance(fmt, PromptFormat):
            raise TypeError(
                f"fmt must be a rmlib.judge.prompts.PromptFormat (PromptFormat(tokenizer)), got "
                f"{_kind(fmt)}"
            )
        self.backend = backend
        self.fmt = fmt
        self.config = _config(config, "JudgeReward(config=...)")
        self.reflection_backend = reflection_backend
        self.__name__ = name  # TRL names the reward's metrics after it
        self.last = pd.DataFrame(columns=list(COMPARISON_COLUMNS))
        self.rewards: list[float | None] = []

    async def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        """TRL's call: one reward per completion (dataset columns arrive as keyword arguments)."""
        references = self._references(kwargs)
        self._check_processes()
        rewards = await asyncio.to_thread(self.score, prompts, completions, references)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and len(self.last):
            log_metric(f"{self.__name__}/parsed", float(self.last["verdict"].notna().mean()))
        return rewards

    def score(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        references: Sequence[Any] | None = None,
    ) -> list[float | None]:
        """The rewards of `completions` (each answering its `prompts` entry), synchronously.

        Each prompt is a str or chat messages ending with the user's turn; each completion and
        reference a str or chat messages (the last one's content is the text). Anything else is
        a TypeError or ValueError of one line naming its index and the accepted forms.
        """
        prompts, completions = _batch(prompts, "prompts"), _batch(completions, "completions")
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
        if references is not None:
            references = _batch(references, "references")
        # the config may have been changed since it was built: checked at each call
        check_built(self.config, "JudgeReward.config", "rmlib.tools.reward")
        comparisons = _comparisons(prompts, completions, references, self.config)
        verdicts = self._verdicts(comparisons)
        self.last = _table(comparisons, verdicts)
        self.rewards = _rewards(self.last, len(completions), self.config)
        return self.rewards

    # ------------------------------------------------------------------ judging

    def _verdicts(self, comparisons: list[_Comparison]) -> pd.DataFrame:
        """verdict, p_first (soft), logprobs_kind and text of each comparison, in order."""
        pairs = [c.pair for c in comparisons]
        cfg = self.config
        if not pairs:
            return pd.DataFrame(columns=["verdict", "p_first", "logprobs_kind", "text"])
        if cfg.method == "greedy":
            rows = judge.judge_pairs(
                pairs,
                self.backend,
                self.fmt,
                n=1,
                params=cfg.inference.greedy_params(),
                confidence_fraction=cfg.inference.confidence_fraction,
                verdict_logprobs=True,
            )
            p = rows["verdict_logprob"].astype(float).map(math.exp)
            first_won = (rows["choice"] == 1).fillna(False).astype(bool)
            p_first = p.where(first_won, 1 - p)
            return pd.DataFrame(
                {
                    "verdict": rows["choice"].to_numpy(),
                    "p_first": p_first.to_numpy(dtype=float),
                    "logprobs_kind": rows["logprobs_kind"].to_numpy(),
                    "text": rows["text"].to_numpy(),
                }
            )
        return self._reflectrm(pairs)

    def _reflectrm(self, pairs: list[Pair]) -> pd.DataFrame:
        from rmlib.reflect.method import run_reflectrm

        # the orders are this config's; the baselines are not rewards
        cfg = dataclasses.replace(
            self.config.inference,
            both_orders=False,
            swapped_pairs=None,
            run_greedy=False,
            run_random_anchor=False,
        )
        result = run_reflectrm(
            pairs,
            self.backend,
            self.fmt,
            cfg,
            reflection_backend=self.reflection_backend,
        )
        preds = result.predictions[result.predictions["method"] == "reflectrm"]
        verdict = preds.set_index("key")["verdict"]
        keys = [p.key for p in pairs]
        return pd.DataFrame(
            {
                "verdict": verdict.reindex(keys).to_numpy(),
                "p_first": math.nan,
                "logprobs_kind": None,
                "text": None,  # a two-stage verdict has many texts: result tables hold them
            }
        )

    # ------------------------------------------------------------------ TRL's arguments

    def _references(self, kwargs: Mapping[str, Any]) -> Sequence[Any] | None:
        if self.config.opponent != "reference":
            return None
        column = self.config.reference_column
        if column not in kwargs:
            columns = sorted(k for k in kwargs if k not in _TRL_KWARGS)
            raise KeyError(
                f"opponent 'reference' reads the dataset column {column!r}, which this batch "
                f"lacks (its columns: {columns}): add it, or set reference_column"
            )
        return kwargs[column]

    def _check_processes(self) -> None:
        if self.config.opponent == "reference":
            return
        from accelerate import PartialState

        n = PartialState().num_processes
        if n > 1:
            raise RuntimeError(
                f"opponent {self.config.opponent!r} compares completions within their group, but "
                f"TRL hands each of the {n} processes its own slice of the batch and a group can "
                "span processes: train on one process, or use opponent 'reference'"
            )


_TRL_KWARGS = frozenset(
    {"trainer_state", "log_extra", "log_metric", "environments", "completion_ids"}
)


# ---------------------------------------------------------------------- comparisons


def _comparisons(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    references: Sequence[Any] | None,
    cfg: RewardJudgeConfig,
) -> list[_Comparison]:
    """Each comparison in the given order (and swapped, with `both_orders`), in one list."""
    contexts = [prompt_context(p, f"prompt {i}") for i, p in enumerate(prompts)]
    texts = [answer_text(c, f"completion {i}") for i, c in enumerate(completions)]
    if cfg.opponent == "reference":
        if references is None or len(references) != len(texts):
            got = "none" if references is None else len(references)
            raise ValueError(
                f"opponent 'reference' needs one reference per completion: {got} for "
                f"{len(texts)} completions"
            )
        refs = [answer_text(r, f"reference {i}") for i, r in enumerate(references)]
        matchups = [(i, REFERENCE, refs[i]) for i in range(len(texts))]
    else:
        matchups = [
            (i, j, texts[j])
            for group in _groups(prompts, cfg.group_size)
            for i, j in _group_matchups(group, cfg.opponent)
        ]
    out: list[_Comparison] = []
    for k, (i, j, other) in enumerate(matchups):
        pair = Pair(
            id=f"c{k}",
            source="reward",
            subset=cfg.opponent,
            context=contexts[i],
            response1=texts[i],
            response2=other,
            label=1,  # unused: who won is read from the verdict and the slots
        )
        out.append(_Comparison(pair, k, i, j))
        if cfg.both_orders:
            out.append(_Comparison(pair.swapped(), k, j, i))
    return out


def _groups(prompts: Sequence[Any], size: int | None) -> list[list[int]]:
    """Completion indices by group: blocks of `size`, or runs of equal consecutive prompts."""
    n = len(prompts)
    if size is not None:
        if n % size:
            raise ValueError(f"{n} completions do not split into groups of {size}")
        groups = [list(range(s, s + size)) for s in range(0, n, size)]
        for g in groups:
            if any(_key(prompts[i]) != _key(prompts[g[0]]) for i in g):
                raise ValueError(f"completions {g} form a group of different prompts")
        return groups
    groups: list[list[int]] = []
    for i in range(n):
        if groups and _key(prompts[i]) == _key(prompts[groups[-1][0]]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _group_matchups(group: list[int], opponent: str) -> list[tuple[int, int]]:
    """The unordered comparisons of one group: every pair, or a ring of neighbours."""
    g = len(group)
    if opponent == "group" or g <= 3:  # a ring of 3 is every pair
        return [(group[a], group[b]) for a in range(g) for b in range(a + 1, g)]
    return [(group[a], group[(a + 1) % g]) for a in range(g)]


def _key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


# ---------------------------------------------------------------------- the inputs, checked

TEXT_FORMS = (
    "a str, or chat messages: a list of {'role': str, 'content': str} dicts (content may also be "
    "a list of {'type': 'text', 'text': str} blocks)"
)
_SHORT = reprlib.Repr()  # a value in an error line: short, and one line (repr escapes newlines)
_SHORT.maxstring = _SHORT.maxother = 40
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 3
_SHORT.maxlevel = 2
_brief = _SHORT.repr


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    """What a bad value is, in a few words: "None", "an int 3", "a list [...]"."""
    if value is None:
        return "None"
    kind = type(value).__name__
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} {_brief(value)}"


def _batch(value: Any, name: str) -> list[Any]:
    """A batch argument as a list: any sized, indexable collection but a text or a mapping
    (verl hands numpy object arrays, TRL lists)."""
    if isinstance(value, str | bytes | Mapping) or not (
        hasattr(value, "__len__") and hasattr(value, "__getitem__")
    ):
        raise TypeError(f"{name} must be a list with one entry per completion, got {_kind(value)}")
    return list(value)


def _checked_str(text: str, what: str) -> str:
    """`text`, refused if it cannot be encoded (a lone surrogate: the tokenizer and the store
    need UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"{what} is not valid Unicode text: {text[e.start]!r} at character {e.start} (a lone "
            "surrogate); decode its bytes with errors='replace'"
        ) from None
    return text


def _messages(value: Any, what: str) -> list[dict[str, str]]:
    """Chat messages (a list of them, or one dict) as role/content texts, each checked."""
    if isinstance(value, bytes | bytearray):
        raise TypeError(f"{what} is bytes: decode it to str; accepted: {TEXT_FORMS}")
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list | tuple):
        raise TypeError(f"{what} is {_shown(value)}; accepted: {TEXT_FORMS}")
    if not value:
        raise ValueError(f"{what} is an empty message list; accepted: {TEXT_FORMS}")
    out = []
    for j, m in enumerate(value):
        here = f"{what}, message {j}"
        if not isinstance(m, Mapping):
            deeper = " (a batch nested one level too deep?)" if isinstance(m, list) else ""
            raise TypeError(
                f"{here} is {_shown(m)}, not a {{'role', 'content'}} dict{deeper}; "
                f"accepted: {TEXT_FORMS}"
            )
        role = m.get("role", "assistant")
        if not isinstance(role, str):
            raise TypeError(f"{here} has role {_shown(role)}: a str ('user', 'assistant', ...)")
        if "content" not in m:
            raise ValueError(f"{here} has no 'content' (keys: {sorted(map(str, m))})")
        out.append({"role": role, "content": _content(m["content"], here)})
    return out


def _content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return _checked_str(content, f"{where}'s content")
    if isinstance(content, list | tuple):  # content blocks: the judge reads their text
        parts = []
        for k, block in enumerate(content):
            text = block.get("text") if isinstance(block, Mapping) else None
            if not isinstance(text, str):
                raise TypeError(
                    f"{where}, content block {k} is {_brief(block)}: the judge reads text "
                    "blocks only ({'type': 'text', 'text': str})"
                )
            parts.append(_checked_str(text, f"{where}, content block {k}"))
        return "".join(parts)
    raise TypeError(
        f"{where} has content {_shown(content)}: a str or a list of "
        "{'type': 'text', 'text': str} blocks"
    )


def answer_text(value: Any, what: str) -> str:
    """The text of a completion or a reference: a str, or the last chat message's content.
    A None, a number, bytes, a wrong nesting or a bad message is a TypeError or ValueError of
    one line naming `what` (e.g. "completion 3") and the accepted forms."""
    if isinstance(value, str):
        return _checked_str(value, what)
    return _messages(value, what)[-1]["content"]


def prompt_context(value: Any, what: str) -> tuple[dict[str, str], ...]:
    """A TRL prompt (text, or conversational messages ending with the user's turn) as a Pair's
    context; anything else is one line naming `what` (e.g. "prompt 0")."""
    if isinstance(value, str):
        return ({"role": "user", "content": _checked_str(value, what)},)
    messages = _messages(value, what)
    if messages[-1]["role"] != "user":
        raise ValueError(
            f"{what}'s last message has role {messages[-1]['role']!r}: the judge needs the "
            "user's query last"
        )
    return tuple(messages)


# ---------------------------------------------------------------------- rewards


def _table(comparisons: list[_Comparison], verdicts: pd.DataFrame) -> pd.DataFrame:
    df = pd.DataFrame(
        {
            "comparison": [c.index for c in comparisons],
            "order": [c.pair.order for c in comparisons],
            "first": [c.first for c in comparisons],
            "second": [c.second for c in comparisons],
        }
    )
    for col in ("verdict", "p_first", "logprobs_kind", "text"):
        df[col] = verdicts[col].to_numpy() if len(verdicts) else []
    df["verdict"] = df["verdict"].astype("Int64")
    winner = df["first"].where(df["verdict"] == 1, df["second"])
    df["winner"] = winner.where(df["verdict"].notna()).astype("Int64")
    return df[list(COMPARISON_COLUMNS)]


def _rewards(table: pd.DataFrame, n: int, cfg: RewardJudgeConfig) -> list[float | None]:
    """Each completion's mean credit over its judged comparisons: 1 a win, 0 a loss (soft: its
    probability of winning); `cfg.unparsed_reward` where none of them gave a verdict."""
    credits: list[list[float]] = [[] for _ in range(n)]
    for row in table.itertuples(index=False):
        if pd.isna(row.verdict):
            continue
        if cfg.soft and pd.isna(row.p_first):
            raise ValueError(
                "a soft reward needs the verdict token's log-prob, and this judgment has no "
                "token ids (a server answering token strings: vLLM's return_tokens_as_token_ids "
                "gives ids): use soft=False"
            )
        p_first = float(row.p_first) if cfg.soft else float(row.verdict == 1)
        for who, credit in ((row.first, p_first), (row.second, 1.0 - p_first)):
            if who != REFERENCE:
                credits[who].append(credit)
    return [sum(c) / len(c) if c else cfg.unparsed_reward for c in credits]


# ---------------------------------------------------------------------- an HTTP judge, verl


def http_judge(
    endpoint: str | Sequence[str],
    model: str,
    tokenizer: str,
    store: str | Path,
    *,
    api: Literal["completions", "chat"] = "completions",
    logprobs_kind: Literal["raw", "processed", "unknown"] = "unknown",
    api_key: str | None = None,
    extra_body: Mapping[str, Any] | None = None,
    config: RewardJudgeConfig | Mapping[str, Any] | None = None,
    budget: Any = None,
    enable_thinking: bool = False,
    critique_with_result: bool = False,
    progress: bool = False,
    generation: GenerationSection | None = None,
) -> JudgeReward:
    """A `JudgeReward` over an OpenAI-compatible server (`vllm serve`; module
    rmlib.generation.http), every judgment stored in the SQLite file `store`.

    tokenizer: the judge's (a hub id, a local folder, or an embedded name) to render and count
    prompts. api / logprobs_kind / api_key / extra_body: `HTTPBackend`'s. config: a
    `RewardJudgeConfig` or its fields as a mapping (verl's reward kwargs are plain values).
    budget: a `rmlib.judge.prompts.PromptBudget` or its fields (None: its defaults), within the
    server's --max-model-len less the judgment's max_new_tokens (checked against the server's
    window before the first judgment). generation: the HTTP client's settings (timeouts,
    concurrency, retries: a params file's `generation` section; None: its defaults). The
    backend is built by the one builder (rmlib.generation.backends.build_backend).
    """
    from rmlib.generation.backends import build_backend
    from rmlib.generation.registry import Needs, Weights

    config = _config(config, "http_judge")
    if isinstance(budget, Mapping):
        budget = PromptBudget(**budget)
    if budget is not None and not isinstance(budget, PromptBudget):
        raise TypeError(
            f"http_judge: budget must be a PromptBudget or a mapping of its fields, got "
            f"{_kind(budget)}"
        )
    budget = budget or PromptBudget()
    gen = replace(
        generation or GenerationSection(),
        backend="http",
        endpoints=[endpoint] if isinstance(endpoint, str) else list(endpoint),
        http_api=api,
        http_logprobs_kind=logprobs_kind,
        progress=progress,
    )
    # the client's settings checked as a params file's generation section is (api, timeouts)
    gen = build_section(GenerationSection, dataclasses.asdict(gen), "generation", "http_judge")
    # the server's weights are its own: the store keys on the served name (precision unknown)
    weights = Weights(checkpoint=tokenizer, precision=None, served_name=model)
    needs = Needs(
        # the server's window is checked against the longest prompt + completion
        context_tokens=_context_tokens(budget, config),
        api_key=api_key,
        extra_body=dict(extra_body) if extra_body is not None else None,
        source="http_judge",
    )
    backend, tok = build_backend(gen, weights, store, needs)
    fmt = PromptFormat(tok, budget, enable_thinking, critique_with_result)
    return JudgeReward(backend, fmt, config)


def _context_tokens(budget: PromptBudget, config: RewardJudgeConfig) -> int:
    """The longest prompt + completion the judge sends: a Pref. prompt and its judgment, and
    with method 'reflectrm' a reflection prompt and its completion too."""
    infer = config.inference
    if config.method == "reflectrm":
        prompt = max(budget.max_prompt_tokens, budget.max_reflection_prompt_tokens)
        return prompt + max(infer.max_new_tokens, infer.reflection_max_new_tokens)
    return budget.max_prompt_tokens + infer.max_new_tokens


def _config(config: Any, source: str) -> RewardJudgeConfig:
    """A RewardJudgeConfig, or its fields as a mapping (verl's reward kwargs are plain values),
    validated as a params section is (one ConfigError line); None = the defaults."""
    if config is None:
        return RewardJudgeConfig()
    if isinstance(config, RewardJudgeConfig):
        return config
    if isinstance(config, Mapping):
        # a section given as its dataclass (inference=ReflectConfig(...)) is checked field by
        # field too, its errors named under this source
        fields = {
            k: dataclasses.asdict(v)
            if dataclasses.is_dataclass(v) and not isinstance(v, type)
            else v
            for k, v in config.items()
        }
        return build_section(RewardJudgeConfig, fields, "config", source)
    raise TypeError(
        f"{source}: config must be a RewardJudgeConfig or a mapping of its fields, got "
        f"{_kind(config)}"
    )


_VERL_JUDGES: dict[str, JudgeReward] = {}


def _verl_judge(judge_kwargs: Mapping[str, Any]) -> JudgeReward:
    """One judge per process and settings: verl calls compute_score once per response."""
    key = json.dumps(judge_kwargs, sort_keys=True, default=str)
    if key not in _VERL_JUDGES:
        kwargs = dict(judge_kwargs)
        config = _config(kwargs.pop("config", None), "verl reward_kwargs")
        if config.opponent != "reference":
            raise ValueError(
                "verl scores one response against its ground truth: opponent 'reference'"
            )
        _VERL_JUDGES[key] = http_judge(config=config, **kwargs)
    return _VERL_JUDGES[key]


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[str],
    extra_infos: Sequence[Mapping[str, Any] | None],
    *,
    prompt_key: str = "prompt",
    **judge_kwargs: Any,
) -> list[float]:
    """verl's batch form: the rewards of `solution_strs` against their ground truths (reference
    completions), judged in one call. `extra_infos[i][prompt_key]`: the prompt (text or chat
    messages). judge_kwargs: `http_judge`'s arguments (verl's reward_kwargs)."""
    batch = {
        "data_sources": _batch(data_sources, "data_sources"),
        "solution_strs": _batch(solution_strs, "solution_strs"),
        "ground_truths": _batch(ground_truths, "ground_truths"),
        "extra_infos": _batch(extra_infos, "extra_infos"),
    }
    if len({len(v) for v in batch.values()}) > 1:
        sizes = ", ".join(f"{len(v)} {k}" for k, v in batch.items())
        raise ValueError(f"verl's batch lists must be as long as each other: {sizes}")
    prompts = [_verl_prompt(info, prompt_key, i) for i, info in enumerate(batch["extra_infos"])]
    reward = _verl_judge(judge_kwargs)
    scores = reward.score(prompts, batch["solution_strs"], batch["ground_truths"])
    # verl wants a number for every response: a missing reward is no preference
    return [0.5 if s is None else float(s) for s in scores]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    **reward_kwargs: Any,
) -> float:
    """verl's custom reward function (verl 0.4's interface; module docstring): the judge's
    reward of `solution_str` against `ground_truth`, a reference completion.

    In verl's config: `custom_reward_function.path=<rmlib>/tools/reward.py`,
    `custom_reward_function.name=compute_score`, and `custom_reward_function.reward_kwargs`
    holding `endpoint`, `model`, `tokenizer`, `store` (and any other `http_judge` argument,
    `prompt_key`); the dataset's `extra_info` holds the prompt under `prompt_key` ("prompt").
    """
    return compute_score_batch(
        [data_source], [solution_str], [ground_truth], [extra_info], **reward_kwargs
    )[0]


def _verl_prompt(info: Mapping[str, Any] | None, key: str, index: int = 0) -> Any:
    if info is not None and not isinstance(info, Mapping):
        raise TypeError(
            f"extra_info {index} is {_kind(info)}: a dict holding the prompt under {key!r}"
        )
    if not info or key not in info:
        raise KeyError(
            f"the judge needs each response's prompt: put it in the dataset's extra_info under "
            f"{key!r} (or pass prompt_key in reward_kwargs); extra_info has {sorted(info or {})}"
        )
    prompt = info[key]
    return list(prompt) if not isinstance(prompt, str) else prompt

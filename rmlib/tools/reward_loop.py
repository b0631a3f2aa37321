"""The judge as the reward of verl's Reward Loop: an async `compute_score` that sends ReflectRM's
judgments to the judge verl serves (its reward router) or to any OpenAI-compatible server
(`rmlib serve`).

Read from verl's source at commit b178a3cd (v0.7.0-125, 2026-01-29; docs/advance/reward_loop.rst
"Last updated 12/20/2025"): `verl/trainer/ppo/reward.py` `get_custom_reward_fn` loads
`custom_reward_function.path`/`.name` and, for a coroutine function, wraps it as
`_call_with_kwargs_async(raw_fn, reward_kwargs, **kwargs)` (`custom_reward_function.reward_kwargs`
override the call's own keywords); `RewardLoopWorker.compute_score_batch` starts one task per
response, and the reward manager's `run_single` (`verl/experimental/reward_loop/reward_manager/
naive.py`, the same in dapo.py, limited.py, remote.py) awaits

    compute_score(data_source=, solution_str=, ground_truth=, extra_info=,
                  reward_router_address=, reward_model_tokenizer=)

the last two only when verl serves a reward model (`reward_model.enable`): the router's
"host:port" (no scheme; it forwards any path, `/v1/completions` included, to the reward model's
vLLM or SGLang servers, which serve the model under its local path) and the reward model's
tokenizer (loaded from that same local path). The result is a number or a dict with "score"
(every other key goes to verl's reward_extra_info): here `{"score": reward, "judge_parsed":
share of the response's comparisons that gave a verdict}`.

One call is one response; the judgments are `rmlib.tools.reward.JudgeReward`'s (greedy or two
stages, both orders, soft rewards). The calls of one event loop that arrive together (verl starts
a batch's at once) are judged in one batched call (`ReflectRMRewardLoop.gather_s`), one batch at a
time, so the judge's store is used by one thread. Opponents: 'reference' (the ground truth) or,
with `config.group_size` set to verl's `actor_rollout_ref.rollout.n`, 'group' / 'round_robin': a
call waits until its group's `group_size` responses to the same prompt have arrived in this
process (verl keeps a group in one worker's chunk), then the group is judged together.
"""

# no `from __future__ import annotations`: verl loads this file by path without entering it in
# sys.modules, and dataclasses resolve string annotations through sys.modules (an AttributeError)

import asyncio
import json
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rmlib.config import PARAMS, Positive, build_section, check_built, doc
from rmlib.tools.reward import JudgeReward, _config, _verl_prompt, http_judge


@dataclass
class ReflectRMRewardLoop:
    """How the Reward Loop's per-response calls become batched judge calls (module docstring)."""

    __pydantic_config__ = PARAMS

    gather_s: Positive = doc(
        "Seconds a call waits for the calls verl started with it before their comparisons go "
        "to the judge in one batched call (longer: bigger batches, later rewards).",
        0.05,
    )
    group_timeout_s: Positive = doc(
        "Seconds a call with opponent 'group' or 'round_robin' waits for the rest of its group "
        "(config.group_size responses to its prompt) before it fails.",
        600.0,
    )

    def __post_init__(self) -> None:
        check_built(self, "ReflectRMRewardLoop", "rmlib.tools.reward_loop")


@dataclass
class _Call:
    prompt: Any
    completion: str
    reference: str
    future: asyncio.Future
    key: str = field(default="")


class _Gatherer:
    """The calls of one event loop for one judge: gathered, judged a batch at a time."""

    def __init__(self, reward: JudgeReward, loop_cfg: ReflectRMRewardLoop) -> None:
        self.reward, self.cfg = reward, loop_cfg
        self.waiting: list[_Call] = []
        self.lock = asyncio.Lock()

    async def judge(self, prompt: Any, completion: str, reference: str) -> tuple[float, float]:
        grouped = self.reward.config.opponent != "reference"
        call = _Call(prompt, completion, reference, asyncio.get_running_loop().create_future())
        call.key = json.dumps(prompt, sort_keys=True, default=str)
        self.waiting.append(call)
        await asyncio.sleep(self.cfg.gather_s)  # the calls verl started with this one arrive
        async with self.lock:
            if not call.future.done():
                batch = self._ready(grouped)
                if batch:
                    await self._judge(batch)
        if not grouped or call.future.done():
            return await call.future
        try:
            return await asyncio.wait_for(call.future, self.cfg.group_timeout_s)
        except TimeoutError:
            self.waiting.remove(call)
            size = self.reward.config.group_size
            have = sum(c.key == call.key for c in self.waiting) + 1
            raise TimeoutError(
                f"opponent {self.reward.config.opponent!r}: {have} of the group's {size} "
                f"responses to a prompt reached this process in {self.cfg.group_timeout_s:g} s: "
                "config.group_size must be verl's actor_rollout_ref.rollout.n, and a group must "
                "stay in one reward worker (or use opponent 'reference')"
            ) from None

    def _ready(self, grouped: bool) -> list[_Call]:
        """The calls to judge now: all (reference), or every complete group (in arrival
        order), each group's calls next to each other."""
        if not grouped:
            batch, self.waiting = self.waiting, []
            return batch
        size = self.reward.config.group_size
        assert size is not None  # checked when the judge was made
        by_prompt: dict[str, list[_Call]] = {}
        for c in self.waiting:
            by_prompt.setdefault(c.key, []).append(c)
        batch = []
        for calls in by_prompt.values():
            batch += calls[: len(calls) // size * size]
        taken = {id(c) for c in batch}
        self.waiting = [c for c in self.waiting if id(c) not in taken]
        return batch

    async def _judge(self, batch: list[_Call]) -> None:
        """One judge call for the batch (in a worker thread); each call's future gets its
        (reward, parsed share), or the judge's error."""
        prompts = [c.prompt for c in batch]
        completions = [c.completion for c in batch]
        references = [c.reference for c in batch]
        try:
            rewards = await asyncio.to_thread(self.reward.score, prompts, completions, references)
            parsed = _parsed_shares(self.reward, len(batch))
        except Exception as e:  # every call of the batch fails with the judge's error
            for c in batch:
                c.future.set_exception(e)
            return
        for c, r, p in zip(batch, rewards, parsed, strict=True):
            # verl wants a number for every response: a missing reward is no preference
            c.future.set_result((0.5 if r is None else float(r), p))


def _parsed_shares(reward: JudgeReward, n: int) -> list[float]:
    """The share of each completion's comparisons (both orders) that gave a verdict."""
    table = reward.last
    shares = []
    for i in range(n):
        mine = table[(table["first"] == i) | (table["second"] == i)]
        shares.append(float(mine["verdict"].notna().mean()) if len(mine) else 0.0)
    return shares


# one judge per process and settings (verl calls once per response); one gatherer per event loop
_JUDGES: dict[str, JudgeReward] = {}
_GATHERERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Gatherer]] = (
    weakref.WeakKeyDictionary()
)


def _plain(value: Any) -> Any:
    """verl's reward_kwargs (OmegaConf containers: Mappings and Sequences) as dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


def _judge_for(judge_kwargs: dict[str, Any]) -> JudgeReward:
    key = json.dumps(judge_kwargs, sort_keys=True, default=str)
    if key not in _JUDGES:
        kwargs = dict(judge_kwargs)
        config = _config(kwargs.pop("config", None), "verl reward_kwargs")
        if config.opponent != "reference" and config.group_size is None:
            raise ValueError(
                f"opponent {config.opponent!r} under verl's Reward Loop (one call a response): "
                "set config.group_size to verl's actor_rollout_ref.rollout.n"
            )
        _JUDGES[key] = http_judge(config=config, **kwargs)
    return _JUDGES[key]


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    reward_router_address: str | None = None,
    reward_model_tokenizer: Any = None,
    *,
    prompt_key: str = "prompt",
    reward_loop: Mapping[str, Any] | None = None,
    **reward_kwargs: Any,
) -> dict[str, float]:
    """verl's Reward Loop custom reward function (module docstring): the judge's reward of
    `solution_str` (the response) against `ground_truth` (a reference response) or against the
    other responses of its group, for the prompt `extra_info[prompt_key]` (text or chat
    messages).

    The judge: at `reward_router_address` (verl's router, the reward model verl serves) under the
    name of `reward_model_tokenizer.name_or_path` (verl serves it under its local path), prompts
    rendered with the tokenizer at that path; without a router (`reward_model.enable=False`),
    `endpoint`, `model` and `tokenizer` in reward_kwargs name a server (`rmlib serve`).
    reward_kwargs: `store` (the judgments' SQLite file; required) and any other `http_judge`
    argument (`config`: a `RewardJudgeConfig` as a mapping, `api`, `logprobs_kind`, `budget`,
    ...); `reward_loop`: `ReflectRMRewardLoop`'s fields.
    """
    judge_kwargs = _plain(reward_kwargs)
    if reward_router_address is not None:
        judge_kwargs.setdefault("endpoint", f"http://{reward_router_address}")
        served = getattr(reward_model_tokenizer, "name_or_path", None)
        if served:
            judge_kwargs.setdefault("model", served)
            judge_kwargs.setdefault("tokenizer", served)
    missing = [k for k in ("endpoint", "model", "tokenizer", "store") if k not in judge_kwargs]
    if missing:
        raise ValueError(
            f"verl reward_kwargs lack {missing}: give store always, and endpoint, model and "
            "tokenizer where verl serves no reward model (no reward_router_address)"
        )
    loop_cfg = build_section(
        ReflectRMRewardLoop, _plain(reward_loop or {}), "reward_loop", "verl reward_kwargs"
    )
    reward = _judge_for(judge_kwargs)
    prompt = _verl_prompt(extra_info, prompt_key)
    loop = asyncio.get_running_loop()
    gatherers = _GATHERERS.setdefault(loop, {})
    key = json.dumps([judge_kwargs, reward_loop], sort_keys=True, default=str)
    if key not in gatherers:
        gatherers[key] = _Gatherer(reward, loop_cfg)
    score, parsed = await gatherers[key].judge(prompt, solution_str, ground_truth)
    return {"score": score, "judge_parsed": parsed}

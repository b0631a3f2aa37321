"""rmlib.tools.reward_loop called exactly as verl's Reward Loop calls a custom reward function
(verl b178a3cd, v0.7.0-125: module docstring), against a fake OpenAI-compatible router on
127.0.0.1 answering from the scripted judge (no model runs; a few seconds)."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
from functools import partial
from pathlib import Path

import pytest
from test_generation_http import FakeServer
from test_reward_judge import ScriptedJudge

from rmlib.config import ConfigError
from rmlib.generation.models import TINY_QWEN3, load_tokenizer
from rmlib.judge.prompts import PromptFormat
from rmlib.reflect.settings import ReflectConfig
from rmlib.tools import reward_loop
from rmlib.tools.reward import JudgeReward, RewardJudgeConfig


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(TINY_QWEN3)


@pytest.fixture
def router(tok):
    """verl's router stands in: an OpenAI-compatible server under the reward model's local path
    (the name verl's vLLM server answers to), the scripted judge behind it."""
    judge = ScriptedJudge(tok)
    judge.tokenizer = tok  # FakeServer reads it to answer token strings
    server = FakeServer(judge, served=(tok.name_or_path,), max_model_len=32768)
    yield server
    server.close()


def _verl_loaded_fn():
    """verl/utils/import_utils.py load_module: the file loaded by path under a fresh name."""
    path = Path(reward_loop.__file__)
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(str(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_score


async def _call_with_kwargs_async(raw_fn, extra_kwargs, *args, **kwargs):
    """verl/trainer/ppo/reward.py, verbatim: reward_kwargs override the call's keywords."""
    merged_kwargs = {**kwargs, **extra_kwargs}
    return await raw_fn(*args, **merged_kwargs)


def _verl_batch(fn, samples, router_address, rm_tokenizer) -> list:
    """RewardLoopWorker.compute_score_batch (one task a sample) and the reward manager's
    run_single (naive.py): the keywords it passes, extra_info as it fills it."""

    async def run_single(data_source, response, ground_truth, extra_info):
        extra_info = dict(extra_info)
        extra_info["num_turns"] = None
        extra_info["rollout_reward_scores"] = {}
        extra_reward_kwargs = (
            {"reward_router_address": router_address, "reward_model_tokenizer": rm_tokenizer}
            if router_address is not None
            else {}
        )
        assert inspect.iscoroutinefunction(fn)  # verl's is_async_reward_score
        return await fn(
            data_source=data_source,
            solution_str=response,
            ground_truth=ground_truth,
            extra_info=extra_info,
            **extra_reward_kwargs,
        )

    async def batch():
        tasks = [asyncio.create_task(run_single(*s)) for s in samples]
        return await asyncio.gather(*tasks)

    return asyncio.run(batch())


def _expected(tok, cfg: RewardJudgeConfig, prompts, completions, references):
    """The same judgments without HTTP or verl: JudgeReward on the scripted judge."""
    return JudgeReward(ScriptedJudge(tok), PromptFormat(tok), cfg).score(
        prompts, completions, references
    )


def test_verl_calls_it_with_the_router_and_gets_the_judges_rewards(tok, router, tmp_path):
    raw = _verl_loaded_fn()
    assert inspect.iscoroutinefunction(raw)  # get_custom_reward_fn picks the async wrapper
    reward_kwargs = {"store": str(tmp_path / "judge.sqlite")}
    fn = partial(_call_with_kwargs_async, raw, reward_kwargs)
    address = router.url.removeprefix("http://")  # verl's router address: host:port
    answers = ["GOOD answer", "plain answer", "another plain one"]
    samples = [("src", a, "ref", {"prompt": "q"}) for a in answers]
    got = _verl_batch(fn, samples, address, tok)
    want = _expected(tok, RewardJudgeConfig(), ["q"] * 3, answers, ["ref"] * 3)
    assert [g["score"] for g in got] == want == [1.0, 0.5, 0.5]
    assert all(g["judge_parsed"] == 1.0 for g in got)
    # both orders of each response reached the router under the reward model's served name
    assert router.requests == 6 and {b["model"] for b in router.bodies} == {tok.name_or_path}


def test_two_stages_and_group_opponents_through_the_router(tok, router, tmp_path):
    inference = {"n_samples": 3, "run_greedy": False, "run_random_anchor": False}
    config = {"opponent": "group", "group_size": 3, "method": "reflectrm", "inference": inference}
    fn = partial(
        _call_with_kwargs_async,
        _verl_loaded_fn(),
        {"store": str(tmp_path / "s.sqlite"), "config": config},
    )
    address = router.url.removeprefix("http://")
    # two groups of three, their responses interleaved as verl's tasks may finish
    samples = [
        ("src", "GOOD", "-", {"prompt": "p"}),
        ("src", "z", "-", {"prompt": "other"}),
        ("src", "x", "-", {"prompt": "p"}),
        ("src", "GOOD", "-", {"prompt": "other"}),
        ("src", "y", "-", {"prompt": "p"}),
        ("src", "w", "-", {"prompt": "other"}),
    ]
    got = [g["score"] for g in _verl_batch(fn, samples, address, tok)]
    cfg = RewardJudgeConfig(
        opponent="group", group_size=3, method="reflectrm", inference=ReflectConfig(**inference)
    )
    p = _expected(tok, cfg, ["p"] * 3, ["GOOD", "x", "y"], None)
    other = _expected(tok, cfg, ["other"] * 3, ["z", "GOOD", "w"], None)
    assert got == [p[0], other[0], p[1], other[1], p[2], other[2]]
    assert got[0] == got[3] == 1.0 and got[2] < 1.0


def test_without_a_router_the_reward_kwargs_name_the_server(tok, router, tmp_path):
    """reward_model.enable=False (the judge on `rmlib serve`): verl passes no router."""
    reward_kwargs = {
        "store": str(tmp_path / "j.sqlite"),
        "endpoint": router.url,
        "model": tok.name_or_path,
        "tokenizer": TINY_QWEN3,
        "config": {"both_orders": False},
    }
    fn = partial(_call_with_kwargs_async, _verl_loaded_fn(), reward_kwargs)
    got = _verl_batch(fn, [("src", "plain", "ref", {"prompt": "q"})], None, None)
    assert got == [{"score": 1.0, "judge_parsed": 1.0}]  # one order keeps the slot-1 bias


def test_its_mistakes_are_one_line(tok, router, tmp_path):
    fn = reward_loop.compute_score
    address = router.url.removeprefix("http://")
    info = {"prompt": "q"}
    with pytest.raises(ValueError, match=r"lack \['store'\]"):
        _verl_batch(fn, [("s", "a", "r", info)], address, tok)
    store = {"store": str(tmp_path / "m.sqlite")}
    groups = partial(fn, **store, config={"opponent": "group"})
    with pytest.raises(ValueError, match="group_size to verl's actor_rollout_ref.rollout.n"):
        _verl_batch(groups, [("s", "a", "r", info)], address, tok)
    with pytest.raises(ConfigError, match="gather_s"):
        _verl_batch(
            partial(fn, **store, reward_loop={"gather_s": 0}), [("s", "a", "r", info)], address, tok
        )
    # a group that never completes in this process fails, naming why
    short = partial(
        fn,
        **store,
        config={"opponent": "group", "group_size": 3},
        reward_loop={"group_timeout_s": 0.2},
    )
    with pytest.raises(TimeoutError, match="2 of the group's 3 responses"):
        _verl_batch(short, [("s", "a", "r", info), ("s", "b", "r", info)], address, tok)

"""The judge as the reward of a real TRL GRPO step, served by a real CPU `vllm serve` (slow).

The judge is the tiny random Qwen3 held to the verdict format by vLLM's structured outputs (a
regex), so its verdicts parse: a judge that never parses would make every equality below pass on
empty verdicts. One server start (the fixture of test_generation_http) serves the GRPO step
(completions API, opponents within the group), then the chat API, a soft reward against a
reference and verl's compute_score on the same group.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from test_generation_http import MODEL, vllm_server  # noqa: F401  (the server fixture)

from rmlib.generation.base import SamplingParams
from rmlib.generation.http import VLLM_EXTRAS
from rmlib.generation.models import TINY_QWEN3, resolve_model
from rmlib.generation.store import CachedBackend, GenerationStore
from rmlib.judge.verdict import parse_verdict
from rmlib.reflect.settings import ReflectConfig
from rmlib.tools.reward import compute_score, http_judge

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]
KEY = "sk-vllm"
# the verdict format, forced: a short analysis, then one of the two verdict sentences
VERDICT_FORMAT = (
    r"<Analysis>[a-z]{1,4}</Analysis>\n<Result>(Response 1 is better than Response 2|"
    r"Response 2 is better than Response 1)</Result>"
)
EXTRA = {**VLLM_EXTRAS, "structured_outputs": {"regex": VERDICT_FORMAT}}
# within the fixture's --max-model-len 512: a prompt of <= 400 tokens + a judgment of <= 96
BUDGET = {"max_prompt_tokens": 400}
INFERENCE = ReflectConfig(max_new_tokens=96, run_greedy=False, run_random_anchor=False)
GROUP = 3


def _judge(url: str, store, **kw):
    config = {"opponent": "group", "group_size": GROUP, "inference": INFERENCE}
    config.update(kw.pop("config", {}))
    return http_judge(
        url,
        MODEL,
        TINY_QWEN3,
        store,
        api_key=KEY,
        extra_body=EXTRA,
        logprobs_kind="raw",  # the fixture starts vLLM with --logprobs-mode raw_logprobs
        config=config,
        budget=BUDGET,
        **kw,
    )


def _expected(table) -> list[float]:
    """Each completion's share of wins among its parsed comparisons, from the verdicts alone."""
    out = []
    for i in range(GROUP):
        mine = table[((table["first"] == i) | (table["second"] == i)) & table["verdict"].notna()]
        out.append(float((mine["winner"] == i).mean()) if len(mine) else 0.5)
    return out


def test_a_grpo_step_rewarded_by_a_served_judge(vllm_server, tmp_path):  # noqa: F811
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    store = tmp_path / "judge.sqlite"
    reward = _judge(vllm_server, store)
    seen: dict[str, list] = {}

    def record(prompts, completions, **kwargs):  # what TRL handed the judge, for the checks
        seen.update(prompts=list(prompts), completions=list(completions))
        return [0.0] * len(completions)

    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": "Name a prime number."}], "reference": "7"}] * 2
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        max_steps=1,
        num_generations=GROUP,
        per_device_train_batch_size=GROUP,
        generation_batch_size=GROUP,
        max_completion_length=8,
        beta=0.0,
        learning_rate=1e-3,
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=resolve_model(TINY_QWEN3),
        reward_funcs=[reward, record],
        args=args,
        train_dataset=data,
    )
    trainer.train()

    table, rewards = reward.last, reward.rewards
    print("\nsample group:", [c[-1]["content"] for c in seen["completions"]])
    print(table.drop(columns="text").to_string(), "\nrewards:", rewards)
    assert len(table) == GROUP * (GROUP - 1)  # every pair of the group, both orders
    parsed = table["verdict"].notna().mean()
    assert parsed >= 0.8, table["text"].tolist()
    # the rewards are the stored judgments' verdicts: each text parses to its row's verdict,
    # and every judgment is in the store, which alone gives the same rewards again
    for text, verdict in zip(table["text"], table["verdict"], strict=True):
        assert parse_verdict(text).choice == (None if pd.isna(verdict) else int(verdict))
    assert rewards == pytest.approx(_expected(table))
    logged = trainer.state.log_history[0]
    assert logged["rewards/reflectrm_judge/mean"] == pytest.approx(sum(rewards) / GROUP, abs=1e-6)
    with GenerationStore(store) as s:
        assert s.count(f"http:{MODEL}") == len(table)
        reward.backend = CachedBackend(_NoServer(), s, progress=False)
        assert reward.score(seen["prompts"], seen["completions"]) == rewards

    # one order only: the given-order judgments come from the store, and the rewards are
    # their verdicts again (a judge biased to one slot no longer cancels out)
    one_order = _judge(vllm_server, store, config={"both_orders": False})
    got = one_order.score(seen["prompts"], seen["completions"])
    assert list(one_order.last["verdict"]) == list(table["verdict"][table["order"] == "given"])
    assert got == pytest.approx(_expected(one_order.last))
    assert one_order.backend.stats.misses == 0
    print("one order only:", got)

    # the chat API: the same judgments (the server renders the same prompt), raw log-probs
    chat = _judge(vllm_server, tmp_path / "chat.sqlite", api="chat")
    assert chat.score(seen["prompts"], seen["completions"]) == rewards
    assert list(chat.last["verdict"]) == list(table["verdict"])

    # soft, against a reference: P(completion wins) from the verdict token's log-prob
    soft = _judge(vllm_server, store, config={"opponent": "reference", "soft": True})
    refs = ["7"] * GROUP
    got = soft.score(seen["prompts"], seen["completions"], refs)
    print("soft rewards against the reference '7':", got)
    assert set(soft.last["logprobs_kind"]) == {"raw"}
    assert all(0 < g < 1 for g in got) and soft.last["p_first"].notna().all()
    # verl's function: the same judge (named by reward kwargs), the same reward
    hard = _judge(vllm_server, store, config={"opponent": "reference"})
    want = hard.score(seen["prompts"][:1], seen["completions"][:1], refs[:1])
    verl = compute_score(
        "demo",
        seen["completions"][0][-1]["content"],
        "7",
        {"prompt": seen["prompts"][0]},
        endpoint=vllm_server,
        model=MODEL,
        tokenizer=TINY_QWEN3,
        store=str(store),
        api_key=KEY,
        extra_body=EXTRA,
        config={"opponent": "reference", "inference": INFERENCE.__dict__},
        budget=BUDGET,
    )
    assert verl == want[0] and not math.isnan(verl)


class _NoServer:
    """A backend that must not be reached: everything comes from the store."""

    identity = f"http:{MODEL}"

    def generate(self, prompts, params: SamplingParams, n: int = 1, offset: int = 0):
        raise AssertionError(f"{len(prompts)} judgments were not in the store")

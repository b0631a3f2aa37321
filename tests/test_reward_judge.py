"""rmlib.tools.reward with a scripted judge (fast): the TRL reward function's comparisons, orders,
groups, soft rewards and refusals; verl's compute_score from a store; the chat envelope."""

from __future__ import annotations

import asyncio
import math
import re

import pytest
from trl.trainer.utils import is_async_callable

from rmlib.generation.base import Generation, SamplingParams
from rmlib.generation.http import (
    ChatMessagesTokenizer,
    HTTPBackend,
    _chat_generation,
    read_chat_prompt,
)
from rmlib.generation.models import TINY_QWEN3, load_tokenizer
from rmlib.generation.store import CachedBackend, GenerationStore
from rmlib.judge.prompts import PromptFormat, build_pref_prompt, count_tokens, render
from rmlib.judge.verdict import parse_verdict, result_sentence, verdict_token
from rmlib.reflect.settings import ReflectConfig
from rmlib.tools.reward import JudgeReward, RewardJudgeConfig, compute_score

_BLOCK = re.compile(r"\[(Response|Critique) ([12]) begins\]\n(.*?)\n\[\1 \2 ends\]", re.S)


class ScriptedJudge:
    """Prefers the response holding GOOD; otherwise says 1 (a position bias); answers garbage
    when a response holds MUTE; stage 2 always prefers Critique 1. Every token's log-prob is
    log(0.8), so a verdict's probability is 0.8."""

    identity = "scripted-judge"

    def __init__(self, tok) -> None:
        self.tok, self.calls = tok, []

    def generate(self, prompts, params: SamplingParams, n: int = 1, offset: int = 0):
        self.calls.append(len(prompts))
        return [[self._one(p) for _ in range(n)] for p in prompts]

    def _one(self, prompt: str) -> Generation:
        blocks = {(k, int(i)): body for k, i, body in _BLOCK.findall(prompt)}
        if ("Critique", 1) in blocks:
            text = f"<Analysis>c</Analysis><Result>{result_sentence(1, 'refl')}</Result>"
        elif "MUTE" in blocks[("Response", 1)] + blocks[("Response", 2)]:
            text = "no verdict"
        else:
            choice = 2 if "GOOD" in blocks[("Response", 2)] else 1
            text = f"<Analysis>a</Analysis><Result>{result_sentence(choice)}</Result>"
        ids = self.tok.encode(text, add_special_tokens=False)
        return Generation(text, ids, [math.log(0.8)] * len(ids), "stop", 10)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(TINY_QWEN3)


def _reward(tok, **cfg) -> tuple[JudgeReward, ScriptedJudge]:
    judge = ScriptedJudge(tok)
    return JudgeReward(judge, PromptFormat(tok), RewardJudgeConfig(**cfg)), judge


def test_against_a_reference_both_orders_cancel_the_position_bias(tok):
    reward, judge = _reward(tok)
    got = reward.score(["q", "q"], ["GOOD answer", "plain answer"], ["ref", "ref"])
    # GOOD wins in both orders; the plain one wins only where the biased judge favours slot 1
    assert got == [1.0, 0.5]
    assert judge.calls == [4]  # one batched call: 2 completions x 2 orders
    assert list(reward.last["order"]) == ["given", "swapped"] * 2
    assert list(reward.last["winner"]) == [0, 0, 1, -1]


def test_one_order_keeps_the_bias(tok):
    reward, _ = _reward(tok, both_orders=False)
    assert reward.score(["q", "q"], ["GOOD", "plain"], ["ref", "ref"]) == [1.0, 1.0]


def test_within_the_group_each_completion_meets_the_others(tok):
    reward, judge = _reward(tok, opponent="group")
    got = reward.score(["p"] * 3 + ["other"] * 2, ["GOOD", "x", "y", "GOOD", "z"])
    assert got == [1.0, 0.25, 0.25, 1.0, 0.0]
    assert judge.calls == [2 * (3 + 1)]  # 3 + 1 pairs in two groups, both orders


def test_round_robin_meets_two_neighbours(tok):
    reward, judge = _reward(tok, opponent="round_robin", group_size=5)
    got = reward.score(["p"] * 5, ["a", "GOOD", "b", "c", "d"])
    assert judge.calls == [10]  # a ring of 5: 5 pairs x 2 orders
    assert got[1] == 1.0 and [got[i] for i in (2, 3, 4)] == [0.25, 0.5, 0.5]
    assert got[0] == 0.25  # meets GOOD (loses both) and d (one of two)
    with pytest.raises(ValueError, match="different prompts"):
        reward.score(["p"] * 4 + ["q"], ["a"] * 5)


def test_soft_rewards_are_the_verdicts_probability(tok):
    reward, _ = _reward(tok, soft=True)
    got = reward.score(["q", "q"], ["GOOD", "plain"], ["ref", "ref"])
    assert got == pytest.approx([0.8, 0.5])
    assert set(reward.last["logprobs_kind"]) == {"unknown"}
    with pytest.raises(ValueError, match="method 'greedy' only"):
        RewardJudgeConfig(soft=True, method="reflectrm")


def test_a_completion_with_no_verdict_gets_the_unparsed_reward(tok):
    reward, _ = _reward(tok)
    assert reward.score(["q"], ["MUTE"], ["ref"]) == [0.5]
    assert reward.last["verdict"].isna().all() and reward.last["winner"].isna().all()
    none, _ = _reward(tok, unparsed_reward=None)
    assert none.score(["q"], ["MUTE"], ["ref"]) == [None]


def test_two_stages(tok):
    inference = ReflectConfig(n_samples=3, run_greedy=False, run_random_anchor=False)
    reward, judge = _reward(tok, method="reflectrm", inference=inference)
    assert reward.score(["q", "q"], ["GOOD", "plain"], ["ref", "ref"]) == [1.0, 0.5]
    assert judge.calls[0] == 4  # stage 1: every order of every comparison in one call


def test_trl_calls_it_async_with_its_arguments(tok, tmp_path):
    reward, judge = _reward(tok)
    # through a store opened here: the judge runs in a worker thread
    reward.backend = CachedBackend(judge, GenerationStore(tmp_path / "s.sqlite"), progress=False)
    assert is_async_callable(reward) and reward.__name__ == "reflectrm_judge"
    metrics = {}
    prompts = [[{"role": "user", "content": "q"}]] * 2
    completions = [[{"role": "assistant", "content": c}] for c in ("GOOD", "plain")]
    trl = dict(trainer_state=None, log_extra=None, completion_ids=[[1], [2]])
    got = asyncio.run(
        reward(
            prompts=prompts,
            completions=completions,
            reference=["r", "r"],
            log_metric=metrics.__setitem__,
            **trl,
        )
    )
    assert got == [1.0, 0.5] and metrics == {"reflectrm_judge/parsed": 1.0}
    with pytest.raises(KeyError, match=r"'reference'.*lacks.*\['answer'\]"):
        asyncio.run(reward(prompts=prompts, completions=completions, answer=["r", "r"], **trl))


def test_group_rewards_refuse_several_processes(tok, monkeypatch):
    import accelerate

    class TwoProcesses:
        num_processes = 2

    monkeypatch.setattr(accelerate, "PartialState", TwoProcesses)
    reward, _ = _reward(tok, opponent="group")
    with pytest.raises(RuntimeError, match="2 processes.*one process, or use opponent 'reference'"):
        asyncio.run(reward(prompts=["p", "p"], completions=["a", "b"]))
    ref, _ = _reward(tok)  # a reference needs no group: fine
    assert asyncio.run(ref(prompts=["p"], completions=["GOOD"], reference=["r"])) == [1.0]


def test_verl_compute_score_reads_its_judge_from_the_store(tok, tmp_path):
    """The verl function with the judge named by reward kwargs: every judgment is in the store
    (written here through the scripted judge under the HTTP judge's identity), so no server."""
    store = tmp_path / "judge.sqlite"
    scripted = ScriptedJudge(tok)
    scripted.identity = "http:judge"
    with GenerationStore(store) as s:
        reward = JudgeReward(CachedBackend(scripted, s, progress=False), PromptFormat(tok))
        reward.score(["q"], ["GOOD"], ["ref"])
    kwargs = dict(endpoint="http://127.0.0.1:9", model="judge", tokenizer=TINY_QWEN3, store=store)
    assert compute_score("src", "GOOD", "ref", {"prompt": "q"}, **kwargs) == 1.0
    with pytest.raises(KeyError, match="extra_info under 'prompt'"):
        compute_score("src", "GOOD", "ref", {"question": "q"}, **kwargs)
    with pytest.raises(ValueError, match="opponent 'reference'"):
        compute_score("src", "x", "y", {"prompt": "q"}, config={"opponent": "group"}, **kwargs)


def test_the_verdict_token_is_found_in_odd_tokenizations(tok):
    text = "<Analysis>ok</Analysis>\n<Result>Response 2 is better than Response 1</Result>"
    ids = tok.encode(text, add_special_tokens=False)
    t = verdict_token(text, ids, tok.decode)
    assert tok.decode([ids[t]]).strip().endswith("2")
    # one token per character (a grammar-constrained decode can tokenize so)
    chars = [tok.encode(c, add_special_tokens=False)[0] for c in text]
    t = verdict_token(text, chars, tok.decode)
    assert text[t] == "2"
    assert verdict_token("no verdict", ids, tok.decode) is None
    assert verdict_token(text, [-1] * len(ids), tok.decode) is None


def test_chat_envelopes_count_as_the_rendered_prompt(tok):
    from rmlib.data.pair import Pair

    pair = Pair("1", "s", "", ({"role": "user", "content": "q"},), "a", "b", 1)
    chat = ChatMessagesTokenizer(tok)
    built = build_pref_prompt(chat, pair)
    messages, kwargs = read_chat_prompt(built.text)
    assert kwargs == {"enable_thinking": False} and messages[0]["role"] == "user"
    rendered = render(tok, messages, enable_thinking=False)
    assert built.n_tokens == count_tokens(tok, rendered) > 50
    backend = HTTPBackend("http://127.0.0.1:9", "m", api="chat", progress=False)
    with pytest.raises(ValueError, match="rendered text"):
        backend._request("<|im_start|>user", SamplingParams.greedy(4), 1, None)
    request = backend._request(built.text, SamplingParams.greedy(4), 1, None)
    assert request["logprobs"] is True and request["messages"] == messages
    assert request["extra_body"]["chat_template_kwargs"] == {"enable_thinking": False}
    extra = request["extra_body"]
    assert extra["top_k"] == -1 and extra["add_special_tokens"] is False
    # a server that refuses unknown fields (OpenAI's API) gets none of vLLM's extensions
    plain = HTTPBackend("http://127.0.0.1:9", "m", api="chat", progress=False, vllm_extras=False)
    request = plain._request(built.text, SamplingParams.greedy(4), 1, None)
    assert "extra_body" not in request and request["temperature"] == 0.0


def test_a_chat_answer_without_log_probs_is_refused():
    from openai.types.chat.chat_completion import Choice

    def choice(logprobs):
        message = {"role": "assistant", "content": "hi"}
        answer = {"index": 0, "finish_reason": "stop", "message": message, "logprobs": logprobs}
        return Choice.model_validate(answer)

    with pytest.raises(ValueError, match="no per-token log-probs"):
        _chat_generation(choice(None), 3)
    with pytest.raises(ValueError, match="no per-token log-probs"):
        _chat_generation(choice({"content": []}), 3)
    lp = {"content": [{"token": "token_id:5", "logprob": -0.5, "top_logprobs": []}]}
    g = _chat_generation(choice(lp), 3)
    assert (g.token_ids, g.logprobs, parse_verdict(g.text).failure) == ([5], [-0.5], "missing")


def test_the_model_card_shows_the_adapter_judging_served_and_as_a_reward(tmp_path):
    from rmlib.training.model_card import write_model_card

    out = tmp_path / "unified"
    out.mkdir()
    meta = {
        "backbone": "Qwen/Qwen3-4B",
        "precision": "nf4",
        "global_step": 2,
        "seed": 0,
        "settings": {"lora_r": 24},
        "n_items": 3,
        "enable_thinking": True,
        "provenance": {
            "budget": {"max_reflection_prompt_tokens": 4096},
            "critique_with_result": True,
        },
    }
    card = write_model_card(out, meta).read_text()
    assert f"rmlib judge pairs.jsonl --model Qwen/Qwen3-4B --adapter {out}" in card
    assert "vllm serve Qwen/Qwen3-4B --enable-lora --max-lora-rank 32" in card  # r=24 -> 32
    assert f"--lora-modules unified={out} --max-model-len 5120" in card  # 4096 + 1024
    assert "--logprobs-mode raw_logprobs" in card and "--served-model unified" in card
    snippet = card.split("```python\n")[1].split("```")[0]
    assert "enable_thinking=True, critique_with_result=True" in snippet
    compile(snippet, "card", "exec")  # the snippet is Python
    assert card.index("## Use") < card.index("## Evaluation")
    # each `rmlib judge` command on the card is one the CLI takes, flags and all
    import shlex

    from rmlib.cli import build_parser

    blocks = [b.split("```")[0].replace("\\\n", " ") for b in card.split("```bash\n")[1:]]
    judged = [line for b in blocks for line in b.splitlines() if line.startswith("rmlib judge")]
    assert len(judged) == 2
    for command in judged:
        args = build_parser().parse_args(shlex.split(command)[1:])
        assert args.pairs == "pairs.jsonl" and args.output == "predictions.jsonl"
    (served,) = [line[2:] for b in blocks for line in b.splitlines() if "rmlib serve" in line]
    args = build_parser().parse_args(shlex.split(served)[1:])
    assert (args.checkpoint, args.adapters) == ("Qwen/Qwen3-4B", [("unified", str(out))])
    assert args.max_model_len == 5120


def test_a_run_selects_the_chat_api_and_declares_its_log_probs(tmp_path):
    from rmlib.config import ConfigError
    from rmlib.run import backends
    from rmlib.run.config import config_from_dict
    from rmlib.run.folder import RunFolder

    generation = {"backend": "http", "endpoints": ["http://127.0.0.1:9"], "progress": False}
    cfg = config_from_dict(
        {
            "model": {"backbone": TINY_QWEN3, "precision": "fp32"},
            "generation": {**generation, "http_api": "chat", "http_logprobs_kind": "raw"},
        }
    )
    ref = backends.ModelRef("base", TINY_QWEN3, None, "fp32")
    gen, tok = backends.backend(cfg, RunFolder(tmp_path / "run"), ref)
    assert (gen.backend.api, gen.backend.logprobs_kind) == ("chat", "raw")
    assert isinstance(tok, ChatMessagesTokenizer) and tok.padding_side == "left"
    with pytest.raises(ConfigError, match="http_api"):
        config_from_dict({"generation": {**generation, "http_api": "responses"}})

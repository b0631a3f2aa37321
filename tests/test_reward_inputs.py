"""The reward API refuses what it cannot judge (#29): every bad prompt, completion, reference,
batch or config is a TypeError or ValueError (ConfigError for a config) of one line naming its
index and the accepted forms, never a raw AttributeError or ZeroDivisionError, and never a
reward for a None. Example tests first, then properties (hypothesis) over shapes, types, nesting,
encodings and sizes."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmlib.config import ConfigError
from rmlib.generation.base import Generation, SamplingParams
from rmlib.generation.models import TINY_QWEN3, load_tokenizer
from rmlib.judge.prompts import PromptFormat
from rmlib.judge.verdict import result_sentence
from rmlib.reflect.settings import ReflectConfig
from rmlib.tools.reward import (
    JudgeReward,
    RewardJudgeConfig,
    compute_score,
    compute_score_batch,
)

FORMS = "accepted: a str, or chat messages"


class FirstWins:
    """A judge that always prefers Response 1 (log-prob log(0.8) per token)."""

    identity = "first-wins"

    def __init__(self, tok) -> None:
        self.tok, self.calls = tok, 0

    def generate(self, prompts, params: SamplingParams, n: int = 1, offset: int = 0):
        self.calls += 1
        text = f"<Analysis>a</Analysis><Result>{result_sentence(1)}</Result>"
        ids = self.tok.encode(text, add_special_tokens=False)
        return [[Generation(text, ids, [math.log(0.8)] * len(ids), "stop", 5)] for _ in prompts]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(TINY_QWEN3)


@pytest.fixture(scope="module")
def reward(tok):
    return JudgeReward(FirstWins(tok), PromptFormat(tok))


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and 0 < len(text) < 400, text
    return text


# ---------------------------------------------------------------- examples: inputs

MSG = {"role": "assistant", "content": "x"}


@pytest.mark.parametrize(
    "completions, error, match",
    [
        ([None], TypeError, rf"^completion 0 is None; {FORMS}"),
        (["a", 3], TypeError, rf"^completion 1 is an int 3; {FORMS}"),
        ([b"abc"], TypeError, "^completion 0 is bytes: decode it to str"),
        ([[[MSG]]], TypeError, r"^completion 0, message 0 is a list .*nested one level too deep"),
        ([[{"role": "assistant"}]], ValueError, r"^completion 0, message 0 has no 'content'"),
        ([[{"content": None}]], TypeError, r"^completion 0, message 0 has content None"),
        ([[{"role": 1, "content": "x"}]], TypeError, "^completion 0, message 0 has role an int"),
        ([[{"content": [{"type": "image"}]}]], TypeError, "content block 0 .* text blocks only"),
        ([[]], ValueError, "^completion 0 is an empty message list"),
        (["ok", "a\udc80b"], ValueError, r"^completion 1 is not valid Unicode .* character 1"),
        ("abc", TypeError, "^completions must be a list with one entry per completion, got str"),
        ({"a": 1}, TypeError, "^completions must be a list .* got dict"),
    ],
)
def test_a_bad_completion_is_one_typed_line(reward, completions, error, match):
    n = len(completions) if isinstance(completions, list) else 1
    with pytest.raises(error, match=match) as e:
        reward.score(["q"] * n, completions, ["ref"] * n)
    one_line(e.value)
    assert reward.backend.calls == 0  # refused before any judgment


def test_bad_prompts_and_references_are_one_typed_line(reward):
    with pytest.raises(ValueError, match="^prompt 0's last message has role 'assistant'") as e:
        reward.score([[MSG]], ["a"], ["r"])
    one_line(e.value)
    with pytest.raises(TypeError, match="^prompt 1 is None"):
        reward.score(["q", None], ["a", "b"], ["r", "r"])
    with pytest.raises(TypeError, match="^reference 0 is None"):
        reward.score(["q"], ["a"], [None])
    with pytest.raises(ValueError, match="one reference per completion: 1 for 2 completions"):
        reward.score(["q", "q"], ["a", "b"], ["r"])
    with pytest.raises(ValueError, match="one reference per completion: none for 1"):
        reward.score(["q"], ["a"])
    with pytest.raises(TypeError, match="^references must be a list"):
        reward.score(["q"], ["a"], "r")


def test_every_accepted_form_is_judged_alike(reward):
    text = "The answer."
    forms = [
        text,
        {"role": "assistant", "content": text},
        [{"role": "assistant", "content": text}],
        [{"role": "assistant", "content": [{"type": "text", "text": text}]}],
        (
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "The "}, {"text": "answer."}],
            },
        ),
    ]
    prompts = ["q", [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]]
    for prompt in prompts:
        got = reward.score([prompt] * len(forms), forms, [text] * len(forms))
        assert got == [0.5] * len(forms)  # both orders against an equal text: the bias cancels
        texts = set(reward.last["text"])
        assert len(texts) == 1


def test_the_constructor_refuses_what_is_not_a_judge(tok):
    with pytest.raises(TypeError, match="^backend must be a Backend"):
        JudgeReward(object(), PromptFormat(tok))
    with pytest.raises(TypeError, match="^fmt must be a rmlib.judge.prompts.PromptFormat"):
        JudgeReward(FirstWins(tok), tok)
    with pytest.raises(TypeError, match="config must be a RewardJudgeConfig or a mapping"):
        JudgeReward(FirstWins(tok), PromptFormat(tok), ["group"])


# ---------------------------------------------------------------- examples: the config


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: RewardJudgeConfig(group_size=0),
            "^rmlib.tools.reward: 'RewardJudgeConfig.group_size': Input should be greater than or "
            "equal to 1, got 0$",
        ),
        (lambda: RewardJudgeConfig(opponent="grp"), "'RewardJudgeConfig.opponent'.*got 'grp'"),
        (
            lambda: RewardJudgeConfig(inference=ReflectConfig(n_samples=0)),
            "'RewardJudgeConfig.inference.n_samples': Input should be greater",
        ),
        (lambda: RewardJudgeConfig(unparsed_reward=math.inf), "unparsed_reward'.*finite"),
        (lambda: RewardJudgeConfig(soft=True, method="reflectrm"), "method 'greedy' only"),
    ],
)
def test_a_config_built_in_python_is_validated_as_a_params_section(make, match):
    with pytest.raises(ValueError, match=match) as e:
        make()
    one_line(e.value)


def test_a_config_changed_after_it_was_built_is_checked_at_the_call(tok):
    reward = JudgeReward(FirstWins(tok), PromptFormat(tok), RewardJudgeConfig(opponent="group"))
    reward.config.group_size = 0  # would divide by zero
    with pytest.raises(ConfigError, match="'JudgeReward.config.group_size'.*got 0"):
        reward.score(["p", "p"], ["a", "b"])


def test_verl_keyword_arguments_are_validated_as_the_cli_validates(tok, tmp_path):
    kwargs = dict(endpoint="http://127.0.0.1:9", model="j", tokenizer=TINY_QWEN3)
    kwargs["store"] = tmp_path / "s.sqlite"
    cases = [
        ({"group_size": 0}, r"^verl reward_kwargs: 'config.group_size': .* got 0$"),
        ({"oponent": "group"}, r"unknown key 'config.oponent' \(did you mean 'opponent'\?"),
        ({"inference": {"n_samples": -1}}, "'config.inference.n_samples'"),
        ({"inference": ReflectConfig(n_samples=0)}, "^verl reward_kwargs: 'config.inference.n_s"),
    ]
    for config, match in cases:
        with pytest.raises(ConfigError, match=match) as e:
            compute_score("s", "x", "y", {"prompt": "q"}, config=config, **kwargs)
        one_line(e.value)
    with pytest.raises(ConfigError, match="^http_judge: 'generation.http_api'"):
        compute_score("s", "x", "y", {"prompt": "q"}, api="responses", **kwargs)
    with pytest.raises(TypeError, match="^http_judge: budget must be a PromptBudget"):
        compute_score("s", "x", "y", {"prompt": "q"}, budget=[512], **kwargs)
    with pytest.raises(
        TypeError, match="^extra_info 0 is list: a dict holding the prompt under 'prompt'"
    ):
        compute_score("s", "x", "y", ["q"], **kwargs)
    with pytest.raises(ValueError, match="as long as each other: 1 data_sources, 2 solution_strs"):
        compute_score_batch(["s"], ["x", "y"], ["r", "r"], [{"prompt": "q"}] * 2, **kwargs)


# ---------------------------------------------------------------- properties

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# short texts, any code point but surrogates (those have their own property)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.binary(max_size=6),
    texts,
    st.text(st.one_of(surrogates, st.characters(max_codepoint=0x7F)), min_size=1, max_size=6),
)
# anything, nested: lists and tuples of it, dicts with message-like keys and any values
anything = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner),
        st.dictionaries(
            st.sampled_from(["role", "content", "text", "type", "x"]), inner, max_size=3
        ),
    ),
    max_leaves=8,
)
messages = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["assistant", "user"]), "content": texts}),
    min_size=1,
    max_size=2,
)
good = st.one_of(texts, messages)


def _ok_or_one_line(call, n: int) -> None:
    try:
        got = call()
    except (TypeError, ValueError) as e:  # ConfigError is a ValueError
        message = one_line(e)
        assert any(w in message for w in ("completion", "prompt", "reference")), message
    else:
        assert len(got) == n and all(r is None or 0.0 <= r <= 1.0 for r in got)


def _unicode(x: object) -> bool:
    return isinstance(x, str) and not any(0xD800 <= ord(c) <= 0xDFFF for c in x)


def _message(m: object) -> bool:
    if not isinstance(m, dict) or "content" not in m or not isinstance(m.get("role", ""), str):
        return False
    c = m["content"]
    blocks = isinstance(c, list | tuple) and all(
        isinstance(b, dict) and _unicode(b.get("text")) for b in c
    )
    return _unicode(c) or blocks


def accepted(x: object) -> bool:
    """The test's own statement of the accepted forms of a completion."""
    if isinstance(x, dict):
        return _message(x)
    if isinstance(x, list | tuple):
        return bool(x) and all(_message(m) for m in x)
    return _unicode(x)


@PROPERTY
@given(completions=st.lists(st.one_of(good, anything), min_size=1, max_size=3))
def test_any_completions_give_rewards_or_one_typed_line(reward, completions):
    """Accepted forms get rewards; anything else is refused, naming the first bad index."""
    n = len(completions)
    bad = [i for i, c in enumerate(completions) if not accepted(c)]
    if not bad:
        got = reward.score(["q"] * n, completions, ["ref"] * n)
        assert len(got) == n and all(0.0 <= r <= 1.0 for r in got)
        return
    with pytest.raises((TypeError, ValueError), match=f"^completion {bad[0]}[ ,]") as e:
        reward.score(["q"] * n, completions, ["ref"] * n)
    one_line(e.value)


@PROPERTY
@given(prompts=st.lists(st.one_of(good, anything), min_size=1, max_size=3), data=st.data())
def test_any_prompts_and_references_give_rewards_or_one_typed_line(reward, prompts, data):
    n = len(prompts)
    refs = data.draw(st.lists(st.one_of(good, anything), min_size=n, max_size=n))
    _ok_or_one_line(lambda: reward.score(prompts, ["answer"] * n, refs), n)


@PROPERTY
@given(completions=st.lists(good, min_size=1, max_size=3))
def test_well_formed_completions_always_get_a_reward(reward, completions):
    n = len(completions)
    got = reward.score(["q"] * n, completions, ["ref"] * n)
    assert got == [0.5] * n  # a judge that always says "Response 1", both orders


@PROPERTY
@given(
    text=st.text(st.one_of(surrogates, st.characters(max_codepoint=0x7F)), min_size=1, max_size=8),
    slot=st.integers(0, 2),
    form=st.sampled_from(["str", "message", "block"]),
)
def test_text_that_is_not_unicode_is_refused_by_index(reward, text, slot, form):
    bad = {"str": text, "message": [{"role": "assistant", "content": text}]}.get(
        form, [{"role": "assistant", "content": [{"type": "text", "text": text}]}]
    )
    completions = ["fine"] * 3
    completions[slot] = bad
    has_surrogate = any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    if not has_surrogate:
        assert len(reward.score(["q"] * 3, completions, ["r"] * 3)) == 3
        return
    with pytest.raises(ValueError, match=f"^completion {slot}.* not valid Unicode") as e:
        reward.score(["q"] * 3, completions, ["r"] * 3)
    one_line(e.value)


@PROPERTY
@given(depth=st.integers(2, 60))
def test_any_nesting_depth_is_one_line(reward, depth):
    value: object = "x"
    for _ in range(depth):
        value = [value]
    with pytest.raises(TypeError, match="^completion 0") as e:
        reward.score(["q"], [value], ["r"])
    one_line(e.value)


@PROPERTY
@given(
    fields=st.fixed_dictionaries(
        {},
        optional={
            "opponent": st.one_of(st.sampled_from(["reference", "group", "round_robin"]), texts),
            "group_size": st.one_of(st.none(), st.integers(-3, 5), st.floats(), texts),
            "unparsed_reward": st.one_of(st.none(), st.floats()),
            "method": st.sampled_from(["greedy", "reflectrm", "best"]),
            "soft": st.booleans(),
            "inference": st.fixed_dictionaries({}, optional={"n_samples": st.integers(-2, 3)}),
        },
    )
)
def test_any_config_mapping_is_a_config_or_one_config_line(fields):
    from rmlib.tools.reward import _config

    try:
        cfg = _config(fields, "verl reward_kwargs")
    except ValueError as e:
        assert one_line(e).startswith("verl reward_kwargs: ") or "greedy' only" in str(e)
        return
    assert cfg.group_size is None or cfg.group_size >= 1
    assert cfg.inference.n_samples >= 1
    assert cfg.unparsed_reward is None or math.isfinite(cfg.unparsed_reward)


@PROPERTY
@given(sizes=st.lists(st.integers(0, 3), min_size=4, max_size=4))
def test_verl_batches_of_unequal_lengths_are_refused_before_any_judge(sizes):
    lists = [["s"] * sizes[0], ["x"] * sizes[1], ["r"] * sizes[2], [{"prompt": "q"}] * sizes[3]]
    if len(set(sizes)) == 1:
        return  # equal: judged (tests above); here no judge exists to call
    with pytest.raises(ValueError, match="^verl's batch lists must be as long as each other") as e:
        compute_score_batch(
            *lists, endpoint="http://127.0.0.1:9", model="m", tokenizer="t", store="s"
        )
    one_line(e.value)

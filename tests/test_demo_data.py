"""demo data: determinism, disjoint splits, balance, labels checked independently per family."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from rmlib.data.demo import (
    DEFAULT_N,
    FAMILIES,
    STYLES,
    default_size,
    load_demo,
    reference_analysis,
    split_of,
)
from rmlib.data.pair import Pair
from rmlib.judge.prompts import format_judgment
from rmlib.judge.verdict import parse_verdict

REFUSAL_WORDS = re.compile(r"sorry|can't|cannot|decline|unable|won't", re.IGNORECASE)


def rows(pairs: list[Pair]) -> list[dict]:
    return [p.to_row() for p in pairs]


def better(p: Pair) -> str:
    return p.response1 if p.label == 1 else p.response2


def worse(p: Pair) -> str:
    return p.response2 if p.label == 1 else p.response1


@pytest.fixture(scope="module")
def train() -> list[Pair]:
    return load_demo(split="train", n=200).pairs


@pytest.fixture(scope="module")
def evals() -> list[Pair]:
    return load_demo(split="eval", n=120).pairs


def test_defaults():
    res = load_demo()
    assert res.source == "demo" and res.split == "train" and res.n_rows == 64
    assert len(res.pairs) == DEFAULT_N["train"] == default_size("train") == 64
    assert len(load_demo(split="eval").pairs) == default_size("eval") == 32
    assert {p.source for p in res.pairs} == {"demo"}
    assert {p.subset for p in res.pairs} == set(FAMILIES)


def test_deterministic_under_seed():
    assert rows(load_demo(split="eval", seed=3).pairs) == rows(
        load_demo(split="eval", seed=3).pairs
    )
    assert rows(load_demo(seed=0).pairs) != rows(load_demo(seed=1).pairs)


def test_ids_and_queries_are_unique(train):
    assert len({p.id for p in train}) == len(train)
    assert len({p.query for p in train}) == len(train)


@pytest.mark.parametrize("seeds", [(0, 0), (0, 1), (5, 2)])
def test_splits_are_disjoint(seeds):
    tr = load_demo(split="train", n=300, seed=seeds[0]).pairs
    ev = load_demo(split="eval", n=120, seed=seeds[1]).pairs
    assert not {p.query for p in tr} & {p.query for p in ev}
    assert all(split_of(p.query) == "train" for p in tr)
    assert all(split_of(p.query) == "eval" for p in ev)


@pytest.mark.parametrize("n", [8, 30, 32, 64, 101])
def test_families_and_slots_balanced(n):
    pairs = load_demo(split="eval", n=n, seed=7).pairs
    assert len(pairs) == n
    per_family = Counter(p.subset for p in pairs)
    assert max(per_family.values()) - min(per_family.values()) <= 1
    ones = sum(p.label == 1 for p in pairs)
    assert abs(ones - n / 2) <= 0.5
    for fam in FAMILIES:
        labels = [p.label for p in pairs if p.subset == fam]
        assert abs(labels.count(1) - len(labels) / 2) <= 0.5


def test_prefix_of_the_list_is_balanced():
    first = load_demo(split="train", n=64).pairs[:8]
    assert Counter(p.subset for p in first) == dict.fromkeys(FAMILIES, 2)


def test_kinds_are_balanced_within_families():
    train = load_demo(split="train", n=120).pairs
    for fam in FAMILIES:
        kinds = Counter(p.meta["kind"] for p in train if p.subset == fam)
        assert max(kinds.values()) - min(kinds.values()) <= 1, (fam, kinds)


def test_slot_placement_varies_with_seed():
    a = [p.label for p in load_demo(seed=0).pairs]
    b = [p.label for p in load_demo(seed=1).pairs]
    assert a != b


def test_texts_are_short(train, evals):
    from transformers import AutoTokenizer

    from rmlib.generation.models import qwen3_tokenizer_dir

    tok = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())
    for p in train + evals:
        n = len(tok(f"{p.query}\n{p.response1}\n{p.response2}")["input_ids"])
        assert 15 <= n <= 150, (p.id, n)


# ---------------------------------------------------------------- labels, checked independently


def check_arithmetic(p: Pair) -> None:
    a, op, b = re.search(r"(\d+) (\+|-|×|plus|minus|times) (\d+)", p.query).groups()
    x, y = int(a), int(b)
    truth = {"+": x + y, "plus": x + y, "-": x - y, "minus": x - y}.get(op, x * y)
    final = [int(re.findall(r"-?\d+", r)[-1]) for r in (better(p), worse(p))]
    assert final[0] == truth and final[1] != truth


def check_constraint(p: Pair) -> None:
    q, good, bad = p.query, better(p), worse(p)
    if m := re.search(r"exactly (\d+) words", q):
        k = int(m[1])
        assert len(good.split()) == k != len(bad.split())
    elif "capital letters" in q:
        assert good == good.upper() and bad != bad.upper()
    elif "lowercase" in q:
        assert good == good.lower() and bad != bad.lower()
    elif m := re.search(r"the word '(\w+)'", q):
        words = lambda s: {w.strip(".,").lower() for w in s.split()}  # noqa: E731
        assert m[1] in words(good) and m[1] not in words(bad)
    else:
        k = int(re.search(r"exactly (\d+)", q)[1])
        assert len(good.splitlines()) == k != len(bad.splitlines())


PASSAGE_FACTS = {  # question pattern -> the passage's answer pattern
    r"How many apples": r"bought (\d+ apples)",
    r"On which day": r"on (\w+day)",
    r"what time does the museum open": r"opens at (\d+ a\.m\.)",
    r"How much does a ticket cost": r"costs (\d+ dollars)",
    r"Where was \w+ born": r"born in (\w+)",
    r"What did \w+ study": r"to study (\w+)",
}


def check_passage(p: Pair) -> None:
    passage = p.query.split("Passage: ")[1].split("\n\nQuestion:")[0]
    question = p.query.split("Question: ")[1]
    fact = next(f for q, f in PASSAGE_FACTS.items() if re.search(q, question, re.IGNORECASE))
    answer = re.search(fact, passage)[1]
    assert answer in better(p) and answer not in worse(p)


def check_refusal(p: Pair) -> None:
    assert REFUSAL_WORDS.search(worse(p)) and not REFUSAL_WORDS.search(better(p))


CHECKS = {
    "arithmetic": check_arithmetic,
    "constraint": check_constraint,
    "passage": check_passage,
    "refusal": check_refusal,
}


def test_labels_are_correct_by_construction(train, evals):
    for p in train + evals:
        CHECKS[p.subset](p)
        CHECKS[p.subset](p.swapped())


def test_a_wrong_label_is_caught(train):
    """The checks above can fail: each rejects the pair with its responses exchanged."""
    for fam in FAMILIES:
        p = next(x for x in train if x.subset == fam)
        flipped = Pair(
            p.id, p.source, p.subset, p.context, p.response2, p.response1, p.label, p.meta
        )
        with pytest.raises(AssertionError):
            CHECKS[fam](flipped)


# ---------------------------------------------------------------- reference analyses


@pytest.mark.parametrize("style", STYLES)
def test_reference_analysis_parses_back_to_the_label(train, evals, style):
    for p in train + evals:
        for q in (p, p.swapped()):
            analysis = reference_analysis(q, style)
            assert f"Therefore Response {q.label} is better." in analysis
            target = format_judgment(analysis, q.label)
            assert parse_verdict(target).choice == q.label


def slot_sentences(analysis: str) -> dict[int, str]:
    """What the evidence style writes about each slot: Response 1's from its name to Response
    2's, Response 2's from there to the conclusion."""
    i1, i2 = analysis.index("Response 1 "), analysis.index("Response 2 ")
    return {1: analysis[i1:i2], 2: analysis[i2 : analysis.index("Therefore")]}


def test_evidence_style_describes_response_1_then_2_and_judges_each_where_it_is_named(train, evals):
    for p in train + evals:
        for q in (p, p.swapped()):
            a = reference_analysis(q, "evidence")
            assert a.index("Response 1 ") < a.index("Response 2 ") < a.index("Therefore")
            good, bad = slot_sentences(a)[q.label], slot_sentences(a)[3 - q.label]
            if q.subset == "refusal":
                assert "it answers the request" in good and "it refuses" in bad
                # the quoted openings are each response's own first words
                assert f"begins '{' '.join(worse(q).split()[:3])}" in bad
                assert f"begins '{' '.join(better(q).split()[:3])}" in good
            if q.subset == "passage":
                assert "matches" in good and q.meta["answer"] in good
                assert "contradicts" in bad and q.meta["wrong"] in bad
            if q.subset == "arithmetic":
                assert "which is right" in good and f"answers {q.meta['answer']}." in good
                assert "which is wrong" in bad and f"answers {q.meta['wrong']}." in bad


def test_evidence_style_of_a_swapped_pair_swaps_the_slots(train):
    for p in train[:24]:
        a, b = reference_analysis(p, "evidence"), reference_analysis(p.swapped(), "evidence")
        first_of_a, second_of_b = slot_sentences(a)[1], slot_sentences(b)[2]
        assert second_of_b[len("Response 2") :].startswith(first_of_a[len("Response 1") :])


def test_unknown_style_is_refused(train):
    with pytest.raises(ValueError, match="unknown analysis style 'terse'"):
        reference_analysis(train[0], "terse")  # type: ignore[arg-type]


def test_reference_analysis_survives_a_table_round_trip(train):
    p = train[0]
    assert reference_analysis(Pair.from_row(p.to_row())) == reference_analysis(p)


def test_reference_analysis_names_the_real_difference(train):
    arith = next(p for p in train if p.subset == "arithmetic")
    assert str(arith.meta["answer"]) in reference_analysis(arith)
    passage = next(p for p in train if p.subset == "passage")
    assert passage.meta["wrong"] in reference_analysis(passage)


def test_reference_analysis_rejects_other_pairs():
    other = Pair("x", "rewardbench", "chat", ({"role": "user", "content": "q"},), "a", "b", 1)
    with pytest.raises(ValueError, match="not a demo pair"):
        reference_analysis(other)


# ---------------------------------------------------------------- arguments


def test_family_subset():
    pairs = load_demo(n=10, families=["passage", "refusal"]).pairs
    assert Counter(p.subset for p in pairs) == {"passage": 5, "refusal": 5}


def test_an_exhausted_kind_hands_its_share_to_the_others():
    pairs = load_demo(split="eval", n=60, families=["refusal"]).pairs
    kinds = Counter(p.meta["kind"] for p in pairs)
    assert len(pairs) == 60 and len({p.query for p in pairs}) == 60
    assert kinds["refusal_scary_harmless"] < 15 < max(kinds.values())


def test_zero_pairs():
    assert load_demo(n=0).pairs == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"path": "some/dir"}, "no path"),
        ({"split": "test"}, "split"),
        ({"families": ["poetry"]}, "unknown demo families"),
        ({"families": []}, "no demo families"),
        ({"families": ["refusal", "refusal"]}, "listed twice"),
        ({"n": -1}, "n must be"),
        ({"on_error": "ignore"}, "on_error"),
        ({"colour": "blue"}, "unknown options"),
        ({"split": "eval", "n": 5000}, "lower n"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_demo(**kwargs)

"""Shared-prefix reuse and n-sample sharing in rmlib.generation.hf, against the plain path.

The plain path (min_shared_prefix=0) prefills every prompt whole; the shared path prefills the
common prefix of one pair's reflection prompts once. Both must give the same tokens and the same
log-probs (fp32, tiny Qwen3), while the counters show the prefill saved.
"""

from __future__ import annotations

import random

import pytest
import torch

from rmlib.data.demo import load_demo
from rmlib.generation.base import Generation, SamplingParams
from rmlib.generation.batching import (
    MAX_PADDING,
    PrefixGroup,
    plan_batches,
    prefill_plan,
    shared_prefix_groups,
)
from rmlib.generation.hf import HFBackend
from rmlib.generation.models import TINY_QWEN3, load_backbone
from rmlib.judge import prompts as P

torch.set_num_threads(2)
GREEDY = SamplingParams.greedy(max_new_tokens=8)
SAMPLED = SamplingParams(max_new_tokens=8, temperature=1.0, seed=5)


# ---------------------------------------------------------------- pure logic


def _synthetic() -> list[list[int]]:
    """Two 'pairs' of three prompts each: a 40-token header common to all, a 100-token pair
    body, then a distinct 5-token tail; plus a prompt sharing only the header."""
    header = list(range(1000, 1040))
    ids = []
    for pair in range(2):
        body = [2000 + 200 * pair + k for k in range(100)]
        for j in range(3):
            ids.append(header + body + [3000 + 10 * pair + j] * 5)
    ids.append(header + [4000 + k for k in range(30)])
    return ids


def test_groups_follow_the_pairs_not_the_common_header():
    ids = _synthetic()
    groups = shared_prefix_groups(ids, 32)
    assert groups == [
        PrefixGroup((0, 1, 2), 140),  # header + pair body, shared by the pair's prompts
        PrefixGroup((3, 4, 5), 140),
        PrefixGroup((6,), 0),  # shares the 40-token header only: worth less than the pairs
    ]
    # a threshold above the pair prefix, or 0, shares nothing
    assert all(g.prefix == 0 for g in shared_prefix_groups(ids, 141))
    assert shared_prefix_groups(ids, 0) == [PrefixGroup((i,), 0) for i in range(7)]
    # with only header-sharing prompts left, the header is worth sharing
    alone = [ids[0], ids[6], ids[6][:-1] + [9]]
    assert shared_prefix_groups(alone, 32) == [PrefixGroup((0, 1, 2), 40)]


def test_identical_prompts_share_everything():
    ids = [[1] * 50 + [2], [7] * 40, [1] * 50 + [2]]
    assert shared_prefix_groups(ids, 32) == [PrefixGroup((0, 2), 51), PrefixGroup((1,), 0)]


def _width(batch, lengths) -> int:
    """KV width of a batch from its items' prefixes, recomputed here from the definition."""
    head = max(it.prefix or lengths[it.prompt] for it in batch)
    tail = max(lengths[it.prompt] - (it.prefix or lengths[it.prompt]) for it in batch)
    return head + tail


def test_plan_keeps_groups_together_within_the_budget():
    ids = _synthetic() + [list(range(300))]
    lengths = [len(x) for x in ids]
    groups = shared_prefix_groups(ids, 32)
    samples = [0, 1]
    for budget in (100_000, 2_000, 700):
        batches = plan_batches(lengths, samples, 20, budget, 64, groups)
        seen = [(it.prompt, s) for b in batches for it in b for s in it.samples]
        assert sorted(seen) == [(p, s) for p in range(len(ids)) for s in samples]
        for b in batches:
            rows = sum(len(it.samples) for it in b)
            assert rows == 1 or rows * (_width(b, lengths) + 20) <= budget
            for it in b:  # a prefix is shared only with another prompt of its group in the batch
                mates = [o for o in b if o.group == it.group and o.prompt != it.prompt]
                assert it.prefix == (groups[it.group].prefix if mates else 0)
    # a generous budget: one batch, the longest prompt first, each pair's prompts side by side
    [batch] = plan_batches(lengths, samples, 20, 100_000, 64, groups)
    assert [it.prompt for it in batch] == [7, 0, 1, 2, 3, 4, 5, 6]
    assert [it.prefix for it in batch] == [0, 140, 140, 140, 140, 140, 140, 0]


def test_plan_limits_padding():
    lengths = [800, 240, 780, 300, 250]
    plan = plan_batches(lengths, [0], 16, 10**9, 64, max_padding=0.5)
    # sorted by length; 250 would make 4 x 800 positions for 2,130 tokens (> 1.5 x): new batch
    assert [[it.prompt for it in b] for b in plan] == [[0, 2, 3], [4, 1]]
    strict = plan_batches(lengths, [0], 16, 10**9, 64, max_padding=0.0)
    assert [len(b) for b in strict] == [1, 1, 1, 1, 1]  # any padding at all starts a new batch
    assert len(plan_batches(lengths, [0], 16, 10**9, 64)) == 1  # default: the budget alone


def test_default_padding_packs_several_reflection_groups_per_batch():
    """Reflection prompts of one pair share a prefix and differ in critique length; at the
    default padding limit a batch must hold several pairs (a batch per pair decodes ~4x slower)."""
    rng = random.Random(0)
    lengths, groups = [], []
    for _ in range(21):
        prefix = rng.randint(230, 290)
        members = []
        for _ in range(3):
            lengths.append(prefix + rng.randint(150, 260))
            members.append(len(lengths) - 1)
        groups.append(PrefixGroup(tuple(members), prefix))
    plan = plan_batches(lengths, [0], 128, 16384, 32, groups, max_padding=MAX_PADDING)
    assert len(plan) <= 5 and sum(len(b) for b in plan) == 63


def test_prefill_plan_runs_each_shared_prefix_once():
    ids = _synthetic()
    [batch] = plan_batches(
        [len(x) for x in ids], [0], 5, 100_000, 64, shared_prefix_groups(ids, 32)
    )
    units, unit_of, suffixes = prefill_plan(batch, ids)
    assert len(units) == 3  # two pair prefixes + the lone prompt whole
    for it, u, suffix in zip(batch, unit_of, suffixes, strict=True):
        assert units[u] + suffix == ids[it.prompt]
    assert sum(map(len, units)) + sum(map(len, suffixes)) == 2 * 140 + 6 * 5 + len(ids[6])


# ---------------------------------------------------------------- on the tiny Qwen3


@pytest.fixture(scope="module")
def tiny():
    return load_backbone(TINY_QWEN3, precision="fp32")


@pytest.fixture(scope="module")
def texts(tiny):
    """Reflection prompts of two demo pairs (3 each, critiques in both slots), a Pref. prompt,
    and a repeated reflection prompt (its suffix after the shared prefix is empty)."""
    _, tok = tiny
    out = []
    for pair in load_demo(split="eval", n=2).pairs:
        for j in range(3):
            mine = f"<Analysis>Critique {j}: response {1 + j % 2} is right.</Analysis>"
            anchor = "<Analysis>The anchor thinks response 1 is right.</Analysis>"
            c1, c2 = (mine, anchor) if j % 2 else (anchor, mine)
            out.append(P.build_refl_prompt(tok, pair, c1, c2).text)
    out.append(P.build_pref_prompt(tok, load_demo(split="eval", n=3).pairs[2]).text)
    out.append(out[0])
    return out


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def _backend(tiny, **kw) -> HFBackend:
    model, tok = tiny
    return HFBackend(model, tok, identity="tiny-fp32", progress=False, **kw)


def _assert_same(a: list[list[Generation]], b: list[list[Generation]]) -> None:
    assert [[g.token_ids for g in gs] for gs in a] == [[g.token_ids for g in gs] for gs in b]
    for ga, gb in zip(sum(a, []), sum(b, []), strict=True):
        torch.testing.assert_close(
            torch.tensor(ga.logprobs), torch.tensor(gb.logprobs), atol=1e-4, rtol=0
        )
        assert (ga.text, ga.finish_reason, ga.prompt_tokens) == (
            gb.text,
            gb.finish_reason,
            gb.prompt_tokens,
        )


def _top2_gap(model, prompt_ids: list[int], gen: Generation) -> float:
    """Smallest gap between the two best logits along a generated path (full forward)."""
    seq = torch.tensor([prompt_ids + gen.token_ids])
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0, len(prompt_ids) - 1 : -1].float()
    top = logits.topk(2, dim=-1).values
    return float((top[:, 0] - top[:, 1]).min())


def test_shared_prefix_greedy_equals_the_plain_path(tiny, texts):
    model, tok = tiny
    plain, shared = _backend(tiny, min_shared_prefix=0), _backend(tiny)
    a = plain.generate(texts, GREEDY)
    b = shared.generate(texts, GREEDY)
    # precondition: no near-tied argmax on the way, so equal tokens are a real check
    gaps = [_top2_gap(model, _ids(tok, t), g[0]) for t, g in zip(texts, a, strict=True)]
    assert min(gaps) > 1e-3, gaps
    _assert_same(a, b)
    ids = [_ids(tok, t) for t in texts]
    groups = shared_prefix_groups(ids, shared.min_shared_prefix)
    assert sorted(len(g.members) for g in groups) == [1, 3, 4]  # pair 1 (+ repeat), pair 2, Pref.
    # counters: the plain path prefills every prompt whole; the shared one each prefix once
    total = sum(map(len, ids))
    assert plain.stats.prefill_tokens == plain.stats.prompt_tokens == total
    saved = sum((len(g.members) - 1) * g.prefix for g in groups)
    assert shared.stats.prefill_tokens == total - saved and saved > 0.3 * total
    assert shared.stats.prompt_tokens == total
    assert shared.stats.forward_calls == plain.stats.forward_calls + 1  # the suffix pass
    assert shared.stats.generated_tokens == plain.stats.generated_tokens == 8 * len(texts)


def test_shared_prefix_sampling_equals_the_plain_path(tiny, texts):
    plain, shared = _backend(tiny, min_shared_prefix=0), _backend(tiny)
    a = plain.generate(texts, SAMPLED, n=3)
    b = shared.generate(texts, SAMPLED, n=3)
    _assert_same(a, b)
    assert len({tuple(g.token_ids) for g in a[0]}) == 3  # real, distinct samples
    # a budget so tight that groups are split across batches (a lone member shares nothing)
    small = _backend(tiny, max_batch_tokens=2000)
    _assert_same(a, small.generate(texts, SAMPLED, n=3))
    # split groups share less, but still some
    assert shared.stats.prefill_tokens < small.stats.prefill_tokens < plain.stats.prefill_tokens


def test_each_prompt_is_prefilled_once_for_its_samples(tiny, texts):
    _, tok = tiny
    lengths = [len(_ids(tok, t)) for t in texts[:3]]
    batched = _backend(tiny, min_shared_prefix=0)
    naive = _backend(tiny, min_shared_prefix=0, max_batch_size=1)  # one sequence at a time
    a = batched.generate(texts[:3], SAMPLED, n=4)
    b = naive.generate(texts[:3], SAMPLED, n=4)
    _assert_same(a, b)
    assert batched.stats.prefill_tokens == sum(lengths)  # once per prompt, not per sample
    assert naive.stats.prefill_tokens == naive.stats.prompt_tokens == 4 * sum(lengths)
    assert batched.stats.sequences == naive.stats.sequences == 12
    # the prompt repeated per sample in one batch, as generate(num_return_sequences=n) does
    repeated = _backend(tiny, share_prompt_prefill=False)
    _assert_same(a, repeated.generate(texts[:3], SAMPLED, n=4))
    assert repeated.stats.prefill_tokens == 4 * sum(lengths)
    assert repeated.stats.forward_calls == batched.stats.forward_calls
    old = batched.reset_stats()
    assert old.calls == 1 and batched.stats.prefill_tokens == 0


def test_store_chunks_keep_a_pairs_prompts_together():
    from rmlib.generation.store import SHARED_CHARS, _chunks

    body = "x" * SHARED_CHARS
    pairs = [[f"pair {k} {body} critique {j}" for j in range(7)] for k in range(3)]
    items = sum(pairs, [])
    assert [len(c) for c in _chunks(items, 16)] == [14, 7]  # not 16 + 5: pair 3 stays whole
    assert sum(_chunks(items, 16), []) == items
    short = [f"prompt {i}" for i in range(10)]  # nothing long in common: plain chunks
    assert [len(c) for c in _chunks(short, 4)] == [4, 4, 2]
    assert [len(c) for c in _chunks(pairs[0], 3)] == [3, 3, 1]  # one long group: size rules


def test_store_orders_prompts_by_length_keeping_families():
    from rmlib.generation.store import SHARED_CHARS, _batching_order

    body = "y" * SHARED_CHARS
    family = [f"pair {body} critique {j}" for j in range(3)]  # long shared prefix
    short = ["s1", "s2"]
    long = ["L" * 4 * SHARED_CHARS]
    order = _batching_order([short[0], *family, short[1], *long])
    assert order == [*long, *family, *short]  # longest bucket first, stable, family whole
    # prompts sharing only a header (less than half of them) are not a family
    header = "h" * SHARED_CHARS
    prefs = [header + "a" * 3 * SHARED_CHARS, header + "b" * (SHARED_CHARS + 10)]
    assert _batching_order(prefs[::-1]) == prefs


def test_static_decode_equals_the_dynamic_path(tiny, texts):
    model, tok = tiny
    dynamic = _backend(tiny).generate(texts, SAMPLED, n=3)
    static = _backend(tiny, decode_cache="static", compile_decode=True)  # compile: CUDA only
    _assert_same(dynamic, static.generate(texts, SAMPLED, n=3))
    _assert_same(_backend(tiny).generate(texts, GREEDY), static.generate(texts, GREEDY))
    # batches of one prompt's 3 samples: one static cache reused from batch to batch
    reused = _backend(tiny, decode_cache="static", max_batch_size=3)
    _assert_same(dynamic, reused.generate(texts, SAMPLED, n=3))
    assert reused._static_key is not None and reused.stats.calls == 1
    # stopped rows ride along in a static batch: their tokens end at the stop all the same
    stop = dynamic[1][0].token_ids[2]
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [*saved, stop]
    try:
        a = _backend(tiny).generate(texts, SAMPLED, n=3)
        b = _backend(tiny, decode_cache="static").generate(texts, SAMPLED, n=3)
    finally:
        model.generation_config.eos_token_id = saved
    _assert_same(a, b)
    assert any(g.finish_reason == "stop" for gs in b for g in gs)
    with pytest.raises(ValueError, match="decode_cache"):
        _backend(tiny, decode_cache="paged")

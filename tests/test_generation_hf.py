"""rmlib.generation.hf: our decode loop against plain-forward references, on the tiny Qwen3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rmlib.generation.base import Backend, Generation, SamplingParams
from rmlib.generation.batching import choose_tokens, filter_logits, plan_batches
from rmlib.generation.hf import HFBackend
from rmlib.generation.models import TINY_QWEN3, load_backbone, resolve_model

torch.set_num_threads(2)
SAMPLING = SamplingParams(max_new_tokens=10, do_sample=True, temperature=1.0, seed=3)


@pytest.fixture(scope="module")
def tiny():
    return load_backbone(TINY_QWEN3, precision="fp32")


@pytest.fixture(scope="module")
def backend(tiny):
    model, tok = tiny
    return HFBackend(model, tok, identity="tiny-fp32", progress=False)


@pytest.fixture(scope="module")
def prompts(tiny):
    _, tok = tiny
    queries = ["Hi", "Which response is better, the first or the second one, and why?", "2+2?"]
    return [
        tok.apply_chat_template(
            [{"role": "user", "content": q}],
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=False,
        )
        for q in queries
    ]


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def _reference_logprobs(model, prompt_ids: list[int], gen: Generation) -> torch.Tensor:
    """Raw log-softmax of one full forward over prompt + generated tokens, at each new token."""
    seq = torch.tensor([prompt_ids + gen.token_ids])
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0, len(prompt_ids) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(gen.token_ids)[:, None])[:, 0]


def test_is_a_backend(backend):
    assert isinstance(backend, Backend)
    assert backend.stop_ids == [151643, 151645]  # <|endoftext|>, <|im_end|> from the configs


def test_greedy_ignores_the_checkpoint_generation_config(tiny, backend, prompts):
    model, tok = tiny
    # the checkpoint folder ships Qwen3's sampling defaults (as the real Qwen3-4B does)
    shipped = json.loads((Path(resolve_model(TINY_QWEN3)) / "generation_config.json").read_text())
    assert (shipped["do_sample"], shipped["temperature"], shipped["top_k"]) == (True, 0.6, 20)
    ids = _ids(tok, prompts[1])

    # argmax reference: a plain forward over the whole sequence at every step, no cache
    seq = list(ids)
    with torch.no_grad():
        for _ in range(8):
            seq.append(int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax()))
    reference = seq[len(ids) :]

    [[ours]] = backend.generate([prompts[1]], SamplingParams.greedy(max_new_tokens=8))
    assert ours.token_ids == reference

    # the trap is real: generate() with no explicit settings samples from those defaults
    torch.manual_seed(0)
    out = model.generate(
        torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=int), max_new_tokens=8
    )
    assert model.generation_config.do_sample is True
    assert out[0, len(ids) :].tolist() != reference


def test_logprobs_are_raw_temperature_one(tiny, backend, prompts):
    model, tok = tiny
    # filtered, tempered sampling: the log-probs must still be the raw distribution's
    params = SamplingParams(max_new_tokens=8, temperature=0.7, top_k=50, top_p=0.9, seed=1)
    results = backend.generate(prompts, params, n=2)  # left padding: prompts differ in length
    for prompt, gens in zip(prompts, results, strict=True):
        for gen in gens:
            assert len(gen.logprobs) == len(gen.token_ids) == gen.n_tokens > 0
            expected = _reference_logprobs(model, _ids(tok, prompt), gen)
            torch.testing.assert_close(torch.tensor(gen.logprobs), expected, atol=1e-4, rtol=0)


def test_same_seed_same_tokens_other_seed_other_tokens(backend, prompts):
    first = backend.generate(prompts, SAMPLING, n=3)
    again = backend.generate(prompts, SAMPLING, n=3)
    other = backend.generate(prompts, SamplingParams(max_new_tokens=10, seed=4), n=3)
    tokens = [[g.token_ids for g in gens] for gens in first]
    assert tokens == [[g.token_ids for g in gens] for gens in again]
    assert tokens != [[g.token_ids for g in gens] for gens in other]
    assert len({tuple(t) for t in tokens[0]}) == 3  # the samples of one prompt differ


def _assert_same(a: list[Generation], b: list[Generation]) -> None:
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(
            torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4, rtol=0
        )


def test_samples_do_not_depend_on_the_batch(tiny, backend, prompts):
    model, tok = tiny
    alone = backend.generate([prompts[1]], SAMPLING, n=8)[0]
    in_batch = backend.generate(prompts, SAMPLING, n=8)[1]
    _assert_same(alone, in_batch)
    # a tight budget splits the prompt's samples over several batches
    small = HFBackend(model, tok, identity="tiny-fp32", max_batch_tokens=120, progress=False)
    _assert_same(alone, small.generate(prompts, SAMPLING, n=8)[1])
    # samples 4..7 asked for later are samples 4..7 of the whole set
    _assert_same(alone[4:], backend.generate([prompts[0], prompts[1]], SAMPLING, n=4, offset=4)[1])


def test_greedy_samples_are_identical_copies(backend, prompts):
    gens = backend.generate(prompts[:1], SamplingParams.greedy(max_new_tokens=5), n=3)[0]
    assert len({tuple(g.token_ids) for g in gens}) == 1
    assert len({id(g.token_ids) for g in gens}) == 3  # copies, not one shared list


def test_length_finish_and_prompt_tokens(tiny, backend, prompts):
    _, tok = tiny
    results = backend.generate(prompts, SamplingParams(max_new_tokens=3, seed=0), n=2)
    for prompt, gens in zip(prompts, results, strict=True):
        for g in gens:
            assert g.finish_reason == "length" and g.n_tokens == 3
            assert g.prompt_tokens == len(_ids(tok, prompt))
    assert backend.generate(prompts, SAMPLING, n=0) == [[], [], []]


def test_stop_tokens_end_samples_and_are_not_in_the_text(tiny, prompts):
    """Stopping at an EOS id truncates exactly the unconstrained sample (incl. pruned rows)."""
    model, tok = tiny
    free = HFBackend(model, tok, identity="t", progress=False).generate(prompts, SAMPLING, n=4)
    stop = free[1][0].token_ids[3]  # sample 0 of prompt 1 stops at its 4th token at the latest
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [*saved, stop]  # stop ids come from the config
    try:
        # batches of 4 rows: one stopped row is a quarter, so it is pruned from the batch
        stopped = HFBackend(model, tok, identity="t", max_batch_size=4, progress=False).generate(
            prompts, SAMPLING, n=4
        )
    finally:
        model.generation_config.eos_token_id = saved
    n_stopped = 0
    for gens_free, gens_stop in zip(free, stopped, strict=True):
        for f, s in zip(gens_free, gens_stop, strict=True):
            cut = f.token_ids.index(stop) + 1 if stop in f.token_ids else len(f.token_ids)
            assert s.token_ids == f.token_ids[:cut]
            torch.testing.assert_close(
                torch.tensor(s.logprobs), torch.tensor(f.logprobs[:cut]), atol=1e-4, rtol=0
            )
            assert s.finish_reason == ("stop" if stop in f.token_ids else "length")
            assert s.text == tok.decode(
                s.token_ids[: cut - (s.finish_reason == "stop")], skip_special_tokens=True
            )
            n_stopped += s.finish_reason == "stop"
    assert 1 <= n_stopped < 12  # some rows stopped early while others went on


@pytest.mark.parametrize("precision", ["bf16", "nf4"])
def test_runs_in_bf16_and_4bit(precision, prompts):
    model, tok = load_backbone(TINY_QWEN3, precision=precision)
    results = HFBackend(model, tok, identity=precision, progress=True).generate(
        prompts[:2], SamplingParams(max_new_tokens=4, seed=0), n=2
    )
    for gens in results:
        for g in gens:
            assert g.n_tokens == 4 and all(lp <= 0 for lp in g.logprobs)
            assert all(torch.isfinite(torch.tensor(g.logprobs)))


def test_filtering_matches_transformers_warpers():
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    torch.manual_seed(0)
    scores = torch.randn(4, 200) * 3
    dummy = torch.zeros(4, 1, dtype=torch.long)
    for top_k, top_p in [(10, 1.0), (0, 0.8), (30, 0.5), (0, 1.0)]:
        ref = scores.clone()
        if top_k:
            ref = TopKLogitsWarper(top_k)(dummy, ref)
        if top_p < 1:
            ref = TopPLogitsWarper(top_p)(dummy, ref)
        ours = filter_logits(scores, top_k, top_p)
        assert torch.equal(torch.isinf(ours), torch.isinf(ref)), (top_k, top_p)
        assert torch.equal(ours[~torch.isinf(ours)], scores[~torch.isinf(ours)])


def test_gumbel_max_draws_from_the_tempered_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(6000, 1)
    params = SamplingParams(max_new_tokens=1, temperature=2.0, seed=0)
    gens = [torch.Generator().manual_seed(i) for i in range(len(logits))]
    draws = choose_tokens(logits, params, gens)
    freq = torch.bincount(draws, minlength=4).float() / len(draws)
    torch.testing.assert_close(freq, torch.softmax(logits[0] / 2.0, -1), atol=0.02, rtol=0)


def test_plan_batches_respects_the_budget_and_covers_every_sample():
    lengths = [50, 10, 200, 30, 120]
    samples = list(range(2, 8))
    batches = plan_batches(
        lengths, samples, max_new_tokens=20, max_batch_tokens=600, max_batch_size=5
    )
    seen = [(it.prompt, s) for b in batches for it in b for s in it.samples]
    assert sorted(seen) == sorted((p, s) for p in range(5) for s in samples)  # once each
    for b in batches:
        width = max(lengths[it.prompt] for it in b) + 20
        rows = sum(len(it.samples) for it in b)
        assert rows <= 5 and rows * width <= 600
        assert len({it.prompt for it in b}) == len(b)  # a prompt prefilled once per batch
    assert batches[0][0].prompt == 2  # longest first
    # a single sequence over budget still runs, alone
    over = plan_batches([1000], [0, 1], 20, 600, 5)
    assert [[(it.prompt, it.samples) for it in b] for b in over] == [[(0, [0])], [(0, [1])]]


def test_out_of_memory_splits_the_batch_and_changes_no_sample(tiny, prompts, monkeypatch):
    model, tok = tiny
    hf = HFBackend(model, tok, identity="tiny-fp32", progress=False)
    whole = hf.generate(prompts, SAMPLING, n=3)
    real = HFBackend._run_batch
    sizes: list[int] = []

    def small_card(self, batch, *args):  # a card that holds 2 sequences at a time
        rows = sum(len(it.samples) for it in batch)
        sizes.append(rows)
        if rows > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(self, batch, *args)

    monkeypatch.setattr(HFBackend, "_run_batch", small_card)
    with pytest.warns(UserWarning, match="splitting it in two"):
        split = hf.generate(prompts, SAMPLING, n=3)
    assert sizes[0] == 9 and max(s for s in sizes if s <= 2) == 2
    assert [[g.token_ids for g in row] for row in split] == [
        [g.token_ids for g in row] for row in whole
    ]


def test_split_batch_keeps_every_sequence_once():
    from rmlib.generation.batching import BatchItem as _Item
    from rmlib.generation.batching import split_batch

    batch = [_Item(0, [0, 1, 2], group=0, prefix=5), _Item(1, [0], group=0, prefix=5)]
    first, second = split_batch(batch)
    rows = [(it.prompt, s) for half in (first, second) for it in half for s in it.samples]
    assert sorted(rows) == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert all(it.prefix == 0 for it in first)  # prompt 1 went to the other half
    assert split_batch([_Item(0, [0])]) is None


def test_the_batch_budget_follows_the_cards_free_memory(tiny):
    from types import SimpleNamespace

    from rmlib.generation import hf as hfmod

    qwen3_4b = SimpleNamespace(
        num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        hidden_size=2560,
    )  # fmt: skip
    per_token = hfmod.kv_bytes_per_token(qwen3_4b, 2)
    assert per_token == 147_456  # Qwen3-4B in bf16 (the profiles' comments use it)
    # 262,144 batch tokens ask ~36 GiB of KV: a 24 GB card with ~14 GiB free after the weights
    # holds far fewer; a card with room keeps the asked budget
    fits = hfmod.fitting_batch_tokens(262_144, 14 * 2**30, per_token)
    assert 50_000 < fits < 70_000
    assert hfmod.fitting_batch_tokens(16_384, 60 * 2**30, per_token) == 16_384
    # on CPU the budget is what the params say
    model, tok = tiny
    assert (
        HFBackend(model, tok, identity="t", max_batch_tokens=123, progress=False).max_batch_tokens
        == 123
    )

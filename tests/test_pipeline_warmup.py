"""The format warm-up is reused only when it was made with the current settings."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rmlib.run.config import config_from_dict
from rmlib.run.folder import RunFolder
from rmlib.workbook import steps as pipeline


def _cfg(**warmup):
    return config_from_dict(
        {"model": {"backbone": "embedded:tiny-qwen3"}, "warmup": {"enabled": True, **warmup}}
    )


def test_warmup_is_redone_when_its_settings_change(tmp_path, monkeypatch):
    import rmlib.training.sft as sft

    calls = []

    def fake_run_warmup(pairs, cfg, adapter_dir, *, merged_dir, **kw):
        calls.append(cfg.epochs)
        merged_dir.mkdir(parents=True)
        (merged_dir / "config.json").write_text("{}")
        return SimpleNamespace(n_examples=len(pairs), steps=1, train_loss=0.5, n_cut=0)

    monkeypatch.setattr(sft, "run_warmup", fake_run_warmup)
    run = RunFolder(tmp_path / "run")
    pipeline.format_warmup(_cfg(epochs=1.0, n_examples=8), run)
    pipeline.format_warmup(_cfg(epochs=1.0, n_examples=8), run)  # same settings: reused
    assert calls == [1.0]
    pipeline.format_warmup(_cfg(epochs=2.0, n_examples=8), run)  # changed: trained again
    assert calls == [1.0, 2.0]
    summary = json.loads((run.path / "models" / "warmup.json").read_text())
    assert summary["settings"]["epochs"] == 2.0 and summary["examples"] == 8


def test_warmup_gets_the_runs_prompt_settings_and_is_redone_when_they_change(tmp_path, monkeypatch):
    import rmlib.training.sft as sft

    seen = []

    def fake_run_warmup(pairs, cfg, adapter_dir, *, merged_dir, **kw):
        seen.append(kw)
        merged_dir.mkdir(parents=True)
        (merged_dir / "config.json").write_text("{}")
        return SimpleNamespace(n_examples=len(pairs), steps=1, train_loss=0.5, n_cut=0)

    monkeypatch.setattr(sft, "run_warmup", fake_run_warmup)
    run = RunFolder(tmp_path / "run")

    def warm(**sections):
        data = {"model": {"backbone": "embedded:tiny-qwen3"}, "warmup": {"enabled": True}}
        for name, values in sections.items():
            data.setdefault(name, {}).update(values)
        pipeline.format_warmup(config_from_dict(data), run)

    warm()
    fmt = seen[-1]["fmt"]
    assert fmt.critique_with_result is False and fmt.enable_thinking is False
    assert fmt.budget.max_reflection_prompt_tokens == 8192
    warm()
    assert len(seen) == 1  # same prompts: reused
    for change in (
        {"prompts": {"critique_with_result": True}},
        {"model": {"enable_thinking": True}},
        {"prompts": {"max_reflection_prompt_tokens": 6000}},
    ):
        before = len(seen)
        warm(**change)
        assert len(seen) == before + 1, change  # the examples' prompts changed: trained again
    assert seen[1]["fmt"].critique_with_result is True
    assert seen[2]["fmt"].enable_thinking is True
    assert seen[3]["fmt"].budget.max_reflection_prompt_tokens == 6000


def test_the_base_trained_again_is_another_model_to_the_store(tmp_path, monkeypatch):
    """The warm-up trains into models/base again when its settings change: the store's key for
    the base changes with it, so 02 and 04 generate with the new base instead of reading the
    old one's judgments (the key named the folder only: every stored judgment was reused)."""
    import rmlib.training.sft as sft
    from rmlib.run.backends import model_ref, weights

    def fake_run_warmup(pairs, cfg, adapter_dir, *, merged_dir, **kw):
        merged_dir.mkdir(parents=True)
        # weights of another size each time (a real warm-up's files also differ in time)
        (merged_dir / "config.json").write_text("{}" + " " * int(cfg.epochs))
        return SimpleNamespace(n_examples=len(pairs), steps=1, train_loss=0.5, n_cut=0)

    monkeypatch.setattr(sft, "run_warmup", fake_run_warmup)
    run = RunFolder(tmp_path / "run")

    def identity(cfg) -> str:
        pipeline.format_warmup(cfg, run)
        return weights(cfg, run, model_ref(cfg, run, "base")).identity

    first = identity(_cfg(epochs=1.0))
    assert identity(_cfg(epochs=1.0)) == first  # reused: the same model, its judgments kept
    assert identity(_cfg(epochs=2.0)) != first

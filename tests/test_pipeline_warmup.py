"""The format warm-up is reused only when it was made with the current settings."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rmlib import pipeline
from rmlib.config import config_from_dict
from rmlib.run_folder import RunFolder


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
        return SimpleNamespace(n_examples=len(pairs), steps=1, train_loss=0.5)

    monkeypatch.setattr(sft, "run_warmup", fake_run_warmup)
    run = RunFolder(tmp_path / "run")
    pipeline.format_warmup(_cfg(epochs=1.0, n_examples=8), run)
    pipeline.format_warmup(_cfg(epochs=1.0, n_examples=8), run)  # same settings: reused
    assert calls == [1.0]
    pipeline.format_warmup(_cfg(epochs=2.0, n_examples=8), run)  # changed: trained again
    assert calls == [1.0, 2.0]
    summary = json.loads((run.path / "models" / "warmup.json").read_text())
    assert summary["settings"]["epochs"] == 2.0 and summary["examples"] == 8

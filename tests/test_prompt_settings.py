"""One source for each prompt setting, used by every step of the pipeline: model.enable_thinking
(rollouts, mix, GRPO, evaluation), prompts.critique_with_result (mix, evaluation) and the two
prompt budgets (Pref. and Refl.), checked on the prompts the steps really render."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from rmlib.generation.base import Generation
from rmlib.generation.models import TINY_QWEN3, load_tokenizer
from rmlib.judge.prompts import render
from rmlib.judge.verdict import result_sentence
from rmlib.run.config import config_from_dict
from rmlib.run.folder import RunFolder
from rmlib.training.mix import load_mix
from rmlib.workbook import steps as pipeline

THINKING_OPENING = "<|im_start|>assistant\n"
NON_THINKING_OPENING = "<|im_start|>assistant\n<think>\n\n</think>\n\n"


@dataclass
class _Stats:
    hits: int = 0


class RecordingBackend:
    """Answers every prompt with a well-formed judgment (sample s votes 1 + s % 2, so every
    training pair is mixed) and keeps the prompts it was sent."""

    identity = "recording-test"

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.stats = _Stats()

    def generate(self, prompts, params, n=1, offset=0):
        self.prompts.extend(prompts)
        return [[self._one(p, s) for s in range(n)] for p in prompts]

    @staticmethod
    def _one(prompt: str, s: int) -> Generation:
        task = "refl" if "## Critiques for Judgment" in prompt else "pref"
        text = (
            f"<Analysis>sample {s}</Analysis>\n<Result>{result_sentence(1 + s % 2, task)}</Result>"
        )
        return Generation(text, [1, 2, 3], [-0.1, -0.2, -0.3], "stop", 5)


def _critiques(prompt: str) -> str:
    return prompt.split("## Critiques for Judgment")[1].split("## Output format")[0]


def _cfg(**sections):
    data = {
        "model": {"backbone": TINY_QWEN3},
        "data": {
            "train": {"source": "demo", "split": "train", "n": 2},
            "eval": [{"source": "demo", "split": "eval", "n": 2}],
        },
        "rollouts": {"n_samples": 2, "max_new_tokens": 8},
        "mix": {"ratio": "1:1"},
        "grpo": {"use_vllm": True, "max_completion_length": 16},
        "inference": {"n_samples": 2, "run_random_anchor": False},
        "eval": {"models": ["base", "unified"]},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return config_from_dict(data)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(TINY_QWEN3)


@pytest.mark.parametrize("thinking, with_result", [(True, True), (False, False)])
def test_every_step_renders_with_the_runs_switches(
    tmp_path, monkeypatch, tokenizer, thinking, with_result
):
    import rmlib.training.launch as launch

    cfg = _cfg(
        model={"enable_thinking": thinking},
        prompts={"critique_with_result": with_result},
    )
    opening = THINKING_OPENING if thinking else NON_THINKING_OPENING
    run = RunFolder(tmp_path / "run")
    pipeline.load_data(cfg, run)
    fake = RecordingBackend()
    monkeypatch.setattr(pipeline, "backend", lambda cfg, run, ref, **kw: (fake, tokenizer))

    # 02 rollouts: every judgment prompt rendered with the model's switch
    pipeline.training_rollouts(cfg, run)
    assert fake.prompts and all(p.endswith(opening) for p in fake.prompts)
    assert all(("<think>" in p) is not thinking for p in fake.prompts)

    # 02 mixes: Refl. items show (or not) the critiques' <Result> lines; the provenance records
    # both switches, and every item renders back under the model's switch to its token count
    pipeline.build_mixes(cfg, run)
    dataset, provenance = load_mix(pipeline.mix_dir(run, "unified"))
    assert provenance["enable_thinking"] is thinking
    assert provenance["critique_with_result"] is with_result
    assert provenance["budget"]["max_reflection_prompt_tokens"] == 8192
    refl = [r for r in dataset if r["task"] == "refl"]
    assert refl and all(
        (_critiques(r["prompt"][0]["content"]).count("<Result>") == 2) is with_result for r in refl
    )
    for row in dataset:
        text = render(tokenizer, row["prompt"], enable_thinking=thinking)
        assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) == row["prompt_tokens"]

    # 03 GRPO: the model's switch goes to TRL, and the colocated engine holds Refl. prompts
    seen = {}

    def fake_run_job(job, processes=1):
        seen.update(job=job, settings=job.grpo_settings())
        Path(job.output).mkdir(parents=True, exist_ok=True)
        (Path(job.output) / "adapter_config.json").write_text("{}")
        return 0

    monkeypatch.setattr(launch, "run_job", fake_run_job)
    pipeline.train(cfg, run, "unified")
    assert seen["job"].enable_thinking is thinking
    assert seen["settings"].vllm_max_model_length == 8192 + 16  # reflection budget + completion

    # 04 evaluation: stage 1, greedy and stage 2 alike
    fake.prompts.clear()
    pipeline.evaluate(cfg, run, "base")
    stage2 = [p for p in fake.prompts if "## Critiques for Judgment" in p]
    assert stage2 and len(stage2) < len(fake.prompts)
    assert all(p.endswith(opening) for p in fake.prompts)
    assert all((_critiques(p).count("<Result>") == 2) is with_result for p in stage2)


def test_grpo_on_a_pref_only_mix_sizes_its_engine_for_judgment_prompts(
    tmp_path, monkeypatch, tokenizer
):
    import rmlib.training.launch as launch

    cfg = _cfg(mix={"ratio": "1:0"})  # Pref. only: no reflection prompt reaches GRPO
    run = RunFolder(tmp_path / "run")
    pipeline.load_data(cfg, run)
    monkeypatch.setattr(
        pipeline, "backend", lambda c, r, ref, **kw: (RecordingBackend(), tokenizer)
    )
    pipeline.training_rollouts(cfg, run)
    pipeline.build_mixes(cfg, run)
    seen = {}

    def fake_run_job(job, processes=1):
        seen["settings"] = job.grpo_settings()
        Path(job.output).mkdir(parents=True, exist_ok=True)
        (Path(job.output) / "adapter_config.json").write_text("{}")
        return 0

    monkeypatch.setattr(launch, "run_job", fake_run_job)
    pipeline.train(cfg, run, "unified")
    assert seen["settings"].vllm_max_model_length == cfg.prompts.max_prompt_tokens + 16

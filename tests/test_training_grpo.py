"""rmlib.training.grpo on the tiny Qwen3 (QLoRA, 4-bit NF4 on CPU): real GRPO steps that change
the adapter, exact kill-and-resume, the bitsandbytes CPU guard, the progress table, the card."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from test_workbook import METRIC_DICT, TEXT_BAR

from rmlib.data.demo import load_demo
from rmlib.generation.models import TINY_QWEN3, load_tokenizer
from rmlib.judge.prompts import PromptFormat
from rmlib.judge.verdict import result_sentence
from rmlib.run.config import config_from_dict
from rmlib.training.grpo import last_checkpoint, train_grpo
from rmlib.training.grpo_config import GRPOSettings, batch_plan
from rmlib.training.grpo_trainer import build_trainer
from rmlib.training.mix import TrainMixConfig, build_mix
from rmlib.training.model_card import EVAL_END, EVAL_START, fill_evaluation
from rmlib.training.progress import progress_table
from rmlib.training.reward import JudgmentReward

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]
ROOT = Path(__file__).resolve().parents[1]


def length_reward(completions, **kwargs):
    """Varies within a group (a random model's completions differ in length), so advantages are
    nonzero; the judgment reward is constant (all unparseable) on a random model."""
    return [len(c[-1]["content"]) / 20.0 for c in completions]


def tiny_settings(**overrides) -> GRPOSettings:
    base = dict(
        num_generations=2,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
        generation_batch_size=2,
        max_completion_length=6,
        learning_rate=1e-3,
        warmup_ratio=0.0,
        gradient_checkpointing=False,
        torch_threads=2,
        save_steps=100,
    )
    base.update(overrides)
    return GRPOSettings(**base)


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    return tiny_mix(tmp_path_factory.mktemp("mix"))


def tiny_mix(root: Path, enable_thinking: bool = False):
    """A real mix (3 items: Pref. and Refl.) from scripted rollouts of demo pairs."""
    pairs = load_demo(split="train", n=2, seed=0).pairs
    rows = []
    for p in pairs:
        for s, choice in enumerate((p.label, 3 - p.label)):
            rows.append(
                {
                    "key": p.key,
                    "label": p.label,
                    "sample": s,
                    "choice": choice,
                    "failure": None,
                    "text": f"<Analysis>a{s}</Analysis><Result>{result_sentence(choice)}</Result>",
                }
            )
    rollouts = pd.DataFrame(rows)
    m = build_mix(
        rollouts,
        pairs,
        PromptFormat(load_tokenizer(TINY_QWEN3), enable_thinking=enable_thinking),
        TrainMixConfig(ratio="1:2"),
        backbone=TINY_QWEN3,
    )
    assert sorted(m.dataset["task"]) == ["pref", "refl", "refl"]
    path = m.save(root / "mix")
    return m, path


def adapter(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "adapter_model.safetensors"))


def test_grpo_steps_change_the_adapter(mix, tmp_path, capfd):
    m, _ = mix
    out = tmp_path / "run"
    judgment: dict[str, list[float]] = {}
    reward = JudgmentReward([151645, 151643])

    def judged(**kwargs):  # the real reward, run alongside: it must take TRL's real arguments
        judgment.setdefault("seen", []).extend(reward(**kwargs))
        return [0.0] * len(kwargs["completions"])

    trainer = build_trainer(
        m.dataset,
        tiny_settings(max_steps=2),
        out,
        backbone=TINY_QWEN3,
        reward_funcs=[length_reward, judged],
        verbose=False,
    )
    # our sampling settings override the checkpoint's generation_config (temperature 0.6, top-k 20)
    assert trainer.generation_config.temperature == 1.0 and trainer.generation_config.top_k == 0
    assert trainer.model.get_base_model().is_loaded_in_4bit  # QLoRA: NF4 under the adapter
    lora = {n: p for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert lora and all(p.dtype == torch.float32 for p in lora.values())  # not TRL's bf16 cast
    before = {n: p.detach().clone() for n, p in lora.items()}
    capfd.readouterr()
    trainer.train()
    # quiet (notebook 03 relays this as text): no text progress bar, no raw metric dictionary
    printed = capfd.readouterr()
    lines = [p for t in (printed.out, printed.err) for ln in t.splitlines() for p in ln.split("\r")]
    assert not [ln for ln in lines if METRIC_DICT.search(ln) or TEXT_BAR.search(ln)], lines
    changed = [n for n, p in lora.items() if not torch.equal(p.detach(), before[n])]
    assert len(changed) == len(lora)  # every LoRA matrix moved (B starts at zero)
    assert judgment["seen"] == [-0.5] * 4  # 2 steps x 2 completions; noise never parses
    progress = progress_table(out)
    assert progress["step"].tolist() == [1, 2]
    assert progress["reward"].notna().all() and progress["kl"].notna().all()


def test_train_grpo_saves_adapter_and_model_card(mix, tmp_path):
    m, _ = mix
    out = train_grpo(
        m.dataset,
        tiny_settings(max_steps=1),
        tmp_path / "run",
        backbone=TINY_QWEN3,
        provenance=m.provenance,
        seed=5,
        reward_funcs=[length_reward],
        verbose=False,
        enable_thinking=True,
    )
    assert (out / "adapter_config.json").exists() and (out / "adapter_model.safetensors").exists()
    card = (out / "README.md").read_text()
    assert "- thinking mode: on" in card  # the run's model.enable_thinking, not a GRPO copy
    assert f"base_model: {TINY_QWEN3}" in card and "| 1 | 2 | 3 | 2 |" in card  # Pref./Refl./Sum
    assert "| beta | 0.001 |" in card and "- seed: 5" in card
    assert "Not evaluated yet" in card and EVAL_START in card
    fill_evaluation(out, "| benchmark | accuracy |\n|---|---|\n| demo | 0.5 |")
    filled = (out / "README.md").read_text()
    assert "| demo | 0.5 |" in filled and "Not evaluated yet" not in filled
    settings = json.loads((out / "training_settings.json").read_text())
    assert settings["global_step"] == 1 and settings["provenance"]["counts"]["refl"] == 2
    assert settings["enable_thinking"] is True and "enable_thinking" not in settings["settings"]
    # trained and sampled on the same NF4 base here (transformers generates): both recorded
    assert settings["base"] == {
        "trained_on": "nf4",
        "sampled_on": "nf4",
        "sampled_by": "transformers",
    }
    assert "- trained on: nf4 base; GRPO groups sampled from: nf4 base" in card
    # rewriting the card (a later save) keeps the evaluation figures
    from rmlib.training.model_card import write_model_card

    write_model_card(out, settings)
    assert "| demo | 0.5 |" in (out / "README.md").read_text()
    assert filled.count(EVAL_END) == 1
    # a finished run called again with the same settings is not redone; another thinking mode
    # is another run
    from rmlib.training.grpo import _finished

    n = len(m.dataset)
    assert not _finished(out, tiny_settings(max_steps=1), TINY_QWEN3, "nf4", n, False)
    stamp = (out / "adapter_model.safetensors").stat().st_mtime_ns
    again = train_grpo(
        m.dataset,
        tiny_settings(max_steps=1),
        out,
        backbone=TINY_QWEN3,
        reward_funcs=[length_reward],
        verbose=False,
        enable_thinking=True,
    )
    assert again == out and (out / "adapter_model.safetensors").stat().st_mtime_ns == stamp


@pytest.mark.parametrize(
    ("precision", "on_cuda", "sampled_on", "how"),
    [
        ("nf4", False, "float32", "unquantized base + the adapter by LoRARequest"),
        ("nf4", True, "bfloat16", "unquantized base + the adapter by LoRARequest"),
        ("bf16", True, "bfloat16", "LoRA merged"),
        ("fp32", False, "float32", "LoRA merged"),
    ],
)
def test_the_card_names_the_base_trained_on_and_the_base_sampled_from(
    tmp_path, precision, on_cuda, sampled_on, how
):
    """QLoRA on vLLM trains on NF4 and samples from the checkpoint unquantized (in the nf4 base's
    compute dtype): training_settings.json and the model card say both."""
    from rmlib.training.colocate import adapter_bases
    from rmlib.training.model_card import write_model_card

    base = adapter_bases(precision, use_vllm=True, on_cuda=on_cuda)
    assert base == {
        "trained_on": precision,
        "sampled_on": sampled_on,
        "sampled_by": f"vLLM colocate, {how}",
    }
    meta = {
        "backbone": TINY_QWEN3,
        "precision": precision,
        "base": base,
        "global_step": 2,
        "seed": 0,
        "settings": {},
        "n_items": 3,
    }
    card = write_model_card(tmp_path, meta).read_text()
    assert (
        f"- trained on: {precision} base; GRPO groups sampled from: {sampled_on} base "
        f"(vLLM colocate, {how})" in card
    )


KILLED_RUN = """
import os, signal, sys
from transformers import TrainerCallback
from rmlib.training.mix import load_mix
from rmlib.training.grpo import train_grpo
sys.path.insert(0, {tests!r})
from test_training_grpo import length_reward, tiny_settings

class Kill(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kw):
        if state.global_step == {kill_at}:  # after checkpoint {ckpt}, before the run ends
            os.kill(os.getpid(), signal.SIGKILL)

dataset, prov = load_mix({mix!r})
train_grpo(dataset, tiny_settings(**{settings!r}), {out!r}, backbone="embedded:tiny-qwen3",
           provenance=prov, reward_funcs=[length_reward], callbacks=[Kill()], verbose=False)
"""


def test_killed_run_resumes_to_the_same_adapter(mix, tmp_path):
    m, mix_dir = mix
    # 3 items, 1 prompt per step: epoch 1 is steps 1-3; the checkpoint at step 4 is inside epoch
    # 2, so the resumed step 5 also checks that epoch 2's data order survives a restart (TRL's
    # own sampler replays epoch 1's order after a restart: this test fails with it).
    settings = dict(max_steps=5, save_steps=4, num_train_epochs=2.0)
    whole = train_grpo(
        m.dataset,
        tiny_settings(**settings),
        tmp_path / "whole",
        backbone=TINY_QWEN3,
        reward_funcs=[length_reward],
        verbose=False,
    )

    out = tmp_path / "killed"
    script = tmp_path / "killed_run.py"
    script.write_text(
        textwrap.dedent(
            KILLED_RUN.format(
                tests=str(ROOT / "tests"),
                kill_at=5,
                ckpt=4,
                mix=str(mix_dir),
                settings=settings,
                out=str(out),
            )
        )
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert last_checkpoint(out).name == "checkpoint-4"
    assert not (out / "adapter_model.safetensors").exists()  # it never finished
    assert progress_table(out)["step"].tolist() == [1, 2, 3, 4, 5]  # step 5 logged, then killed

    resumed = train_grpo(
        m.dataset,
        tiny_settings(**settings),
        out,
        backbone=TINY_QWEN3,
        reward_funcs=[length_reward],
        verbose=False,
    )
    for run in (whole, resumed):
        assert json.loads((run / "training_settings.json").read_text())["global_step"] == 5
    a, b = adapter(whole), adapter(resumed)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6)
    at_checkpoint = adapter(out / "checkpoint-4")
    assert any(not torch.equal(a[k], at_checkpoint[k]) for k in a)  # step 5 did move the weights
    pw, pr = progress_table(whole), progress_table(resumed)
    assert pr["step"].tolist() == [1, 2, 3, 4, 5]  # the killed run's step-5 row was replaced
    pd.testing.assert_series_equal(pw["reward"], pr["reward"], rtol=1e-6)


def test_generate_after_training_keeps_qlora_gradients_exact(mix, tmp_path):
    """The bitsandbytes CPU trap: an eval-mode generate (as Trainer evaluation or our backend
    does) must not change LoRA gradients. The flag bitsandbytes sets on AVX512-BF16 CPUs is
    simulated before the trainer is built; the trainer's guard must undo it."""
    import bitsandbytes as bnb

    from rmlib.generation import models

    real_load = models.load_backbone

    def load_as_on_avx512bf16(*args, **kwargs):
        model, tok = real_load(*args, **kwargs)
        for module in model.modules():
            if isinstance(module, bnb.nn.Linear4bit):
                module.support_avx512bf16_for_cpu = True
        return model, tok

    m, _ = mix
    models.load_backbone = load_as_on_avx512bf16
    try:
        trainer = build_trainer(
            m.dataset,
            tiny_settings(max_steps=1),
            tmp_path / "g",
            backbone=TINY_QWEN3,
            reward_funcs=[length_reward],
            verbose=False,
        )
    finally:
        models.load_backbone = real_load
    model = trainer.model
    layers = [x for x in model.modules() if isinstance(x, bnb.nn.Linear4bit)]
    assert layers and not any(x.support_avx512bf16_for_cpu for x in layers)
    ids = torch.tensor([trainer.processing_class("gradients stay exact")["input_ids"]])
    with torch.no_grad():  # a trained adapter: B != 0, so every LoRA matrix has a gradient
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05, generator=torch.Generator().manual_seed(0))

    def grads():
        model.train()
        model.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}

    before = grads()
    model.eval()
    with torch.no_grad():
        model.generate(input_ids=ids, max_new_tokens=2, do_sample=False)
    after = grads()
    assert max(((before[k] - after[k]).norm() / before[k].norm()).item() for k in before) < 1e-6


def test_epoch_order_does_not_depend_on_history():
    from rmlib.training.grpo_trainer import _epoch_seeded_sampler_class

    def order(sampler, epoch):
        sampler.set_epoch(epoch)
        return list(sampler)

    make = _epoch_seeded_sampler_class()
    fresh, used = (make(range(7), mini_repeat_count=2, batch_size=1, seed=3) for _ in range(2))
    order(used, 0)
    assert order(fresh, 1) == order(used, 1) != order(used, 0)
    assert sorted(order(fresh, 2)) == sorted(list(range(7)) * 2)


@pytest.mark.parametrize("thinking", [True, False])
def test_trl_renders_the_mix_with_the_runs_thinking_switch(tmp_path, thinking):
    """grpo_args passes the run's model.enable_thinking to TRL (chat_template_kwargs; GRPOSettings
    has no copy), and TRL's tokenization of the mix's prompts, as GRPOTrainer calls it, is then
    exactly the prompt each item was fitted and counted as."""
    from dataclasses import fields

    from rmlib.training.grpo_config import grpo_args

    assert "enable_thinking" not in {f.name for f in fields(GRPOSettings)}
    args = grpo_args(tiny_settings(), tmp_path / "out", enable_thinking=thinking)
    assert args.chat_template_kwargs == {"enable_thinking": thinking}
    m, _ = tiny_mix(tmp_path, enable_thinking=thinking)
    tokenizer = load_tokenizer(TINY_QWEN3)
    for row in m.dataset:
        ids = tokenizer.apply_chat_template(
            conversation=[row["prompt"]],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            **args.chat_template_kwargs,
        )["input_ids"][0]
        assert len(ids) == row["prompt_tokens"]
        assert ("<think>" in tokenizer.decode(ids)) is not thinking


def test_settings_validation():
    # the accumulation's rule depends on the process count: checked by batch_plan (at load for
    # run.gpus, and by a job's process for its WORLD_SIZE; tests/test_training_launch.py: 1, 2, 8)
    uneven = GRPOSettings(
        per_device_train_batch_size=4, generation_batch_size=16, gradient_accumulation_steps=6
    )
    with pytest.raises(ValueError, match="multiple of generation_batch_size"):
        batch_plan(uneven, 1)
    with pytest.raises(ValueError, match="'grpo.num_generations': .*greater than or equal to 2"):
        config_from_dict({"grpo": {"num_generations": 1}})  # a group needs two: checked at load
    cfg = GRPOSettings()
    assert (
        cfg.num_generations,
        cfg.learning_rate,
        cfg.beta,
        cfg.max_completion_length,
        cfg.num_train_epochs,
        cfg.warmup_ratio,
    ) == (8, 1e-6, 1e-3, 1024, 3.0, 0.1)


def test_trl_config_is_parsed_by_the_librarys_parser(tmp_path):
    """Every same-named setting reaches GRPOConfig without hand copying; grpo.trl adds any other
    GRPOConfig field; a wrong name is refused before any work (rmlib run's preflight)."""
    from dataclasses import fields

    from trl import GRPOConfig

    from rmlib.config import ConfigError
    from rmlib.training.grpo_config import grpo_args
    from rmlib.workbook.execute import check_trl_keys

    cfg = GRPOSettings(beta=0.01, top_k=5, save_total_limit=3, trl={"num_iterations": 2})
    args = grpo_args(cfg, tmp_path, seed=7)
    shared = {f.name for f in fields(GRPOSettings)} & {f.name for f in fields(GRPOConfig)}
    for name in shared - {"seed", "bf16"}:  # the two the trainer derives (run seed, CUDA)
        assert getattr(args, name) == getattr(cfg, name), name
    assert (args.num_iterations, args.seed, args.warmup_steps) == (2, 7, 0.1)
    with pytest.raises(ValueError, match="not trl.GRPOConfig fields"):
        grpo_args(GRPOSettings(trl={"num_iteration": 2}), tmp_path)
    with pytest.raises(ValueError, match="set grpo.<name> instead"):
        GRPOSettings(trl={"beta": 0.1})
    bad = config_from_dict({"grpo": {"trl": {"num_iteration": 2}}})
    with pytest.raises(ConfigError, match="'grpo.trl': \\['num_iteration'\\]"):
        check_trl_keys(bad)
    check_trl_keys(config_from_dict({"grpo": {"trl": {"num_iterations": 2}}}))


def test_trl_fields_read_without_importing_trl_are_grpo_configs_own():
    """The dry run checks grpo.trl from TRL's source (no torch): the same names as the class."""
    from dataclasses import fields

    from trl import GRPOConfig

    from rmlib.training.grpo_config import trl_config_fields

    assert trl_config_fields() == {f.name for f in fields(GRPOConfig)}


def test_a_misspelt_trl_mode_is_refused_before_any_work():
    """Before: TRL takes the mode as any string; a misspelt one reached notebook 03."""
    from dataclasses import fields

    from trl import GRPOConfig

    from rmlib.config import ConfigError
    from rmlib.training.grpo_config import TRL_CHOICES
    from rmlib.workbook.execute import check_trl_keys

    bad = config_from_dict({"grpo": {"trl": {"vllm_importance_sampling_mode": "sequence_masks"}}})
    with pytest.raises(ConfigError, match="'grpo.trl.vllm_importance_sampling_mode': "):
        check_trl_keys(bad)
    check_trl_keys(config_from_dict({"grpo": {"trl": {"importance_sampling_level": "sequence"}}}))
    helps = {f.name: f.metadata.get("help", "") for f in fields(GRPOConfig)}
    for key, allowed in TRL_CHOICES.items():  # each mode named by TRL's own help
        assert all(f"'{mode}'" in helps[key] or f"`'{mode}'`" in helps[key] for mode in allowed)


def test_command_line_overrides():
    from rmlib.training.grpo import _parse_set, main

    assert _parse_set(["max_steps=3", "beta=0.0", "generation_batch_size=null"]) == {
        "max_steps": 3,
        "beta": 0.0,
        "generation_batch_size": None,
    }
    with pytest.raises(SystemExit):
        _parse_set(["max_step=3"])
    with pytest.raises(SystemExit):
        main(["--help"])


def test_command_line_trains_with_the_mixs_thinking_switch(tmp_path, monkeypatch):
    """The mix was fitted under model.enable_thinking (its provenance says which): the command
    line trains with that switch, having no parameter of its own for it."""
    import rmlib.training.grpo as grpo

    _, path = tiny_mix(tmp_path, enable_thinking=True)
    seen = {}
    monkeypatch.setattr(grpo, "train_grpo", lambda *a, **kw: seen.update(kw) or tmp_path)
    grpo.main(["--mix", str(path), "--output", str(tmp_path / "o"), "--backbone", TINY_QWEN3])
    assert seen["enable_thinking"] is True


def test_cpu_log_probs_equal_trls_fused_path(mix, tmp_path):
    """Our plain CPU path (completion positions only) gives TRL's fused-head log-probs and
    entropies, on left-padded prompts, with and without grad."""
    from trl import GRPOTrainer

    trainer = build_trainer(
        mix[0].dataset,
        tiny_settings(),
        tmp_path / "out",
        backbone=TINY_QWEN3,
        precision="fp32",
        reward_funcs=[length_reward],
        verbose=False,
    )
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (3, 20), generator=gen)
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding of a shorter prompt
    args = (trainer.model, ids, mask, 7)
    ours = trainer._get_per_token_logps_and_entropies(*args, batch_size=2, compute_entropy=True)
    trls = GRPOTrainer._get_per_token_logps_and_entropies(
        trainer, *args, batch_size=2, compute_entropy=True
    )
    assert ours[0].shape == trls[0].shape == (3, 7)
    torch.testing.assert_close(ours[0], trls[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours[1], trls[1], atol=1e-4, rtol=1e-4)
    assert ours[0].requires_grad  # the policy's log-probs carry gradients to the adapter


def test_the_seed_fixes_the_initial_lora_weights(mix, tmp_path):
    """TRL seeds (set_seed(args.seed)) before it wraps the policy in LoRA: two builds with the
    same seed start from the same adapter, whatever the global RNG did in between; another
    seed starts elsewhere. No step is trained."""

    def initial_lora(seed: int, scramble: int) -> dict[str, torch.Tensor]:
        torch.manual_seed(scramble)  # a global RNG state the seed must override
        trainer = build_trainer(
            mix[0].dataset,
            tiny_settings(),
            tmp_path / f"s{seed}-{scramble}",
            backbone=TINY_QWEN3,
            precision="fp32",
            seed=seed,
            reward_funcs=[length_reward],
            verbose=False,
        )
        named = trainer.model.named_parameters()
        return {n: p.detach().clone() for n, p in named if "lora_A" in n}

    first, again, other = initial_lora(0, 1), initial_lora(0, 2), initial_lora(1, 1)
    assert first and first.keys() == again.keys() == other.keys()
    assert all(torch.equal(first[n], again[n]) for n in first)
    assert not any(torch.equal(first[n], other[n]) for n in first)

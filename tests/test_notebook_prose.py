"""Chapters that say what ran: no notebook's markdown names a fact that varies by profile.

The backbone, the precisions, the generator and the adapter method differ between the demo,
smoke and Qwen3-4B profiles (and, with precision auto, between machines), so prose that names
them is false for some run (notebook 03 once read "GRPO with QLoRA … 4-bit NF4 backbone" over a
bf16 run). The notebooks display `rmlib.workbook.facts.what_ran` instead, rendered from the run's
manifest.json; these tests keep the terms below out of their markdown cells and check the line.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest

from rmlib.run.config import load_config
from rmlib.run.folder import RunFolder
from rmlib.workbook.facts import what_ran

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# The profile-dependent terms, each a case-insensitive regex, and what kind of fact it names.
# A statement about the paper's own set-up is no exception: the differences table of notebook 05
# renders it, so the prose can say "the paper's backbone" without naming it.
PROFILE_TERMS: dict[str, str] = {
    r"\bnf4\b|\b[48]-?bit\b": "quantization (precision)",
    r"\b(bf|fp)16\b|\bbfloat16\b|\bfloat16\b|\bfp32\b|\bfloat32\b": "precision",
    r"\bqlora\b": "adapter method (QLoRA = a 4-bit base; LoRA alone is every profile's)",
    r"\bvllm\b|\bsglang\b": "generation backend",
    r"\bqwen|\bsmollm|\bllama|\bmistral|\bgemma": "model family / id",
    r"\b\d+(\.\d+)?\s?[mb]\b": "model size (4B, 135M)",
}
TERMS = re.compile("|".join(f"(?:{t})" for t in PROFILE_TERMS), re.IGNORECASE)


def profile_terms(markdown: str) -> list[str]:
    """The profile-dependent terms in `markdown` (PROFILE_TERMS), as written."""
    return [m.group(0) for m in TERMS.finditer(markdown)]


def test_the_term_list_catches_what_notebook_03_once_claimed():
    old = (
        "# 03 · Training: GRPO with QLoRA on the unified mix\n"
        "GRPO with a 4-bit NF4 backbone, served by vLLM in bf16; the demo's SmolLM2-135M and "
        "Qwen3-4B"
    )
    assert profile_terms(old) == [
        "QLoRA",
        "4-bit",
        "NF4",
        "vLLM",
        "bf16",
        "SmolLM",
        "135M",
        "Qwen",
        "4B",
    ]
    assert profile_terms("LoRA adapters on every linear projection, 16 GPUs, N = 8") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_markdown_names_no_profile_dependent_fact(path):
    nb = nbformat.read(path, as_version=4)
    found = [
        f"{cell.id}: {term!r}"
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for term in profile_terms(cell.source)
    ]
    assert not found, f"{path.name}: say these from the manifest (what_ran), not in prose: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS[1:], ids=lambda p: p.stem)
def test_every_model_notebook_displays_what_ran(path):
    nb = nbformat.read(path, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    opened = next(i for i, s in enumerate(code) if "open_run(run_dir, params_file)" in s)
    assert "Markdown(what_ran(cfg, run))" in code[opened + 1]  # right under the set-up cell


def _manifest(run: Path, train_precision: str, precision: str = "bf16") -> None:
    """A manifest.json with the sections what_ran reads, as rmlib.workbook.execute.manifest writes
    them."""
    cfg = load_config(ROOT / "params" / "demo.yaml")
    sampled_by = "vLLM colocate, " + (
        "unquantized base + the adapter by LoRARequest"
        if train_precision == "nf4"
        else "LoRA merged"
    )
    manifest = {
        "params": cfg.to_dict(),
        "hardware": {"cpu_count": 16, "gpus": ["NVIDIA H100 80GB HBM3"]},
        "precision": {
            "precision": {"asked": precision, "used": precision, "why": "set by the profile"},
            "train_precision": {"asked": train_precision, "used": train_precision, "why": "x"},
            "warmup_precision": {"asked": "auto", "used": "bf16", "why": "auto: CUDA device"},
            "adapters": {
                "trained_on": train_precision,
                "sampled_on": "bfloat16",
                "sampled_by": sampled_by,
            },
        },
    }
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.json").write_text(json.dumps(manifest))


def test_what_ran_says_qlora_only_over_an_nf4_base(tmp_path):
    cfg = load_config(ROOT / "params" / "demo.yaml")
    _manifest(tmp_path / "q", "nf4")
    line = what_ran(cfg, RunFolder(tmp_path / "q"))
    assert line.startswith("**What this run used** (from manifest.json): ")
    assert "backbone `embedded:smollm2-135m` on 1 × NVIDIA H100 80GB HBM3" in line
    assert "generation by vLLM's engine in this process in bf16 (set by the profile)" in line
    assert "GRPO: QLoRA (LoRA adapters on a 4-bit NF4 base), groups sampled by vLLM" in line
    assert "format warm-up: LoRA adapters on a bf16 base" in line
    _manifest(tmp_path / "b", "bf16")
    line = what_ran(cfg, RunFolder(tmp_path / "b"))
    assert "QLoRA" not in line and "NF4" not in line
    assert (
        "GRPO: LoRA adapters on a bf16 base, groups sampled by vLLM colocate, LoRA merged" in line
    )


def test_what_ran_without_a_manifest_reads_the_params(tmp_path):
    # a notebook opened by hand: the smoke profile fixes fp32 and the transformers loop
    cfg = load_config(ROOT / "params" / "smoke.yaml")
    line = what_ran(cfg, RunFolder(tmp_path))
    assert "(from this run's params; no manifest.json yet)" in line
    assert "generation by the transformers decode loop in fp32 (set by the profile)" in line
    assert "GRPO: LoRA adapters on a fp32 base, groups sampled by transformers in fp32" in line

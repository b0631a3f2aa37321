"""A run folder for the results/plots/report tests: real demo pairs judged by a scripted backend.

The pairs are the project's own demo evaluation pairs (rmlib.data.demo); the judge is the scripted
test double of reflect_fakes, taught to recognise demo prompts, run through the real
`run_reflectrm` with both orders. The tables are written the way `pipeline.evaluate` writes them,
so every results/plots/report function reads exactly what a real run leaves behind.

Scripted models (label L, wrong answer W = 3 - L; every log-prob of a sample equals its
confidence, so the anchor is the sample with the highest listed confidence):

- `unified`: per pair a pattern (PATTERNS), both orders the same except pair 1 (swapped: easy);
- `base`: always answers "Response 1" (a pure first-slot judge), sample 3 of even pairs fails
  to parse; its greedy judgment also says 1.
- `rft` is not evaluated (its tables are absent), as in the demo profile.
"""

from __future__ import annotations

import re
from pathlib import Path

from reflect_fakes import Scripted, ScriptedBackend, qwen3_tokenizer

from rmlib.data.demo import load_demo
from rmlib.data.pair import Pair
from rmlib.generation.base import Generation
from rmlib.judge.prompts import PromptFormat
from rmlib.judge.verdict import result_sentence
from rmlib.reflect import run_reflectrm
from rmlib.run.config import config_from_dict
from rmlib.run.folder import RunFolder
from rmlib.workbook.steps import pairs_frame

N = 4
N_PAIRS = 8
_CRIT = re.compile(r"CRIT \S*/s(\d+) reasoning")


def pattern(name: str, label: int) -> Scripted:
    """One pair's stage-1 samples (choice, confidence) and critique quality, by pattern name.

    overrule: the anchor (s0) is wrong, the three others right and better critiques: the
        reflection overrules it (3 informative calls, all prefer the correct critique).
    fail: the anchor is right, two wrong critiques beat it (2 informative calls, both prefer the
        wrong one) and the final vote is wrong.
    easy: all four right (no informative call).
    split: anchor right, s1 and s3 wrong and worse critiques (2 informative, both right), s2
        right but worse: no winners, the anchor stands.
    parsefail: s0 and s2 fail to parse; anchor s3 wrong, s1 right and better (1 informative,
        right); final right.
    none: nothing parses: every rollout-based method is a parse failure.
    """
    L, W = label, 3 - label
    table = {
        "overrule": ([(W, -0.1), (L, -1.0), (L, -1.0), (L, -1.0)], [0, 1, 1, 1]),
        "fail": ([(L, -0.1), (W, -1.0), (W, -1.0), (L, -1.0)], [0, 1, 1, 0.5]),
        "easy": ([(L, -0.1), (L, -0.2), (L, -0.3), (L, -0.4)], [0.4, 0.3, 0.2, 0.1]),
        "split": ([(L, -0.1), (W, -1.0), (L, -1.0), (W, -1.0)], [0.9, 0, 0.8, 0.1]),
        "parsefail": (
            [("missing", -0.1), (L, -1.0), ("truncated", -0.1), (W, -0.5)],
            [0, 1, 0, 0],
        ),
        "none": ([("missing", -0.1), ("empty", -0.1), ("tie", -0.1), ("ambiguous", -0.1)], []),
    }
    samples, quality = table[name]
    return Scripted(
        samples=[(c, [conf] * 4) for c, conf in samples],
        greedy=L,
        quality=[float(q) for q in quality],
    )


PATTERNS = ["overrule", "fail", "easy", "split", "parsefail", "overrule", "easy", "none"]


class DemoBackend(ScriptedBackend):
    """The scripted backend, recognising demo pairs by their query and responses."""

    def __init__(self, script: dict[str, Scripted], pairs: list[Pair]):
        super().__init__(script)
        self.pairs = pairs

    def _key(self, prompt: str) -> str:
        head = prompt.split("## Critiques for Judgment")[0]
        context, _, responses = head.partition("## Responses for Judgment")
        hits = [
            p
            for p in self.pairs
            if p.query in context and p.response1 in responses and p.response2 in responses
        ]
        if len(hits) != 1:
            raise AssertionError(f"prompt matches {len(hits)} demo pairs")
        p = hits[0]
        given = responses.index(p.response1) < responses.index(p.response2)
        return f"{p.source}:{p.id}:{'given' if given else 'swapped'}"

    def _reflect(self, key: str, sc: Scripted, section: str) -> Generation:
        s1, s2 = (int(m) for m in _CRIT.findall(section))
        self.reflections_seen.append((key, s1, s2))
        better = 1 if sc.quality[s1] > sc.quality[s2] else 2
        text = f"<Analysis>ok</Analysis>\n<Result>{result_sentence(better, 'refl')}</Result>"
        return Generation(text, [0, 1, 2], [-0.1] * 3, "stop", 10)


def unified_script(pairs: list[Pair]) -> dict[str, Scripted]:
    script = {}
    for k, p in enumerate(pairs):
        name = PATTERNS[k % len(PATTERNS)]
        script[p.key] = pattern(name, p.label)
        swapped = p.swapped()
        script[swapped.key] = pattern("easy" if k == 1 else name, swapped.label)
    script[pairs[1].key].greedy = 3 - pairs[1].label  # one wrong greedy judgment
    return script


def base_script(pairs: list[Pair]) -> dict[str, Scripted]:
    script = {}
    for k, p in enumerate(pairs):
        for q in (p, p.swapped()):
            last = "missing" if k % 2 == 0 else 1
            script[q.key] = Scripted(
                samples=[(1, [-0.5] * 4), (1, [-0.6] * 4), (1, [-0.7] * 4), (last, [-0.8] * 4)],
                greedy=1,
                quality=[0.1, 0.2, 0.3, 0.4],
            )
    return script


def params(n_pairs: int = N_PAIRS, name: str = "results-test") -> dict:
    return {
        "run": {"name": name, "description": "scripted judge on demo pairs (tests)"},
        "data": {
            "train": {"source": "demo", "split": "train", "n": 16},
            "eval": [{"source": "demo", "split": "eval", "n": n_pairs}],
        },
        "inference": {
            "n_samples": N,
            "confidence_fraction": 0.25,
            "both_orders": True,
            "max_new_tokens": 64,
            "reflection_max_new_tokens": 32,
            "random_anchor_sources": ["demo"],  # the ablation on the only set here
        },
        "eval": {"models": ["base", "rft", "unified"], "n_bootstrap": 200, "n_grid": [1, 2, 4, 8]},
    }


def failing_script(pairs: list[Pair]) -> dict[str, Scripted]:
    """Nothing parses, greedy included (what a tiny random model produces)."""
    script = {}
    for p in pairs:
        for q in (p, p.swapped()):
            script[q.key] = pattern("none", q.label)
            script[q.key].greedy = "missing"
    return script


def build_run(path: Path, n_pairs: int = N_PAIRS, failing: bool = False) -> RunFolder:
    """Write params, pairs_eval and every base/unified table into `path` (`failing`: both
    models' outputs never parse)."""
    cfg = config_from_dict(params(n_pairs))
    run = RunFolder(path)
    run.write_params(cfg)
    loaded = load_demo(split="eval", n=n_pairs, seed=0)
    pairs = loaded.pairs
    run.write_table("pairs_eval", pairs_frame(pairs))
    tokenizer = qwen3_tokenizer()
    scripts = {"base": base_script(pairs), "unified": unified_script(pairs)}
    if failing:
        scripts = {"base": failing_script(pairs), "unified": failing_script(pairs)}
    for model, script in scripts.items():
        result = run_reflectrm(
            pairs, DemoBackend(script, pairs), PromptFormat(tokenizer), cfg.inference
        )
        for name, table in result.tables().items():
            run.write_table(f"{name}_{model}", table)
        run.update_metrics(f"counts_{model}", result.counts)
    return run


_BUILT: dict[str, Path] = {}


def shared_run(tmp_path_factory) -> RunFolder:
    """The scripted run folder, built once per test session (the test modules share it)."""
    if "path" not in _BUILT:
        _BUILT["path"] = build_run(tmp_path_factory.mktemp("scripted_run")).path
    return RunFolder(_BUILT["path"])


def one_order_copy(run: RunFolder, dest: Path) -> RunFolder:
    """A copy of `run` as if it had judged the given order only (inference.both_orders false)."""
    import shutil

    import yaml

    shutil.copytree(run.path / "tables", dest / "tables")
    out = RunFolder(dest)
    data = yaml.safe_load(run.params_file.read_text())
    data["inference"]["both_orders"] = False
    out.params_file.write_text(yaml.safe_dump(data, sort_keys=False))
    for model in ("base", "unified"):
        for name in ("rollouts", "greedy", "reflections", "predictions"):
            table = out.read_table(f"{name}_{model}")
            out.write_table(f"{name}_{model}", table[table["order"] == "given"])
    if out.has_table("results_main"):  # built from both orders: let it be rebuilt
        out.table_path("results_main").unlink()
    return out

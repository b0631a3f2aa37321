"""LLMBar (GitHub `princeton-nlp/LLMBar`, folder `Dataset/`; no hub copy, so a path is needed).

Layout: `LLMBar/Natural/dataset.json`, `LLMBar/Adversarial/{Neighbor,GPTInst,GPTOut,Manual}/
dataset.json` (the benchmark, 419 pairs) and `Processed/{MT-Bench,FairEval,LLMEval^2}/
dataset.json` (human-labelled sets, ties removed). Each file is a JSON array of `input`,
`output_1`, `output_2`, `label` (1 or 2); the given order is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmlib.data._io import Row, chain_files, collect, no_options, user
from rmlib.data.pair import LoadResult, OnError, Pair

SOURCE = "llmbar"
FILE_NAME = "dataset.json"
GROUPS: tuple[str, ...] = ("LLMBar", "Processed")
LABELS: dict[Any, int] = {1: 1, 2: 2, "1": 1, "2": 2}


def load_llmbar(
    path: str | None = None,
    *,
    split: str | None = None,
    config: str | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    **options: Any,
) -> LoadResult:
    """LLMBar pairs from one `dataset.json` or every one found (recursively) under a folder.

    config: "LLMBar" or "Processed" picks that subfolder of the repo's `Dataset/` root, "all"
    reads everything under path; default (None): `LLMBar/` when path holds one, else everything
    under path. subset: the file's folder below `LLMBar/` ("Natural", "Adversarial/Neighbor") or
    from `Processed/` on ("Processed/MT-Bench"); else relative to path. id: "{subset}/{row}".
    split and seed are unused (one set, given order).
    """
    no_options(SOURCE, options)
    if path is None:
        raise ValueError(
            "llmbar has no hub copy: pass the GitHub Dataset/ folder or a "
            "dataset.json with --path FILE_OR_DIR"
        )
    root = _root(Path(path).expanduser(), config)
    files = [root] if root.is_file() else sorted(root.rglob(FILE_NAME))
    if not files:
        raise FileNotFoundError(f"no {FILE_NAME} under {root}")
    subset_of = {str(f): _subset(f, root) for f in files}
    result = LoadResult(SOURCE, str(root), split, [])
    return collect(
        result, chain_files(files), lambda row: [_pair(row, subset_of[row.file])], on_error
    )


def _root(p: Path, config: str | None) -> Path:
    if not p.exists():
        raise FileNotFoundError(f"no such file or directory: {p}")
    if config not in (None, "all", *GROUPS):
        raise ValueError(f"llmbar config must be one of {[*GROUPS, 'all']}, got {config!r}")
    if config is None:
        return p / "LLMBar" if (p / "LLMBar").is_dir() else p
    if config == "all" or p.name == config:
        return p
    if (p / config).is_dir():
        return p / config
    raise FileNotFoundError(f"no {config}/ folder under {p}")


def _subset(file: Path, root: Path) -> str:
    folder = file.resolve().parent.parts
    for k in range(len(folder) - 1, -1, -1):  # the innermost LLMBar/ or Processed/ folder
        if folder[k] == "LLMBar":
            return "/".join(folder[k + 1 :]) or "LLMBar"
        if folder[k] == "Processed":
            return "/".join(folder[k:])
    base = root.resolve() if root.is_dir() else root.resolve().parent.parent
    rel = file.resolve().parent.relative_to(base).as_posix()
    return rel if rel != "." else base.name


def _pair(row: Row, subset: str) -> Pair:
    return Pair(
        f"{subset}/{row.index}",
        SOURCE,
        subset,
        user(row.text("input", kind="empty_prompt")),
        row.text("output_1"),
        row.text("output_2"),
        row.label("label", LABELS),
        {"row": row.index},
    )

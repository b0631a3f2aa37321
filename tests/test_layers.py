"""rmlib's layers contract holds, and fails where it should.

`lint-imports` (import-linter; the contracts in pyproject.toml, run by `make test` before pytest)
checks that each floor imports only the floors below it and that no package's modules import
each other in a circle, counting in-function and TYPE_CHECKING imports. Here the same contracts
run on a copy of rmlib with one upward import, and one import cycle, added: each must break
them. Imports by name (`__import__`, importlib) are invisible to a static graph, so none may
be in rmlib; and at most 8 modules stand loose at its top level.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed")


def _lint(package_parent: Path) -> subprocess.CompletedProcess:
    """The project's contracts over the rmlib package found in `package_parent`."""
    return subprocess.run(
        [str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=package_parent,
        env={"PYTHONPATH": str(package_parent), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy(tmp_path: Path) -> Path:
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "rmlib", tmp_path / "rmlib", ignore=skip)
    return tmp_path


def _append(path: Path, code: str) -> None:
    path.write_text(path.read_text() + "\n\n" + code + "\n")


def test_the_library_keeps_its_contracts():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_an_upward_import_in_a_function_breaks_the_floors(tmp_path):
    """The ground floor reaching the workbook, even inside a function, is refused."""
    tree = _copy(tmp_path)
    _append(
        tree / "rmlib" / "config" / "fields.py",
        "def _notebook_steps():\n    from rmlib.workbook import steps\n\n    return steps",
    )
    done = _lint(tree)
    assert done.returncode != 0
    assert "rmlib.config is not allowed to import rmlib.workbook" in done.stdout
    assert "rmlib.config.fields -> rmlib.workbook.steps" in done.stdout


def test_a_type_checking_import_cycle_breaks_the_siblings(tmp_path):
    """A run's config typing a name from the run's models (which import the config): a circle,
    even under TYPE_CHECKING."""
    tree = _copy(tmp_path)
    _append(
        tree / "rmlib" / "run" / "config.py",
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from rmlib.run.models import MODELS",
    )
    done = _lint(tree)
    assert done.returncode != 0
    assert "no import cycle among the modules of any rmlib package BROKEN" in done.stdout


def test_no_import_by_name_and_few_loose_modules():
    by_name = re.compile(r"__import__\(|import_module\(")
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sorted((ROOT / "rmlib").rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if by_name.search(line)
    ]
    assert found == [], f"imports by name hide edges from the layers contract: {found}"
    loose = sorted(p.name for p in (ROOT / "rmlib").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 8, loose


@pytest.mark.parametrize(
    ("statement", "where"),
    [
        ("from rmlib.reward_judge import http_judge", "rmlib.tools.reward"),
        ("from rmlib import judging", "rmlib.tools.judge"),
        ("import rmlib.run_folder", "rmlib.run.folder"),
        ("from rmlib.config import RunConfig", "rmlib.run.config"),
        ("from rmlib.config import GenerationSection", "rmlib.generation.settings"),
        ("from rmlib.run import execute", "rmlib.workbook.execute"),
        ("from rmlib.run import holding", "rmlib.run.lock"),
        ("from rmlib.judge import judge_pairs", "rmlib.judge.judgments"),
    ],
)
def test_an_old_import_says_where_it_went(statement, where):
    with pytest.raises(ImportError, match=rf"moved: import .*{re.escape(where)}"):
        exec(statement, {})


def test_every_moved_module_names_modules_that_exist():
    import importlib.util

    import rmlib

    for old, new in rmlib.MOVED.items():
        targets = re.findall(r"rmlib(?:\.\w+)+", new)
        assert targets, old
        for target in targets:
            assert importlib.util.find_spec(target) is not None, f"{old} -> {target}"

"""A run writes only its own files: a symbolic link planted in place of any file it writes in its
folder is replaced (or, for the lock, the params and the store, refused in one line), and the
file the link points to, outside the folder, is never written. A run folder that is itself a
link (a data disk) stays allowed.
"""

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from rmlib import status, writes
from rmlib.run import lock
from rmlib.run.folder import RunFolder

ROOT = Path(__file__).resolve().parents[1]
SECRET = "someone else's file\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the run folder that a planted link points to."""
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_text(SECRET)
    return target


def _plant(link: Path, target: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def _untouched(target: Path) -> None:
    assert target.read_text() == SECRET


# ---- the helper ---------------------------------------------------------------------------------


def test_write_text_replaces_a_link_and_leaves_its_target(tmp_path, outside):
    name = _plant(tmp_path / "run" / "metrics.json", outside)
    writes.write_text(name, "{}")
    _untouched(outside)
    assert not name.is_symlink() and name.read_text() == "{}"
    assert [p.name for p in name.parent.iterdir()] == ["metrics.json"]  # no temporary left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    name = tmp_path / "table.parquet"
    name.write_text("old")
    with pytest.raises(RuntimeError), writes.replacing(name) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert name.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == [name.name]


def test_a_new_file_has_the_mode_a_plain_open_gives(tmp_path):
    name = writes.write_text(tmp_path / "a.json", "{}")
    plain = tmp_path / "b.json"
    plain.write_text("{}")
    assert name.stat().st_mode == plain.stat().st_mode


def test_appending_never_follows_a_link(tmp_path, outside):
    name = _plant(tmp_path / "progress.jsonl", outside)
    with writes.open_append(name) as fh:
        fh.write("row\n")
    with writes.open_append(name) as fh:  # a plain file is appended to
        fh.write("row\n")
    _untouched(outside)
    assert not name.is_symlink() and name.read_text() == "row\nrow\n"


# ---- the run folder -----------------------------------------------------------------------------


def test_tables_metrics_and_data_hashes_replace_links(tmp_path, outside):
    run = RunFolder(tmp_path / "run")
    names = [
        _plant(run.table_path("pairs_eval"), outside),
        _plant(run.metrics_file, outside),
        _plant(run.path / "data_hashes.json", outside),
    ]
    # the temporary names the writers used before: a link there is not followed either
    _plant(run.path / "tables" / "pairs_eval.parquet.tmp", outside)
    _plant(run.path / "metrics.tmp", outside)
    run.write_table("pairs_eval", pd.DataFrame({"a": [1, 2]}))
    run.update_metrics("headline", {"accuracy": 0.5})
    run.record_data_file("some/hub-id")
    _untouched(outside)
    assert not any(n.is_symlink() for n in names)
    assert run.read_table("pairs_eval")["a"].tolist() == [1, 2]
    assert run.metrics() == {"headline": {"accuracy": 0.5}}


def test_a_linked_params_file_is_refused_in_one_line(tmp_path, outside):
    from rmlib.run.config import load_config

    run = RunFolder(tmp_path / "run")
    _plant(run.params_file, outside)
    with pytest.raises(writes.LinkedFile) as err:
        run.write_params(load_config(ROOT / "params" / "smoke.yaml"))
    msg = str(err.value)
    assert "\n" not in msg and str(run.params_file) in msg and "the run folder's params" in msg
    _untouched(outside)


def test_rmlib_run_refuses_a_linked_params_file_before_writing_anything(tmp_path, outside, capsys):
    from rmlib.cli import main

    folder = tmp_path / "out" / "linked"
    _plant(folder / "params.yaml", outside)
    args = ["run", str(ROOT / "params" / "smoke.yaml"), "--name", "linked"]
    args += ["--set", f"run.output_root={tmp_path / 'out'}", "--set", "run.notebooks=[01_data]"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err == (
        f"rmlib: error: {folder / 'params.yaml'} (the run folder's params) is a symbolic link "
        f"(to {outside}): rmlib never writes through a link; remove it and run again\n"
    )
    _untouched(outside)
    assert not (folder / lock.LOCK_FILE).exists() and not (folder / "run.log").exists()


def test_a_linked_lock_file_is_refused_in_one_line_and_its_target_kept(tmp_path, outside):
    folder = tmp_path / "run"
    _plant(folder / lock.LOCK_FILE, outside)
    with pytest.raises(writes.LinkedFile) as err, lock.holding(folder):
        pass
    msg = str(err.value)
    assert "\n" not in msg and str(folder / lock.LOCK_FILE) in msg and "lock" in msg
    _untouched(outside)  # the old open truncated it to the holder's pid


def test_a_server_log_replaces_a_link(tmp_path, outside):
    name = _plant(tmp_path / "serve" / "server-8000.log", outside)
    with writes.open_fresh(name) as out:
        out.write(b"started\n")
    _untouched(outside)
    assert not name.is_symlink() and name.read_bytes() == b"started\n"


def test_links_inside_a_folder_a_library_writes_are_removed(tmp_path, outside):
    """Trainer checkpoints and `datasets` write by name: the links in their folder go first."""
    out = tmp_path / "training" / "unified"
    names = [
        _plant(out / "trainer_state.json", outside),
        _plant(out / "checkpoint-1" / "adapter_model.safetensors", outside),
        _plant(out / "checkpoint-2", outside.parent),  # a linked folder: not entered
    ]
    writes.unlink_links(out)
    _untouched(outside)
    assert not any(n.exists() or n.is_symlink() for n in names)
    assert outside.parent.is_dir() and (out / "checkpoint-1").is_dir()


def test_a_run_folder_that_is_itself_a_link_stays_allowed(tmp_path):
    disk = tmp_path / "data-disk" / "run"
    disk.mkdir(parents=True)
    (tmp_path / "outputs").mkdir()
    linked = _plant(tmp_path / "outputs" / "run", disk)
    run = RunFolder(linked)
    with lock.holding(run.path):
        run.write_table("t", pd.DataFrame({"a": [1]}))
        run.update_metrics("s", {"x": 1})
    assert (disk / "tables" / "t.parquet").is_file() and (disk / "metrics.json").is_file()
    assert (disk / lock.LOCK_FILE).read_text() == f"{os.getpid()}\n"


def test_the_status_file_replaces_a_link(tmp_path, outside, monkeypatch):
    path = _plant(tmp_path / "status.json", outside)
    _plant(tmp_path / "status.json.tmp", outside)  # the old fixed temporary name
    monkeypatch.setenv(status.ENV, str(path))
    monkeypatch.setattr(status, "_state", {"written": 0.0, "step": None})
    status.report("step", 1, 1)
    _untouched(outside)
    assert json.loads(path.read_text())["done"] == 1


def test_a_linked_generation_store_is_refused_in_one_line(tmp_path, outside):
    from rmlib.generation.store import GenerationStore

    for suffix in ("", "-wal"):
        folder = tmp_path / f"run{suffix}"
        _plant(folder / f"generations.sqlite{suffix}", outside)
        with pytest.raises(writes.LinkedFile, match=r"generations\.sqlite.* is a symbolic link"):
            GenerationStore(folder / "generations.sqlite")
        _untouched(outside)


def test_training_files_replace_links(tmp_path, outside):
    from rmlib.training.model_card import _write
    from rmlib.training.progress import PROGRESS_CSV, PROGRESS_JSONL, ProgressTable

    out = tmp_path / "adapters" / "unified"
    names = [_plant(out / PROGRESS_JSONL, outside), _plant(out / PROGRESS_CSV, outside)]
    table = ProgressTable(out, verbose=False)
    state = SimpleNamespace(is_world_process_zero=True, global_step=1, epoch=0.5, max_steps=2)
    table.on_log(None, state, None, logs={"reward": 0.5})
    names.append(_plant(out / "README.md", outside))
    _write(out / "README.md", "card")
    _untouched(outside)
    assert not any(n.is_symlink() for n in names)
    assert json.loads((out / PROGRESS_JSONL).read_text())["step"] == 1


def test_figures_replace_links(tmp_path, outside):
    import matplotlib.pyplot as plt

    from rmlib.plots.style import save_to

    stem = tmp_path / "figures" / "accuracy"
    names = [_plant(stem.with_suffix(".png"), outside), _plant(stem.with_suffix(".svg"), outside)]
    save_to(plt.figure(), stem)
    _untouched(outside)
    assert not any(n.is_symlink() for n in names)
    assert stem.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in stem.with_suffix(".svg").read_bytes()


def test_rmlib_run_writes_through_no_link_in_its_folder(tmp_path, outside, capsys, monkeypatch):
    """`rmlib run` with a link planted in place of each file the runner writes: state, manifest,
    log, the executed notebook; each target outside is untouched."""
    import papermill

    from rmlib.cli import main

    folder = tmp_path / "out" / "linked"
    names = ["state.json", "manifest.json", "run.log", "notebooks/01_data.ipynb", "status.json"]
    for name in [*names, "state.json.tmp"]:
        _plant(folder / name, outside)

    def fake_notebook(src, dest, **kw):
        status.report("step", 1, 1)
        Path(dest).write_text("{}")  # papermill opens its output by name

    monkeypatch.setattr(papermill, "execute_notebook", fake_notebook)
    monkeypatch.setattr(status.Watcher, "start", lambda self: None)
    monkeypatch.setattr(status.Watcher, "stop", lambda self: None)
    args = ["run", str(ROOT / "params" / "smoke.yaml"), "--name", "linked"]
    args += ["--set", f"run.output_root={tmp_path / 'out'}", "--set", "run.notebooks=[01_data]"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 0, err
    _untouched(outside)
    for name in names:
        assert not (folder / name).is_symlink(), name
    assert json.loads((folder / "state.json").read_text())["01_data"]["status"] == "completed"
    assert "done 01_data" in (folder / "run.log").read_text()

"""Settings a notebook would refuse (or silently get wrong) are refused when the params file is
loaded: by the dry run and by `rmlib run` before the first notebook, one line naming the key.
Pure config checks: no model, no notebook."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmlib.cli import main
from rmlib.config import ConfigError
from rmlib.run.config import load_config

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "params" / "demo.yaml"


@pytest.mark.parametrize(
    ("families", "says"),
    [
        ([], "no demo families: list at least one of"),
        (["refusals"], "unknown demo families ['refusals']"),
        (["refusal", "passage", "refusal"], "demo families listed twice: ['refusal']"),
    ],
)
def test_bad_warmup_families_are_refused_at_load(families, says):
    """Before: accepted by the dry run, refused (or duplicated pairs) inside notebook 02."""
    with pytest.raises(ConfigError) as info:
        load_config(DEMO, {"warmup.families": families})
    message = str(info.value)
    assert "'warmup.families'" in message and says in message and "\n" not in message


def test_a_dry_run_refuses_a_misspelt_family_before_planning(capsys):
    code = main(["run", str(DEMO), "--dry-run", "--set", "warmup.families=[refusals]"])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown demo families ['refusals']" in err[0]


def test_output_root_expands_home_or_is_refused():
    """Before: `run.output_root=~/x` made a folder named '~' in the working directory."""
    cfg = load_config(DEMO, {"run.output_root": "~/runs"})
    assert cfg.run.output_root == os.path.join(os.path.expanduser("~"), "runs")
    with pytest.raises(ConfigError, match="names no home folder of this machine"):
        load_config(DEMO, {"run.output_root": "~no-such-user-here/runs"})


@pytest.mark.parametrize("value", ["nan", "-2", "0", "inf"])
def test_serve_kv_cache_gib_is_refused_naming_the_flag_before_anything_is_written(
    tmp_path, monkeypatch, capsys, value
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["serve", "--checkpoint", "embedded:tiny-qwen3", "--kv-cache-gib", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --kv-cache-gib: expected a number of GiB above 0, got '{value}'" in err
    assert list(tmp_path.iterdir()) == []


def test_a_demo_family_listed_twice_in_a_data_set_is_refused_at_load():
    """Before: accepted; the loader drew that family's pairs twice as often."""
    spec = {"source": "demo", "split": "eval", "options": {"families": ["refusal", "refusal"]}}
    with pytest.raises(ConfigError, match=r"'data.eval\[0\]': demo families listed twice"):
        load_config(DEMO, {"data.eval": [spec]})


def test_a_run_name_too_long_for_a_folder_is_refused_at_load():
    """Before: accepted by the dry run, an OSError when the run folder was made."""
    with pytest.raises(ConfigError, match="is 300 bytes, over the 255 a folder name holds"):
        load_config(DEMO, {"run.name": "r" * 300})
    assert load_config(DEMO, {"run.name": "r" * 255}).run.name == "r" * 255

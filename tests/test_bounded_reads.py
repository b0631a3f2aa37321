"""rmlib.reads: every file the project reads is a regular file under a size limit, or refused in
one line naming it (a device, a pipe, a link to one, a file over its limit); numbers read from a
constants file are finite and in range, named by file and key. Pure logic on small hand-made
files: no model, no engine."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmlib import reads
from rmlib.cli import EXIT_ERROR, main
from rmlib.config import ConfigError
from rmlib.data.pair import DataError
from rmlib.run.config import load_config
from rmlib.scoring.predictions import load_predictions
from rmlib.tools.judge import read_pairs
from rmlib.workbook.plan.constants import CPU_KIND, cpu_card, measured_constants
from rmlib.workbook.plan.lengths import read_lengths

ROOT = Path(__file__).resolve().parents[1]


def _device_link(tmp_path: Path, name: str) -> Path:
    link = tmp_path / name
    link.symlink_to("/dev/zero")
    return link


def test_a_device_a_pipe_and_an_oversized_file_are_refused_in_one_line(tmp_path):
    link = _device_link(tmp_path, "pairs.jsonl")
    with pytest.raises(reads.UnreadableInput) as info:
        reads.read_bytes(link, "pairs file")
    assert str(info.value) == (
        f"{link}: the pairs file is a character device (through a symbolic link), not a regular "
        "file: give a file"
    )
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # no writer: opening it to read must not block
    with pytest.raises(reads.UnreadableInput, match="is a pipe, not a regular file"):
        reads.read_bytes(fifo, "lengths file")
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(reads.UnreadableInput, match=r"over its size limit \(1,024 bytes\)"):
        reads.read_bytes(big, "params file", limit=1024)
    assert reads.read_bytes(big, "params file", limit=2048) == b"x" * 2048


def test_a_gzip_bomb_is_bounded_by_its_content_not_its_size(tmp_path):
    bomb = tmp_path / "pairs.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"\n" * (1 << 20)))  # 1 MiB of content in about 1 kB
    assert bomb.stat().st_size < 4096
    with pytest.raises(reads.UnreadableInput, match="over its size limit"):
        reads.read_bytes(bomb, "pairs file", limit=1 << 16)


@pytest.mark.parametrize(
    ("name", "read", "error"),
    [
        ("pairs.jsonl", read_pairs, DataError),
        ("preds.jsonl", load_predictions, DataError),
        ("preds.parquet", load_predictions, DataError),
        ("params.yaml", load_config, ConfigError),
        ("lengths.json", read_lengths, ValueError),
        ("cpu.json", cpu_card, ValueError),
        ("gpu.json", measured_constants, ValueError),
    ],
)
def test_every_reader_refuses_a_link_to_a_device_naming_the_file(tmp_path, name, read, error):
    """Before: a MemoryError traceback after reading /dev/zero whole (or a hang)."""
    link = _device_link(tmp_path, name)
    with pytest.raises(error) as info:
        read(link)
    message = str(info.value)
    assert str(link) in message and "not a regular file" in message and "\n" not in message


def test_rmlib_score_on_a_device_is_one_line(tmp_path, capsys):
    link = _device_link(tmp_path, "preds.jsonl")
    assert main(["score", str(link), "--benchmark", "ppe", "--n-boot", "5"]) == EXIT_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"rmlib: error: {link}: the data file is a character device (through a symbolic link), "
        "not a regular file: give a file"
    ]


# ---------------------------------------------------------------- constants files' numbers


def _cpu_file(tmp_path: Path, **change) -> Path:
    data = {
        "kind": CPU_KIND,
        "device": "test CPU",
        "memory_gib": 24.0,
        "bandwidth_gb_s": 20.0,
        "tflops": 1.5,
        "constants": {"engine_start_s": 40.0, "train_mfu": 0.1},
    }
    for key, value in change.items():
        if key.startswith("constants_"):
            data["constants"][key.removeprefix("constants_")] = value
        else:
            data[key] = value
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(data))  # allow_nan: Infinity and NaN written as JSON allows
    return path


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"bandwidth_gb_s": 0}, "bandwidth_gb_s"),
        ({"tflops": -1.5}, "tflops"),
        ({"memory_gib": True}, "memory_gib"),
        ({"memory_gib": None}, "memory_gib"),
        ({"bandwidth_gb_s": float("inf")}, "bandwidth_gb_s"),
        ({"constants_engine_start_s": -3.0}, "constants.engine_start_s"),
        ({"constants_train_mfu": float("nan")}, "constants.train_mfu"),
        ({"constants_engine_start_s": None}, "constants.engine_start_s"),
    ],
)
def test_a_cpu_constants_file_with_a_bad_number_names_file_and_key(tmp_path, change, key):
    path = _cpu_file(tmp_path, **change)
    with pytest.raises(ValueError) as info:
        cpu_card(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {key}: expected a finite number") and "\n" not in message


def test_a_malformed_cpu_constants_file_is_one_line(tmp_path):
    path = tmp_path / "cpu.json"
    path.write_text('{"kind": "rmlib-cpu-constants", ')
    with pytest.raises(ValueError, match=rf"^{path}: not a CPU constants file \(not JSON: "):
        cpu_card(path)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a CPU constants file of benchmarks/calibrate_cpu"):
        cpu_card(path)


finite = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False)
anything = st.one_of(
    st.none(), st.booleans(), st.floats(), st.integers(-10, 10), st.text(max_size=3), finite
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(memory=anything, bandwidth=anything, tflops=anything, start=anything)
def test_a_cpu_constants_file_gives_a_card_of_positive_finite_numbers_or_one_line(
    tmp_path, memory, bandwidth, tflops, start
):
    path = _cpu_file(
        tmp_path,
        memory_gib=memory,
        bandwidth_gb_s=bandwidth,
        tflops=tflops,
        constants_engine_start_s=start,
    )
    try:
        card, constants, _ = cpu_card(path)
    except ValueError as e:
        assert str(e).startswith(f"{path}: ") and "\n" not in str(e)
        return
    import math

    for value in (card.memory_gib, card.bandwidth_gb_s, card.bf16_tflops):
        assert math.isfinite(value) and value > 0
    assert all(math.isfinite(c.value) and c.value >= 0 for c in constants.values())


# ---------------------------------------------------------------- lengths files


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers(-5, 5000) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
lengths_like = st.dictionaries(
    st.sampled_from(["demo", "rewardbench", "x"]),
    st.fixed_dictionaries({"prompt_tokens": st.dictionaries(st.just("mean"), json_values)}),
    max_size=3,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.one_of(json_values, lengths_like))
def test_a_lengths_file_gives_finite_positive_prompt_lengths_or_one_line(tmp_path, data):
    """Any JSON at all: the dry run gets a finite length above 0 for every source, or one
    ValueError line naming the file (before: a KeyError or a negative or infinite figure)."""
    import math

    from rmlib.workbook.plan.lengths import source_length

    path = tmp_path / "lengths.json"
    path.write_text(json.dumps(data))
    try:
        measured = read_lengths(path)
    except ValueError as e:
        assert str(e).startswith(f"{path}: ") and "\n" not in str(e)
        return
    for source in measured:
        length = source_length(source, measured).prompt_tokens
        assert math.isfinite(length) and length > 0


# ---------------------------------------------------------------- model configs

dims = st.one_of(st.none(), st.booleans(), st.integers(-3, 4096), st.floats(), st.text(max_size=2))
config_like = st.fixed_dictionaries(
    {
        "vocab_size": dims,
        "hidden_size": dims,
        "intermediate_size": dims,
        "num_hidden_layers": dims,
        "num_attention_heads": dims,
    },
    optional={"num_key_value_heads": dims, "head_dim": dims, "num_experts": dims},
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(config=st.one_of(config_like, json_values))
def test_a_local_model_config_gives_positive_dimensions_none_or_one_line(tmp_path, config):
    """Any config.json: the dry run gets the model's facts with every dimension above 0, None
    (not a dense decoder it can cost), or one ValueError line naming the file and key."""
    from rmlib.workbook.plan.facts import model_facts

    (tmp_path / "config.json").write_text(json.dumps(config))
    try:
        facts = model_facts(str(tmp_path))
    except ValueError as e:
        assert str(e).startswith(f"{tmp_path / 'config.json'}: ") and "\n" not in str(e)
        return
    if facts is not None:
        sizes = (facts.vocab, facts.hidden, facts.intermediate, facts.layers, facts.q_dim)
        assert all(v > 0 for v in sizes) and facts.kv_dim > 0 and facts.params > 0


# ---------------------------------------------------------------- a writer's crash behaviour


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    limit=st.integers(0, 6000),
    note=st.text(max_size=3000),
    mean=st.floats(1, 1e5, allow_nan=False),
)
def test_a_lengths_write_cut_anywhere_leaves_the_old_file_or_the_new_one(
    tmp_path, limit, note, mean
):
    """A file size limit (as `ulimit -f`, a disk filling) at any byte: the lengths file is the
    earlier one or the new one, never a mix, and no temporary file is left. The limit is set in
    this process for the one write only (Python ignores SIGXFSZ: the write fails with EFBIG)."""
    import resource
    import tempfile

    from rmlib.workbook.plan.lengths import write_lengths

    folder = Path(tempfile.mkdtemp(dir=tmp_path))  # one per example
    out = folder / "lengths.json"
    write_lengths(out, "demo", {"prompt_tokens": {"mean": 200.0}})
    before = out.read_bytes()
    entry = {"prompt_tokens": {"mean": mean}, "note": note}
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        write_lengths(out, "rewardbench", entry)
        wrote = True
    except OSError as e:
        wrote = False
        assert str(e).startswith(f"{out}: the lengths file could not be written (")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    data = json.loads(out.read_text())
    if wrote:
        assert data == {"demo": {"prompt_tokens": {"mean": 200.0}}, "rewardbench": entry}
    else:
        assert out.read_bytes() == before
    assert [p.name for p in folder.iterdir()] == ["lengths.json"]

"""`rmlib serve`, `lab` and `fetch` closed to bad input (issue #29, item 6): ports checked at
parse time and by a bind before any server starts, duplicate adapter names and an open host
without a key refused, nothing written on a refusal; the lab refuses a run folder in use and a
missing params file before JupyterLab starts; fetch exits non-zero when the profile needs what
is neither fetchable nor present. Each condition is faked; the exact line is asserted."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from rmlib.cli import main
from rmlib.run import lock

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "params" / "smoke.yaml")


def _err(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line]


@pytest.fixture
def no_start(monkeypatch):
    """Any server start, or model resolution, fails the test: every refusal comes first."""

    def start(*_, **__):
        raise AssertionError("nothing may start on a refused call")

    monkeypatch.setattr("rmlib.generation.servers.start_servers", start)
    monkeypatch.setattr("rmlib.run.backends.served", start)
    monkeypatch.setattr("rmlib.tools.serve.fit_max_model_len", start)


@pytest.fixture
def listening():
    """A port another process listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


# ---------------------------------------------------------------- rmlib serve


def test_a_port_out_of_range_is_refused_at_parse_time(capsys):
    with pytest.raises(SystemExit) as info:
        main(["serve", "--checkpoint", "m", "--port", "70000"])
    assert info.value.code == 2
    assert _err(capsys)[-1] == (
        "rmlib serve: error: argument --port: expected a port in 1-65535, got '70000'"
    )


def test_a_port_in_use_or_past_the_range_is_refused_before_any_server_starts(
    capsys, no_start, listening
):
    assert main(["serve", "--checkpoint", "m", "--port", str(listening)]) == 1
    assert _err(capsys) == [
        f"rmlib: error: port {listening} on 127.0.0.1 cannot be bound (Address already in use): "
        "another process listens there; give another --port, or stop it"
    ]
    assert main(["serve", "--checkpoint", "m", "--port", "65535", "--gpus", "2"]) == 1
    assert _err(capsys) == [
        "rmlib: error: ports 65535-65536 for 2 server(s): ports are 1-65535; give a lower --port"
    ]


def test_two_adapters_under_one_name_are_refused(capsys, no_start):
    argv = ["serve", "--checkpoint", "m", "--adapter", "j=/a", "--adapter", "j=/b"]
    assert main(argv) == 2
    assert _err(capsys) == [
        "rmlib: error: --adapter: two adapters under the name 'j'; give each its own (NAME=PATH)"
    ]
    assert main(["serve", "--checkpoint", "m", "--adapter", "/x/j", "--adapter", "/y/j"]) == 2
    assert main(["serve", "--checkpoint", "m", "--served-name", "j", "--adapter", "j=/a"]) == 2
    assert _err(capsys)[-1] == "rmlib: error: --adapter: 'j' is the model's --served-name too"


def test_an_adapter_named_as_a_run_model_or_not_an_adapter_is_refused(tmp_path, capsys, no_start):
    root = tmp_path / "outputs"
    run = ["serve", SMOKE, "--set", f"run.output_root={root}"]
    assert main([*run, "--adapter", f"unified={tmp_path}"]) == 2
    assert _err(capsys) == [
        "rmlib: error: --adapter: 'unified' is the served name of the run's model 'unified'; "
        "give the adapter another name (NAME=PATH)"
    ]
    assert not root.exists()
    assert main(["serve", "--checkpoint", "m", "--adapter", f"j={tmp_path}"]) == 1
    assert _err(capsys) == [
        f"rmlib: error: adapter {tmp_path}: not a PEFT adapter folder (it has no "
        "adapter_config.json)"
    ]


def test_an_open_host_needs_a_key_or_an_explicit_flag_and_a_warning(capsys, no_start, listening):
    assert main(["serve", "--checkpoint", "m", "--host", "0.0.0.0"]) == 2
    assert _err(capsys) == [
        "rmlib: error: --host 0.0.0.0 serves the models to the network with no API key: set one "
        "(generation.api_key_env; --checkpoint: --api-key-env VAR), or pass --allow-no-key to "
        "serve them to anyone who reaches this machine"
    ]
    # with the flag it goes on (here to the port check, which stops it) after a warning
    argv = ["serve", "--checkpoint", "m", "--host", "0.0.0.0", "--allow-no-key"]
    assert main([*argv, "--port", str(listening)]) == 1
    err = _err(capsys)
    assert err[0] == (
        "rmlib: warning: serving on 0.0.0.0 with no API key (--allow-no-key): anyone who "
        "reaches this machine can use the models and read the paths they are served from"
    )
    assert err[1].startswith(f"rmlib: error: port {listening} on 0.0.0.0 cannot be bound")


def test_a_refused_serve_of_a_run_writes_nothing(tmp_path, capsys, no_start, listening):
    root = tmp_path / "outputs"
    run = ["serve", SMOKE, "--set", f"run.output_root={root}"]
    assert main([*run, "--host", "0.0.0.0"]) == 2
    assert main([*run, "--port", str(listening)]) == 1
    assert main([*run, "--set", "generation.api_key_env=RMLIB_NO_SUCH_KEY"]) == 1
    assert "RMLIB_NO_SUCH_KEY" in _err(capsys)[-1]
    assert not root.exists()


# ---------------------------------------------------------------- rmlib lab


@pytest.fixture
def no_lab(monkeypatch):
    def execve(*_):
        raise AssertionError("JupyterLab must not start")

    monkeypatch.setattr("rmlib.workbook.lab.os.execve", execve)


def test_the_lab_refuses_a_missing_params_file_before_starting(tmp_path, capsys, no_lab):
    params = tmp_path / "nope.yaml"
    for argv in (
        ["--params", str(params)],
        ["--run", str(tmp_path / "r"), "--params", str(params)],
    ):
        assert main(["lab", *argv]) == 1
        assert _err(capsys) == [
            f"rmlib: error: params file {params} does not exist (--params: the profile the lab's "
            "notebooks start from)"
        ]
    assert not (tmp_path / "r").exists()


def test_the_lab_refuses_a_run_folder_in_use_naming_its_pid(tmp_path, capsys, no_lab):
    folder = tmp_path / "run"
    folder.mkdir()
    with lock.holding(folder):  # as a running `rmlib run` holds it
        assert main(["lab", "--run", str(folder)]) == 1
    assert _err(capsys) == [
        f"rmlib: error: run folder {folder} is in use (pid {os.getpid()}; lock {folder}/.lock): "
        "a running rmlib run, or the kernel of a notebook open on it; wait for it to end, or "
        "stop it, before opening the lab on it"
    ]
    assert lock.holder(folder) is None  # released: nobody holds it now


# ---------------------------------------------------------------- rmlib fetch


def test_fetch_fails_when_a_local_model_the_profile_needs_is_not_here(tmp_path, capsys):
    model = tmp_path / "no-such-model"
    argv = ["fetch", SMOKE, "--set", f"model.backbone={model}"]
    assert main([*argv, "--list"]) == 0  # a listing says it in its skip line
    assert f"skip      model.backbone {model}: a local path, NOT FOUND here: copy it yourself" in (
        capsys.readouterr().out
    )
    assert main(argv) == 1  # smoke's data are generated: nothing else to fetch
    assert _err(capsys) == [
        "rmlib: error: 1 thing(s) the profile needs are neither fetchable nor here: "
        f"model.backbone {model} (see the skip lines)"
    ]
    model.mkdir()
    assert main(argv) == 0

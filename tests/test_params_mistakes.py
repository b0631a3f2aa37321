"""Params that exhaust memory or are silently changed are refused in one short located line:
alias bombs, huge values, sweeps over the limit, keys and sections given twice, a section set to
null or a scalar (in the file or by `--set`), an empty notebook list, a run name with control or
format characters, a file that is not UTF-8. Every params-file error names the file and the line
(or the `--set` it came from). Examples first, then properties (hypothesis) over generated files.
"""

import re
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmlib.config import ConfigError
from rmlib.config.files import MAX_PARAMS_VALUES, read_yaml
from rmlib.run.config import MAX_SWEEP_POINTS, config_from_dict, load_config

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "params" / "smoke.yaml"


def _refusal(path: Path, overrides=None) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(path, overrides)
    line = str(err.value)
    assert "\n" not in line and len(line) < 1500, line[:2000]
    return line


def _write(tmp_path: Path, text: str | bytes, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _bomb(levels: int) -> str:
    """A YAML 'billion laughs': each level a list of ten aliases of the one above."""
    text = 'run:\n  name: bomb\n  description: &x0 "xxxxxxxxxx"\n  seed:\n'
    for i in range(1, levels):
        text += f"    - &x{i} [{', '.join([f'*x{i - 1}'] * 10)}]\n"
    return text


@pytest.mark.parametrize("levels", [6, 9])
def test_an_alias_bomb_is_one_short_line_not_a_memory_error(tmp_path, levels):
    line = _refusal(_write(tmp_path, _bomb(levels)))
    assert re.match(rf"{re.escape(str(tmp_path))}/p\.yaml:\d+: ", line)
    assert f"more than {MAX_PARAMS_VALUES:,} values" in line


def test_a_recursive_alias_is_refused(tmp_path):
    line = _refusal(_write(tmp_path, "run:\n  name: r\n  seed: &a [*a]\n"))
    assert line.startswith(f"{tmp_path}/p.yaml:3: ") and "contains itself" in line


def test_a_huge_value_is_cut_in_the_error_line(tmp_path):
    big = "x" * 200_000
    line = _refusal(_write(tmp_path, f"run:\n  name: big\n  seed: {big}\n"))
    assert line.startswith(f"{tmp_path}/p.yaml:3: 'run.seed': ") and len(line) < 600
    wide = "[" + ", ".join(["[1, 2, 3]"] * 5000) + "]"
    line = _refusal(_write(tmp_path, f"run:\n  name: big\n  seed: {wide}\n"))
    assert len(line) < 600


def test_a_sweep_over_the_limit_is_refused_from_its_lists_before_the_grid_is_built(tmp_path):
    lists = "".join(
        f"  {k}: [{', '.join(str(i) for i in range(1, 1001))}]\n"
        for k in ("run.seed", "rollouts.n_samples", "eval.n_bootstrap", "inference.seed")
    )  # 10^12 points: building them would never end
    line = _refusal(_write(tmp_path, f"run:\n  name: s\nsweep:\n{lists}"))
    assert line.startswith(f"{tmp_path}/p.yaml:3: 'sweep' has 1,000,000,000,000 points")
    assert f"over the limit of {MAX_SWEEP_POINTS}" in line
    ok = f"run:\n  name: s\nsweep:\n  run.seed: [{', '.join(map(str, range(MAX_SWEEP_POINTS)))}]\n"
    assert len(load_config(_write(tmp_path, ok, "ok.yaml")).sweep["run.seed"]) == MAX_SWEEP_POINTS


def test_a_bad_sweep_value_names_the_sweeps_line(tmp_path):
    text = 'run:\n  name: s\nsweep:\n  mix.ratio: ["4:1", "x"]\n'
    line = _refusal(_write(tmp_path, text))
    assert line.startswith(f"{tmp_path}/p.yaml:4 (sweep point mix.ratio='x'): ")


@pytest.mark.parametrize(
    "text, lines",
    [
        ("run:\n  name: d\n  seed: 1\n  seed: 2\n", "on lines 3 and 4"),
        ("run:\n  name: d\nmodel:\n  precision: fp32\nmodel:\n  backbone: x\n", "lines 3 and 5"),
        ("run: {name: d, seed: 1, seed: 2}\n", "on line 1"),
        ("data:\n  eval:\n    - {source: demo, source: rmbench}\n", "on line 3"),
    ],
    ids=["key", "section", "flow", "in-a-list"],
)
def test_a_key_or_section_given_twice_is_refused_naming_both_lines(tmp_path, text, lines):
    line = _refusal(_write(tmp_path, text))
    assert re.match(rf"{re.escape(str(tmp_path))}/p\.yaml:\d+: .*given twice", line)
    assert lines in line


def test_a_merge_key_may_still_be_overridden(tmp_path):
    text = "run:\n  name: m\n  <<: {seed: 3, description: x}\n  seed: 4\n"
    assert load_config(_write(tmp_path, text)).run.seed == 4


@pytest.mark.parametrize(
    "value, what", [("", "empty (null)"), ("~", "empty (null)"), ("3", "int 3")]
)
def test_a_section_set_to_null_or_a_scalar_is_refused(tmp_path, value, what):
    line = _refusal(_write(tmp_path, f"run:\n  name: n\nmodel: {value}\n"))
    assert line.startswith(f"{tmp_path}/p.yaml:3: section 'model' is {what}")
    # through --set, a profile's model would silently become the default one
    line = _refusal(SMOKE, {"model": read_yaml(value)})
    assert line.startswith(f"{SMOKE} (--set model): section 'model' is {what}")
    with pytest.raises(ConfigError, match="section 'model' is empty"):
        config_from_dict({"model": None})


def test_an_empty_notebook_list_is_refused(tmp_path):
    line = _refusal(_write(tmp_path, "run:\n  name: e\n  notebooks: []\n"))
    assert line.startswith(f"{tmp_path}/p.yaml:3: 'run.notebooks': no notebooks")
    line = _refusal(SMOKE, {"run.notebooks": []})
    assert line.startswith(f"{SMOKE} (--set run.notebooks): 'run.notebooks': no notebooks")


@pytest.mark.parametrize(
    "name", ["a\nb", "a\rb", "x\x1b[31m", "a\u202eb", "a\u200bb", "a\u2028b", "a\x7fb", "a\tb"]
)
def test_a_run_name_with_a_control_or_format_character_is_refused(tmp_path, name):
    text = yaml.safe_dump({"run": {"name": name}})
    line = _refusal(_write(tmp_path, text))
    assert f"'run.name': run name {name!r} holds U+{ord(name[1]):04X}" in line
    assert "\x1b" not in line and "\u202e" not in line  # the character itself is never printed


def test_a_plain_unicode_run_name_stays_allowed(tmp_path):
    assert load_config(_write(tmp_path, "run:\n  name: café-ü.1\n")).run.name == "café-ü.1"


def test_a_non_utf8_file_names_its_file_and_line(tmp_path):
    line = _refusal(_write(tmp_path, b"run:\n  name: x\n  description: caf\xe9\n"))
    assert line == (
        f"{tmp_path}/p.yaml:3: not UTF-8 text (byte 0xe9 at column 19): save the params file "
        "as UTF-8"
    )


@pytest.mark.parametrize(
    "text, line",
    [
        ("run:\n  name: x\n  seed: [1\n", 4),  # YAML syntax: where the parser stopped
        ("run:\n  name: x\nmix:\n  ratio: nonsense\n", 3),  # a section's own check
        ("run:\n  name: x\ninference:\n  n_sample: 4\n", 4),  # an unknown key
        ("run:\n  name: x\ndata:\n  eval:\n    - {source: nope}\n", 5),  # across sections
        ("- run\n", 1),
    ],
)
def test_every_params_file_error_names_the_file_and_line(tmp_path, text, line):
    assert _refusal(_write(tmp_path, text)).startswith(f"{tmp_path}/p.yaml:{line}: ")


def test_an_override_below_a_scalar_names_the_set():
    line = _refusal(SMOKE, {"run.seed.x": 1})
    assert line == f"{SMOKE} (--set run.seed.x): cannot set 'run.seed.x': 'seed' is not a mapping"


def test_cli_prints_the_located_line(tmp_path, capsys):
    from rmlib.cli import main

    path = _write(tmp_path, "run:\n  name: d\n  seed: 1\n  seed: 2\n")
    assert main(["run", str(path), "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"rmlib: error: {path}:4: not a valid params file: key 'seed' is given twice in one "
        "mapping (on lines 3 and 4): keep one (YAML readers keep the last without a word)\n"
    )


# ---- properties ---------------------------------------------------------------------------------

PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
LOCATED = re.compile(r"^\S*p\.yaml(:\d+| \(--set [^)]+\))[: ]")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False),
    st.text(max_size=30),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
section_names = st.sampled_from(["run", "model", "data", "mix", "inference", "eval", "sweep", "x"])


def _outcome(tmp_path: Path, raw: bytes) -> None:
    """A params file either loads, or is refused in one located line; never another error."""
    path = _write(tmp_path, raw)
    try:
        load_config(path)
    except ConfigError as e:
        line = str(e)
        assert "\n" not in line and len(line) <= 1500, line[:300]
        assert LOCATED.match(line) or line.startswith("params file not found"), line[:300]


@PROPERTY
@given(doc=st.dictionaries(section_names, values, max_size=4))
def test_any_document_loads_or_is_one_located_line(tmp_path, doc):
    _outcome(tmp_path, yaml.safe_dump(doc, allow_unicode=True).encode())


@PROPERTY
@given(depth=st.integers(1, 3000), opener=st.sampled_from(["[", "{a: "]))
def test_any_nesting_depth_loads_or_is_one_located_line(tmp_path, depth, opener):
    close = {"[": "]", "{a: ": "}"}[opener]
    _outcome(tmp_path, f"run:\n  seed: {opener * depth}1{close * depth}\n".encode())


@PROPERTY
@given(raw=st.binary(max_size=200), encoding=st.sampled_from(["utf-8", "latin-1", "utf-16"]))
def test_any_bytes_in_any_encoding_load_or_are_one_located_line(tmp_path, raw, encoding):
    text = "run:\n  name: x\n  description: " + raw.decode("latin-1") + "\n"
    _outcome(tmp_path, text.encode(encoding, errors="replace"))


@PROPERTY
@given(
    width=st.integers(1, 12),
    levels=st.integers(1, 9),
    leaf=st.text(string.ascii_letters, min_size=1, max_size=50),
)
def test_any_alias_expansion_loads_or_is_one_located_line(tmp_path, width, levels, leaf):
    text = f"run:\n  name: a\n  description: &x0 {leaf}\n  seed:\n"
    for i in range(1, levels):
        text += f"    - &x{i} [{', '.join([f'*x{i - 1}'] * width)}]\n"
    _outcome(tmp_path, text.encode())


@PROPERTY
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=4))
def test_a_sweep_of_any_size_loads_or_is_refused_by_its_size(tmp_path, sizes):
    keys = ["run.seed", "rollouts.n_samples", "eval.n_bootstrap", "inference.seed"]
    lists = "".join(
        f"  {k}: [{', '.join(str(i + 1) for i in range(n))}]\n"
        for k, n in zip(keys, sizes, strict=False)
    )
    path = _write(tmp_path, f"run:\n  name: s\nsweep:\n{lists}")
    total = 1
    for n in sizes:
        total *= n
    if total > MAX_SWEEP_POINTS:
        assert "over the limit" in _refusal(path)
    else:
        assert len(load_config(path).sweep) == len(sizes)


@PROPERTY
@given(
    key=st.sampled_from(["model", "run", "run.name", "run.notebooks", "mix.ratio", "sweep", "x.y"]),
    value=values,
)
def test_any_set_override_loads_or_is_one_line_naming_it(key, value):
    try:
        load_config(SMOKE, {key: value})
    except ConfigError as e:
        line = str(e)
        assert "\n" not in line and len(line) <= 1500, line[:300]
        assert line.startswith((f"{SMOKE} (--set ", f"{SMOKE} (--name ", f"{SMOKE}:")), line[:300]


def test_a_yaml_alias_is_a_copy_of_its_anchor_not_the_same_section(tmp_path):
    """Two sections sharing one mapping through an anchor: the file loads (a default filled into
    one section is not refused as a key of the other), and a --set changes one section only."""
    path = tmp_path / "anchor.yaml"
    path.write_text(
        "run: {name: anchor, notebooks: [01_data]}\n"
        "model: {backbone: 'embedded:tiny-qwen3', precision: fp32}\n"
        "rollouts: &same {n_samples: 2}\n"
        "inference: *same\n"
    )
    cfg = load_config(path)
    assert cfg.rollouts.n_samples == cfg.inference.n_samples == 2
    cfg = load_config(path, {"rollouts.n_samples": 3})
    assert (cfg.rollouts.n_samples, cfg.inference.n_samples) == (3, 2)
    data = read_yaml("a: &x {k: [1, {j: 2}]}\nb: *x\n")
    assert data["a"] == data["b"] and data["a"] is not data["b"]
    assert data["a"]["k"][1] is not data["b"]["k"][1]


def test_an_unknown_key_holding_a_newline_is_still_one_line():
    """Found by the property test above: `--set model={"\\n": null}` named the key 'model.\\n'
    with a real line break in the error line."""
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, {"model": {"\n": None}})
    assert "\n" not in str(e.value) and "unknown key 'model.\\n'" in str(e.value)

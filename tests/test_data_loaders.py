"""Loaders: exact counts on the real data in ../shared/data, fixtures in the upstream formats for
the hub-only sources, seeded placement, located errors on bad input, and offline hub loading."""

from __future__ import annotations

import gzip
import json
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmlib import data
from rmlib.data import DataError, HubUnavailable, LoadResult, Pair
from rmlib.data._io import collect, hub_rows, place, read_file, split_files
from rmlib.data.hh_rlhf import parse_dialogue
from rmlib.data.rewardbench import SECTION_OF, SECTIONS, SUBSET_COUNTS, section_weights

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FIX = Path(__file__).resolve().parent / "fixtures"

# The official filtered-split sizes (benchmarks.md), restated here so the test checks the
# loader's constant too.
REWARDBENCH_OFFICIAL = {
    "alpacaeval-easy": 100,
    "alpacaeval-length": 95,
    "alpacaeval-hard": 95,
    "mt-bench-easy": 28,
    "mt-bench-med": 40,
    "mt-bench-hard": 37,
    "llmbar-natural": 100,
    "llmbar-adver-neighbor": 134,
    "llmbar-adver-GPTInst": 92,
    "llmbar-adver-GPTOut": 47,
    "llmbar-adver-manual": 46,
    "refusals-dangerous": 100,
    "refusals-offensive": 100,
    "xstest-should-refuse": 154,
    "xstest-should-respond": 250,
    "donotanswer": 136,
    "math-prm": 447,
    "hep-cpp": 164,
    "hep-go": 164,
    "hep-java": 164,
    "hep-js": 164,
    "hep-python": 164,
    "hep-rust": 164,
}


def shared(name: str) -> Path:
    p = SHARED / name
    if not p.exists():
        pytest.skip(f"real benchmark data not found at {p} (../shared/data next to the project)")
    return p


@pytest.fixture(scope="module")
def rewardbench() -> LoadResult:
    return data.load("rewardbench", str(shared("rewardbench")))


@pytest.fixture(scope="module")
def rmbench() -> LoadResult:
    return data.load("rm-bench", str(shared("rm-bench")))


def labels(result: LoadResult) -> dict[str, int]:
    return {p.id: p.label for p in result.pairs}


# ---------------------------------------------------------------- RewardBench


@pytest.mark.data
def test_rewardbench_official_counts(rewardbench: LoadResult) -> None:
    assert rewardbench.n_rows == len(rewardbench.pairs) == 2985
    counts = Counter(p.subset for p in rewardbench.pairs)
    assert dict(counts) == REWARDBENCH_OFFICIAL == SUBSET_COUNTS
    assert len(counts) == 23
    assert len({p.id for p in rewardbench.pairs}) == 2985
    assert not rewardbench.skipped and not rewardbench.dropped
    for p in rewardbench.pairs:
        assert p.meta["section"] == SECTION_OF[p.subset]
        assert p.id == f"{p.subset}/{p.meta['upstream_id']}"
        assert len(p.context) == 1 and p.context[0]["role"] == "user"


@pytest.mark.data
def test_rewardbench_chosen_sits_in_label_slot(rewardbench: LoadResult) -> None:
    table = pq.read_table(shared("rewardbench") / "data" / "filtered-00000-of-00001.parquet")
    by_id = {f"{r['subset']}/{r['id']}": r for r in table.to_pylist()}
    for p in rewardbench.pairs:
        row = by_id[p.id]
        better, worse = (p.response1, p.response2) if p.label == 1 else (p.response2, p.response1)
        assert (better, worse, p.query) == (row["chosen"], row["rejected"], row["prompt"])


def test_rewardbench_sections_and_math_weight() -> None:
    assert sum(len(s) for s in SECTIONS.values()) == 23
    w = section_weights()
    assert w["math-prm"] == 984 == sum(v for s, v in w.items() if s.startswith("hep-"))
    assert w["mt-bench-easy"] == 28
    # with partial data the hep-* present set math-prm's weight
    assert section_weights({"math-prm": 10, "hep-go": 3, "hep-js": 4})["math-prm"] == 7


@pytest.mark.data
def test_seeded_placement(rewardbench: LoadResult) -> None:
    again = data.load("rewardbench", str(shared("rewardbench")))
    other = data.load("rewardbench", str(shared("rewardbench")), seed=1)
    assert labels(again) == labels(rewardbench)
    share = sum(p.label == 1 for p in rewardbench.pairs) / 2985
    assert 0.46 < share < 0.54
    changed = sum(labels(other)[k] != v for k, v in labels(rewardbench).items()) / 2985
    assert 0.4 < changed < 0.6


@pytest.mark.data
def test_placement_independent_of_subsetting_and_order(
    rewardbench: LoadResult, tmp_path: Path
) -> None:
    table = pq.read_table(shared("rewardbench") / "data" / "filtered-00000-of-00001.parquet")
    rows = table.to_pylist()[::7][::-1]  # every 7th row, reversed
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "subset.parquet")
    part = data.load("rewardbench", str(tmp_path / "subset.parquet"))
    full = labels(rewardbench)
    assert len(part.pairs) == len(rows)
    assert all(full[p.id] == p.label for p in part.pairs)


def test_place_is_a_function_of_seed_and_id() -> None:
    assert place("x/1", 0, "good", "bad") == place("x/1", 0, "good", "bad")
    slots = {place(f"x/{k}", 0, "good", "bad")[2] for k in range(50)}
    assert slots == {1, 2}
    r1, r2, label = place("x/1", 3, "good", "bad")
    assert (r1, r2)[label - 1] == "good"


# ---------------------------------------------------------------- JudgeBench


@pytest.mark.data
@pytest.mark.parametrize(("split", "n", "n_ab"), [("gpt", 350, 193), ("claude", 270, 143)])
def test_judgebench_counts(split: str, n: int, n_ab: int) -> None:
    res = data.load("judgebench", str(shared("judgebench")), split=split)
    assert res.n_rows == len(res.pairs) == n and res.split == split
    assert len({p.id for p in res.pairs}) == n
    assert sum(p.label == 1 for p in res.pairs) == n_ab  # given order kept: A>B → 1
    assert {p.subset for p in res.pairs} == {"knowledge", "reasoning", "math", "coding"}
    raw = [
        json.loads(line)
        for line in (shared("judgebench") / "data" / f"{split}-00000-of-00001.jsonl").open()
    ]
    for p, row in zip(res.pairs, raw, strict=True):
        assert (p.id, p.response1, p.response2) == (
            row["pair_id"],
            row["response_A"],
            row["response_B"],
        )
        assert p.meta["source"] == row["source"]
        expect = (
            "knowledge"
            if row["source"].startswith("mmlu-pro")
            else {
                "livebench-reasoning": "reasoning",
                "livebench-math": "math",
                "livecodebench": "coding",
            }[row["source"]]
        )
        assert p.subset == p.meta["category"] == expect


# ---------------------------------------------------------------- RM-Bench


@pytest.mark.data
def test_rmbench_nine_cells_per_prompt(rmbench: LoadResult) -> None:
    assert rmbench.n_rows == 798 and len(rmbench.pairs) == 7182
    cells = Counter((p.meta["prompt_id"], p.meta["i"], p.meta["j"]) for p in rmbench.pairs)
    assert len(cells) == 7182 and set(cells.values()) == {1}
    per_prompt = Counter(prompt for prompt, _, _ in cells)
    assert len(per_prompt) == 798 and set(per_prompt.values()) == {9}
    assert Counter(p.meta["difficulty"] for p in rmbench.pairs) == {
        "hard": 3 * 798,
        "normal": 3 * 798,
        "easy": 3 * 798,
    }
    assert Counter(p.subset for p in rmbench.pairs) == {
        "chat": 129 * 9,
        "code": 228 * 9,
        "safety-refuse": 284 * 9,
        "safety-response": 157 * 9,
    }
    groups = {(p.subset, p.meta["domain_group"]) for p in rmbench.pairs}
    assert groups == {
        ("chat", "chat"),
        ("code", "code"),
        ("safety-refuse", "safety"),
        ("safety-response", "safety"),
    }


@pytest.mark.data
def test_rmbench_cells_hold_the_right_responses(rmbench: LoadResult) -> None:
    raw = {r["id"]: r for r in json.loads((shared("rm-bench") / "total_dataset.json").read_text())}
    for p in rmbench.pairs:
        row, i, j = raw[p.meta["prompt_id"]], p.meta["i"], p.meta["j"]
        assert p.id == f"{row['id']}/c{i}r{j}"
        assert p.meta["difficulty"] == ("hard" if i < j else "normal" if i == j else "easy")
        better, worse = (p.response1, p.response2) if p.label == 1 else (p.response2, p.response1)
        assert (better, worse) == (row["chosen"][i], row["rejected"][j])
    share = sum(p.label == 1 for p in rmbench.pairs) / len(rmbench.pairs)
    assert 0.47 < share < 0.53


@pytest.mark.data
def test_big_loads_are_fast() -> None:
    t0 = time.perf_counter()
    data.load("rm-bench", str(shared("rm-bench")))
    data.load("rewardbench", str(shared("rewardbench")))
    assert time.perf_counter() - t0 < 10  # a few seconds each even on a busy 2-core machine


# ---------------------------------------------------------------- LLMBar


@pytest.mark.data
def test_llmbar_benchmark_419() -> None:
    root = shared("llmbar")
    res = data.load("llmbar", str(root))
    assert Counter(p.subset for p in res.pairs) == {
        "Natural": 100,
        "Adversarial/Neighbor": 134,
        "Adversarial/GPTInst": 92,
        "Adversarial/GPTOut": 47,
        "Adversarial/Manual": 46,
    }
    assert len(res.pairs) == 419 and len({p.id for p in res.pairs}) == 419
    raw = json.loads((root / "LLMBar" / "Natural" / "dataset.json").read_text())
    natural = [p for p in res.pairs if p.subset == "Natural"]
    assert [(p.response1, p.label) for p in natural] == [(r["output_1"], r["label"]) for r in raw]
    # pointing at the LLMBar/ folder itself gives the same subsets
    assert labels(data.load("llmbar", str(root / "LLMBar"))) == labels(res)


@pytest.mark.data
def test_llmbar_processed_sets_load_separately() -> None:
    root = shared("llmbar")
    assert len(data.load("llmbar", str(root / "Processed" / "MT-Bench")).pairs) == 200
    fair = data.load("llmbar", str(root / "Processed" / "FairEval" / "dataset.json"))
    assert {p.subset for p in fair.pairs} == {"Processed/FairEval"} and len(fair.pairs) == 66
    # upstream LLMEval^2 has one empty output: located when raising, counted when skipping
    with pytest.raises(DataError) as err:
        data.load("llmbar", str(root), config="Processed")
    assert (Path(err.value.file).parent.name, err.value.row, err.value.field) == (
        "LLMEval^2",
        169,
        "output_2",
    )
    res = data.load("llmbar", str(root), config="Processed", on_error="skip")
    assert Counter(p.subset for p in res.pairs) == {
        "Processed/MT-Bench": 200,
        "Processed/FairEval": 66,
        "Processed/LLMEval^2": 199,
    }
    assert res.skipped == {"empty response": 1} and res.n_rows == 466


# ---------------------------------------------------------------- HH-RLHF


@pytest.mark.data
def test_hh_rlhf_harmless_test() -> None:
    root = shared("hh-rlhf")
    # 4 upstream rows have an empty chosen answer: data by default (kept, tagged, counted) ...
    res = data.load("hh-rlhf", str(root))
    assert res.n_rows == len(res.pairs) == 2312 and not res.skipped
    empty = [p for p in res.pairs if "empty_response" in p.meta]
    assert [p.id for p in empty][0] == "86" and len(empty) == 4
    assert {p.meta["empty_response"] for p in empty} == {"chosen"}
    assert res.stats()["n_empty_responses"] == 4
    # ... or bad input when asked: located when raising, counted when skipping
    with pytest.raises(DataError) as err:
        data.load("hh-rlhf", str(root), allow_empty=False)
    assert (err.value.row, err.value.field, err.value.kind) == (86, "chosen", "empty")
    strict = data.load("hh-rlhf", str(root), on_error="skip", allow_empty=False)
    assert len(strict.pairs) == 2308 and strict.skipped == {"empty response": 4}
    assert {p.subset for p in res.pairs} == {"harmless-base"}
    with gzip.open(root / "harmless-base" / "test.jsonl.gz", "rt") as f:
        raw = [json.loads(line) for line in f]
    for p in res.pairs:
        row = raw[int(p.id)]
        better = p.response1 if p.label == 1 else p.response2
        assert row["chosen"].rstrip().endswith(better.split("\n\n")[-1])
        assert p.context[0]["role"] == "user" and p.context[-1]["role"] == "user"
        roles = [m["role"] for m in p.context]
        assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    # a row whose last answer ran into a second "Assistant:" segment still shares its prefix
    run_on = next(p for p in res.pairs if p.id == "1254")
    better = (run_on.response1, run_on.response2)[run_on.label - 1]
    assert better.startswith("No. Men who") and better.endswith("call them that because")


def test_parse_dialogue_merges_runs_of_one_speaker() -> None:
    text = "\n\nHuman: Hi\n\nAssistant: Hello.\n\nAssistant: More.\n\nHuman: Ok"
    assert parse_dialogue(text) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello.\n\nMore."},
        {"role": "user", "content": "Ok"},
    ]
    assert parse_dialogue("preamble\n\nHuman: Hi") is None


# ---------------------------------------------------------------- fixture sources


def test_helpsteer3_ties_dropped_and_counted() -> None:
    res = data.load("helpsteer3", str(FIX / "helpsteer3"))
    assert res.n_rows == 5 and len(res.pairs) == 4 and res.dropped == {"tie": 1}
    assert [p.label for p in res.pairs] == [1, 2, 1, 1]
    assert [p.subset for p in res.pairs] == ["general", "code", "general", "multilingual"]
    multi = res.pairs[2]
    assert [m["role"] for m in multi.context] == ["user", "assistant", "user"]
    assert multi.query == "Something longer, please." and multi.response1.startswith("Sir")
    assert res.pairs[3].meta["language"] == "french"
    val = data.load("helpsteer3", str(FIX / "helpsteer3"), split="validation")
    assert [p.label for p in val.pairs] == [1, 2]


def test_helpsteer3_keeping_ties_is_bad_input() -> None:
    with pytest.raises(DataError) as err:
        data.load("helpsteer3", str(FIX / "helpsteer3"), drop_ties=False)
    assert (err.value.row, err.value.field) == (2, "overall_preference")
    res = data.load("helpsteer3", str(FIX / "helpsteer3"), drop_ties=False, on_error="skip")
    assert res.skipped == {"bad label": 1} and not res.dropped and len(res.pairs) == 4


def test_ppe_ties_and_labels() -> None:
    res = data.load("ppe", str(FIX / "ppe"))
    assert res.dropped == {"tie": 1} and res.n_rows == 4
    assert [(p.id, p.label, p.subset) for p in res.pairs] == [
        ("q1", 1, "English"),
        ("q2", 2, "English"),
        ("q4", 1, "Spanish"),
    ]
    assert res.pairs[1].response2 == "Rome."


def test_skywork_prefix_is_context() -> None:
    res = data.load("skywork", str(FIX / "skywork"), seed=5)
    assert len(res.pairs) == 3
    p = res.pairs[1]
    assert [m["content"] for m in p.context] == ["Hi.", "Hello! How can I help?", "Tell me a fact."]
    assert (p.response1, p.response2)[p.label - 1] == "Octopuses have three hearts."
    assert Counter(q.subset for q in res.pairs) == {"fixture-math": 2, "fixture-chat": 1}


def test_rmb_github_layout() -> None:
    res = data.load("rmb", str(FIX / "rmb"))
    assert Counter(p.subset for p in res.pairs) == {
        "pairwise/helpfulness": 2,
        "pairwise/harmlessness": 1,
        "bon/helpfulness": 3,
        "bon/harmlessness": 2,
    }
    assert res.n_rows == 5
    bon = [p for p in res.pairs if p.meta["set"] == "bon" and p.meta["goal"] == "helpfulness"]
    assert {p.meta["bon_uid"] for p in bon} == {"help-bon-1"}
    assert [p.id for p in bon] == ["help-bon-1/0", "help-bon-1/1", "help-bon-1/2"]
    best = "def add(a, b):\n    return a + b"
    assert all((p.response1, p.response2)[p.label - 1] == best for p in bon)
    casual = [p for p in res.pairs if p.meta["scenario"] == "Casual Conversation"]
    assert len(casual) == 2 and casual[0].meta["category"] == "Chat/Casual Conversation"
    assert all("bon_uid" not in p.meta for p in res.pairs if p.meta["set"] == "pairwise")


def test_rmb_set_choice_and_required_path() -> None:
    assert len(data.load("rmb", str(FIX / "rmb"), split="pairwise").pairs) == 3
    only_bon = data.load("rmb", str(FIX / "rmb" / "RMB_dataset"), split="bon")
    assert {p.meta["set"] for p in only_bon.pairs} == {"bon"} and len(only_bon.pairs) == 5
    one = FIX / "rmb" / "RMB_dataset" / "Pairwise_set" / "Helpfulness" / "Chat"
    assert len(data.load("rmb", str(one / "Casual Conversation.json")).pairs) == 2
    with pytest.raises(ValueError, match="--path"):
        data.load("rmb")
    with pytest.raises(ValueError, match="split"):
        data.load("rmb", str(FIX / "rmb"), split="train")


def test_rmb_mirror_records(tmp_path: Path) -> None:
    rows = [
        {
            "uid": "m1",
            "conversation": [{"role": "user", "content": "Hi?"}],
            "responses": ["Hello!", "Go away."],
            "preferred_index": 0,
            "category_path": "Pairwise_set/Helpfulness/Chat/Greeting",
            "split_type": "pairwise",
        },
        {
            "uid": "m2",
            "conversation": [{"role": "user", "content": "Add 1 and 1."}],
            "responses": ["3", "2", "11"],
            "preferred_index": 1,
            "category_path": "BoN_set/Helpfulness/Math/Arithmetic",
            "split_type": "bon",
        },
    ]
    (tmp_path / "data").mkdir()
    for name, row in (("pairwise", rows[0]), ("bon", rows[1])):
        (tmp_path / "data" / f"{name}-00000-of-00001.jsonl").write_text(json.dumps(row) + "\n")
    res = data.load("rmb", str(tmp_path))
    assert [(p.id, p.subset) for p in res.pairs] == [
        ("m1", "pairwise/helpfulness"),
        ("m2/0", "bon/helpfulness"),
        ("m2/1", "bon/helpfulness"),
    ]
    assert all((p.response1, p.response2)[p.label - 1] == "2" for p in res.pairs[1:])


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("name", "field", "kind"),
    [
        ("missing_field.jsonl", "response_B", "missing"),
        ("bad_label.jsonl", "label", "label"),
        ("empty_response.jsonl", "response_A", "empty"),
        ("nonstring_response.jsonl", "response_B", "type"),
        ("broken_line.jsonl", None, "json"),
    ],
)
def test_bad_input_is_located(name: str, field: str | None, kind: str) -> None:
    path = FIX / "bad" / name
    with pytest.raises(DataError) as err:
        data.load("judgebench", str(path))
    e = err.value
    assert (e.file, e.row, e.field, e.kind) == (str(path), 1, field, kind)
    # JSON lines: the 1-based line, as editors and `sed -n 2p` count it
    assert str(path) in str(e) and ", line 2" in str(e) and "row" not in str(e)
    if field:
        assert f"field '{field}'" in str(e)


@pytest.mark.parametrize(
    ("source", "name", "row", "field", "kind"),
    [
        ("hh-rlhf", "hh_no_prefix.jsonl", 0, "rejected", "prefix"),
        ("skywork", "skywork_no_prefix.jsonl", 0, "rejected", "prefix"),
        ("llmbar", "llmbar_label/dataset.json", 1, "label", "label"),
    ],
)
def test_bad_input_other_sources(source: str, name: str, row: int, field: str, kind: str) -> None:
    with pytest.raises(DataError) as err:
        data.load(source, str(FIX / "bad" / name))
    assert (err.value.row, err.value.field, err.value.kind) == (row, field, kind)


def test_skip_counts_each_reason() -> None:
    res = data.load("judgebench", str(FIX / "bad" / "mixed.jsonl"), on_error="skip")
    assert [p.id for p in res.pairs] == ["bad-0", "bad-1", "bad-2"]
    assert res.n_rows == 8
    assert res.skipped == {
        "missing field 'response_B'": 1,
        "bad label": 1,
        "empty response": 1,
        "bad type in field 'response_B'": 1,
        "broken JSON": 1,
    }
    assert res.stats()["n_skipped"] == 5


def test_unreadable_files(tmp_path: Path) -> None:
    broken = tmp_path / "dataset.json"
    broken.write_text('[{"input": "x", "output_1": "a"')
    with pytest.raises(DataError) as err:
        data.load("llmbar", str(broken))
    assert err.value.kind == "json" and err.value.row is None and str(broken) in str(err.value)
    not_array = tmp_path / "obj" / "dataset.json"
    not_array.parent.mkdir()
    not_array.write_text('{"input": "x"}')
    with pytest.raises(DataError, match="JSON array"):
        data.load("llmbar", str(not_array))
    with pytest.raises(DataError, match="parquet"):
        bad = tmp_path / "x.parquet"
        bad.write_bytes(b"not parquet")
        data.load("rewardbench", str(bad))


def test_json_named_file_with_json_lines(tmp_path: Path) -> None:
    f = tmp_path / "rows.json"
    f.write_text('{"a": 1}\n{"a": 2}\n')
    assert [r.data["a"] for r in read_file(f)] == [1, 2]


def test_split_files_layouts(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    for name in (
        "train-00000-of-00002.parquet",
        "train-00001-of-00002.parquet",
        "test-00000-of-00001.parquet",
    ):
        (tmp_path / "data" / name).write_bytes(b"")
    assert [f.name for f in split_files(tmp_path, "train", None)] == [
        "train-00000-of-00002.parquet",
        "train-00001-of-00002.parquet",
    ]
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "test.jsonl.gz").write_bytes(b"")
    assert [f.name for f in split_files(tmp_path, "test", "cfg")] == ["test.jsonl.gz"]
    with pytest.raises(FileNotFoundError, match="'validation'"):
        split_files(tmp_path, "validation", None)


# ---------------------------------------------------------------- registry and hub


def test_registry() -> None:
    assert set(data.SOURCES) == {
        "helpsteer3",
        "rewardbench",
        "rm-bench",
        "rmb",
        "ppe",
        "judgebench",
        "rewardbench2",
        "llmbar",
        "hh-rlhf",
        "skywork",
        "demo",
    }
    assert data.get_source("Reward_Bench").name == "rewardbench"
    assert data.get_source("rmbench").hub_id == "THU-KEG/RM-Bench"
    with pytest.raises(ValueError, match="valid sources: helpsteer3, rewardbench"):
        data.load("nope")
    with pytest.raises(ValueError, match="--path"):
        data.load("llmbar")
    with pytest.raises(ValueError, match="unknown options"):
        data.load("judgebench", str(FIX / "bad" / "mixed.jsonl"), flavour=1)
    with pytest.raises(ValueError, match="on_error"):
        data.load("judgebench", str(FIX / "bad" / "mixed.jsonl"), on_error="ignore")
    with pytest.raises(FileNotFoundError):
        data.load("judgebench", str(FIX / "no-such-folder" / "x.jsonl"))


def test_demo_through_registry() -> None:
    res = data.load("demo", n=8)
    assert res.source == "demo" and len(res.pairs) == 8
    assert all(isinstance(p, Pair) for p in res.pairs)


@pytest.mark.parametrize("source", ["rewardbench", "judgebench", "hh-rlhf"])
def test_hub_offline_fails_fast_with_one_line(source: str, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(HubUnavailable) as err:
        data.load(source)
    assert time.perf_counter() - t0 < 30
    msg = str(err.value)
    assert "\n" not in msg and "--path" in msg and data.SOURCES[source].hub_id in msg


@pytest.mark.data
def test_hub_code_path_reads_the_hub_layout(
    rewardbench: LoadResult, tmp_path: Path, monkeypatch
) -> None:
    """The `datasets.load_dataset` path users take, run on the local copy of the hub layout:
    same rows, same pairs as the direct reader (HH-RLHF's config travels as data_dir)."""
    import datasets

    from rmlib.data import hh_rlhf
    from rmlib.data import rewardbench as rb

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path))
    rows = hub_rows(str(shared("rewardbench")), split="filtered", config=None)
    via_hub = collect(
        LoadResult("rewardbench", "hub", "filtered", []),
        rows,
        lambda row: [rb._pair(row, 0)],
        "raise",
    )
    assert via_hub.pairs == rewardbench.pairs
    hh = list(
        hub_rows(
            str(shared("hh-rlhf")), split="test", config="harmless-base", config_is_data_dir=True
        )
    )
    assert len(hh) == 2312 and hh[0].file.endswith("[harmless-base:test]")
    assert hh_rlhf._pair(hh[0], "harmless-base", 0).context[0]["role"] == "user"


def test_bom_and_crlf_json_lines_load(tmp_path):
    """A Windows export (UTF-8 byte-order mark, CRLF line ends) is valid data."""
    good = (FIX / "bad" / "missing_field.jsonl").read_text().splitlines()[0]
    path = tmp_path / "windows.jsonl"
    text = good + "\r\n" + good.replace("bad-0", "bad-9") + "\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    res = data.load("judgebench", str(path))
    assert [p.id for p in res.pairs] == ["bad-0", "bad-9"]
    array = tmp_path / "windows.json"
    array.write_bytes(b"\xef\xbb\xbf[" + good.encode() + b"]\r\n")
    assert [p.id for p in data.load("judgebench", str(array)).pairs] == ["bad-0"]


def test_json_array_errors_name_the_row_index(tmp_path):
    good = json.loads((FIX / "bad" / "missing_field.jsonl").read_text().splitlines()[0])
    bad = {k: v for k, v in good.items() if k != "response_A"}
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps([good, bad]))
    with pytest.raises(DataError, match=r"pairs.json, row 1, field 'response_A'"):
        data.load("judgebench", str(path))


def _judgebench_row(pair_id: str) -> dict:
    return {
        "pair_id": pair_id,
        "original_id": 0,
        "source": "mmlu-pro-math",
        "question": "Q?",
        "response_model": "m",
        "response_A": "A.",
        "response_B": "B.",
        "label": "A>B",
    }


def _rewardbench_row(upstream_id: int) -> dict:
    return {
        "prompt": "Q?",
        "chosen": "good",
        "rejected": "bad",
        "subset": "donotanswer",
        "id": upstream_id,
    }


def _rmbench_row(prompt_id: str) -> dict:
    return {
        "id": prompt_id,
        "prompt": "Q?",
        "chosen": ["a", "b", "c"],
        "rejected": ["x", "y", "z"],
        "domain": "chat",
    }


@pytest.mark.parametrize(
    ("source", "file", "make", "ids", "field", "where"),
    [
        ("judgebench", "pairs.jsonl", _judgebench_row, ["p0", "p1", "p0"], "pair_id", "line 3"),
        ("rewardbench", "pairs.json", _rewardbench_row, [7, 8, 7], "id", "row 2"),
        ("rm-bench", "total_dataset.json", _rmbench_row, ["chat/1", "chat/1"], "id", "row 1"),
    ],
)
def test_duplicate_ids_are_refused_or_counted(
    tmp_path: Path, source: str, file: str, make, ids: list, field: str, where: str
) -> None:
    # a repeated id would collide in the generation store and in scoring: never two pairs
    path = tmp_path / file
    rows = [make(i) for i in ids]
    path.write_text(
        "\n".join(map(json.dumps, rows)) if file.endswith(".jsonl") else json.dumps(rows)
    )
    with pytest.raises(DataError) as err:
        data.load(source, str(path))
    msg = str(err.value)
    assert err.value.kind == "duplicate" and err.value.field == field
    assert f"{path}, {where}, field '{field}': duplicate id" in msg and str(ids[0]) in msg
    res = data.load(source, str(path), on_error="skip")
    assert res.skipped == {"duplicate id": 1}
    per_row = 9 if source == "rm-bench" else 1
    assert len({p.id for p in res.pairs}) == len(res.pairs) == (res.n_rows - 1) * per_row

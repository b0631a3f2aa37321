"""benchmarks/bench_inference.py --quick on the tiny Qwen3: it runs, and its figures add up."""

from __future__ import annotations

import json

from scripts import load_script


def _bench():
    return load_script("benchmarks/bench_inference.py")


def test_quick_benchmark_on_the_tiny_model(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["--quick", "--model", "embedded:tiny-qwen3", "--data", "demo", "--threads", "1"]
    argv += ["--out", str(out)]
    report = _bench().main(argv)
    assert json.loads(out.read_text()) == json.loads(capsys.readouterr().out) == report
    assert report["warmed"] is False and "un-warmed" in report["note"]
    assert report["data"] == {
        "source": "demo",
        "path": "demo:generated",
        "pairs": 3,
        "skipped_too_long": 0,
        "room_tokens": 2 * 4 + 160,
    }
    naive, batched = report["results"]["naive"], report["results"]["batched"]
    assert set(naive) == {"greedy", "majority", "two_stage"}
    # stage2_full and the pruned method: batched only by default
    assert set(batched) == {*naive, "stage2_full", "two_stage_pruned"}
    assert batched["two_stage_pruned"]["generations"] == 6
    assert report["pruning"]["pairs"] == 3 and report["pruning"]["reflection_calls_saved"] == 0
    assert report["pruning"]["same_final_verdict_share"] == 1.0
    for path in (naive, batched):
        assert path["greedy"]["generations"] == 3 and path["two_stage"]["generations"] == 6
        assert path["majority"]["measured_as"].startswith("stage 1")
        assert path["two_stage"]["reflection_calls"] == 0  # nothing parses on a random model
    # the naive path prefills every sequence; the batched one each prompt once for its samples
    assert naive["two_stage"]["prefill_tokens"] == naive["two_stage"]["prompt_tokens"]
    assert batched["two_stage"]["prefill_tokens"] * 2 <= naive["two_stage"]["prefill_tokens"]
    assert batched["two_stage"]["forward_calls"] < naive["two_stage"]["forward_calls"]
    assert report["same_text_naive_vs_batched"]["greedy"] == 1.0  # same outputs either way
    assert naive["greedy"]["generated_tokens"] == batched["greedy"]["generated_tokens"] == 12
    ratios = report["ratios"]["naive_over_batched"]["two_stage"]
    assert ratios["prefill_tokens"] >= 2 and ratios["wall_s"] > 0
    assert report["outcomes"]["rollout_parse_rate"] == 0.0
    # stage 2 as if all parsed: N-1 = 1 call per pair, their shared prefix prefilled once
    full = batched["stage2_full"]
    assert full["reflection_calls"] == full["generations"] == 3
    assert report["ratios"]["two_stage_full_over_majority"]["batched"]["generated_tokens"] == 1.5


def test_generation_throughput_rows():
    from rmlib.generation.models import TINY_QWEN3, load_backbone

    model, tok = load_backbone(TINY_QWEN3, precision="fp32")
    rows = _bench().generation_throughput(
        model, tok, batch_sizes=(1, 2), prompt_tokens=32, new_tokens=4
    )
    assert [(r["path"], r["batch"]) for r in rows] == [
        ("plain", 1),
        ("plain", 2),
        ("fast", 1),
        ("fast", 2),
    ]
    assert all(r["generated_tokens"] == 4 * r["batch"] and r["tokens_per_s"] > 0 for r in rows)

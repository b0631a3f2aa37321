"""The plan as the readable table `rmlib run PARAMS --dry-run` prints."""

from __future__ import annotations

from typing import Any

from rmlib.workbook.plan.notebooks import empty_row

COLUMNS = (  # (key, header, alignment); "≤": the upper bound, "exp.": the expected figure
    ("notebook", "notebook", "<"),
    ("generations", "generations", ">"),
    ("generated_tokens_expected", "gen. tokens exp.", ">"),
    ("generated_tokens_upper_bound", "gen. tokens ≤", ">"),
    ("prompt_tokens_expected", "prompt tokens exp.", ">"),
    ("prompt_tokens_upper_bound", "prompt tokens ≤", ">"),
    ("optimizer_steps", "opt. steps", ">"),
    ("peak_gpu_gib", "peak GPU GiB", ">"),
    ("fits", "fits", ">"),
    ("hours_expected", "exp. hours", ">"),
    ("hours", "hours ≤", ">"),
)


_SUMMED = ("generations", "generated_tokens_expected", "generated_tokens_upper_bound")
_SUMMED += ("prompt_tokens_expected", "prompt_tokens_upper_bound", "optimizer_steps")


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key == "fits":
        return "yes" if value else "NO"
    if key == "peak_gpu_gib":
        return f"{value:.1f}" if value >= 1 else f"{value:.2f}"
    if key in ("hours", "hours_expected"):
        return f"{value:.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def format_plan(p: dict[str, Any]) -> str:
    """The plan as a readable table: one row per notebook, totals, notes, and every constant
    with its source (what `rmlib run PARAMS --dry-run` prints; --json prints the dict)."""
    gpu = p["gpu"]
    model = p["model"]
    size = f"{model['params'] / 1e9:.2f}e9 params" if "params" in model else "dimensions unknown"
    count = p.get("gpu_count", 1)
    lines = [
        f"run {p['run']}: {p['backbone']} ({size}), {p['parameters']} parameters; "
        f"estimates for {count} x GPU class {gpu['class']} ({gpu['cards']}, "
        f"{gpu['memory_gib']:g} GiB)",
        "",
    ]
    total = empty_row(
        "total",
        **{k: sum(r.get(k) or 0 for r in p["per_notebook"]) for k in _SUMMED},
        peak_gpu_gib=p["peak_gpu_gib"],
        fits=p["fits_gpu"],
        hours=p["hours_estimate"],
        hours_expected=p.get("hours_expected"),
    )
    table = [[h for _, h, _ in COLUMNS]]
    table += [[_cell(k, r.get(k)) for k, _, _ in COLUMNS] for r in [*p["per_notebook"], total]]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    for i, row in enumerate(table):
        cells = [
            c.ljust(w) if a == "<" else c.rjust(w)
            for c, w, (_, _, a) in zip(row, widths, COLUMNS, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0 or i == len(table) - 2:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(
        "(≤: upper bound, every prompt at its budget and every generation at its cap; exp.: "
        "expected, at the lengths below; total peak: the largest notebook's; hours: the sum)"
    )
    lines += _scaling_lines(p.get("scaling") or [], count)
    lines += _lengths_lines(p.get("lengths") or [])
    lines += _protocol_lines(p["protocols"])
    lines += _detectable_lines(p.get("detectable_difference"))
    lines += _memory_lines(p["per_notebook"], gpu["memory_gib"])
    lines += ["", "notes:"]
    lines += [f"  - {n}" for n in p["notes"]]
    for r in p["per_notebook"]:
        lines += [f"  - {r['notebook']}: {n}" for n in r["notes"] if "not estimated" not in n]
        lines += [
            f"  - {r['notebook']}: {_part_line(part)}" for part in r["parts"] if "schedule" in part
        ]
    lines += ["", f"constants ({gpu['class']}):"]
    name_w = max(len(k) for k in gpu["constants"])
    for name, c in gpu["constants"].items():
        value = f"{c['value']:,.4g}" if c["value"] < 1000 else f"{c['value']:,.0f}"
        tag = c["source"] if c["basis"].startswith(c["source"]) else f"{c['source']}: "
        basis = c["basis"] if c["basis"].startswith(c["source"]) else tag + c["basis"]
        lines.append(f"  {name.ljust(name_w)}  {value:>8} {c['unit']:<6}  {basis}")
    if gpu.get("measured"):
        m = gpu["measured"]
        colocated = m["device_used_gib_vllm_colocate"]
        lines.append(
            f"  (gpu_check's own peaks at its settings: NF4 trainer "
            f"{m['peak_reserved_gib_nf4_trainer']} GiB reserved"
            + (f"; colocated card use {colocated} GiB)" if colocated is not None else ")")
        )
        if m.get("unmeasured"):
            lines.append(
                f"  ({m['check']} measured no value for {', '.join(m['unmeasured'])}: "
                "they stay assumed)"
            )
    return "\n".join(lines)


def _memory_lines(rows: list[dict[str, Any]], card_gib: float) -> list[str]:
    """Each notebook's estimated memory term by term, phase by phase (a phase's terms are held
    at once; the peak is the largest phase's sum)."""
    lines: list[str] = []
    for r in rows:
        phases: dict[str, list[dict[str, Any]]] = {}
        for t in r.get("memory_terms", []):
            phases.setdefault(t["phase"], []).append(t)
        for phase, terms in phases.items():
            values = [t["gib"] for t in terms]
            total = None if None in values else sum(values)
            share = (
                "" if total is None else f" = {total:.2f} GiB, {total / card_gib:.0%} of the card"
            )
            lines.append(f"  {r['notebook']}, {phase}{share}")
            width = max(len(t["term"]) for t in terms)
            for t in terms:
                gib = "unknown" if t["gib"] is None else f"{t['gib']:.2f}"
                lines.append(f"    {t['term'].ljust(width)}  {gib:>7}  {t['what']}")
    if not lines:
        return []
    head = f"memory by term (GiB, estimates; card {card_gib:g} GiB)"
    return ["", head, *lines]


PROTOCOL_COLUMNS = [  # (key, header): the dry run's protocol table
    ("benchmark", "benchmark"),
    ("pairs", "pairs"),
    ("accuracy_pairs", "accuracy (given order)"),
    ("consistency_pairs", "consistency (both orders)"),
    ("judged_pair_orders", "judged (pair, order)"),
    ("generations", "generations (all models)"),
]


def _protocol_lines(rows: list[dict[str, Any]]) -> list[str]:
    """04's protocols per benchmark: Table 1's accuracy pairs, Table 5's consistency pairs."""
    if not rows:
        return []
    table = [[h for _, h in PROTOCOL_COLUMNS]]
    table += [[r["benchmark"], *(f"{r[k]:,}" for k, _ in PROTOCOL_COLUMNS[1:])] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(PROTOCOL_COLUMNS))]
    lines = ["", "04_inference by benchmark (accuracy: Table 1's protocol; consistency: Table 5's)"]
    for i, row in enumerate(table):
        cells = [
            c.ljust(w) if j == 0 else c.rjust(w)
            for j, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _part_line(part: dict[str, Any]) -> str:
    mix, s = part["mix_items_upper_bound"], part["schedule"]
    paper = part.get("paper_mix") or {}
    published = (
        f" (paper, Qwen3-4B: {paper['pref']:,} + {paper['refl']:,})"
        if paper.get("pref") is not None and paper.get("refl") is not None
        else ""
    )
    return (
        f"{part['part']}: mix ≤ {mix['pref']:,} Pref. + {mix['refl']:,} Refl. = "
        f"{mix['total']:,} items{published}{_expected_mix(part)}; "
        f"{s['steps']:,} steps of {s['prompts_per_step']} prompts x "
        f"{s['completions_per_step'] // max(s['prompts_per_step'], 1)} completions "
        f"({s['epochs']:g} epochs of {s['steps_per_epoch']:,} steps), "
        f"{part.get('hours_expected', 0):.2f} h expected, ≤ {part['hours']:.2f} h"
    )


def _scaling_lines(rows: list[dict[str, Any]], count: int) -> list[str]:
    """Total hours on a node of 1-8 GPUs (GRPO data parallel at the same global batch, one
    colocated engine a rank; rollouts and evaluation over one engine a GPU)."""
    if not rows:
        return []
    one = rows[0]["hours_expected"] or 1.0
    lines = ["", "GPUs  exp. hours  hours ≤  speed-up (exp.)"]
    for r in rows:
        mark = "  <- this plan" if r["gpus"] == count else ""
        if r["hours_expected"] is None:
            lines.append(f"{r['gpus']:>4}  {'—':>10}  {'—':>7}  the GRPO batch does not split")
            continue
        lines.append(
            f"{r['gpus']:>4}  {r['hours_expected']:>10.2f}  {r['hours_upper']:>7.2f}  "
            f"{one / max(r['hours_expected'], 1e-9):>14.2f}x{mark}"
        )
    return lines


def _lengths_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Each source's expected judgment prompt, and where the figure comes from."""
    if not rows:
        return []
    lines = ["", "expected judgment prompt per source (tokens; within prompts.max_prompt_tokens)"]
    for r in rows:
        lines.append(
            f"  {r['source']:<12} {r['prompt_tokens']:>7,.0f} -> {r['within_budget']:>7,.0f}  "
            f"{r['from']}: {r['basis']}"
        )
    return lines


def _detectable_lines(d: dict[str, Any] | None) -> list[str]:
    """The smallest paired accuracy difference the evaluation can detect, against the paper's
    gains of 0.8-1.2 points."""
    if not d or not d["per_benchmark"]:
        return []
    lines = ["", f"smallest detectable paired difference, accuracy points ({d['assumes']})"]
    for r in d["per_benchmark"]:
        lines.append(f"  {r['benchmark']:<12} {r['pairs']:>7,} pairs  {r['points']:>5.2f}")
    mean = d["mean_over_benchmarks"]
    if mean <= 0.8:
        verdict = "can show them"
    elif mean <= 1.2:
        verdict = f"can show a gain of {mean:.2f} or more, not the smaller ones"
    else:
        verdict = "cannot show them"
    lines.append(
        f"  mean of benchmarks      {mean:>10.2f}  (the paper's gains are 0.8-1.2 points: this "
        f"evaluation {verdict})"
    )
    return lines


def _expected_mix(part: dict[str, Any]) -> str:
    exp, mix = part.get("mix_items_expected"), part["mix_items_upper_bound"]
    if not exp or exp == mix:
        return ""
    return f" (expected {exp['total']:,}: {exp['pref']:,} + {exp['refl']:,})"

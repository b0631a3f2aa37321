"""The adapter's model card (README.md): backbone, data counts, parameters, seed, and an
evaluation section that `fill_evaluation` fills (`rmlib.workbook.report` writes the model's rows
there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmlib.writes import write_text

EVAL_START = "<!-- rmlib:evaluation:start -->"


EVAL_END = "<!-- rmlib:evaluation:end -->"


def write_model_card(out: Path, meta: dict[str, Any]) -> Path:
    """README.md of the adapter: backbone, data counts, parameters, seed, evaluation placeholder.

    An existing evaluation section (filled by `fill_evaluation`) is kept.
    """
    path = out / "README.md"
    evaluation = _evaluation_block(path.read_text()) if path.exists() else None
    counts = (meta.get("provenance") or {}).get("counts", {})
    settings = meta["settings"]
    lines = [
        "---",
        "library_name: peft",
        f"base_model: {meta['backbone']}",
        "tags: [rmlib, reflectrm, grpo, qlora, lora, generative-reward-model]",
        "---",
        "",
        f"# ReflectRM judge adapter ({counts.get('variant', 'mix')})",
        "",
        "LoRA adapter trained with GRPO (TRL) on the unified judgment tasks of ReflectRM: "
        "response preference (Pref.) and analysis preference (Refl.). Built with `rmlib`.",
        "",
        "## Backbone",
        "",
        f"- model: `{meta['backbone']}` (weights under the adapter: {meta['precision']})",
        *_base_lines(meta.get("base") or {}),
        f"- thinking mode: {'on' if meta.get('enable_thinking') else 'off'}",
        f"- optimizer steps: {meta['global_step']}",
        f"- seed: {meta['seed']}",
        "",
        "## Training data",
        "",
        *_data_lines(meta.get("provenance") or {}, meta["n_items"]),
        "",
        "## Parameters",
        "",
        "| parameter | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in settings.items()],
        "",
        *usage_lines(out, meta),
        "",
        "## Evaluation",
        "",
        evaluation or _EMPTY_EVALUATION,
        "",
    ]
    write_text(path, "\n".join(lines))
    return path


# A judgment's and a reflection's token cap at inference (rmlib.reflect.settings' defaults): the
# served context must hold the longest prompt plus this
_CARD_NEW_TOKENS = 1024


def usage_lines(out: Path, meta: dict[str, Any]) -> list[str]:
    """The card's "Use" section: the adapter judging pairs (`rmlib judge`), served by `vllm
    serve` (or `rmlib serve --checkpoint`), and as the reward of a TRL GRPO
    (`rmlib.tools.reward`), with this adapter's backbone, rank, prompt budget and prompt
    settings filled in."""
    from rmlib.generation.vllm import vllm_lora_rank

    prov = meta.get("provenance") or {}
    name, backbone = out.name, meta["backbone"]
    thinking = bool(meta.get("enable_thinking"))
    with_result = bool(prov.get("critique_with_result", False))
    context = int((prov.get("budget") or {}).get("max_reflection_prompt_tokens", 8192))
    context += _CARD_NEW_TOKENS
    rank = vllm_lora_rank(int(meta["settings"].get("lora_r", 16)))
    shown = f"enable_thinking={thinking}, critique_with_result={with_result}"
    return [
        "## Use",
        "",
        "Prompts must be shown as in training: rmlib's judgment prompts "
        f"({prov.get('prompt_version', 'reflectrm-v1')}), {shown}.",
        "",
        "Judge pairs (a jsonl of `prompt`, `response_a`, `response_b`; or `--source` a "
        "benchmark), both orders, ReflectRM's two stages; `rmlib score` reads the output:",
        "",
        "```bash",
        f"rmlib judge pairs.jsonl --model {backbone} --adapter {out} \\",
        "    --method reflectrm --orders both -o predictions.jsonl",
        "```",
        "",
        "Serve it with vLLM (raw log-probs: the confidence and soft rewards read them; the "
        "checkpoint's sampling defaults off), then judge over HTTP:",
        "",
        "```bash",
        f"vllm serve {backbone} --enable-lora --max-lora-rank {rank} \\",
        f"    --lora-modules {name}={out} --max-model-len {context} \\",
        "    --logprobs-mode raw_logprobs --generation-config vllm --port 8000",
        "# or the same server with `rmlib judge`'s own engine settings:",
        f"# rmlib serve --checkpoint {backbone} --adapter {name}={out} --max-model-len {context}",
        f"rmlib judge pairs.jsonl --endpoint http://127.0.0.1:8000 --model {backbone} \\",
        f"    --served-model {name} --adapter {out} -o predictions.jsonl",
        "```",
        "",
        "As the reward of a TRL GRPO (async, batched; each completion against the dataset's "
        "`reference` column in both orders, or `opponent='group'` within its group on one "
        "process; `soft=True` for the verdict's probability; `method='reflectrm'` for both "
        "stages):",
        "",
        "```python",
        "from rmlib.tools.reward import http_judge",
        "",
        f'judge = http_judge("http://127.0.0.1:8000", "{name}", "{backbone}", "judge.sqlite",',
        '                   logprobs_kind="raw", config={"opponent": "reference"},',
        f"                   enable_thinking={thinking}, critique_with_result={with_result})",
        "trainer = GRPOTrainer(model=..., reward_funcs=[judge], train_dataset=..., args=...)",
        "```",
        "",
        "verl: `custom_reward_function.path=<rmlib>/tools/reward.py`, `name=compute_score`, "
        "`reward_kwargs` = the same arguments (`endpoint`, `model`, `tokenizer`, `store`, ...); "
        "the prompt in each row's `extra_info.prompt`.",
    ]


def _base_lines(base: dict[str, str]) -> list[str]:
    """Trained on one base, sampled from another (QLoRA on vLLM): both, named."""
    if not base:
        return []
    return [
        f"- trained on: {base['trained_on']} base; GRPO groups sampled from: "
        f"{base['sampled_on']} base ({base['sampled_by']})"
    ]


_EMPTY_EVALUATION = (
    f"{EVAL_START}\nNot evaluated yet: the run's evaluation step writes its figures here.\n"
    f"{EVAL_END}"
)


def _data_lines(prov: dict[str, Any], n_items: int) -> list[str]:
    c = prov.get("counts", {})
    if not c:
        return [f"- items: {n_items} (no provenance recorded)"]
    return [
        f"- source: {', '.join(prov.get('sources', [])) or '?'}; rollouts: N = "
        f"{prov.get('n_samples')} per pair from `{prov.get('backbone') or '?'}`",
        f"- mix: variant {c.get('variant')}, ratio {c.get('ratio')}, seed {prov.get('seed')}",
        "",
        "| Pref. | Refl. | Sum | pairs | easy | mixed | all-wrong | correct+failed |",
        "|---|---|---|---|---|---|---|---|",
        f"| {c.get('pref')} | {c.get('refl')} | {c.get('total')} | {c.get('n_pairs')} | "
        f"{c.get('easy')} | {c.get('mixed')} | {c.get('all_wrong')} | "
        f"{c.get('correct_or_failed')} |",
    ]


def _evaluation_block(text: str) -> str | None:
    if EVAL_START in text and EVAL_END in text:
        start = text.index(EVAL_START)
        return text[start : text.index(EVAL_END, start) + len(EVAL_END)]
    return None


def fill_evaluation(adapter_dir: str | Path, markdown: str) -> Path:
    """Put evaluation figures (markdown, e.g. a table) into the model card's evaluation section."""
    path = Path(adapter_dir) / "README.md"
    text = path.read_text()
    block = _evaluation_block(text)
    if block is None:
        raise ValueError(f"{path}: no evaluation section markers: not an rmlib model card")
    return _write(path, text.replace(block, f"{EVAL_START}\n{markdown.strip()}\n{EVAL_END}"))


def _write(path: Path, text: str) -> Path:
    write_text(path, text)
    return path

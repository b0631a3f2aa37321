"""The dry run: what a run will do and what it may cost, before any model is loaded.

`plan(cfg, gpu=...)` counts, for every notebook the profile lists, the generations, upper bounds
on the generated and the prompt tokens, and the optimizer steps, from the params alone: pair
counts come from `n` or the sets' published sizes, and no data, model or network is touched (nor
torch imported). It then estimates each notebook's peak GPU memory and wall time on a named GPU
class from a small table of constants.

**None of the speed constants has been measured by this project** (its machines have no GPU).
Each one is labelled 'assumed (unmeasured)' with the one-line reasoning it comes from, until
`benchmarks/gpu_check.py --output FILE` has run on a card and FILE is passed as
`gpu_constants` (`rmlib run PARAMS --dry-run --gpu-constants FILE`): the figures it measures then
replace the assumed ones and say 'measured'. The card's memory, bandwidth and bf16 FLOPS are
spec-sheet figures.

How the estimates are made, each twice (`counts.Scenario`): the UPPER BOUND (every prompt at its
budget, every generation at its cap, no training pair easy) and the EXPECTED figure (each
source's mean judgment prompt, `lengths`: measured with the real Qwen3 tokenizer on the local
sets or by `rmlib data stats --lengths FILE`, assumed where the set is hub-only; judgment and
reflection lengths and the easy share from the params' `plan:` section, `settings`):

- generated tokens: every generation at its cap, or at the expected length within its cap.
- prompt tokens (the tokens prefilled): every prompt at its budget, or its source's mean
  judgment prompt within it (a reflection prompt: that plus two critiques), prefilled once for
  all its samples (vLLM's prefix caching, our transformers loop's prefill-once); a pair's
  reflection prompts after the first add only their two critiques (`eval_calls`; the random
  anchor's calls only on the benchmarks of `inference.random_anchor_sources`); TRL's
  transformers generation (`grpo.use_vllm` off) prefills each of a group's copies.
- GRPO steps: from the training mix (`mix_items`: the non-easy pairs as both pools, within the
  caps) and TRL's batching (`grpo_schedule`); `grpo.max_steps` > 0 sets the count outright, as
  in transformers' Trainer.
- memory: a vLLM engine takes its share of the card (`gpu_memory_utilization`), or its weights +
  `kv_cache_gib` + a fixed reserve when that is set; a trainer holds its weights at the training
  precision, the LoRA weights with their gradients and AdamW states, the activations autograd
  keeps (`activation_bytes`), the logits (SFT's in full; GRPO's one tile of TRL's fused LM head)
  and a workspace; an engine splits into its weights, KV cache and reserve; GRPO adds the
  colocated engine's share (use_vllm) or the KV cache of transformers' generation batch;
  transformers generation holds its weights + the KV cache of `generation.max_batch_tokens`.
  Each notebook's row lists these terms (`memory_terms`: phase, term, GiB, what); a phase's terms
  are held at once and the peak is the largest phase's sum; the table prints them.
- time: prefill FLOPS-bound (2 x params a token); decode at the rate an engine's batch and mean
  context allow (`Estimator.decode_rate`: a step reads the weights and every sequence's KV,
  bandwidth-bound, or costs 2 x params FLOPs a sequence, compute-bound; the batch is what the
  engine's KV room holds, at most the queued sequences and generation.max_num_seqs; GRPO's
  colocated engine has its share of the card); training at `train_flops_per_param` x params a
  token (every forward TRL runs); plus engine starts, GRPO's per-step weight sync and each
  notebook's overhead. A gpu_check file's measured rates replace the modelled ones.
- GPUs (`gpu_count`, default run.gpus): GRPO data parallel at the same global batch (each rank
  generates and trains its share of a step on its own colocated engine; steps and syncs stay),
  rollouts and evaluation spread over one engine a GPU; `scaling` lists 1, 2, 4 and 8 GPUs.
- the smallest paired difference each benchmark (and their mean) can detect
  (`detectable_difference`: McNemar's normal approximation at an assumed discordance).
- a CPU constants file of benchmarks/calibrate_cpu.py plans for that CPU with the same model
  (its bandwidth and FLOPS are achieved figures); `calibrate.compare` sets the predictions
  beside a finished run's notebook times.

Modules: `facts` (model dimensions, GPU classes), `constants` (assumed / measured / spec-sheet
figures), `settings` (the `plan:` section), `lengths` (prompt lengths per source), `counts`
(what the params ask for), `estimate` (memory and time), `notebooks` (`plan`: the rows), `table`
(`format_plan`), `calibrate` (the CPU check).
"""

from rmlib.workbook.plan.constants import (
    ASSUMED,
    DECODE_BANDWIDTH_SHARE,
    HF_STEP_FLOOR_S,
    MEASURED,
    MEASURED_KEYS,
    NF4_TRAIN_SLOWDOWN,
    PREFILL_MFU,
    REF_COMPLETION_TOKENS,
    REF_ENGINE_BATCH,
    REF_GENERATION_BATCH,
    REF_PROMPT_TOKENS,
    SPEC,
    TRAIN_FLOPS_PER_PARAM,
    TRAIN_MFU,
    TRAINER_WORKSPACE_GIB,
    VLLM_RESERVE_GIB,
    Constant,
    assumed_constants,
    measured_constants,
    plan_constants,
)
from rmlib.workbook.plan.counts import (
    eval_calls,
    grpo_schedule,
    mix_items_upper_bound,
    mix_prompt_tokens,
    models_eval_calls,
    paper_mix,
    protocols,
    set_pairs,
    swapped_pairs,
    warmup_steps,
)
from rmlib.workbook.plan.estimate import Estimator, activation_bytes, plan_precision
from rmlib.workbook.plan.facts import (
    DEFAULT_GPU,
    GPU_ALIASES,
    GPU_CLASSES,
    KNOWN_MODELS,
    REFERENCE_MODEL,
    GiB,
    GPUClass,
    ModelFacts,
    class_of_device,
    gpu_class,
    model_facts,
)
from rmlib.workbook.plan.notebooks import empty_row, plan
from rmlib.workbook.plan.table import COLUMNS, PROTOCOL_COLUMNS, format_plan

__all__ = [
    "ASSUMED",
    "COLUMNS",
    "Constant",
    "DECODE_BANDWIDTH_SHARE",
    "DEFAULT_GPU",
    "Estimator",
    "GPUClass",
    "GPU_ALIASES",
    "GPU_CLASSES",
    "GiB",
    "HF_STEP_FLOOR_S",
    "KNOWN_MODELS",
    "MEASURED",
    "MEASURED_KEYS",
    "ModelFacts",
    "NF4_TRAIN_SLOWDOWN",
    "PREFILL_MFU",
    "PROTOCOL_COLUMNS",
    "REFERENCE_MODEL",
    "REF_COMPLETION_TOKENS",
    "REF_ENGINE_BATCH",
    "REF_GENERATION_BATCH",
    "REF_PROMPT_TOKENS",
    "SPEC",
    "TRAINER_WORKSPACE_GIB",
    "TRAIN_FLOPS_PER_PARAM",
    "TRAIN_MFU",
    "VLLM_RESERVE_GIB",
    "activation_bytes",
    "assumed_constants",
    "class_of_device",
    "empty_row",
    "eval_calls",
    "format_plan",
    "gpu_class",
    "grpo_schedule",
    "measured_constants",
    "mix_items_upper_bound",
    "mix_prompt_tokens",
    "model_facts",
    "models_eval_calls",
    "paper_mix",
    "plan",
    "plan_constants",
    "plan_precision",
    "protocols",
    "set_pairs",
    "swapped_pairs",
    "warmup_steps",
]

"""Which settings size memory and not results: the run's params hash and a finished training's
settings leave them out, so a run stopped by out-of-memory resumes with them changed."""

from __future__ import annotations

# Settings that size memory, not results: a run stopped by out-of-memory resumes with any of them
# changed. The generation store keys on (model, prompt, sampling settings, sample index) only, so
# none of them regenerates a stored sample, and params_hash leaves them out, so no completed
# notebook runs again. GRPO's micro-batch and accumulation trade against each other: their
# product (completions per optimizer step, which changes training) stays in the hash. GRPO's
# generation batch is not here: TRL drops an incomplete last one, so it sets the steps an epoch.
MEMORY_SETTINGS: tuple[str, ...] = (
    "generation.max_batch_tokens",
    "generation.max_batch_size",
    "generation.chunk_prompts",
    "generation.gpu_memory_utilization",
    "generation.kv_cache_gib",
    "generation.max_num_seqs",
    "generation.max_num_batched_tokens",
    "grpo.per_device_train_batch_size",
    "grpo.gradient_accumulation_steps",
    "grpo.gradient_checkpointing",
    "grpo.vllm_gpu_memory_utilization",
    "grpo.vllm_cpu_kv_cache_gib",
)
# Settings that change neither results nor memory: the card the run checks for (check_gpu_class).
NOT_RESULTS: tuple[str, ...] = (*MEMORY_SETTINGS, "run.gpu_class")

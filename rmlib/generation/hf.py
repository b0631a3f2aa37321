"""The transformers backend: our own batched decode loop over a causal LM.

Why not `model.generate`:
- log-probs must be the raw temperature-1 log-softmax of the logits, of the chosen token, kept
  as we go (`output_scores` keeps full-vocabulary scores for every step: gigabytes);
- sample i of a prompt must depend only on (seed, prompt, params, i), whatever shares its batch:
  each sample owns a `torch.Generator` seeded from a hash of (seed, prompt, i) and draws its token
  by Gumbel-max (argmax of filtered logits / T + Gumbel noise), so batch composition, offsets and
  chunking never change the draws (up to batch numerics in the logits);
- each prompt is prefilled once and its KV cache copied to its n samples (`generate` with
  `num_return_sequences` prefills n times), and prompts of one call that share a long token
  prefix (all reflection prompts of one pair: instructions, context, both responses) prefill
  that prefix once (`shared_prefix_groups`, `prefill_plan`): found from the token ids, so no
  caller changes anything;
- every setting comes from `SamplingParams`: a checkpoint's generation_config.json (Qwen3's turns
  sampling on at temperature 0.6) never applies. Only its EOS ids are read, as stop tokens.

Prompts arrive already rendered through the chat template, so they are tokenized without adding
special tokens. A generation's `token_ids` and `logprobs` include the stop token when one ended
it; its `text` is decoded without the stop token and without special tokens.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch

from rmlib.generation.base import Generation, SamplingParams, encode_prompt, sample_seed
from rmlib.generation.batching import (
    MAX_PADDING,
    MIN_SHARED_PREFIX,
    BatchItem,
    choose_tokens,
    plan_batches,
    prefill_plan,
    shared_prefix_groups,
    split_batch,
)

log = logging.getLogger(__name__)


# Drop finished rows from the batch once this fraction of it has finished: compacting the KV
# cache costs a copy, so it is done in bulk rather than after every finished sequence.
PRUNE_FRACTION = 0.25


# Static decode: the cache is allocated in multiples of this many positions, so compiled decode
# steps (CUDA graphs, one per shape) are reused across batches of similar width.
STATIC_CACHE_ROUND = 256


DecodeCache = Literal["dynamic", "static"]


def stop_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """EOS ids that end a generation: the tokenizer's plus those of the model's configs.

    Qwen3's generation_config lists <|im_end|> and <|endoftext|>; these are stop ids, not
    sampling settings, so reading them keeps the chat turn's end without importing defaults.
    """
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    for cfg in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        eos = getattr(cfg, "eos_token_id", None) if cfg is not None else None
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, list | tuple):
            ids.update(int(e) for e in eos)
    if not ids:
        raise ValueError("no EOS token id on the tokenizer or the model's configs: cannot stop")
    return sorted(ids)


@dataclass
class GenerationStats:
    """What the backend computed, summed over its calls (`HFBackend.reset_stats` zeroes it).

    prompt_tokens: prompt tokens of every decoded sequence: what prefilling each sequence on its
    own would cost. prefill_tokens: prompt tokens actually run through the model (each prompt
    once for all its samples, each shared prefix once for its group). prefill_positions: the
    positions computed by prefill passes, padding included. generated_tokens: tokens decoded (a
    greedy prompt is decoded once, its copies cost nothing). forward_calls: model forward passes.
    seconds: wall time spent in `generate`.
    """

    calls: int = 0
    prompts: int = 0
    sequences: int = 0
    prompt_tokens: int = 0
    prefill_tokens: int = 0
    prefill_positions: int = 0
    generated_tokens: int = 0
    forward_calls: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass
class _Row:
    """One sequence being decoded."""

    item: BatchItem
    sample: int
    generator: torch.Generator
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stopped: bool = False


# Of the free memory a batch may take, and its bytes per token beyond the KV cache (activations,
# the logits of the last position, allocator slack): an estimate; an out-of-memory batch is
# still split in two (`_run_fitting`).
FREE_MEMORY_SHARE = 0.9


ACTIVATION_OVERHEAD = 0.5


def kv_bytes_per_token(config: Any, dtype_bytes: int) -> int:
    """KV cache bytes one token takes in every layer (keys and values)."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * config.num_hidden_layers * heads * head_dim * dtype_bytes


def fitting_batch_tokens(asked: int, free_bytes: int, per_token: int) -> int:
    """The batch-token budget that `free_bytes` holds at `per_token` KV bytes, at most `asked`."""
    fits = int(free_bytes * FREE_MEMORY_SHARE / (per_token * (1 + ACTIVATION_OVERHEAD)))
    return max(1, min(asked, fits))


def _fit_to_device(model: Any, asked: int) -> int:
    """`asked`, lowered on CUDA to what the free memory holds once the weights are loaded."""
    weight = model.get_input_embeddings().weight
    if weight.device.type != "cuda":
        return asked
    free, _ = torch.cuda.mem_get_info(weight.device)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    fits = fitting_batch_tokens(asked, free, kv_bytes_per_token(base.config, weight.element_size()))
    if fits < asked:
        log.info(
            "generation.max_batch_tokens %d lowered to %d: what %.1f GiB free on %s holds",
            asked, fits, free / 2**30, weight.device,
        )  # fmt: skip
    return fits


class HFBackend:
    """Backend over a transformers causal LM (plain, 4-bit, or PEFT-wrapped).

    max_batch_tokens: budget per batch, (KV cache width + max_new_tokens) x sequences, where the
    width is the longest prompt (or, with shared prefixes, longest prefix + longest suffix). On
    CUDA it is lowered to what the card's free memory holds (`fitting_batch_tokens`), so a budget
    set for a large card does not run out of memory on a small one.
    max_batch_size: most sequences decoded at once.
    min_shared_prefix: prompts of one call that share at least this many leading tokens (e.g. the
    reflection prompts of one pair: instructions, context, both responses) prefill that prefix
    once and reuse its KV cache (MIN_SHARED_PREFIX by default; 0 turns it off). Exact: only the
    padding layout changes, so outputs equal the plain path's up to batch numerics.
    max_padding: a batch takes no further prompt once its prefill would compute more than
    (1 + max_padding) x its prompt tokens (None: MAX_PADDING; math.inf:
    only the budget limits a batch). Prompts are sorted by length, so this starts a new batch
    where lengths drop; it trades padded prefill for more, smaller decode batches.
    share_prompt_prefill: True (default) prefills a prompt once for all its samples in a batch;
    False prefills every sample's copy of the prompt, as `generate(num_return_sequences=n)` does
    (a baseline for benchmarks; also turns prefix sharing off for those copies).
    decode_cache: "dynamic" (default: finished rows are dropped from the batch as it goes) or
    "static" (the KV cache is copied after prefill into a preallocated transformers StaticCache
    and every decode step has the same shapes; finished rows ride along, fed padding).
    compile_decode: on CUDA with decode_cache="static", decode steps run through
    `torch.compile(mode="reduce-overhead")` (CUDA graphs), the fastest path transformers offers
    for a fixed batch; ignored on CPU, and any compile failure falls back to the plain forward
    with a warning. Both are off by default: the plain path is the reference the tests check the
    others against.
    progress: a tqdm bar of prompts done (prompts/s), generated and prefilled tokens per second.
    `stats` (GenerationStats) counts prefilled and generated tokens and forward calls.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        identity: str,
        max_batch_tokens: int = 32_768,
        max_batch_size: int = 64,
        min_shared_prefix: int = MIN_SHARED_PREFIX,
        max_padding: float | None = None,
        share_prompt_prefill: bool = True,
        decode_cache: DecodeCache = "dynamic",
        compile_decode: bool = False,
        progress: bool = True,
    ) -> None:
        if max_batch_tokens < 1 or max_batch_size < 1:
            raise ValueError("max_batch_tokens and max_batch_size must be >= 1")
        if min_shared_prefix < 0:
            raise ValueError("min_shared_prefix must be >= 0 (0 turns prefix sharing off)")
        if decode_cache not in ("dynamic", "static"):
            raise ValueError(f"decode_cache must be 'dynamic' or 'static', got {decode_cache!r}")
        if max_padding is not None and max_padding < 0:
            raise ValueError("max_padding must be >= 0 (math.inf: no limit; None: MAX_PADDING)")
        self.max_padding = max_padding
        self.share_prompt_prefill = share_prompt_prefill
        self.decode_cache: DecodeCache = decode_cache
        self.compile_decode = compile_decode
        self._compiled: Any = None  # the compiled forward, built on first use (CUDA only)
        self._static: Any = None  # the last static cache and its (rows, positions)
        self._static_key: tuple[int, int] | None = None
        self.model = model
        self.tokenizer = tokenizer
        self.identity = identity
        self.max_batch_tokens = _fit_to_device(model, max_batch_tokens)
        self.max_batch_size = max_batch_size
        self.min_shared_prefix = min_shared_prefix
        self.progress = progress
        self.stats = GenerationStats()
        self.stop_ids = stop_token_ids(model, tokenizer)
        self._stops = frozenset(self.stop_ids)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.stop_ids[0]
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self._config = base.config
        # the forward takes `cache` in transformers 5.24 (`past_key_values` deprecated there);
        # fall back to the old name where `cache` is not a parameter
        params = inspect.signature(base.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    def _max_padding(self) -> float:
        return MAX_PADDING if self.max_padding is None else self.max_padding

    def reset_stats(self) -> GenerationStats:
        """Zero the counters; returns the old ones."""
        old, self.stats = self.stats, GenerationStats()
        return old

    # ------------------------------------------------------------------ public

    def generate(
        self, prompts: list[str], params: SamplingParams, n: int = 1, offset: int = 0
    ) -> list[list[Generation]]:
        """Samples offset … offset+n-1 of each prompt, in prompt order."""
        if n < 0 or offset < 0:
            raise ValueError("n and offset must be >= 0")
        if n == 0 or not prompts:
            return [[] for _ in prompts]
        start = time.perf_counter()
        ids = [self._encode(p) for p in prompts]
        # greedy: every sample index gives the same tokens, so decode one and copy it
        samples = list(range(offset, offset + n)) if params.do_sample else [offset]
        batches = plan_batches(
            [len(x) for x in ids],
            samples,
            params.max_new_tokens,
            self.max_batch_tokens,
            self.max_batch_size,
            groups=shared_prefix_groups(ids, self.min_shared_prefix),
            max_padding=self._max_padding(),
        )
        out: dict[tuple[int, int], Generation] = {}
        speed = _Speed(self.stats)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode(), self._bar(len(prompts)) as bar:
                for batch in batches:
                    done = self._run_fitting(batch, prompts, ids, params)
                    out.update(done)
                    # a prompt is done when its last sample is (big ones span batches)
                    bar.update(sum(1 for it in batch if it.samples[-1] == samples[-1]))
                    bar.set_postfix_str(speed.postfix(), refresh=False)
        finally:
            self.model.train(was_training)
            self.stats.calls += 1
            self.stats.prompts += len(prompts)
            self.stats.seconds += time.perf_counter() - start
        return [
            [out[(p, s if params.do_sample else offset)].copy() for s in range(offset, offset + n)]
            for p in range(len(prompts))
        ]

    # ------------------------------------------------------------------ batches

    def _encode(self, prompt: str) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def _run_fitting(
        self,
        batch: list[BatchItem],
        prompts: list[str],
        ids: list[list[int]],
        params: SamplingParams,
    ) -> dict[tuple[int, int], Generation]:
        """`_run_batch`, halving the batch on a CUDA out-of-memory error until it fits.

        The token budget is an estimate (activations, the allocator's fragmentation and other
        processes on the card are not in it); a sample's tokens do not depend on its batch, so
        a split changes nothing but speed. One sequence that does not fit raises as it is.
        """
        try:
            return self._run_batch(batch, prompts, ids, params)
        except torch.OutOfMemoryError:
            halves = split_batch(batch)
            if halves is None:
                raise
            torch.cuda.empty_cache()
            warnings.warn(
                f"out of memory on a batch of {sum(len(it.samples) for it in batch)} sequences: "
                "splitting it in two (lower generation.max_batch_tokens to avoid the retry)",
                stacklevel=2,
            )
            out: dict[tuple[int, int], Generation] = {}
            for half in halves:
                out.update(self._run_fitting(half, prompts, ids, params))
            return out

    def _run_batch(
        self,
        batch: list[BatchItem],
        prompts: list[str],
        ids: list[list[int]],
        params: SamplingParams,
    ) -> dict[tuple[int, int], Generation]:
        if not self.share_prompt_prefill:  # one prefill row per sample: the prompt repeated
            batch = [BatchItem(it.prompt, [s], it.group, 0) for it in batch for s in it.samples]
        cache, logits, mask, positions = self._prefill(batch, ids)
        # Index tensors stay on the CPU: they index CUDA tensors too, whichever device a layer
        # sits on (device_map may spread layers). The noise is drawn where the logits are.
        rows, expand = [], []
        for b, it in enumerate(batch):
            for s in it.samples:
                g = torch.Generator(device=logits.device)
                g.manual_seed(sample_seed(params.seed, prompts[it.prompt], s))
                rows.append(_Row(it, s, g))
                expand.append(b)
        self.stats.sequences += len(rows)
        self.stats.prompt_tokens += sum(len(ids[r.item.prompt]) for r in rows)
        index = torch.tensor(expand)
        if expand != list(range(len(batch))):
            cache.batch_select_indices(index)  # one prefill per prompt, copied to its samples
            logits, mask, positions = logits[index], mask[index], positions[index]
        if self.decode_cache == "static":
            rows = self._decode_static(rows, cache, logits, mask, positions, params)
            return {(r.item.prompt, r.sample): self._finish(r, ids) for r in rows}
        finished: list[_Row] = []
        for step in range(params.max_new_tokens):
            self._choose(rows, logits, params)
            if step == params.max_new_tokens - 1:
                break
            keep = [i for i, r in enumerate(rows) if not r.stopped]
            if not keep:
                break
            if len(rows) - len(keep) >= max(1, math.ceil(PRUNE_FRACTION * len(rows))):
                finished += [r for r in rows if r.stopped]
                rows, mask, positions = _prune(keep, rows, cache, mask, positions)
            logits, mask, positions = self._step(rows, cache, mask, positions)
        return {(r.item.prompt, r.sample): self._finish(r, ids) for r in finished + rows}

    def _decode_static(
        self,
        rows: list[_Row],
        cache: Any,
        logits: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        params: SamplingParams,
    ) -> list[_Row]:
        """Decode with a preallocated cache and fixed shapes (what CUDA graphs need).

        The prefill's cache is copied into a StaticCache as wide as the whole batch can grow
        (rounded up to STATIC_CACHE_ROUND positions, so a compiled step is reused across batches);
        the 2D mask is allocated at that width up front and filled in one column per step.
        """
        width = mask.shape[1]
        total = -(-(width + params.max_new_tokens) // STATIC_CACHE_ROUND) * STATIC_CACHE_ROUND
        static = self._static_cache(cache, total)
        full = mask.new_zeros((mask.shape[0], total))
        full[:, :width] = mask
        forward = self._decode_forward()
        for step in range(params.max_new_tokens):
            self._choose(rows, logits, params)
            if step == params.max_new_tokens - 1 or all(r.stopped for r in rows):
                break
            last = [self.pad_id if r.stopped else r.tokens[-1] for r in rows]
            input_ids = torch.tensor(last, device=full.device).unsqueeze(-1)
            full[:, width + step] = 1
            logits = self._forward(input_ids, full, positions.unsqueeze(-1), static, forward)
            positions = positions + 1
        return rows

    def _static_cache(self, cache: Any, total: int) -> Any:
        """The prefill's cache copied into a StaticCache of `total` positions, reused from the
        previous batch when the shape is the same (stable addresses: CUDA graphs replay)."""
        from transformers import StaticCache

        key = (cache.layers[0].keys.shape[0], total)
        if self._static_key != key:
            self._static = StaticCache(config=self._config, max_cache_len=total)
            self._static_key = key
        return _static_fill(self._static, cache)

    def _decode_forward(self) -> Any:
        """The forward for decode steps: compiled (CUDA, static, asked for) or plain."""
        if not (self.compile_decode and self.device.type == "cuda"):
            return self.model
        if self._compiled is None:
            try:
                self._compiled = torch.compile(self.model, mode="reduce-overhead", fullgraph=False)
            except Exception as e:  # noqa: BLE001 - any compile failure: keep the plain path
                warnings.warn(f"torch.compile failed ({e!r}); decoding without it", stacklevel=2)
                self.compile_decode = False
                return self.model
        return self._compiled

    def _prefill(
        self, batch: list[BatchItem], ids: list[list[int]]
    ) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Prefill the batch's prompts: cache, last logits, mask, next positions (one row each).

        Pass 1 runs each shared prefix once and each other prompt whole (left-padded); its cache
        rows are then copied to the prompts, and pass 2 runs the suffixes after their prefix
        (left-padded again, so padding sits between prefix and suffix, masked out; positions
        skip it). A batch that shares nothing is pass 1 alone: the plain left-padded prefill.
        """
        from transformers import DynamicCache

        units, unit_of, suffixes = prefill_plan(batch, ids)
        cache = DynamicCache(config=self._config)
        input_ids, mask = self._left_pad(units)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = self._forward(input_ids, mask, positions, cache)
        self._count_prefill(mask)
        if unit_of != list(range(len(units))):
            index = torch.tensor(unit_of)
            cache.batch_select_indices(index)
            logits, mask = logits[index], mask[index]
        if any(suffixes):
            suffix_ids, suffix_mask = self._left_pad(suffixes)
            mask = torch.cat([mask, suffix_mask], dim=-1)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -suffix_ids.shape[1] :]
            after = self._forward(suffix_ids, mask, positions, cache)
            self._count_prefill(suffix_mask)
            # a prompt that is all prefix (its suffix all padding) keeps pass 1's logits
            has_suffix = torch.tensor([bool(s) for s in suffixes], device=logits.device)
            logits = torch.where(has_suffix.unsqueeze(-1), after, logits)
        return cache, logits, mask, mask.sum(-1)

    def _left_pad(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in seqs)
        input_ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            if s:
                input_ids[i, width - len(s) :] = torch.tensor(s)
                mask[i, width - len(s) :] = 1
        return input_ids.to(self.device), mask.to(self.device)

    def _count_prefill(self, mask: torch.Tensor) -> None:
        self.stats.prefill_tokens += int(mask.sum())
        self.stats.prefill_positions += mask.numel()

    def _step(
        self, rows: list[_Row], cache: Any, mask: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # finished rows not yet pruned are fed pad; their outputs are never recorded
        last = [self.pad_id if r.stopped else r.tokens[-1] for r in rows]
        input_ids = torch.tensor(last, device=mask.device).unsqueeze(-1)
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
        logits = self._forward(input_ids, mask, positions.unsqueeze(-1), cache)
        return logits, mask, positions + 1

    def _forward(
        self,
        input_ids: torch.Tensor,
        mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: Any,
        model: Any = None,
    ) -> torch.Tensor:
        self.stats.forward_calls += 1
        kwargs = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "position_ids": position_ids,
            "use_cache": True,
            "logits_to_keep": 1,  # never materialise prompt-length x vocabulary logits
            self._cache_kw: cache,
        }
        if model is not None and model is not self.model:
            try:  # clone: a CUDA-graph output buffer is overwritten by the next replay
                return model(**kwargs).logits[:, -1, :].float().clone()
            except Exception as e:  # noqa: BLE001 - a compiled step that fails: plain path
                warnings.warn(f"compiled decode failed ({e!r}); decoding without it", stacklevel=2)
                self.compile_decode, self._compiled = False, None
        return self.model(**kwargs).logits[:, -1, :].float()

    def _choose(self, rows: list[_Row], logits: torch.Tensor, params: SamplingParams) -> None:
        """Pick each live row's next token and record it with its raw log-prob."""
        live = [i for i, r in enumerate(rows) if not r.stopped]
        if not live:
            return
        sel = torch.tensor(live)
        lg = logits[sel]
        chosen = choose_tokens(lg, params, [rows[i].generator for i in live])
        logprob = torch.log_softmax(lg, dim=-1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
        for i, tok, lp in zip(live, chosen.tolist(), logprob.tolist(), strict=True):
            rows[i].tokens.append(tok)
            rows[i].logprobs.append(lp)
            rows[i].stopped = tok in self._stops
        self.stats.generated_tokens += len(live)

    def _finish(self, row: _Row, ids: list[list[int]]) -> Generation:
        # the stop token is not part of the text, even when it is not a special token
        body = row.tokens[:-1] if row.stopped else row.tokens
        return Generation(
            text=self.tokenizer.decode(body, skip_special_tokens=True),
            token_ids=row.tokens,
            logprobs=row.logprobs,
            finish_reason="stop" if row.stopped else "length",
            prompt_tokens=len(ids[row.item.prompt]),
        )

    def _bar(self, total: int) -> Any:
        from tqdm.auto import tqdm

        # transient (leave=False): CachedBackend calls once per chunk and shows its own bar
        return tqdm(
            total=total,
            unit="prompt",
            desc="generate",
            disable=not self.progress,
            leave=False,
            dynamic_ncols=True,
        )


def _static_fill(static: Any, cache: Any) -> Any:
    """Copy a DynamicCache's keys and values into the first positions of a StaticCache.

    Positions after them keep whatever an earlier batch left there: the attention mask hides
    them until a decode step overwrites them.
    """
    if len(static.layers) != len(cache.layers) or any(st.is_sliding for st in static.layers):
        raise ValueError("decode_cache='static' supports full-attention models only")
    for dyn, st in zip(cache.layers, static.layers, strict=True):
        width = dyn.keys.shape[-2]
        if not st.is_initialized:
            st.lazy_initialization(dyn.keys, dyn.values)
        st.keys[:, :, :width].copy_(dyn.keys)
        st.values[:, :, :width].copy_(dyn.values)
        st.cumulative_length.fill_(width)
    return static


def _prune(
    keep: list[int], rows: list[_Row], cache: Any, mask: torch.Tensor, positions: torch.Tensor
) -> tuple[list[_Row], torch.Tensor, torch.Tensor]:
    """Keep only the rows still decoding, in the cache and in the per-row tensors."""
    sel = torch.tensor(keep)
    cache.batch_select_indices(sel)
    return [rows[i] for i in keep], mask[sel], positions[sel]


class _Speed:
    """Generated and prefilled tokens per second since the call began, for the progress bar."""

    def __init__(self, stats: GenerationStats) -> None:
        self.stats, self.start = stats, time.perf_counter()
        self.gen0, self.pre0 = stats.generated_tokens, stats.prefill_tokens

    def postfix(self) -> str:
        dt = max(time.perf_counter() - self.start, 1e-9)
        gen = (self.stats.generated_tokens - self.gen0) / dt
        pre = (self.stats.prefill_tokens - self.pre0) / dt
        return f"gen {gen:.0f} tok/s, prefill {pre:.0f} tok/s"

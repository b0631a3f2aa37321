"""The transformers backend: our own batched decode loop over a causal LM.

Why not `model.generate`:
- log-probs must be the raw temperature-1 log-softmax of the logits, of the chosen token, kept
  as we go (`output_scores` keeps full-vocabulary scores for every step: gigabytes);
- sample i of a prompt must depend only on (seed, prompt, params, i), whatever shares its batch:
  each sample owns a `torch.Generator` seeded from a hash of (seed, prompt, i) and draws its token
  by Gumbel-max (argmax of filtered logits / T + Gumbel noise), so batch composition, offsets and
  chunking never change the draws (up to batch numerics in the logits);
- each prompt is prefilled once and its KV cache copied to its n samples (`generate` with
  `num_return_sequences` prefills n times);
- every setting comes from `SamplingParams`: a checkpoint's generation_config.json (Qwen3's turns
  sampling on at temperature 0.6) never applies. Only its EOS ids are read, as stop tokens.

Prompts arrive already rendered through the chat template, so they are tokenized without adding
special tokens. A generation's `token_ids` and `logprobs` include the stop token when one ended
it; its `text` is decoded without the stop token and without special tokens.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from rmlib.generation.base import Generation, SamplingParams

# Drop finished rows from the batch once this fraction of it has finished: compacting the KV
# cache costs a copy, so it is done in bulk rather than after every finished sequence.
PRUNE_FRACTION = 0.25


def sample_seed(seed: int, prompt: str, index: int) -> int:
    """The RNG seed of sample `index` of `prompt`: a 63-bit hash of (seed, prompt, index)."""
    h = hashlib.sha256(f"{seed}\x00{index}\x00".encode() + prompt.encode("utf-8"))
    return int.from_bytes(h.digest()[:8], "little") & ((1 << 63) - 1)


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
class _Item:
    """One prompt's share of a batch: which samples of it to generate."""

    prompt: int
    samples: list[int]


@dataclass
class _Row:
    """One sequence being decoded."""

    item: _Item
    sample: int
    generator: torch.Generator
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stopped: bool = False


class HFBackend:
    """Backend over a transformers causal LM (plain, 4-bit, or PEFT-wrapped).

    max_batch_tokens: budget per batch, (padded prompt length + max_new_tokens) x sequences; the
    KV cache grows to this many positions. max_batch_size: most sequences decoded at once.
    progress: a tqdm bar of prompts done and generated tokens per second.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        identity: str,
        max_batch_tokens: int = 32_768,
        max_batch_size: int = 64,
        progress: bool = True,
    ) -> None:
        if max_batch_tokens < 1 or max_batch_size < 1:
            raise ValueError("max_batch_tokens and max_batch_size must be >= 1")
        self.model = model
        self.tokenizer = tokenizer
        self.identity = identity
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.progress = progress
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

    # ------------------------------------------------------------------ public

    def generate(
        self, prompts: list[str], params: SamplingParams, n: int = 1, offset: int = 0
    ) -> list[list[Generation]]:
        """Samples offset … offset+n-1 of each prompt, in prompt order."""
        if n < 0 or offset < 0:
            raise ValueError("n and offset must be >= 0")
        if n == 0 or not prompts:
            return [[] for _ in prompts]
        ids = [self._encode(p) for p in prompts]
        # greedy: every sample index gives the same tokens, so decode one and copy it
        samples = list(range(offset, offset + n)) if params.do_sample else [offset]
        batches = plan_batches(
            [len(x) for x in ids],
            samples,
            params.max_new_tokens,
            self.max_batch_tokens,
            self.max_batch_size,
        )
        out: dict[tuple[int, int], Generation] = {}
        speed = _Speed()
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode(), self._bar(len(prompts)) as bar:
                for batch in batches:
                    done = self._run_batch(batch, prompts, ids, params)
                    out.update(done)
                    # a prompt is done when its last sample is (big ones span batches)
                    bar.update(sum(1 for it in batch if it.samples[-1] == samples[-1]))
                    bar.set_postfix_str(speed.add(done.values()), refresh=False)
        finally:
            self.model.train(was_training)
        return [
            [_copy(out[(p, s if params.do_sample else offset)]) for s in range(offset, offset + n)]
            for p in range(len(prompts))
        ]

    # ------------------------------------------------------------------ batches

    def _encode(self, prompt: str) -> list[int]:
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError("empty prompt: nothing to condition on")
        return list(ids)

    def _run_batch(
        self, batch: list[_Item], prompts: list[str], ids: list[list[int]], params: SamplingParams
    ) -> dict[tuple[int, int], Generation]:
        cache, logits, mask, positions = self._prefill([ids[it.prompt] for it in batch])
        # Index tensors stay on the CPU: they index CUDA tensors too, whichever device a layer
        # sits on (device_map may spread layers). The noise is drawn where the logits are.
        rows, expand = [], []
        for b, it in enumerate(batch):
            for s in it.samples:
                g = torch.Generator(device=logits.device)
                g.manual_seed(sample_seed(params.seed, prompts[it.prompt], s))
                rows.append(_Row(it, s, g))
                expand.append(b)
        index = torch.tensor(expand)
        cache.batch_select_indices(index)  # one prefill per prompt, copied to its samples
        logits, mask, positions = logits[index], mask[index], positions[index]
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

    def _prefill(self, seqs: list[list[int]]) -> tuple[Any, torch.Tensor, torch.Tensor, Any]:
        """Left-padded forward over the prompts: cache, last logits, mask, next positions."""
        from transformers import DynamicCache

        dev = self.device
        width = max(len(s) for s in seqs)
        input_ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            input_ids[i, width - len(s) :] = torch.tensor(s)
            mask[i, width - len(s) :] = 1
        input_ids, mask = input_ids.to(dev), mask.to(dev)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self._config)
        logits = self._forward(input_ids, mask, position_ids, cache)
        return cache, logits, mask, mask.sum(-1)

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
        self, input_ids: torch.Tensor, mask: torch.Tensor, position_ids: torch.Tensor, cache: Any
    ) -> torch.Tensor:
        out = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=position_ids,
            use_cache=True,
            logits_to_keep=1,  # never materialise prompt-length x vocabulary logits
            **{self._cache_kw: cache},
        )
        return out.logits[:, -1, :].float()

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


# ---------------------------------------------------------------------- pure helpers


def choose_tokens(
    logits: torch.Tensor, params: SamplingParams, generators: list[torch.Generator]
) -> torch.Tensor:
    """Greedy argmax, or Gumbel-max over temperature/top-k/top-p filtered logits.

    Row r's noise comes only from generators[r] (one uniform per vocabulary entry per step), so a
    row's draw does not depend on the other rows.
    """
    if not params.do_sample:
        return logits.argmax(dim=-1)
    scores = filter_logits(logits / params.temperature, params.top_k, params.top_p)
    noise = torch.empty_like(scores, dtype=torch.float32)
    for row, g in zip(noise, generators, strict=True):
        row.uniform_(generator=g)
    noise.log_().neg_().log_().neg_()  # Gumbel(0, 1); u = 0 gives -inf: never chosen, no NaN
    return (scores + noise).argmax(dim=-1)


def filter_logits(scores: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Top-k then top-p (nucleus) filtering, as transformers orders them; removed -> -inf.

    Top-p keeps the smallest set of most likely tokens whose mass reaches top_p (at least one).
    """
    vocab = scores.shape[-1]
    if not 0 < top_k < vocab and top_p >= 1.0:
        return scores
    if 0 < top_k < vocab:
        # only the k best can survive: sort those, not the whole vocabulary
        values, order = torch.topk(scores, top_k, dim=-1)
    else:
        values, order = torch.sort(scores, dim=-1, descending=True)
    keep = torch.ones_like(values, dtype=torch.bool)
    if top_p < 1.0:
        probs = torch.softmax(values, dim=-1)  # renormalised over the top-k, as transformers does
        keep = (probs.cumsum(dim=-1) - probs) < top_p  # mass strictly before a token < top_p
    kept = values.masked_fill(~keep, float("-inf"))
    return torch.full_like(scores, float("-inf")).scatter(-1, order, kept)


def plan_batches(
    lengths: list[int],
    samples: list[int],
    max_new_tokens: int,
    max_batch_tokens: int,
    max_batch_size: int,
) -> list[list[_Item]]:
    """Pack (prompt, samples) items into batches under a token budget, longest prompts first.

    A batch costs (its longest prompt + max_new_tokens) x its sequences (left padding makes every
    row that wide). A prompt whose samples do not fit one batch is split across several: sample
    seeds do not depend on the batch, so splitting changes nothing but speed.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[_Item]] = []
    current: list[_Item] = []
    rows, width = 0, 0
    for p in order:
        todo = list(samples)
        while todo:
            w = max(width, lengths[p] + max_new_tokens)
            room = min(max_batch_size - rows, max_batch_tokens // w - rows)
            if room <= 0 and current:
                batches.append(current)
                current, rows, width = [], 0, 0
                continue
            take = max(room, 1)  # a single sequence over budget still runs, alone
            current.append(_Item(p, todo[:take]))
            todo = todo[take:]
            rows += len(current[-1].samples)
            width = w
    if current:
        batches.append(current)
    return batches


def _prune(
    keep: list[int], rows: list[_Row], cache: Any, mask: torch.Tensor, positions: torch.Tensor
) -> tuple[list[_Row], torch.Tensor, torch.Tensor]:
    """Keep only the rows still decoding, in the cache and in the per-row tensors."""
    sel = torch.tensor(keep)
    cache.batch_select_indices(sel)
    return [rows[i] for i in keep], mask[sel], positions[sel]


class _Speed:
    """Generated tokens per second since the call began, for the progress bar."""

    def __init__(self) -> None:
        self.start, self.tokens = time.perf_counter(), 0

    def add(self, generations: Any) -> str:
        self.tokens += sum(g.n_tokens for g in generations)
        return f"{self.tokens / max(time.perf_counter() - self.start, 1e-9):.0f} tok/s"


def _copy(g: Generation) -> Generation:
    return Generation(
        g.text, list(g.token_ids), list(g.logprobs), g.finish_reason, g.prompt_tokens, dict(g.meta)
    )

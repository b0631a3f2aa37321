"""The transformers backend's pure batching rules: which prompts share a prefix (prefilled once),
how they are packed into batches under a token budget and a padding limit, how a batch splits
on out-of-memory, and how the next tokens are chosen (top-k, top-p, seeded per sample).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import torch

from rmlib.generation.base import SamplingParams

# Padding a batch's prefill may add, as a fraction of its prompt tokens (HFBackend max_padding
# None). Only gross padding is worth a new batch, on a GPU and on a CPU alike: decode steps dominate
# and a small batch decodes far slower per token. Measured here (SmolLM2-135M, 2 cores): at 0.25
# one pair's reflection prompts (critiques of unequal length after a shared prefix) made a batch
# of their own, 3 rows, and stage 2 decoded at ~20 tok/s against ~85 tok/s for stage 1's full
# batches; at 1.0 batches hold ~6 pairs.
MAX_PADDING = 1.0


# Most prompts in one shared-prefix group (bounds the grouping search; larger sets split).
MAX_GROUP = 256


# Prompts of one call sharing at least this many leading tokens prefill them once (0: never).
# Exact whatever the value; small values only add a second, short prefill pass.
MIN_SHARED_PREFIX = 32


@dataclass(frozen=True)
class PrefixGroup:
    """Prompts (indices) whose first `prefix` tokens are identical; prefix 0 = shares nothing."""

    members: tuple[int, ...]
    prefix: int


@dataclass
class BatchItem:
    """One prompt's share of a batch: which samples of it to generate.

    group: its PrefixGroup's index (-1: none); prefix: leading tokens it shares with another
    prompt of the same batch, prefilled once for them all (0: prefilled alone).
    """

    prompt: int
    samples: list[int]
    group: int = -1
    prefix: int = 0


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


def shared_prefix_groups(ids: list[list[int]], min_shared_prefix: int) -> list[PrefixGroup]:
    """Partition prompts (token ids) into groups that prefill a common prefix once.

    Prompts sorted by their token ids put every set with a common prefix next to each other; the
    partition of that order into runs maximising the prefill tokens saved, sum over groups of
    (members - 1) x common prefix, is found by dynamic programming, counting only runs whose
    common prefix has at least `min_shared_prefix` tokens. So one pair's reflection prompts
    (long shared prefix) group together rather than with every prompt that merely starts with
    the same instructions. Every prompt is in exactly one group; a lone prompt has prefix 0.
    min_shared_prefix 0 disables sharing (every prompt alone).
    """
    n = len(ids)
    if min_shared_prefix <= 0 or n < 2:
        return [PrefixGroup((i,), 0) for i in range(n)]
    order = sorted(range(n), key=lambda i: ids[i])
    lcp = [_common_prefix(ids[order[k]], ids[order[k + 1]]) for k in range(n - 1)]
    # best[j]: most tokens saved over order[:j]; cut[j]: where its last run starts
    best, cut = [0] * (n + 1), [0] * (n + 1)
    for j in range(1, n + 1):
        best[j], cut[j] = best[j - 1], j - 1  # order[j-1] alone
        shared = math.inf
        # run order[i:j], common prefix min(lcp[i:j-1]); at most MAX_GROUP long (keeps it O(n))
        for i in range(j - 2, max(-1, j - 1 - MAX_GROUP), -1):
            shared = min(shared, lcp[i])
            if shared < min_shared_prefix:
                break
            if best[i] + (j - 1 - i) * shared > best[j]:
                best[j], cut[j] = best[i] + (j - 1 - i) * int(shared), i
    groups: list[PrefixGroup] = []
    j = n
    while j > 0:
        i = cut[j]
        members = tuple(sorted(order[i:j]))
        prefix = min(lcp[i : j - 1]) if j - i > 1 else 0
        groups.append(PrefixGroup(members, prefix))
        j = i
    return sorted(groups, key=lambda g: g.members[0])


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def plan_batches(
    lengths: list[int],
    samples: list[int],
    max_new_tokens: int,
    max_batch_tokens: int,
    max_batch_size: int,
    groups: list[PrefixGroup] | None = None,
    max_padding: float = math.inf,
) -> list[list[BatchItem]]:
    """Pack (prompt, samples) items into batches under a token budget, longest prompts first.

    A batch costs (its KV cache width + max_new_tokens) x its sequences: the width is its
    longest prompt (left padding makes every row that wide) or, where prompts of a PrefixGroup
    share their prefix in it, its longest prefix + its longest suffix. A group's prompts are
    placed together (groups longest first), so they land in one batch unless it overflows. A
    prompt whose samples do not fit one batch is split across several: sample seeds do not
    depend on the batch, so splitting changes nothing but speed. max_padding: a batch takes no
    further prompt that would make the positions its prefill computes exceed (1 + max_padding)
    x the prompt tokens it holds (the rest is padding); inf = the budget alone decides.
    """
    if groups is None:
        groups = [PrefixGroup((i,), 0) for i in range(len(lengths))]
    prefix_of = [g.prefix for g in groups]
    ranked = sorted(
        range(len(groups)),
        key=lambda g: (-max(lengths[m] for m in groups[g].members), groups[g].members[0]),
    )
    order = [
        (p, g) for g in ranked for p in sorted(groups[g].members, key=lambda i: (-lengths[i], i))
    ]
    batches: list[list[BatchItem]] = []
    current: list[BatchItem] = []
    rows = 0
    for p, g in order:
        todo = list(samples)
        while todo:
            trial = [*current, BatchItem(p, [], g)]
            width, positions, tokens = _batch_shape(trial, lengths, prefix_of)
            room = min(max_batch_size - rows, max_batch_tokens // (width + max_new_tokens) - rows)
            padded = positions > (1 + max_padding) * tokens
            if current and (room <= 0 or padded):
                batches.append(_set_prefixes(current, prefix_of))
                current, rows = [], 0
                continue
            take = max(room, 1)  # a single sequence over budget still runs, alone
            current.append(BatchItem(p, todo[:take], g))
            todo = todo[take:]
            rows += len(current[-1].samples)
    if current:
        batches.append(_set_prefixes(current, prefix_of))
    return batches


def split_batch(batch: list[BatchItem]) -> tuple[list[BatchItem], list[BatchItem]] | None:
    """Two halves of a batch by sequences (a prompt's samples may split); None for one sequence.

    Shared prefixes are recomputed per half (`_set_prefixes`): a prefix shared by prompts that
    land in different halves is prefilled once in each.
    """
    rows = [(it, s) for it in batch for s in it.samples]
    if len(rows) < 2:
        return None
    cut = len(rows) // 2
    halves = []
    for part in (rows[:cut], rows[cut:]):
        items: dict[int, BatchItem] = {}
        for it, s in part:
            items.setdefault(
                it.prompt, BatchItem(it.prompt, [], it.group, it.prefix)
            ).samples.append(s)
        halves.append(list(items.values()))
    for half in halves:  # a group split in two: its members share the prefix only if 2+ remain
        counts = Counter(it.group for it in half if it.group >= 0)
        for it in half:
            if counts[it.group] < 2:
                it.prefix = 0
    return halves[0], halves[1]


def _shared_in_batch(items: list[BatchItem], prefix_of: list[int]) -> set[int]:
    """Groups with two or more prompts (and a prefix) in this batch: they share their prefix."""
    counts = Counter(it.group for it in items if it.group >= 0 and prefix_of[it.group] > 0)
    return {g for g, c in counts.items() if c >= 2}


def _batch_shape(
    items: list[BatchItem], lengths: list[int], prefix_of: list[int]
) -> tuple[int, int, int]:
    """(KV cache width, positions prefill computes, prompt tokens it holds) of a batch.

    Width: the longest pass-1 row (a shared prefix, or a whole prompt) + the longest suffix.
    Positions: pass 1's rows x its width, plus pass 2's rows x the longest suffix if any.
    """
    shared = _shared_in_batch(items, prefix_of)
    units: dict[tuple[str, int], int] = {}
    tails = []
    for it in items:
        if it.group in shared:
            units[("group", it.group)] = prefix_of[it.group]
            tails.append(lengths[it.prompt] - prefix_of[it.group])
        else:
            units[("prompt", it.prompt)] = lengths[it.prompt]
            tails.append(0)
    head, tail = max(units.values()), max(tails)
    positions = len(units) * head + (len(items) * tail if tail else 0)
    return head + tail, positions, sum(units.values()) + sum(tails)


def _set_prefixes(items: list[BatchItem], prefix_of: list[int]) -> list[BatchItem]:
    shared = _shared_in_batch(items, prefix_of)
    for it in items:
        it.prefix = prefix_of[it.group] if it.group in shared else 0
    return items


def prefill_plan(
    batch: list[BatchItem], ids: list[list[int]]
) -> tuple[list[list[int]], list[int], list[list[int]]]:
    """(pass-1 rows, the pass-1 row of each item, each item's pass-2 suffix).

    Items sharing a prefix (same group, prefix > 0) get one pass-1 row, the prefix; every other
    item's pass-1 row is its whole prompt and its suffix is empty.
    """
    units: list[list[int]] = []
    unit_of: list[int] = []
    suffixes: list[list[int]] = []
    row_of_group: dict[int, int] = {}
    for it in batch:
        seq = ids[it.prompt]
        if it.prefix > 0:
            if it.group not in row_of_group:
                row_of_group[it.group] = len(units)
                units.append(seq[: it.prefix])
            unit_of.append(row_of_group[it.group])
            suffixes.append(seq[it.prefix :])
        else:
            unit_of.append(len(units))
            units.append(seq)
            suffixes.append([])
    return units, unit_of, suffixes

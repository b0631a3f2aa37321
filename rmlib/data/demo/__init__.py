"""The embedded demo data: verifiable preference pairs whose better response is known by design.

Four families (the pair's `subset`), each with kinds balanced by round-robin:

- `arithmetic`: a sum, difference or product worked in two steps; the worse response slips in
  one step, so its result is wrong.
- `constraint`: an instruction with a checkable constraint (exact word count, all capitals or
  all lowercase, a required word, a list of exactly k items); the worse response breaks it.
- `passage`: a question about a short passage; the worse answer contradicts the passage (it
  usually picks another detail of the same passage, so it looks plausible).
- `refusal`: a harmless request (some phrased with alarming-sounding words: "kill a process");
  the worse response refuses needlessly, the better one helps.

Texts are short (query and both responses about 25–100 Qwen3 tokens) so a 135M model on CPU judges
them quickly. Everything is deterministic under `seed`. Train and eval are disjoint by
construction: a query belongs to the split chosen by a hash of its text (one third to eval),
whatever the seed, and each split rejects the other's queries. Families get equal counts (the
first families one more when n does not divide evenly), and the better response sits in slot 1
for half of each family's pairs (seeded shuffle; an odd family's extra pair alternates slots
across families), so the whole set is balanced too. Pairs are interleaved family by family, so a
prefix of the list stays balanced.

Capacity: arithmetic and passage queries are practically unlimited; the refusal family has about
170 distinct train and 75 eval queries, constraint about 850 and 370; asking for more raises.

`reference_analysis(pair, style)` writes a short correct analysis explaining why the better
response is better, verdict first or evidence first (`STYLES`; rmlib.data.demo.analyses); with
`rmlib.judge.prompts.format_judgment` it makes the format warm-up SFT targets.

Modules: `loader` (`load_demo`, the split and the balance), one module per family
(`arithmetic`, `constraint`, `passage`, `refusal`), `analyses` (reference critiques), `items`.
"""

from rmlib.data.demo.analyses import STYLES, reference_analysis
from rmlib.data.demo.loader import (
    DEFAULT_N,
    FAMILIES,
    SOURCE,
    default_size,
    load_demo,
    split_of,
)

__all__ = [
    "DEFAULT_N",
    "FAMILIES",
    "SOURCE",
    "STYLES",
    "default_size",
    "load_demo",
    "reference_analysis",
    "split_of",
]

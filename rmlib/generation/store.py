"""The on-disk generation store (SQLite) and `CachedBackend`, which makes every run resumable.

One row per sample, keyed by `generation_key(identity, prompt, params, index)`: the same model,
prompt, settings and sample index are generated once, ever. `CachedBackend` looks every sample up
first, generates only the missing ones, and commits each chunk of new samples before it goes on,
so a run killed at any point keeps everything it finished and a rerun picks up from there.

SQLite in WAL mode: readers (a notebook looking at progress) never block the writer, and a
committed chunk survives the process being killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmlib import status
from rmlib.generation.base import Backend, Generation, SamplingParams, generation_key
from rmlib.writes import refuse_link

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    params TEXT NOT NULL,
    prompt_sha TEXT NOT NULL,
    sample INTEGER NOT NULL,
    generation TEXT NOT NULL,
    created REAL NOT NULL
)
"""
_QUERY_CHUNK = 500  # keys per SELECT: stays under SQLite's bound-variable limit
# Adjacent prompts sharing this many more leading characters than all prompts share (a pair's
# reflection prompts share its context and both responses) are a family, kept in one chunk.
SHARED_CHARS = 512
# Prompts are ordered for batching by length in buckets of this many characters (~15 tokens).
LENGTH_BUCKET_CHARS = 64

# The store's mark in its SQLite header (PRAGMA application_id, "RMLG"): a file holding another
# program's tables is refused before anything is written to it (journal mode, schema).
APPLICATION_ID = 0x524D4C47
_COLUMNS = ("key", "identity", "params", "prompt_sha", "sample", "generation", "created")

# (identity, prompt, params, sample index, generation): what put_many stores
StoreItem = tuple[str, str, SamplingParams, int, Generation]


class CorruptStore(ValueError):
    """The store file, or one of its rows, cannot be read; says which and what to do."""


class ForeignStore(ValueError):
    """The file given as the store is another program's SQLite database (or holds tables the
    store does not make): refused before anything is written to it; names it."""


class StoreUnavailable(OSError):
    """The store cannot be opened or written (a full disk, a read-only or missing folder, a
    lock held too long, an I/O error): names the store and says its generations are kept."""


def prompt_sha(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


class GenerationStore:
    """SQLite file of generations, one row per (identity, prompt, params, sample index)."""

    def __init__(self, path: str | Path, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # SQLite opens its files by name, following links: one planted in place of the store or
        # its -wal / -shm / -journal file would have it write elsewhere; refused in one line
        for name in ("", "-wal", "-shm", "-journal"):
            refuse_link(f"{self.path}{name}", "the generation store")
        # timeout: wait for another process's write instead of failing with "database is locked".
        # check_same_thread=False: a store is used by one thread at a time, but not always the one
        # that opened it (a GRPO reward function runs the judge in a worker thread); Python's
        # sqlite3 here is serialized (threadsafety 3), so a shared connection is safe
        with self._readable():
            self._db = sqlite3.connect(self.path, timeout=timeout, check_same_thread=False)
            try:
                mark = _own(self._db, self.path)  # before WAL mode or a table is written
            except BaseException:
                self._db.close()
                raise
            if not mark:
                self._db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: commits survive a kill
            self._db.execute(_SCHEMA)
            self._db.commit()

    @staticmethod
    def check(path: str | Path) -> None:
        """Refuse (ForeignStore, one line) a file at `path` that is not a generation store,
        reading it only (a missing or empty file is a new store): for a command that checks its
        paths before a model loads."""
        path = Path(path)
        if not path.is_file() or path.stat().st_size == 0:
            return
        try:
            db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error:
            return  # unopenable: the store's own opening says why, in one line
        try:
            _own(db, path)
        except sqlite3.DatabaseError:
            return  # not SQLite at all: CorruptStore when the store opens it
        finally:
            db.close()

    @contextlib.contextmanager
    def _readable(self) -> Iterator[None]:
        """SQLite's "file is not a database" / "disk image is malformed" as one line naming the
        file and what to do. A killed write cannot cause them (WAL rolls back what was not
        committed): a file overwritten, truncated by a full disk or copied half-way can. Its
        operational errors (a full disk, an unopenable file) are one line too (StoreUnavailable),
        which says the committed generations are kept."""
        try:
            yield
        except sqlite3.OperationalError as e:
            # a full disk, a folder it cannot write, a lock held past the timeout, an I/O error:
            # not a damaged file. What was committed stays: say so, and where
            raise StoreUnavailable(
                f"{self.path}: the generation store cannot be opened or written ({e}); the "
                "generations it holds are kept (each chunk is committed as it is made): free "
                "disk space or make its folder writable, and run again to go on from them"
            ) from None
        except sqlite3.DatabaseError as e:
            # only SQLITE_NOTADB / SQLITE_CORRUPT come as the base class itself; its other
            # subclasses (an integrity error, a closed connection) are not a damaged file
            if type(e) is not sqlite3.DatabaseError:
                raise
            raise CorruptStore(
                f"{self.path}: the generation store is unreadable ({e}); move it away, with its "
                f"-wal and -shm files (mv {self.path} {self.path}.bad), and run again: the "
                "generations it held are made again"
            ) from None

    def _generation(self, key: str, text: str) -> Generation:
        try:
            return Generation.from_json(text)
        except (ValueError, TypeError) as e:  # bad JSON, or not a Generation's fields
            raise CorruptStore(
                f"{self.path}: stored generation {key!r} is unreadable ({e}); delete that row "
                f"(sqlite3 {self.path} \"DELETE FROM generations WHERE key = '{key}'\") and run "
                "again to make it anew"
            ) from None

    def get_many(self, keys: Iterable[str]) -> dict[str, Generation]:
        """The stored generations among `keys` (absent keys are simply missing from the dict)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Generation] = {}
        for i in range(0, len(wanted), _QUERY_CHUNK):
            part = wanted[i : i + _QUERY_CHUNK]
            marks = ",".join("?" * len(part))
            sql = f"SELECT key, generation FROM generations WHERE key IN ({marks})"
            with self._readable():
                rows = self._db.execute(sql, part).fetchall()
            for key, text in rows:
                found[key] = self._generation(key, text)
        return found

    def put_many(self, items: Iterable[StoreItem]) -> int:
        """Store (identity, prompt, params, index, generation) items in one committed transaction.

        A key already present is kept as it is (the first write wins). Returns rows added.
        """
        now = time.time()
        rows = [
            (
                generation_key(ident, prompt, params, index),
                ident,
                params.key(),
                prompt_sha(prompt),
                index,
                gen.to_json(),
                now,
            )
            for ident, prompt, params, index, gen in items
        ]
        with self._readable(), self._db:  # the transaction commits on success, rolls back on error
            before = self._db.total_changes
            self._db.executemany(
                "INSERT OR IGNORE INTO generations VALUES (?, ?, ?, ?, ?, ?, ?)", rows
            )
            return self._db.total_changes - before

    def __len__(self) -> int:
        return self.count()

    def count(self, identity: str | None = None) -> int:
        """Rows stored, for one model identity or all."""
        sql, args = "SELECT COUNT(*) FROM generations", ()
        if identity is not None:
            sql, args = f"{sql} WHERE identity = ?", (identity,)
        with self._readable():
            return self._db.execute(sql, args).fetchone()[0]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> GenerationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _own(db: sqlite3.Connection, path: Path) -> bool:
    """Whether the database on `db` carries the store's mark (True) or is a new or earlier store
    without it (False: exactly the store's one table, or none); raises ForeignStore for any other
    database. Reads only (the header and the schema)."""
    app = db.execute("PRAGMA application_id").fetchone()[0]
    if app == APPLICATION_ID:
        return True
    rows = db.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
    objects = sorted(f"{kind} {name}" for kind, name in rows)
    columns = tuple(r[1] for r in db.execute("PRAGMA table_info(generations)"))
    if app == 0 and objects in ([], ["table generations"]) and columns in ((), _COLUMNS):
        return False
    held = ", ".join(objects[:4]) + (", ..." if len(objects) > 4 else "") or "no tables"
    raise ForeignStore(
        f"{path}: not an rmlib generation store (application_id {app}; it holds {held}): rmlib "
        "never writes into another program's database; give the store a new file"
    )


@dataclass
class CacheStats:
    """Samples found in the store (hits) and generated (misses), over the backend's life."""

    hits: int = 0
    misses: int = 0


class CachedBackend:
    """A Backend that answers from a GenerationStore and generates only what is missing.

    chunk_prompts: prompts per call to the wrapped backend; each chunk's samples are committed
    before the next starts, so a kill loses at most one chunk. Larger chunks batch better (the
    wrapped backend sorts by length and shares prefixes only within a call). Prompts are
    ordered by length first, one pair's reflection prompts kept together (`_batching_order`).
    progress: a bar of prompts done (prompts/s), with hits, misses and generated tokens/s.
    """

    def __init__(
        self,
        backend: Backend,
        store: GenerationStore,
        *,
        chunk_prompts: int = 64,
        progress: bool = True,
    ) -> None:
        if chunk_prompts < 1:
            raise ValueError("chunk_prompts must be >= 1")
        self.backend = backend
        self.store = store
        self.identity = backend.identity
        self.chunk_prompts = chunk_prompts
        self.progress = progress
        self.stats = CacheStats()

    def generate(
        self, prompts: list[str], params: SamplingParams, n: int = 1, offset: int = 0
    ) -> list[list[Generation]]:
        """Samples offset … offset+n-1 of each prompt, from the store or freshly generated."""
        if n < 0 or offset < 0:
            raise ValueError("n and offset must be >= 0")
        indices = range(offset, offset + n)
        unique = list(dict.fromkeys(prompts))  # a repeated prompt is looked up and made once
        keys = {
            (p, i): generation_key(self.identity, p, params, i) for p in unique for i in indices
        }
        stored = self.store.get_many(keys.values())
        have = {pi: stored[k] for pi, k in keys.items() if k in stored}
        self.stats.hits += len(have)
        todo = _missing_runs(unique, indices, have)
        start, tokens = time.perf_counter(), 0
        with self._bar(len(unique)) as bar:
            done = len(unique) - len({p for group in todo.values() for p in group})
            bar.update(done)
            status.report("generations (prompts)", done, len(unique))
            for (lo, count), group in todo.items():
                for chunk in _chunks(_batching_order(group), self.chunk_prompts):
                    made = self.backend.generate(chunk, params, n=count, offset=lo)
                    self._save(chunk, made, params, lo, have)
                    tokens += sum(g.n_tokens for gens in made for g in gens)
                    rate = tokens / max(time.perf_counter() - start, 1e-9)
                    finished = sum(1 for p in chunk if _complete(p, indices, have))
                    done += finished
                    bar.update(finished)
                    status.report("generations (prompts)", done, len(unique))
                    bar.set_postfix_str(
                        f"hits={self.stats.hits} new={self.stats.misses} {rate:.0f} tok/s",
                        refresh=False,
                    )
        return [[have[(p, i)] for i in indices] for p in prompts]

    def _save(
        self,
        chunk: list[str],
        made: list[list[Generation]],
        params: SamplingParams,
        lo: int,
        have: dict[tuple[str, int], Generation],
    ) -> None:
        """Commit a chunk's samples to the store, then (only then) hand them on."""
        if len(made) != len(chunk):
            raise RuntimeError(f"backend returned {len(made)} results for {len(chunk)} prompts")
        items = [
            (self.identity, p, params, lo + j, g)
            for p, gens in zip(chunk, made, strict=True)
            for j, g in enumerate(gens)
        ]
        self.store.put_many(items)
        self.stats.misses += len(items)
        for _, p, _, i, g in items:
            have[(p, i)] = g

    def _bar(self, total: int) -> Any:
        from tqdm.auto import tqdm

        return tqdm(
            total=total,
            unit="prompt",
            desc="generations",
            disable=not self.progress,
            dynamic_ncols=True,
        )


def _missing_runs(
    prompts: list[str], indices: range, have: dict[tuple[str, int], Generation]
) -> dict[tuple[int, int], list[str]]:
    """Group prompts by each contiguous run (offset, count) of their missing sample indices."""
    groups: dict[tuple[int, int], list[str]] = defaultdict(list)
    for p in prompts:
        run_start = None
        for i in [*indices, None]:  # None closes the last run
            missing = i is not None and (p, i) not in have
            if missing and run_start is None:
                run_start = i
            elif not missing and run_start is not None:
                end = i if i is not None else indices.stop
                groups[(run_start, end - run_start)].append(p)
                run_start = None
    return dict(groups)


def _complete(prompt: str, indices: range, have: dict[tuple[str, int], Generation]) -> bool:
    return all((prompt, i) in have for i in indices)


def _batching_order(prompts: list[str]) -> list[str]:
    """The prompts regrouped so each backend call gets similar lengths: less padding.

    Families (see `_families`: one pair's reflection prompts) stay together; they are stably
    sorted, longest first, by length in LENGTH_BUCKET_CHARS buckets (similar lengths keep their
    order). Order does not change what is generated (the store keys on each sample), only how
    well the wrapped backend can batch it.
    """
    families = _families(prompts)
    families.sort(key=lambda f: -(max(map(len, f)) // LENGTH_BUCKET_CHARS))
    return [p for f in families for p in f]


def _families(prompts: list[str]) -> list[list[str]]:
    """Runs of adjacent prompts sharing SHARED_CHARS more leading text than all prompts share.

    All prompts of one task share the instructions; one pair's reflection prompts (adjacent, as
    rmlib.judge.judgments asks for them) share the context and both responses besides.
    """
    header = len(os.path.commonprefix(prompts)) if prompts else 0
    families: list[list[str]] = []
    for p in prompts:
        if families and _shared_chars(families[-1][-1], p) >= header + SHARED_CHARS:
            families[-1].append(p)
        else:
            families.append([p])
    return families


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    """Chunks of at most `size` prompts, not cutting a family where that can be helped.

    A chunk whose natural end would split a family ends earlier, where the family starts if that
    is in the chunk's second half, so the backend prefills the family's shared prefix once
    (HFBackend's min_shared_prefix) rather than once per chunk.
    """
    starts, k = set(), 0
    for family in _families(items):
        starts.add(k)
        k += len(family)
    start = 0
    while start < len(items):
        end = min(start + size, len(items))
        if end < len(items) and end not in starts:
            family_start = max(s for s in starts if s < end)
            if family_start >= start + max(1, (end - start + 1) // 2):
                end = family_start
        yield items[start:end]
        start = end


def _shared_chars(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))

"""rmlib.generation.store: the SQLite store, CachedBackend, and resuming a killed run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from rmlib.generation.base import Backend, Generation, SamplingParams, generation_key
from rmlib.generation.hf import HFBackend
from rmlib.generation.models import TINY_QWEN3, load_backbone
from rmlib.generation.store import CachedBackend, CorruptStore, ForeignStore, GenerationStore

torch.set_num_threads(2)
PARAMS = SamplingParams(max_new_tokens=6, seed=11)
PROMPTS = ["first prompt", "a second, longer prompt with more words", "third", "the fourth one"]


@pytest.fixture(scope="module")
def backend():
    model, tok = load_backbone(TINY_QWEN3, precision="fp32")
    return HFBackend(model, tok, identity="tiny-fp32", progress=False)


class Recording:
    """Test double: passes calls to a real backend and records which samples were asked for."""

    def __init__(self, inner: Backend) -> None:
        self.inner, self.identity, self.calls = inner, inner.identity, []

    def generate(self, prompts, params, n=1, offset=0):
        self.calls.append((list(prompts), n, offset))
        return self.inner.generate(prompts, params, n=n, offset=offset)

    def requested(self) -> list[tuple[str, int]]:
        return [(p, i) for ps, n, o in self.calls for p in ps for i in range(o, o + n)]


def _gen(text: str) -> Generation:
    return Generation(
        text=text, token_ids=[1, 2], logprobs=[-0.5, -1.5], finish_reason="stop", prompt_tokens=7
    )


def _tokens(results: list[list[Generation]]) -> list[list[list[int]]]:
    return [[g.token_ids for g in gens] for gens in results]


def test_store_round_trip_first_write_wins_and_persists(tmp_path):
    path = tmp_path / "gen.sqlite"
    with GenerationStore(path) as store:
        assert store.put_many([("m", "p", PARAMS, 0, _gen("a")), ("m", "p", PARAMS, 1, _gen("b"))])
        assert store.put_many([("m", "p", PARAMS, 0, _gen("changed"))]) == 0  # no overwrite
        keys = [generation_key("m", "p", PARAMS, i) for i in (0, 1, 2)]
        found = store.get_many(keys)
        assert set(found) == set(keys[:2]) and found[keys[0]] == _gen("a")
    with GenerationStore(path) as store:  # reopened: still there
        assert len(store) == 2 and store.count("m") == 2 and store.count("other") == 0
        assert store.get_many(keys[1:2])[keys[1]].text == "b"
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    row = db.execute(
        "SELECT identity, params, prompt_sha, sample FROM generations WHERE key = ?", (keys[1],)
    ).fetchone()
    assert row[0] == "m" and row[1] == PARAMS.key() and len(row[2]) == 64 and row[3] == 1


def test_cached_backend_counts_hits_and_never_regenerates(tmp_path, backend):
    rec = Recording(backend)
    cached = CachedBackend(
        rec, GenerationStore(tmp_path / "g.sqlite"), chunk_prompts=3, progress=False
    )
    assert isinstance(cached, Backend) and cached.identity == "tiny-fp32"
    first = cached.generate(PROMPTS, PARAMS, n=4)
    assert (cached.stats.hits, cached.stats.misses) == (0, 16)
    assert _tokens(first) == _tokens(backend.generate(PROMPTS, PARAMS, n=4))
    assert [len(c[0]) for c in rec.calls] == [3, 1]  # chunks of 3 prompts

    again = cached.generate(PROMPTS, PARAMS, n=4)
    assert (cached.stats.hits, cached.stats.misses) == (16, 16) and _tokens(again) == _tokens(first)

    more = cached.generate(PROMPTS + [PROMPTS[0]], PARAMS, n=8)  # 4 more each; one repeated
    assert (cached.stats.hits, cached.stats.misses) == (32, 32)
    assert [m[:4] for m in _tokens(more)[:4]] == _tokens(first)
    assert _tokens(more)[4] == _tokens(more)[0]
    requested = rec.requested()
    assert len(requested) == len(set(requested)) == 32  # no sample generated twice


def test_cached_backend_fills_gaps_by_offset(tmp_path, backend):
    store = GenerationStore(tmp_path / "g.sqlite")
    CachedBackend(backend, store, progress=False).generate(PROMPTS[:1], PARAMS, n=2)  # 0, 1
    CachedBackend(backend, store, progress=False).generate(PROMPTS[:2], PARAMS, n=1, offset=3)
    rec = Recording(backend)
    cached = CachedBackend(rec, store, progress=False)
    out = cached.generate(PROMPTS[:2], PARAMS, n=6)
    # prompt 0 misses 2 and 4-5; prompt 1 misses 0-2 and 4-5: one call per (offset, count) run
    assert sorted((tuple(ps), n, o) for ps, n, o in rec.calls) == sorted(
        [((PROMPTS[0],), 1, 2), ((PROMPTS[1],), 3, 0), ((PROMPTS[0], PROMPTS[1]), 2, 4)]
    )
    assert (cached.stats.hits, cached.stats.misses) == (4, 8)
    assert _tokens(out) == _tokens(backend.generate(PROMPTS[:2], PARAMS, n=6))


_CHILD = """
import sys, time, torch
torch.set_num_threads(1)
from rmlib.generation.base import SamplingParams
from rmlib.generation.hf import HFBackend
from rmlib.generation.store import CachedBackend, CorruptStore, ForeignStore, GenerationStore
from rmlib.generation.models import TINY_QWEN3, load_backbone

class Slow:  # test double: a pause before each chunk leaves the parent time to kill us
    def __init__(self, inner):
        self.inner, self.identity = inner, inner.identity
    def generate(self, *args, **kwargs):
        time.sleep(0.5)
        return self.inner.generate(*args, **kwargs)

model, tok = load_backbone(TINY_QWEN3, precision="fp32")
backend = Slow(HFBackend(model, tok, identity="tiny-fp32", progress=False))
cached = CachedBackend(backend, GenerationStore(sys.argv[1]), chunk_prompts=1, progress=False)
cached.generate({prompts!r}, SamplingParams(max_new_tokens=6, seed=11), n=3)
print("finished")
"""


def test_killed_run_resumes_with_only_the_missing_samples(tmp_path, backend):
    path = tmp_path / "killed.sqlite"
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(_CHILD.format(prompts=PROMPTS)))
    child = subprocess.Popen(
        [sys.executable, str(script), str(path)],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None and not _rows(path):
        time.sleep(0.05)  # the first chunk is committed: kill during the pause before the next
    child.send_signal(signal.SIGKILL)
    output = child.communicate()[0].decode()
    assert child.returncode == -signal.SIGKILL, output
    total = len(PROMPTS) * 3
    with GenerationStore(path) as store:
        kept = len(store)
        assert 0 < kept < total and kept % 3 == 0, (kept, output)  # whole chunks only

        resumed = CachedBackend(backend, store, progress=False)
        results = resumed.generate(PROMPTS, PARAMS, n=3)
    assert (resumed.stats.hits, resumed.stats.misses) == (kept, total - kept)

    fresh = CachedBackend(backend, GenerationStore(tmp_path / "fresh.sqlite"), progress=False)
    uninterrupted = fresh.generate(PROMPTS, PARAMS, n=3)
    assert _tokens(results) == _tokens(uninterrupted)
    for a, b in zip(sum(results, []), sum(uninterrupted, []), strict=True):
        torch.testing.assert_close(
            torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0
        )
        assert (a.text, a.finish_reason, a.prompt_tokens) == (
            b.text,
            b.finish_reason,
            b.prompt_tokens,
        )


def _rows(path) -> int:
    """Rows committed so far by the child, read through a separate connection (0 if none yet)."""
    if not path.exists():
        return 0
    db = sqlite3.connect(path, timeout=30)
    try:
        return db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0
    finally:
        db.close()


# ---------------------------------------------------------------- a damaged store


def _filled(path, rows: int = 400) -> None:
    with GenerationStore(path) as store:
        items = [("m", f"prompt {i} " + "x" * 200, PARAMS, 0, _gen(f"t{i}")) for i in range(rows)]
        store.put_many(items)
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every row into the main file


@pytest.mark.parametrize("damage", ["overwritten", "truncated"])
def test_a_damaged_store_file_is_named_with_what_to_do(tmp_path, damage):
    path = tmp_path / "gen.sqlite"
    if damage == "overwritten":
        path.write_bytes(b"not a database, e.g. a file copied over it\n" * 100)
    else:  # cut in half, as a full disk or an interrupted copy leaves it
        _filled(path)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CorruptStore) as info, GenerationStore(path) as store:
        store.get_many([f"k{i}" for i in range(10)])
        len(store)
    message = str(info.value)
    assert message.startswith(f"{path}: the generation store is unreadable (")
    assert f"move it away, with its -wal and -shm files (mv {path} {path}.bad)" in message
    assert "\n" not in message


def test_an_unreadable_row_is_named_and_deleting_it_as_told_recovers(tmp_path):
    path = tmp_path / "gen.sqlite"
    with GenerationStore(path) as store:
        store.put_many([("m", p, PARAMS, 0, _gen(p)) for p in PROMPTS])
    bad = generation_key("m", PROMPTS[1], PARAMS, 0)
    db = sqlite3.connect(path)
    with db:
        db.execute('UPDATE generations SET generation = \'{"text": "cut\' WHERE key = ?', (bad,))
    db.close()
    keys = [generation_key("m", p, PARAMS, 0) for p in PROMPTS]
    with GenerationStore(path) as store, pytest.raises(CorruptStore) as info:
        store.get_many(keys)
    message = str(info.value)
    assert message.startswith(f"{path}: stored generation {bad!r} is unreadable (")
    command = f"DELETE FROM generations WHERE key = '{bad}'"
    assert f'delete that row (sqlite3 {path} "{command}")' in message
    db = sqlite3.connect(path)  # what the message says to do
    with db:
        db.execute(command)
    db.close()
    with GenerationStore(path) as store:
        assert sorted(store.get_many(keys)) == sorted(k for k in keys if k != bad)


# ---------------------------------------------------------------- another program's database


def _foreign(path, schema: str = "CREATE TABLE users (name TEXT)") -> bytes:
    db = sqlite3.connect(path)
    with db:
        db.execute(schema)
        db.execute("INSERT INTO users VALUES ('ada')" if "users" in schema else "SELECT 1")
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    "schema",
    [
        "CREATE TABLE users (name TEXT)",
        # the store's table name with other columns: still not the store
        "CREATE TABLE generations (id INTEGER, body TEXT)",
    ],
)
def test_another_programs_database_is_refused_before_anything_is_written(tmp_path, schema):
    """Neither the check a command makes before its model loads nor opening the store writes
    to another program's database: no WAL mode, no table, no mark; one line naming the file."""
    path = tmp_path / "app.db"
    before = _foreign(path, schema)
    for attempt in (GenerationStore.check, GenerationStore):
        with pytest.raises(ForeignStore) as info:
            attempt(path)
        message = str(info.value)
        assert (
            message.startswith(f"{path}: not an rmlib generation store (") and "\n" not in message
        )
    assert path.read_bytes() == before
    assert not (tmp_path / "app.db-wal").exists()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()


def test_a_store_made_before_the_mark_is_kept_and_marked(tmp_path):
    """A store written before the store marked its files (its one table, application_id 0) is
    the project's own: opened, its rows kept, and marked."""
    from rmlib.generation.store import _SCHEMA, APPLICATION_ID

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    with db:
        db.execute(_SCHEMA)
        db.execute("INSERT INTO generations VALUES ('k', 'm', 'p', 's', 0, '{}', 0)")
    db.close()
    GenerationStore.check(path)
    with GenerationStore(path) as store:
        assert len(store) == 1
        assert store._db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    GenerationStore.check(path)
    GenerationStore.check(tmp_path / "missing.sqlite")  # a new store: nothing to refuse

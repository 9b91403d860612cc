"""The self-play replay store: actors append finished games, the trainer samples recent positions.

Layout (zarr v3, inside the run directory)::

    RUN/replay.zarr/                    root group (paths: zero.run.rundir), attributes: schema, policy_slots
        actors/<actor_id>/              one group per actor; only that actor's writer touches it
            attributes["commit"]        {"games": G, "positions": P, "time": t, "checksums": ...,
                                        "tail_checksums": ...}: the commit record, with the CRC-32 of every
                                        complete chunk of committed rows and of the committed rows of the
                                        last, partly filled one
            positions/<column>          one row per position (POSITION_SCHEMA), chunked by `chunk_rows`
            games/<column>              one row per game (GAME_SCHEMA), chunked by `chunk_games`
        reanalysis/<worker>/            a reanalyser's fresh targets for committed positions, under the same
                                        protocol (selfplay.replay.reanalysis_store)
    RUN/replay-locks/actor-<id>.lock    flock held by the live writer (outside the zarr hierarchy)

The same layout lives on an object store when the run was started with one (zero.run.rundir's
replay-storage.url; zero.run.objectstore): then the lock is a lease object with a generation number, the
writer checks it still holds the lease before each commit and writes its generation into the commit
record, and a writer that finds a newer generation there has been fenced off and writes nothing more.

Commit protocol. Rows 0 .. P-1 and games 0 .. G-1 of an actor are committed; everything past them is
scratch that readers never look at. A writer (1) writes the new rows and games past the committed counts,
growing the arrays in whole chunks first, then (2) rewrites the actor group's attributes with the larger
counts. Step 2 is the commit: a game is visible exactly when its counts are in the commit record.

Why a SIGKILL at any moment cannot damage committed data:
  * every store write replaces one whole object (a chunk, or a `zarr.json`). zarr's LocalStore (>= 3.1.3,
    checked below) writes a new file under a temporary name and renames it over the old one, so an object is
    the old bytes or the new bytes, never a mix; object stores (S3, GCS) give the same guarantee per PUT.
  * a chunk that holds committed rows is only ever rewritten with those rows unchanged (the writer keeps the
    committed part of the last, partly filled chunk in memory and writes whole chunks), so either version of
    it holds the committed rows intact.
  * growing an array only rewrites its `zarr.json` with a larger shape; committed rows lie below it.
  * the commit record is one `zarr.json` replaced atomically, written last.
A killed writer leaves at most scratch rows past the commit and `*.partial` temporary files; a restarted
writer for the same actor reads its commit record, deletes its own leftovers and overwrites the scratch.
(Rename without fsync survives the death of the process, which is the failure this guards against; a power
cut may lose the last commits, but the store stays readable.)

Readers only ever read below the committed counts, so they may read while actors write: a chunk being
replaced is read as its old or new version, both of which agree on the committed rows.

Intact. Writer (on opening an actor), reader (on each refresh, for what was committed since) and
`replay check` (everything, every chunk decoded) hold an actor's group to one definition, `_intact_problems`:
the commit record agrees with every column's length and shape, every committed chunk exists (the writer
stores chunks of fill values too), the game table tiles the committed rows, the tables' own metadata is
readable and the record's next seed index lies above every committed game's; and for `replay check`, every
complete chunk of committed rows holds the checksum the record keeps for it (a chunk never changes once
complete, so its checksum is written once, with the commit that completes it; a valid chunk copied over
another decodes, and only the checksum tells), and the committed rows of each last, partly filled chunk the
one the record keeps for them (written anew with each commit): every committed byte is covered. A group that is not intact is refused with the file named,
never written to or trained on. Writers and readers look only at what they read, so a command that writes to
a store or trains on it first checks all of it as `replay check` does (`refuse_damaged_store`): damage in the
oldest chunks, outside the training window, is refused too.

Order across actors ("newest"). Each game carries the wall-clock time of its commit. The reader orders all
committed games by (commit time, actor, game index) and the newest `window` positions are the positions of
the newest games in that order (the oldest game in the window contributes its last positions). With actors
on several machines this relies on their clocks agreeing to well within the time a window takes to fill.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zarr
import zarr.api.asynchronous
import zarr.errors
from zarr.core.sync import sync as _run  # runs a coroutine on zarr's own event loop

from selfplay.replay.records import (
    GAME_FIELDS,
    POLICY_SLOTS,
    POSITION_FIELDS,
    STRING,
    GameRecord,
    PositionRows,
)
from zero.run.config import naming_write_errors
from zero.run.objectstore import LeaseError, ObjectPath
from zero.run.rundir import REPLAY_STORE, RunDir, RunDirError

# v2: games record their seed_index. v3: every chunk is stored, even one of fill values only, so that a
# missing chunk of committed rows is damage (zarr would read it back as fill values without a word).
SCHEMA = "checkers-zero replay v3"
ACTOR_BITS = 40  # game_id = actor_id << ACTOR_BITS | index of the game within the actor
MAX_ACTOR_ID = (1 << (63 - ACTOR_BITS)) - 1
# Games copied from another run (`loop --from RUN --take-replay`, train.shipping.lineage) are written as this actor:
# no self-play actor has its id, so the copies share neither a writer nor a seed stream with one.
COPIED_GAMES_ACTOR_ID = MAX_ACTOR_ID

# The store's columns: every field of the records (selfplay.replay.records), and what the store adds.
POSITION_SCHEMA: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
    **POSITION_FIELDS,
    "result": (np.dtype(np.int8), ()),  # +1 the side to move went on to win, -1 lost, 0 draw
    "game_id": (np.dtype(np.int64), ()),
    "actor_id": (np.dtype(np.int32), ()),
    "model_version": (np.dtype(np.int64), ()),
    "seed": (np.dtype(np.int64), ()),
}
GAME_SCHEMA: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
    "game_id": (np.dtype(np.int64), ()),
    **GAME_FIELDS,
    "first_row": (np.dtype(np.int64), ()),  # index of the game's first position in the actor's rows
    "commit_time": (np.dtype(np.float64), ()),  # time.time() of the commit that made the game visible
}
# A reanalyser's fresh target of a committed position, one row per entry (selfplay.replay.reanalysis_store
# writes and reads them; `check_store` checks them with the actors' groups).
REANALYSIS_GROUP = "reanalysis"
TARGET_SCHEMA: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
    "actor_id": (np.dtype(np.int32), ()),  # the position reanalysed: its actor's group ...
    "row": (np.dtype(np.int64), ()),  # ... and its row there
    **{name: POSITION_FIELDS[name] for name in ("policy_actions", "policy_visits", "root_value")},
    "model_version": (np.dtype(np.int64), ()),  # training step of the network that searched it
}

DEFAULT_CHUNK_ROWS = 4096
DEFAULT_CHUNK_GAMES = 256
# The commit record's key for the checksums of an actor's complete chunks (see table_problems).
CHECKSUMS = "checksums"
# ... and for those of the committed rows of each column's last, partly filled chunk ({table: {column: CRC}};
# none where the committed rows end on a chunk's end): the newest rows, which the trainer samples, and most
# often the whole game table, whose chunks hold many commits' games.
TAIL_CHECKSUMS = "tail_checksums"


class ReplayError(ValueError):
    """A record the store refuses, a store that cannot be opened, or a second writer for one actor."""


class ReplayDamage(ReplayError):
    """A file of the store that cannot be read as this code wrote it (garbage metadata, a truncated chunk,
    a damaged commit record). Its message names the file; a restarted process would meet it again, so the
    loop's roles stop for good on it instead of restarting."""


# What zarr and its codecs raise for bytes that are not what was written (json, metadata validation,
# zstd): ValueError, KeyError, TypeError, AttributeError and RuntimeError. OSError is not among them: a
# full disk or a missing permission is no damage of the store and is reported as itself.
_DAMAGE_ERRORS = (ValueError, KeyError, TypeError, AttributeError, RuntimeError)

def _actor_dir(path: Path) -> Path | None:
    """The actor folder (.../actors/<id>) a path of the store lies in, if it lies in one."""
    for parent in (path, *path.parents):
        if parent.parent.name == "actors":
            return parent
    return None


def _damage(file: Path, what: str, exc: BaseException | None = None) -> ReplayDamage:
    """One error naming the damaged file and how to go on."""
    reason = f" ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})" if exc else ""
    actor = _actor_dir(file)
    local = isinstance(file, Path)
    run = next((parent.parent for parent in file.parents if parent.name == REPLAY_STORE and local), "RUN")
    way_on = (f"; to go on without that actor's games, move its {'folder' if local else 'objects'} aside "
              f"({'mv' if local else 'rename the prefix'} {actor} {actor}.damaged)" if actor else "")
    return ReplayDamage(f"{file}: {what}{reason}. The replay store is damaged: `checkers-zero replay check "
                        f"--run {run}` lists every damaged file{way_on}")


def _zarr(path: Path | ObjectPath):
    """What zarr opens a node of the store at `path` through."""
    return path.zarr_store() if isinstance(path, ObjectPath) else path


def _metadata_problem(meta: Path, node_type: str | None = None) -> str | None:
    """What is wrong with a zarr.json as zarr v3 metadata (of a `node_type` node, when given); None if nothing."""
    try:
        node = json.loads(meta.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        return f"unreadable zarr metadata ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    kinds = (node_type,) if node_type else ("group", "array")
    if not isinstance(node, dict) or node.get("zarr_format") != 3 or node.get("node_type") not in kinds:
        return f"not the zarr v3 {' or '.join(kinds)} metadata the writer writes"
    return None


def _bad_metadata_file(path: Path) -> Path | None:
    """The first zarr.json at or below `path` that is not zarr v3 metadata (None when all of them are)."""
    # Shallowest first: a damaged parent is what stops its children from opening.
    for meta in sorted(path.rglob("zarr.json"), key=lambda m: (len(m.parts), m)) if path.is_dir() else []:
        if _metadata_problem(meta):
            return meta
    return None


@contextlib.contextmanager
def _metadata_of(path: Path):
    """Turns a failure to read the zarr metadata at or below `path` into one ReplayDamage naming the file."""
    try:
        yield
    except ReplayError:
        raise
    except _DAMAGE_ERRORS as exc:
        raise _damage(_bad_metadata_file(path) or path / "zarr.json", "unreadable zarr metadata", exc) from None


def _array_dir(array: zarr.Array) -> Path | ObjectPath:
    store = array.store_path.store
    if isinstance(store, zarr.storage.LocalStore):
        return Path(str(store.root)) / array.store_path.path
    return ObjectPath.of_zarr(store, array.store_path.path)


def _chunk_file(array: zarr.Array, chunk: int) -> Path:
    return _array_dir(array) / array.metadata.encode_chunk_key((chunk,) + (0,) * (array.ndim - 1))


def _unreadable_chunk(arrays: dict[str, zarr.Array], lo: int, hi: int) -> tuple[Path, Exception] | None:
    """The first chunk holding rows lo .. hi-1 of these arrays that cannot be read, with its error."""
    for array in arrays.values():
        rows = array.chunks[0]
        for chunk in range(lo // rows, (hi - 1) // rows + 1):
            try:
                array[chunk * rows:min((chunk + 1) * rows, array.shape[0])]
            except _DAMAGE_ERRORS as exc:
                return _chunk_file(array, chunk), exc
    return None


def _missing_chunks(array: zarr.Array, lo: int, hi: int) -> list[int]:
    """The chunks holding rows lo .. hi-1 that are not in the store."""
    rows = array.chunks[0]
    chunks = list(range(lo // rows, (hi - 1) // rows + 1)) if hi > lo else []
    store, prefix = array.store_path.store, array.store_path.path
    keys = ["/".join(filter(None, (prefix, array.metadata.encode_chunk_key((c,) + (0,) * (array.ndim - 1)))))
            for c in chunks]
    found = _run(_gather([store.exists(key) for key in keys]))
    return [c for c, there in zip(chunks, found) if not there]


# A commit record written before the checksums of the last, partly filled chunks (TAIL_CHECKSUMS).
NO_TAIL_CHECKSUMS = object()


def chunk_checksum(rows: np.ndarray) -> int:
    """The CRC-32 of a chunk's rows as values (strings joined by NUL), whatever codec stored them."""
    if rows.dtype.kind in "OUT":
        return zlib.crc32("\0".join(str(value) for value in rows.ravel()).encode())
    return zlib.crc32(np.ascontiguousarray(rows).tobytes())


def _checksum_problems(array: zarr.Array, where: Path, sums, committed: int, decode: bool,
                       tail=NO_TAIL_CHECKSUMS) -> list[tuple[Path, str]]:
    """What is wrong with a column's checksums in its writer's commit record (`sums`: one per complete chunk of
    committed rows, in order; None for a record written before them; `tail`: that of the committed rows of
    the last, partly filled chunk, NO_TAIL_CHECKSUMS for a record written before those), and with decode,
    with its chunks against them. A chunk copied over another, or two swapped, decodes: only its checksum
    tells."""
    rows = array.chunks[0]
    record = _array_dir(array).parent.parent / "zarr.json"  # the table's group's: its writer's commit record
    partial = committed % rows and tail is not NO_TAIL_CHECKSUMS
    if (sums is not None and (not isinstance(sums, list) or len(sums) > committed // rows
                              or not all(type(value) is int for value in sums))) \
            or (partial and type(tail) is not int):
        return [(record, f"the commit record's checksums of {where.parent.name} are damaged")]
    if not decode:
        return []
    damaged = "committed rows are not the ones written: their checksum differs from the commit record's (a " \
              "chunk copied or moved from elsewhere)"
    problems = [(_chunk_file(array, k), damaged) for k, expected in enumerate(sums or [])
                if chunk_checksum(array[k * rows:(k + 1) * rows]) != expected]
    if partial and chunk_checksum(array[committed // rows * rows:committed]) != tail:
        problems.append((_chunk_file(array, committed // rows), damaged))
    return problems


def table_problems(base: Path, schema: dict, arrays: dict[str, zarr.Array], committed: int, done: int,
                   decode: bool = False, sums: dict | None = None, tails=NO_TAIL_CHECKSUMS
                   ) -> tuple[list[tuple[Path, str]], bool]:
    """What is wrong with one table of columns that grow together (`arrays`, in folder `base`), as (file,
    what) pairs, and whether its committed rows can be read: every column has the schema's dtype and row
    shape, one chunk length, and at least the `committed` rows in whole chunks (a longer column holds
    scratch rows); every chunk holding rows `done` .. committed - 1 exists (the writer stores every chunk,
    so a missing one was lost, and zarr would read it back as fill values), and with `decode` every chunk
    of committed rows decodes and every complete one holds the checksum `sums` gives its column, and the
    committed rows of the last, partly filled one the checksum `tails` gives it (the commit record's, where
    the table's writer keeps them)."""
    problems: list[tuple[Path, str]] = []
    readable = True
    chunk = None
    for name, (dtype, row_shape) in schema.items():
        array = arrays.get(name)
        if array is None:
            if committed:
                problems.append((base / name, f"column missing, the commit record says {committed} rows are "
                                              f"committed"))
                readable = False
            continue
        where = _array_dir(array) / "zarr.json"
        chunk = chunk or array.chunks[0]  # the table's first column sets its chunk length
        if array.shape[1:] != row_shape or np.dtype(array.dtype) != dtype or array.chunks[0] != chunk:
            problems.append((where, f"stored as {array.dtype}{array.shape[1:]} in chunks of {array.chunks[0]}, "
                                    f"expected {dtype}{row_shape} in chunks of {chunk}"))
            readable = False
            continue
        if array.shape[0] < committed or array.shape[0] % chunk:
            problems.append((where, f"holds {array.shape[0]} rows, the commit record says {committed} are "
                                    f"committed (and the writer grows columns in whole chunks of {chunk})"))
            readable = False
            continue
        for c in _missing_chunks(array, done, committed):
            problems.append((_chunk_file(array, c), "chunk of committed rows missing"))
        found = _unreadable_chunk({name: array}, 0, committed) if decode and committed else None
        if found:
            problems.append((found[0], f"committed rows cannot be read ({type(found[1]).__name__}: {found[1]})"))
            readable = False
        elif sums is not None or tails is not NO_TAIL_CHECKSUMS:
            problems += _checksum_problems(
                array, where, None if sums is None else sums.get(name) if isinstance(sums, dict) else [None],
                committed, decode,
                tails if tails is NO_TAIL_CHECKSUMS else tails.get(name) if isinstance(tails, dict) else None)
    return problems, readable


def _table_group_problems(table: Path, committed: int) -> list[tuple[Path, str]]:
    """What is wrong with the zarr.json of a table's own group (`positions`, `games`): zarr opens the columns
    without it, so nothing else would notice it unreadable, or gone once rows were committed below it."""
    meta = table / "zarr.json"
    if not meta.exists():
        return [(meta, f"group metadata missing, with {committed} rows committed below it")] if committed else []
    problem = _metadata_problem(meta, "group")
    return [(meta, problem)] if problem else []


GAME_TABLE_COLUMNS = ("game_id", "first_row", "length", "commit_time", "seed_index")


def _intact_problems(base: Path, actor_id: int, games: tuple[dict[str, zarr.Array], int, int],
                     positions: tuple[dict[str, zarr.Array], int, int], next_seed_index: int,
                     decode: bool = False, sums: dict | None = None, tails=NO_TAIL_CHECKSUMS
                     ) -> tuple[list[tuple[Path, str]], dict[str, np.ndarray]]:
    """What is wrong with an actor's group, as (file, what) pairs: THE definition of intact that the writer
    (on opening), the reader (on each refresh, for what was committed since) and `replay check` (all of it,
    decode=True) share. `games` and `positions` are (that table's arrays, committed rows, rows already
    verified), `next_seed_index` the commit record's. Intact means:
      * each table's own group metadata is zarr v3 group metadata (looked at when none of its rows has been
        verified yet), and is there once rows are committed;
      * every column has the schema's dtype and row shape, one chunk length per table, and at least the
        committed rows in whole chunks (a longer column holds scratch rows);
      * every chunk holding committed rows exists (and, with decode, decodes): the writer stores every
        chunk, so a missing one was lost, and zarr would read it back as fill values;
      * with decode, every complete chunk of committed rows holds the checksum the commit record gives it
        (`sums`, the record's "checksums": {table: {column: [one per complete chunk]}}; a record written
        before them has none, and chunks past its lists are not held to one), and the committed rows of the
        last, partly filled chunk of every column the one `tails` gives them (the record's TAIL_CHECKSUMS:
        {table: {column: CRC}}; NO_TAIL_CHECKSUMS for a record written before them): so every committed
        row, the newest and the game table's included, is held to a checksum;
      * the new games are this actor's next ones in order, each with a commit time, starting where the
        one before ended and the last ending at the committed positions: a commit record counting more
        than was written shows as games of fill values here;
      * the commit record's next seed index is above the seed index of every new game: an actor goes on
        from it, and a lower one would have it play committed games again;
      * with decode, every committed position row names the game the game table puts it in.
    Also returns the new games' GAME_TABLE_COLUMNS (when the game table could be read)."""
    problems: list[tuple[Path, str]] = []
    readable = True  # missing chunks read as fill values, which the game table check below then meets
    for table_name, (arrays, committed, done), schema in (("games", games, GAME_SCHEMA),
                                                          ("positions", positions, POSITION_SCHEMA)):
        if not done:
            problems += _table_group_problems(base / table_name, committed)
        if sums is not None and not isinstance(sums, dict):
            problems.append((base / "zarr.json", "the commit record's checksums are damaged"))
            sums = None
        if tails is not NO_TAIL_CHECKSUMS and not isinstance(tails, dict):
            problems.append((base / "zarr.json", "the commit record's checksums are damaged"))
            tails = {}
        found, table_readable = table_problems(base / table_name, schema, arrays, committed, done, decode,
                                               (sums or {}).get(table_name, {}),
                                               tails if tails is NO_TAIL_CHECKSUMS else tails.get(table_name, {}))
        problems += found
        readable = readable and table_readable
    if not readable:
        return problems, {}
    (game_arrays, n_games, done_games), (position_arrays, n_positions, done_positions) = games, positions
    if n_games > done_games:
        table = _read_rows({c: game_arrays[c] for c in GAME_TABLE_COLUMNS}, done_games, n_games)
    else:
        table = {c: np.zeros(0, GAME_SCHEMA[c][0]) for c in GAME_TABLE_COLUMNS}
    ends = np.concatenate([[done_positions], table["first_row"] + table["length"]])
    if ((table["first_row"] != ends[:-1]).any() or (table["length"] < 1).any() or (table["commit_time"] <= 0).any()
            or ends[-1] != n_positions):
        problems.append((base / "zarr.json", f"the commit record ({n_games} games, {n_positions} positions) "
                                             f"disagrees with the game table: games {done_games}..{n_games - 1} "
                                             f"do not tile the committed position rows {done_positions}.."
                                             f"{n_positions - 1}"))
    if (table["game_id"] != [game_id_of(actor_id, k) for k in range(done_games, n_games)]).any():
        problems.append((base / "games" / "game_id", f"game ids are not this actor's games {done_games}.."
                                                     f"{n_games - 1} in order"))
    if len(table["seed_index"]) and table["seed_index"].max() >= next_seed_index:
        # Refused, not mended (raised above the games): the writer never leaves the record so, so something
        # else changed it, and nothing says what else it changed; a writer that mended it would also hide
        # from `replay check` what the writer had met.
        problems.append((base / "zarr.json", f"the commit record's next seed index {next_seed_index} is not above "
                                             f"the seed index {int(table['seed_index'].max())} of a committed "
                                             f"game: the actor would play committed games again"))
    if not problems and decode and n_positions:
        owner = _read_rows({"game_id": position_arrays["game_id"]}, 0, n_positions)["game_id"]
        if (owner != np.repeat(table["game_id"], table["length"])).any():
            problems.append((base / "positions" / "game_id", "position rows name other games than the game table"))
    return problems, table


def _refuse_damage(problems: list[tuple[Path, str]]) -> None:
    """The writer's and the reader's answer to a group that is not intact: the first problem, as damage."""
    if problems:
        raise _damage(*problems[0])


def game_id_of(actor_id: int, index: int) -> int:
    return (int(actor_id) << ACTOR_BITS) | int(index)


def split_game_id(game_id: int) -> tuple[int, int]:
    """(actor_id, index of the game within that actor)."""
    return int(game_id) >> ACTOR_BITS, int(game_id) & ((1 << ACTOR_BITS) - 1)


def require_atomic_local_writes() -> None:
    # LocalStore replaced files in place before zarr 3.1.3 (zarr-python PR #3412); a process killed while
    # rewriting a chunk could then leave committed rows half written. The protocol above needs whole-object
    # replacement, so refuse the older versions rather than corrupt a run.
    parts = zarr.__version__.split(".")
    try:
        version = tuple(int("".join(ch for ch in p if ch.isdigit()) or 0) for p in parts[:3])
    except ValueError:
        return
    if version < (3, 1, 3):
        raise ReplayError(f"the replay store needs zarr >= 3.1.3 (atomic LocalStore writes); found {zarr.__version__}")


async def _gather(coroutines: list) -> list:
    return await asyncio.gather(*coroutines)


def _read_rows(arrays: dict[str, zarr.Array], lo: int, hi: int) -> dict[str, np.ndarray]:
    """Rows lo .. hi-1 of every array, read concurrently; ReplayDamage naming the chunk that cannot be read."""
    names = list(arrays)
    try:
        values = _run(_gather([arrays[n].async_array.getitem(slice(lo, hi)) for n in names]))
    except _DAMAGE_ERRORS as exc:
        # The concurrent read does not say which object failed: look again, chunk by chunk.
        found = _unreadable_chunk(arrays, lo, hi)
        file, cause = found if found else (_array_dir(next(iter(arrays.values()))), exc)
        raise _damage(file, f"rows {lo}..{hi - 1} cannot be read", cause) from None
    return {n: np.asarray(v) for n, v in zip(names, values)}


async def _read_commit(group: Path) -> dict | None:
    try:
        opened = await zarr.api.asynchronous.open_group(_zarr(group), mode="r", zarr_format=3)
    except _DAMAGE_ERRORS as exc:
        raise _damage(group / "zarr.json", "unreadable zarr metadata", exc) from None
    return opened.attrs.get("commit")


async def _read_commits(groups: list[Path]) -> list[dict | None]:
    """The commit record of each actor group, read concurrently (None where there is none yet)."""
    return list(await asyncio.gather(*(_read_commit(g) for g in groups)))


def _commit_counts(commit, group_dir: Path) -> tuple[int, int, int]:
    """(games, positions, next seed index) of an actor's commit record; ReplayError naming the file when
    the record is not one this code writes."""
    try:
        counts = int(commit["games"]), int(commit["positions"]), int(commit.get("next_seed_index", 0))
        if type(commit["games"]) is not int or type(commit["positions"]) is not int or min(counts) < 0:
            raise ValueError("counts must be non-negative whole numbers")
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise _damage(group_dir / "zarr.json", f"the commit record {commit!r} is damaged ({exc}), so the actor's "
                      f"committed games cannot be told from scratch rows") from None
    return counts


def _target_count(commit, group_dir: Path) -> int:
    """The committed entries of a reanalyser's commit record; ReplayDamage naming the file when the record
    is not one this code writes."""
    try:
        count = commit["targets"]
        if type(count) is not int or count < 0:
            raise ValueError("the count must be a non-negative whole number")
    except (TypeError, KeyError, ValueError) as exc:
        raise _damage(group_dir / "zarr.json", f"the commit record {commit!r} is damaged ({exc}), so the "
                      f"reanalyser's committed entries cannot be told from scratch rows") from None
    return count


def _worker_groups(store: Path | ObjectPath) -> list[str]:
    """The reanalysers' group names in a replay store ([] before the first one wrote)."""
    base = store / REANALYSIS_GROUP
    if not (base / "zarr.json").exists():
        return []
    with _metadata_of(base), warnings.catch_warnings():
        # A reanalyser creating its group right now shows as a folder without zarr.json yet: skip it.
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy")
        return sorted(zarr.open_group(_zarr(base), mode="r", zarr_format=3).group_keys(), key=int)


def _round_up(n: int, multiple: int) -> int:
    return max(multiple, math.ceil(n / multiple) * multiple)


def _fill_value(dtype: np.dtype, row_shape: tuple[int, ...]):
    if dtype == STRING:
        return ""
    if dtype.kind == "i" and row_shape:
        return -1  # an empty policy slot
    return False if dtype.kind == "b" else 0


def _empty_column(dtype: np.dtype, row_shape: tuple[int, ...], n: int) -> np.ndarray:
    return np.full((n, *row_shape), _fill_value(dtype, row_shape), dtype=dtype)


class ChunkedColumns:
    """Arrays of one table that grow together (an actor's positions or games, a reanalyser's entries, a
    dataset's search labels: train.learner.search_labels), always written as whole chunks.

    `tail` holds, per column, the committed rows of the last partly filled chunk (rows `tail_start` ..
    committed - 1). Writing new rows writes tail + new rows padded to whole chunks: no chunk is read back,
    and a chunk holding committed rows is replaced by one holding the same committed rows.
    """

    def __init__(self, group: zarr.Group, schema: dict, chunk: int, committed: int,
                 sums: dict[str, list[int]] | None = None):
        """`sums`: the checksums of the complete chunks the commit record holds, for a table whose writer
        keeps them (None: it keeps none)."""
        self.schema = schema
        existing = {name: group[name] for name in schema if name in group}
        # Columns missing after a crash during creation get the chunking of the ones already there.
        self.chunk = next(iter(existing.values())).chunks[0] if existing else chunk
        self.arrays: dict[str, zarr.Array] = {}
        for name, (dtype, row_shape) in schema.items():
            array = existing.get(name)
            if array is None:
                array = group.create_array(
                    name, shape=(0, *row_shape), chunks=(self.chunk, *row_shape),
                    dtype=str if dtype == STRING else dtype, fill_value=_fill_value(dtype, row_shape),
                )
            self.arrays[name] = array.with_config({"write_empty_chunks": True})  # see SCHEMA
        self.tail_start = committed // self.chunk * self.chunk
        held = _read_rows(self.arrays, self.tail_start, committed) if committed > self.tail_start else {}
        self.tail = {name: held[name] if held else _empty_column(*schema[name], 0) for name in self.arrays}
        self.sums: dict[str, list[int]] | None = None
        if sums is not None:
            # A record written before checksums (or a column created since) gets those of its complete chunks
            # from the rows themselves, as they stand now.
            complete = self.tail_start // self.chunk
            self.sums = {}
            for name, array in self.arrays.items():
                have = [int(value) for value in sums.get(name, [])][:complete]
                self.sums[name] = have + [chunk_checksum(array[k * self.chunk:(k + 1) * self.chunk])
                                          for k in range(len(have), complete)]
        self._sealing: dict[str, list[int]] = {}
        self._tail_sums: dict[str, int] = {}

    def grow(self, end: int) -> list:
        """Coroutines growing (in whole chunks) the arrays shorter than `end` rows."""
        return [array.async_array.resize((_round_up(end, self.chunk), *array.shape[1:]))
                for array in self.arrays.values() if array.shape[0] < end]

    def write(self, committed: int, new: dict[str, np.ndarray]) -> list:
        """Coroutines writing `new` rows at index `committed` (after `grow`; nothing is committed by this)."""
        writes = []
        for name, array in self.arrays.items():
            dtype, row_shape = self.schema[name]
            data = np.concatenate([self.tail[name], np.asarray(new[name], dtype=dtype)])
            padded_len = _round_up(len(data), self.chunk)
            if padded_len > len(data):
                data = np.concatenate([data, _empty_column(dtype, row_shape, padded_len - len(data))])
            if self.sums is not None:  # the checksums of the chunks these rows complete, and of the rows after
                end = len(self.tail[name]) + len(new[name])
                self._sealing[name] = [chunk_checksum(data[k:k + self.chunk])
                                       for k in range(0, end - self.chunk + 1, self.chunk)]
                if end % self.chunk:
                    self._tail_sums[name] = chunk_checksum(data[end // self.chunk * self.chunk:end])
                else:
                    self._tail_sums.pop(name, None)
            writes.append(array.async_array.setitem(slice(self.tail_start, self.tail_start + padded_len), data))
        return writes

    def sealed(self) -> dict[str, list[int]]:
        """The checksums of every complete chunk once the rows last written are committed: what the commit
        record holds (see `table_problems`)."""
        return {name: self.sums[name] + self._sealing.get(name, []) for name in self.arrays}

    def sealed_tail(self) -> dict[str, int]:
        """The checksums of the committed rows of each column's last, partly filled chunk once the rows last
        written are committed (none where they end on a chunk's end): the record's TAIL_CHECKSUMS."""
        return dict(self._tail_sums)

    def put(self, committed: int, new: dict[str, np.ndarray]) -> None:
        """Grow the arrays and write `new` rows at index `committed`, waiting for both (nothing is committed
        by this): what a writer of one table does before its commit."""
        _run(_gather(self.grow(committed + len(next(iter(new.values()))))))
        _run(_gather(self.write(committed, new)))

    def advance(self, committed: int, new: dict[str, np.ndarray]) -> None:
        """After the commit of `new` at `committed`: keep the committed part of the last chunk in memory."""
        end = committed + len(next(iter(new.values())))
        start = end // self.chunk * self.chunk
        for name in self.arrays:
            data = np.concatenate([self.tail[name], np.asarray(new[name], dtype=self.schema[name][0])])
            self.tail[name] = data[start - self.tail_start:end - self.tail_start].copy()
        if self.sums is not None:
            self.sums = self.sealed()
        self._sealing = {}
        self.tail_start = start


def _open_root(path: Path) -> zarr.Group:
    """The store's root with its `actors` group, created if absent, safe when several processes race."""
    # zarr looks for a group and then creates it; when actors and the trainer start on a fresh store at
    # once, another process can create it in between and zarr refuses with ContainsGroupError. The group
    # is then there, so open it. The attributes go into the root's first zarr.json, so a reader never
    # sees the root without them.
    try:
        root = zarr.open_group(_zarr(path), mode="a", zarr_format=3,
                               attributes={"schema": SCHEMA, "policy_slots": POLICY_SLOTS})
    except zarr.errors.ContainsGroupError:
        root = zarr.open_group(_zarr(path), mode="r+", zarr_format=3)
    _check_schema(root, path)
    try:
        root.require_group("actors")
    except zarr.errors.ContainsGroupError:
        pass
    return root


def _check_schema(root: zarr.Group, path: Path) -> None:
    if root.attrs.get("schema") != SCHEMA or root.attrs.get("policy_slots") != POLICY_SLOTS:
        raise ReplayError(f"{path}: not a replay store of this version (schema {root.attrs.get('schema')!r}, "
                          f"policy_slots {root.attrs.get('policy_slots')!r}; expected {SCHEMA!r}, {POLICY_SLOTS})")


def _record_columns(record: GameRecord, actor_id: int, game_id: int) -> dict[str, np.ndarray]:
    """The position rows of one game as store columns (validated: refuses what cannot be stored faithfully)."""
    rows = record.positions
    n = len(rows)
    if n != record.length:
        raise ReplayError(f"game record has {n} position rows but length {record.length} (one row per ply)")
    for name in POSITION_FIELDS:
        column = np.asarray(getattr(rows, name))
        if len(column) != n:
            raise ReplayError(f"PositionRows.{name} has {len(column)} rows, PositionRows.ply has {n}")
    actions = np.asarray(rows.policy_actions)
    visits = np.asarray(rows.policy_visits)
    if actions.ndim != 2 or actions.shape != visits.shape:
        raise ReplayError(f"policy_actions {actions.shape} and policy_visits {visits.shape} must be [n, slots]")
    used = (actions >= 0).sum(axis=1)
    if n and used.max() > POLICY_SLOTS:
        worst = int(np.argmax(used))
        raise ReplayError(f"position at ply {int(np.asarray(rows.ply)[worst])} has {int(used[worst])} policy "
                          f"actions, more than POLICY_SLOTS = {POLICY_SLOTS}; the store does not truncate")
    width = actions.shape[1]
    if width > POLICY_SLOTS:
        # Compact each row's used slots to the front so that dropping the padding loses nothing.
        order = np.argsort(actions < 0, axis=1, kind="stable")[:, :POLICY_SLOTS]
        actions = np.take_along_axis(actions, order, axis=1)
        visits = np.take_along_axis(visits, order, axis=1)
    elif width < POLICY_SLOTS:
        actions = np.concatenate([actions, np.full((n, POLICY_SLOTS - width), -1, actions.dtype)], axis=1)
        visits = np.concatenate([visits, np.zeros((n, POLICY_SLOTS - width), visits.dtype)], axis=1)
    columns = {name: np.asarray(getattr(rows, name)) for name in POSITION_FIELDS}
    columns["policy_actions"] = actions
    columns["policy_visits"] = np.where(actions >= 0, visits, 0)
    columns["result"] = record.results_for_side_to_move()
    columns["game_id"] = np.full(n, game_id, np.int64)
    columns["actor_id"] = np.full(n, actor_id, np.int32)
    columns["model_version"] = np.full(n, record.model_version, np.int64)
    columns["seed"] = np.full(n, record.seed, np.int64)
    return columns


def _stored_value(value):
    return getattr(value, "value", value)  # an enum (zero.rules.game.Termination) is stored as its value


def _refuse_rows_without_commit(group: zarr.Group, group_dir: Path) -> None:
    # With no commit record the writer would start at row 0, over games that were committed once.
    rows = group["positions/ply"].shape[0] if "positions" in group and "ply" in group["positions"] else 0
    if rows:
        raise _damage(group_dir / "zarr.json", f"the actor's arrays hold {rows} rows but its commit record is "
                      f"missing, so committed games cannot be told from scratch rows and would be overwritten")


class StoreWriter:
    """What the store's writers share: the writer's lock, held while it is open (a context manager), and
    `close()`, which commits what is queued (`flush`) and then lets another process take its place."""

    _lock = None
    path: Path | ObjectPath  # the store
    group_dir: Path | ObjectPath  # this writer's group in it

    def _begin(self, take_lock: Callable[[], object], open_group: Callable[[zarr.Group], None]) -> None:
        """Take the writer's lock, then open its group (`open_group(root of the store)`); the lock is let go
        again when the group cannot be opened."""
        try:
            self._lock = take_lock()
        except RunDirError as exc:
            raise ReplayError(str(exc)) from None
        try:
            # zarr's failed writes (a full disk) name no file; the user needs to know which store it was.
            with _metadata_of(self.path), naming_write_errors(self.path):
                root = _open_root(self.path)
            with _metadata_of(self.group_dir), naming_write_errors(self.group_dir):
                open_group(root)
        except BaseException:
            self._release_lock()
            raise

    def flush(self) -> None:
        """Write and commit everything queued."""
        with naming_write_errors(self.group_dir):
            self._commit_pending()

    def _commit_pending(self) -> None:
        raise NotImplementedError

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def close(self) -> None:
        if self._lock is None:
            return
        try:
            self.flush()
        finally:
            self._release_lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ReplayWriter(StoreWriter):
    """Appends one actor's finished games to the run's replay store (one writer per actor id at a time).

    `append_game` gives the game its id and queues it; the queue is committed (written, then made visible)
    once it holds `commit_positions` positions or its oldest game has waited `commit_seconds` (checked on
    each append), and on `flush()` / `close()`. A commit costs a few milliseconds per column whatever its
    size, so batching several games is what makes appends cheap; a killed actor loses only the queue.
    `committed_games` / `committed_positions` say what readers can see. commit_positions=1 commits every
    game as it arrives.
    """

    def __init__(self, run_dir: str | os.PathLike, actor_id: int, *, commit_positions: int = 1024,
                 commit_seconds: float = 10.0, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                 chunk_games: int = DEFAULT_CHUNK_GAMES):
        require_atomic_local_writes()
        if not 0 <= int(actor_id) <= MAX_ACTOR_ID:
            raise ReplayError(f"actor_id must be in 0..{MAX_ACTOR_ID}, got {actor_id}")
        if commit_positions < 1 or commit_seconds < 0:
            raise ReplayError(f"need commit_positions >= 1 and commit_seconds >= 0, "
                              f"got {commit_positions}, {commit_seconds}")
        self.actor_id = int(actor_id)
        self.commit_positions = commit_positions
        self.commit_seconds = commit_seconds
        self.path = RunDir(run_dir).replay_store
        self.group_dir = self.path / "actors" / str(self.actor_id)  # this actor's group in the store
        self._begin(lambda: RunDir(run_dir).take_replay_lock(self.actor_id),
                    lambda root: self._open_actor(root, chunk_rows, chunk_games))
        self._pending: list[tuple[GameRecord, dict[str, np.ndarray]]] = []
        self._pending_positions = 0
        self._pending_since = 0.0

    def _open_actor(self, root: zarr.Group, chunk_rows: int, chunk_games: int) -> None:
        """The actor's group, commit record and columns (created on its first start)."""
        self._group = root["actors"].require_group(str(self.actor_id))
        commit = self._group.attrs.get("commit")
        if commit is None:
            _refuse_rows_without_commit(self._group, self.group_dir)
            # A new actor's record exists before its first row does: from then on, rows without a
            # record can only mean a damaged store.
            commit = {"games": 0, "positions": 0, "time": 0.0, "next_seed_index": 0}
            self._group.attrs.update({"commit": commit})
        self.committed_games, self.committed_positions, self.next_seed_index = _commit_counts(commit, self.group_dir)
        if self._lock.generation > commit.get("generation", 0):
            # Fences off a writer of an older generation that still believes it holds the lease: it finds
            # this generation in the record before its next commit.
            self._group.attrs.update({"commit": {**commit, "generation": self._lock.generation}})
        self._remove_leftovers()
        # Writing past a commit record that disagrees with the arrays would misalign or overwrite them. Checked
        # before the tables' groups are required: that would write a lost group's metadata anew.
        written = (_open_arrays(self.group_dir / "games", GAME_SCHEMA, None, self.committed_games),
                   _open_arrays(self.group_dir / "positions", POSITION_SCHEMA, None, self.committed_positions))
        _refuse_damage(_intact_problems(self.group_dir, self.actor_id, (written[0], self.committed_games, 0),
                                        (written[1], self.committed_positions, 0), self.next_seed_index,
                                        sums=commit.get(CHECKSUMS),
                                        tails=commit.get(TAIL_CHECKSUMS, NO_TAIL_CHECKSUMS))[0])
        positions, games = self._group.require_group("positions"), self._group.require_group("games")
        sums = commit.get(CHECKSUMS) if isinstance(commit.get(CHECKSUMS), dict) else {}
        self._rows = ChunkedColumns(positions, POSITION_SCHEMA, chunk_rows, self.committed_positions,
                                    sums.get("positions", {}))
        self._games = ChunkedColumns(games, GAME_SCHEMA, chunk_games, self.committed_games, sums.get("games", {}))

    def _still_the_writer(self) -> None:
        """Refuse to write on once another writer may have taken this actor over (a lease that was lost,
        or a newer generation in the commit record); an flock cannot be lost."""
        try:
            self._lock.check()
        except LeaseError as exc:
            raise ReplayError(f"replay actor {self.actor_id}: stopped writing, the writer lease is lost ({exc})") from None
        if self._lock.generation:
            stored = _run(_read_commit(self.group_dir)) or {}
            if stored.get("generation", 0) > self._lock.generation:
                raise ReplayError(f"replay actor {self.actor_id}: fenced off, a writer of generation "
                                  f"{stored['generation']} took over from this one ({self._lock.generation})")

    def _remove_leftovers(self) -> None:
        # Temporary files of writes this actor's previous process did not finish (nobody else writes here).
        # An object store has none: each put is whole or absent.
        if isinstance(self.path, ObjectPath):
            return
        for leftover in self.group_dir.rglob("*.partial"):
            leftover.unlink(missing_ok=True)

    @property
    def pending_games(self) -> int:
        return len(self._pending)

    @property
    def pending_positions(self) -> int:
        return self._pending_positions

    def append_game(self, record: GameRecord) -> int:
        """Queue a finished game (committing the queue when it is due); returns its store-wide game id."""
        if self._lock is None:
            raise ReplayError("the writer is closed")
        game_id = game_id_of(self.actor_id, self.committed_games + len(self._pending))
        columns = _record_columns(record, self.actor_id, game_id)  # refuses a bad record now, not at commit
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append((record, columns))
        self._pending_positions += len(record.positions)
        if (self._pending_positions >= self.commit_positions
                or time.monotonic() - self._pending_since >= self.commit_seconds):
            self.flush()
        return game_id

    def _commit_pending(self) -> None:
        if not self._pending:
            return
        records = [record for record, _ in self._pending]
        first_game = self.committed_games
        positions = {name: np.concatenate([columns[name] for _, columns in self._pending])
                     for name in POSITION_SCHEMA}
        lengths = np.array([len(r.positions) for r in records], np.int64)
        commit_time = time.time()
        games = {name: np.array([_stored_value(getattr(r, name)) for r in records], dtype)
                 for name, (dtype, _) in GAME_FIELDS.items()}
        games["game_id"] = np.array([game_id_of(self.actor_id, first_game + k) for k in range(len(records))])
        games["first_row"] = self.committed_positions + np.concatenate([[0], np.cumsum(lengths)[:-1]])
        games["commit_time"] = np.full(len(records), commit_time)
        next_seed_index = max(self.next_seed_index, max(r.seed_index for r in records) + 1)
        new_games = self.committed_games + len(records)
        new_positions = self.committed_positions + int(lengths.sum())
        self._still_the_writer()
        # All columns at once: each write mostly waits on its own object, so they overlap (a lot, on an
        # object store).
        _run(_gather(self._rows.grow(new_positions) + self._games.grow(new_games)))
        _run(_gather(self._rows.write(self.committed_positions, positions)
                     + self._games.write(self.committed_games, games)))
        self._still_the_writer()
        # The commit: one atomic replacement of the actor group's zarr.json (see the module doc).
        commit = {"games": new_games, "positions": new_positions, "time": commit_time,
                  "next_seed_index": next_seed_index,
                  CHECKSUMS: {"positions": self._rows.sealed(), "games": self._games.sealed()},
                  TAIL_CHECKSUMS: {"positions": self._rows.sealed_tail(), "games": self._games.sealed_tail()}}
        if self._lock.generation:
            commit["generation"] = self._lock.generation
        self._group.attrs.update({"commit": commit})
        self._rows.advance(self.committed_positions, positions)
        self._games.advance(self.committed_games, games)
        self.committed_games, self.committed_positions = new_games, new_positions
        self.next_seed_index = next_seed_index
        self._pending = []
        self._pending_positions = 0



@dataclass
class StoredGame(GameRecord):
    """One committed game as stored: its record (with PositionRows when read with positions=True), where it
    lives, and then all its stored position columns (POSITION_SCHEMA) in `rows`."""

    game_id: int = -1
    actor_id: int = -1
    index: int = -1  # game number within the actor
    first_row: int = -1
    commit_time: float = 0.0
    rows: dict[str, np.ndarray] | None = None


class _RowCache:
    """In-memory copy of one actor's committed rows lo .. hi-1, grown at the end and trimmed at the front."""

    def __init__(self):
        self.lo = 0
        self.n = 0
        self.columns: dict[str, np.ndarray] = {}

    @property
    def hi(self) -> int:
        return self.lo + self.n

    def cover(self, arrays: dict[str, zarr.Array], lo: int, hi: int) -> None:
        """Hold at least rows lo .. hi-1 (reading only the rows not held yet, when it can)."""
        if self.n == 0 or lo > self.hi:
            self.columns = _read_rows(arrays, lo, hi)
            self.lo, self.n = lo, hi - lo
            return
        if lo < self.lo:  # the window grew backwards: read only the older rows
            older = _read_rows(arrays, lo, self.lo)
            self.columns = {name: np.concatenate([older[name], c[:self.n]]) for name, c in self.columns.items()}
            self.n += self.lo - lo
            self.lo = lo
        if hi > self.hi:
            self._append(_read_rows(arrays, self.hi, hi), hi - self.hi)
        if lo - self.lo > self.n // 2:  # drop rows that left the window once they are half of what is held
            keep = slice(lo - self.lo, self.n)
            self.columns = {name: c[keep].copy() for name, c in self.columns.items()}
            self.n -= lo - self.lo
            self.lo = lo

    def _append(self, new: dict[str, np.ndarray], count: int) -> None:
        capacity = len(next(iter(self.columns.values())))
        if self.n + count > capacity:
            size = max(self.n + count, 2 * capacity)
            grown = {}
            for name, c in self.columns.items():
                g = np.empty((size, *c.shape[1:]), c.dtype)
                g[:self.n] = c[:self.n]
                grown[name] = g
            self.columns = grown
        for name, c in self.columns.items():
            c[self.n:self.n + count] = new[name]
        self.n += count

    def gather(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        index = rows - self.lo
        return {name: c[index] for name, c in self.columns.items()}


@dataclass
class _ActorState:
    actor_id: int
    games: int = 0
    positions: int = 0
    position_arrays: dict[str, zarr.Array] | None = None
    game_arrays: dict[str, zarr.Array] | None = None
    first_row: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    length: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    commit_time: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    cache: _RowCache = dataclasses.field(default_factory=lambda: _RowCache())


def _open_arrays(base: Path, schema: dict, held: dict[str, zarr.Array] | None, rows: int) -> dict[str, zarr.Array]:
    # An array handle keeps the shape it was opened with: reopen once the committed rows pass it.
    if held is not None and all(a.shape[0] >= rows for a in held.values()):
        return held
    arrays = {}
    with _metadata_of(base):
        for name in schema:
            try:
                arrays[name] = zarr.open_array(_zarr(base / name), mode="r")
            except FileNotFoundError:
                # An actor stopped while creating its columns (a kill, a full disk): `table_problems` says
                # whether that matters, which it does only once rows were committed.
                continue
    return arrays


class ReplayReader:
    """Reads a run's replay store while actors append to it; sees committed games only.

    Call `refresh()` to pick up games committed since the last refresh (and new actors). Counts, samples and
    games reflect the store as of the last refresh.

    `sample` keeps the rows of the sampled window in memory (about 440 bytes a position: 440 MB for a window
    of a million), reading from the store only rows it has not held before, so drawing a batch is a numpy
    gather and reads stay sequential.
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.path = RunDir(run_dir).replay_store
        self._actors: dict[int, _ActorState] = {}
        self._order: tuple[np.ndarray, ...] | None = None  # see _newest_first
        self.refresh()

    def refresh(self) -> None:
        """Re-read every actor's commit record; take in the games committed since the last refresh."""
        if not (self.path / "zarr.json").exists():
            return  # no actor has written yet
        with _metadata_of(self.path), warnings.catch_warnings():
            root = zarr.open_group(_zarr(self.path), mode="r", zarr_format=3)
            _check_schema(root, self.path)
            if "actors" not in root:
                return
            # An actor creating its group right now shows as a folder without zarr.json yet: zarr warns and
            # skips it, and so do we (its games show at a later refresh).
            warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy")
            names = list(root["actors"].group_keys())
        commits = _run(_read_commits([self.path / "actors" / name for name in names]))
        for name, commit in zip(names, commits):
            state = self._actors.setdefault(int(name), _ActorState(int(name)))
            base = self.path / "actors" / name
            if commit is None:  # an actor creating its group; rows without a record are damage
                with _metadata_of(base):
                    _refuse_rows_without_commit(zarr.open_group(_zarr(base), mode="r", zarr_format=3), base)
                continue
            games, positions, next_seed_index = _commit_counts(commit, base)
            if (games, positions) == (state.games, state.positions):
                continue
            state.game_arrays = _open_arrays(base / "games", GAME_SCHEMA, state.game_arrays, games)
            state.position_arrays = _open_arrays(base / "positions", POSITION_SCHEMA, state.position_arrays,
                                                 positions)
            problems, new = _intact_problems(base, state.actor_id, (state.game_arrays, games, state.games),
                                             (state.position_arrays, positions, state.positions), next_seed_index)
            _refuse_damage(problems)
            state.first_row = np.concatenate([state.first_row, new["first_row"]])
            state.length = np.concatenate([state.length, new["length"].astype(np.int64)])
            state.commit_time = np.concatenate([state.commit_time, new["commit_time"]])
            state.games, state.positions = games, positions
            self._order = None

    def actor_ids(self) -> list[int]:
        return sorted(a for a, s in self._actors.items() if s.games)

    def total_games(self) -> int:
        return sum(s.games for s in self._actors.values())

    def total_positions(self) -> int:
        return sum(s.positions for s in self._actors.values())

    def positions_committed(self) -> int:
        """All positions ever committed (never decreases: actors only append): for pacing training steps."""
        return self.total_positions()

    def _newest_first(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """All committed games, newest first: actor id, first row, length, and positions in the newest 1..k."""
        if self._order is None:
            states = [s for s in self._actors.values() if s.games]
            actor = np.concatenate([np.full(s.games, s.actor_id, np.int64) for s in states] or [np.zeros(0, int)])
            index = np.concatenate([np.arange(s.games) for s in states] or [np.zeros(0, int)])
            first = np.concatenate([s.first_row for s in states] or [np.zeros(0, int)])
            length = np.concatenate([s.length for s in states] or [np.zeros(0, int)])
            ctime = np.concatenate([s.commit_time for s in states] or [np.zeros(0)])
            # Newest first by (commit time, actor, game index), one total order every reader agrees on.
            order = np.lexsort((index, actor, ctime))[::-1]
            self._order = (actor[order], first[order], length[order], np.cumsum(length[order]))
        return self._order

    def sample(self, batch_size: int, window: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """`batch_size` positions drawn uniformly (with replacement) from the newest `window` committed
        positions across all actors (all of them when fewer are committed): POSITION_SCHEMA columns,
        `moves_left`, the plies from each position to the end of its recorded game (the position's own
        move included), derived from where the position lies in its game, and `row`, the position's index
        among its actor's rows (with `actor_id`, what names it: selfplay.replay.reanalysis_store)."""
        if window < 1 or batch_size < 1:
            raise ReplayError(f"batch_size and window must be >= 1 (got {batch_size}, {window})")
        actor, first, length, cum = self._window_games(window)
        if not len(cum):
            raise ReplayError(f"no committed positions in {self.path} to sample from")
        window = min(window, int(cum[-1]))
        # Offset u counts positions back from the newest; game g holds offsets cum[g-1] .. cum[g]-1, newest
        # position (its last row) first, so the oldest game in the window contributes its last positions.
        u = rng.integers(0, window, size=batch_size)
        g = np.searchsorted(cum, u, side="right")
        before = np.where(g > 0, cum[np.maximum(g - 1, 0)], 0)
        rows = first[g] + length[g] - 1 - (u - before)
        out = {name: np.empty((batch_size, *shape), dtype) for name, (dtype, shape) in POSITION_SCHEMA.items()}
        # Plies from each sampled position to the end of its recorded game (itself included).
        out["moves_left"] = (u - before + 1).astype(np.int32)
        out["row"] = rows
        sampled_actor = actor[g]
        for a in np.unique(sampled_actor):
            state = self._actors[int(a)]
            # Hold the actor's whole share of the window (not just this batch's rows) so the cache is stable.
            state.cache.cover(state.position_arrays, int(first[actor == a].min()), state.positions)
            pick = sampled_actor == a
            for name, column in state.cache.gather(rows[pick]).items():
                out[name][pick] = column
        return out

    def _window_games(self, window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """_newest_first cut to the newest games that hold the newest `window` positions (empty arrays
        when no position is committed)."""
        actor, first, length, cum = self._newest_first()
        if not len(cum) or cum[-1] == 0:
            return actor[:0], first[:0], length[:0], cum[:0]
        games_in = int(np.searchsorted(cum, min(window, int(cum[-1])))) + 1
        return actor[:games_in], first[:games_in], length[:games_in], cum[:games_in]

    def window_games(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """Actor id and first row of each game that holds the newest `window` positions, newest first."""
        actor, first, _, _ = self._window_games(window)
        return actor, first

    def stored_game(self, actor_id: int, first_row: int) -> StoredGame:
        """The committed game of this actor that begins at `first_row`, with its position rows."""
        state = self._actors[int(actor_id)]
        index = int(np.searchsorted(state.first_row, first_row))
        if index >= state.games or state.first_row[index] != first_row:
            raise ReplayError(f"replay actor {actor_id} has no committed game beginning at row {first_row}")
        return next(self._actor_games(int(actor_id), index, True, 1))

    def newest_games(self, window: int) -> list[StoredGame]:
        """The newest committed games that hold the newest `window` positions (the games `sample` draws
        from), with their position rows, oldest first in the order `sample` uses."""
        actor, first, _, _ = self._window_games(window)
        wanted = set(zip(actor.tolist(), first.tolist()))
        found = []
        for actor_id in sorted({a for a, _ in wanted}):
            state = self._actors[actor_id]
            # An actor's newest games are the last ones it committed: read from its oldest one wanted on.
            start = int(np.searchsorted(state.first_row, min(f for a, f in wanted if a == actor_id)))
            found += [g for g in self._actor_games(actor_id, start, True, 1024) if (actor_id, g.first_row) in wanted]
        return sorted(found, key=lambda g: (g.commit_time, g.actor_id, g.index))

    def iter_games(self, positions: bool = False, block: int = 1024) -> Iterator[StoredGame]:
        """Every committed game, actor by actor in game order; with their position rows if asked."""
        for actor_id in self.actor_ids():
            yield from self._actor_games(actor_id, 0, positions, block)

    def _actor_games(self, actor_id: int, first_game: int, positions: bool, block: int) -> Iterator[StoredGame]:
        """An actor's committed games from its `first_game`-th on, in game order."""
        state = self._actors[actor_id]
        for start in range(first_game, state.games, block):
            stop = min(start + block, state.games)
            cols = _read_rows(state.game_arrays, start, stop)
            rows = None
            if positions:
                lo = int(cols["first_row"][0])
                hi = int(cols["first_row"][-1] + cols["length"][-1])
                rows = _read_rows(state.position_arrays, lo, hi)
            for k in range(stop - start):
                game_rows = None
                if rows is not None:
                    r0 = int(cols["first_row"][k]) - lo
                    game_rows = {c: v[r0:r0 + int(cols["length"][k])] for c, v in rows.items()}
                stored = {name: cols[name][k].item() if cols[name].dtype != STRING else str(cols[name][k])
                          for name in GAME_FIELDS}
                position_rows = None if game_rows is None else PositionRows(
                    **{name: game_rows[name] for name in POSITION_FIELDS})
                yield StoredGame(positions=position_rows, **stored, game_id=int(cols["game_id"][k]),
                                 actor_id=actor_id, index=start + k, first_row=int(cols["first_row"][k]),
                                 commit_time=float(cols["commit_time"][k]), rows=game_rows)


@dataclass
class StoreCheck:
    """What `check_store` found: committed counts of the actors and reanalysers it could read, and every
    problem, the first also as the error a writer or reader raises on it."""

    actors: int = 0
    games: int = 0
    positions: int = 0
    reanalysers: int = 0
    targets: int = 0
    problems: list[str] = field(default_factory=list)
    first: ReplayError | None = None

    def found(self, problem: ReplayError | tuple[Path, str]) -> None:
        """Note a problem: an error raised on a file, or a (file, what) pair of `_intact_problems`."""
        if isinstance(problem, ReplayError):
            self.problems.append(str(problem))
            self.first = self.first or problem
        else:
            self.problems.append(f"{problem[0]}: {problem[1]}")
            self.first = self.first or _damage(*problem)


def check_store(run_dir: str | os.PathLike) -> StoreCheck:
    """Verify a run's replay store (`replay check`): every actor's and reanalyser's metadata and commit
    record readable, and each group intact as `_intact_problems` (actors) and `table_problems`
    (reanalysers) define it, every committed chunk decoded. Reads the whole store once; never writes."""
    path = RunDir(run_dir).replay_store
    report = StoreCheck()
    if not (path / "zarr.json").is_file():
        report.problems.append(f"{path}: no replay store")
        return report
    try:
        with _metadata_of(path), warnings.catch_warnings():
            root = zarr.open_group(_zarr(path), mode="r", zarr_format=3)
            _check_schema(root, path)
            warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy")
            names = sorted(root["actors"].group_keys(), key=int) if "actors" in root else []
        workers = _worker_groups(path)
    except ReplayError as exc:
        report.found(exc)
        return report
    for name in names:
        try:
            games, positions = _check_actor(path / "actors" / name, int(name), report)
        except ReplayError as exc:
            report.found(exc)
            continue
        report.actors += 1
        report.games += games
        report.positions += positions
    for name in workers:
        base = path / REANALYSIS_GROUP / name
        try:
            commit = _run(_read_commit(base))
            committed = 0 if commit is None else _target_count(commit, base)
            found, _ = table_problems(base, TARGET_SCHEMA, _open_arrays(base, TARGET_SCHEMA, None, committed),
                                      committed, 0, decode=True)
        except ReplayError as exc:
            report.found(exc)
            continue
        for problem in found:
            report.found(problem)
        report.reanalysers += 1
        report.targets += committed
    return report


def _check_actor(base: Path, actor_id: int, report: StoreCheck) -> tuple[int, int]:
    """Check one actor's group (what is wrong goes to `report`); its committed (games, positions)."""
    commit = _run(_read_commit(base))
    if commit is None:
        with _metadata_of(base):
            _refuse_rows_without_commit(zarr.open_group(_zarr(base), mode="r", zarr_format=3), base)
        return 0, 0
    games, positions, next_seed_index = _commit_counts(commit, base)
    found, _ = _intact_problems(base, actor_id, (_open_arrays(base / "games", GAME_SCHEMA, None, games), games, 0),
                                (_open_arrays(base / "positions", POSITION_SCHEMA, None, positions), positions, 0),
                                next_seed_index, decode=True, sums=commit.get(CHECKSUMS),
                                tails=commit.get(TAIL_CHECKSUMS, NO_TAIL_CHECKSUMS))
    for problem in found:
        report.found(problem)
    return games, positions


def refuse_damaged_store(run_dir: str | os.PathLike) -> None:
    """The first problem `check_store` finds in a run's store (none before the store exists), raised as the
    error a writer or reader raises on it. Every command that writes to a store or trains on it runs this
    before it starts, so that it refuses what `replay check` refuses: writers and readers look only at what
    they read, and damage in the oldest chunks, outside the training window, would otherwise go unnoticed."""
    # It decodes every committed chunk: 1.3 s for a store of 4,000 games (272,000 positions) on two busy cores,
    # about 5 s a million positions, once at a start.
    if (RunDir(run_dir).replay_store / "zarr.json").is_file():
        report = check_store(run_dir)
        if report.first is not None:
            raise report.first

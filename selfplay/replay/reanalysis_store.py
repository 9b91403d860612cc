"""Fresh search targets for stored positions: reanalysers write them, the trainer lays them over the rows.

Reanalyse (the idea of MuZero Reanalyze, for this store): a reanalyser (selfplay.actors.reanalyser) searches
committed positions again with the newest network and appends what it found, one entry per position: which
position (its actor and row), the search's visit shares over the legal moves, its root value and the step
of the network that searched. When the trainer samples a row, the newest entry for it replaces its policy
target and root value (`FreshTargets.apply`), so a position keeps one row however often it is reanalysed:
old games go on teaching with the targets of newer networks, and positions that self-play searched only
fast (no policy target) get one.

Layout, inside the replay store (zero.run.rundir)::

    RUN/replay.zarr/reanalysis/<worker>/    one group per reanalyser; only its writer touches it
        attributes["commit"]                {"targets": N, "time": t}: the commit record
        <column>                            one row per entry (TARGET_SCHEMA)
    RUN/replay-locks/reanalyser-<worker>.lock

The actors' commit protocol and definition of intact hold here too (selfplay.replay.replay_buffer, which holds
this schema with the actors' and checks both in `check_store`): entries past the committed count are scratch
that readers never look at, chunks are written whole, the commit record is replaced last, and a missing or
unreadable chunk of committed entries is damage, refused with its file named.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr
import zarr.errors

from selfplay.replay.records import padded_policy
from selfplay.replay.replay_buffer import (
    ACTOR_BITS,
    DEFAULT_CHUNK_ROWS,
    MAX_ACTOR_ID,
    REANALYSIS_GROUP,
    TARGET_SCHEMA,
    ReplayError,
    StoreWriter,
    ChunkedColumns,
    _damage,
    _open_arrays,
    _read_commits,
    _read_rows,
    _refuse_damage,
    require_atomic_local_writes,
    _run,
    _target_count,
    _worker_groups,
    table_problems,
)
from zero.run.objectstore import LeaseError, ObjectPath
from zero.run.rundir import RunDir

FRESH_COLUMNS = ("policy_actions", "policy_visits", "root_value")  # what an entry replaces in a row


def position_key(actor_id: np.ndarray, row: np.ndarray) -> np.ndarray:
    """One int64 naming each (actor, row) position of the store."""
    return (np.asarray(actor_id, np.int64) << ACTOR_BITS) | np.asarray(row, np.int64)


def _columns_in(group: zarr.Group) -> dict[str, zarr.Array]:
    return {name: group[name] for name in TARGET_SCHEMA if name in group}


class ReanalysisWriter(StoreWriter):
    """Appends one reanalyser's entries (one writer per worker id at a time); `append` queues, and the
    queue is committed once it holds `commit_targets` entries, and on `flush()` / `close()`."""

    def __init__(self, run_dir: str | os.PathLike, worker: int, *, commit_targets: int = 1024,
                 chunk_rows: int = DEFAULT_CHUNK_ROWS):
        require_atomic_local_writes()
        if not 0 <= int(worker) <= MAX_ACTOR_ID:
            raise ReplayError(f"a reanalyser's id must be in 0..{MAX_ACTOR_ID}, got {worker}")
        self.worker = int(worker)
        self.commit_targets = max(1, int(commit_targets))
        run = RunDir(run_dir)
        self.path = run.replay_store
        self.group_dir = self.path / REANALYSIS_GROUP / str(self.worker)
        self._begin(lambda: run.take_reanalysis_lock(self.worker), lambda root: self._open(root, chunk_rows))
        self._pending: list[dict[str, np.ndarray]] = []

    def _open(self, root: zarr.Group, chunk_rows: int) -> None:
        try:
            parent = root.require_group(REANALYSIS_GROUP)
        except zarr.errors.ContainsGroupError:  # another reanalyser created it in between
            parent = root[REANALYSIS_GROUP]
        self._group = parent.require_group(str(self.worker))
        commit = self._group.attrs.get("commit")
        if commit is None:
            written = _columns_in(self._group)
            if written and next(iter(written.values())).shape[0]:
                raise _damage(self.group_dir / "zarr.json", "the reanalyser's columns hold rows but its commit "
                              "record is missing, so committed entries cannot be told from scratch rows")
            self._group.attrs.update({"commit": {"targets": 0, "time": 0.0}})
            commit = self._group.attrs["commit"]
        self.committed = _target_count(commit, self.group_dir)
        if not isinstance(self.path, ObjectPath):  # leftovers of this worker's previous process
            for leftover in Path(self.group_dir).rglob("*.partial"):
                leftover.unlink(missing_ok=True)
        _refuse_damage(table_problems(self.group_dir, TARGET_SCHEMA, _columns_in(self._group), self.committed, 0)[0])
        self._columns = ChunkedColumns(self._group, TARGET_SCHEMA, chunk_rows, self.committed)

    def append(self, actor_id: int, row: int, actions: np.ndarray, shares: np.ndarray, root_value: float,
               model_version: int) -> None:
        """Queue the fresh target of one position: its visit shares per action (at most POLICY_SLOTS)."""
        if self._lock is None:
            raise ReplayError("the reanalysis writer is closed")
        padded_actions, padded_shares = padded_policy(actions, shares)
        self._pending.append({"actor_id": actor_id, "row": row, "policy_actions": padded_actions,
                              "policy_visits": padded_shares, "root_value": root_value,
                              "model_version": model_version})
        if len(self._pending) >= self.commit_targets:
            self.flush()

    def _commit_pending(self) -> None:
        if not self._pending:
            return
        new = {name: np.array([entry[name] for entry in self._pending], dtype)
               for name, (dtype, _) in TARGET_SCHEMA.items()}
        end = self.committed + len(self._pending)
        self._columns.put(self.committed, new)
        try:
            self._lock.check()
        except LeaseError as exc:
            raise ReplayError(f"reanalyser {self.worker}: stopped writing, the writer lease is lost ({exc})") from None
        self._group.attrs.update({"commit": {"targets": end, "time": time.time()}})  # the commit
        self._columns.advance(self.committed, new)
        self.committed = end
        self._pending = []



@dataclass
class _WorkerState:
    done: int = 0  # entries taken in
    arrays: dict[str, zarr.Array] | None = None


class FreshTargets:
    """The newest reanalysed target of each position (the highest network step; the later entry among
    equals), taken in from every reanalyser's committed entries at each `refresh()`."""

    def __init__(self, run_dir: str | os.PathLike):
        self.path = RunDir(run_dir).replay_store
        self._workers: dict[str, _WorkerState] = {}
        self.keys = np.zeros(0, np.int64)  # sorted, one per position
        self.columns = {name: np.zeros((0, *shape), dtype) for name, (dtype, shape) in TARGET_SCHEMA.items()}
        self.refresh()

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def entries_committed(self) -> int:
        """Every entry committed so far, a position reanalysed twice counted twice (never decreases)."""
        return sum(state.done for state in self._workers.values())

    def refresh(self) -> None:
        names = _worker_groups(self.path)
        bases = [self.path / REANALYSIS_GROUP / name for name in names]
        new = []
        for name, base, commit in zip(names, bases, _run(_read_commits(bases))):
            if commit is None:
                continue
            state = self._workers.setdefault(name, _WorkerState())
            committed = _target_count(commit, base)
            if committed == state.done:
                continue
            state.arrays = _open_arrays(base, TARGET_SCHEMA, state.arrays, committed)
            _refuse_damage(table_problems(base, TARGET_SCHEMA, state.arrays, committed, state.done)[0])
            new.append(_read_rows(state.arrays, state.done, committed))
            state.done = committed
        if new:
            self._take_in(new)

    def _take_in(self, new: list[dict[str, np.ndarray]]) -> None:
        merged = {name: np.concatenate([self.columns[name]] + [part[name] for part in new]) for name in TARGET_SCHEMA}
        self._keep(merged, position_key(merged["actor_id"], merged["row"]))

    def _keep(self, merged: dict[str, np.ndarray], keys: np.ndarray) -> None:
        """Keep the newest entry per key (later rows of `merged` are later entries)."""
        order = np.lexsort((np.arange(len(keys)), merged["model_version"], keys))
        ordered = keys[order]
        newest = order[np.r_[ordered[1:] != ordered[:-1], True]] if len(keys) else order
        self.keys = keys[newest]
        self.columns = {name: column[newest] for name, column in merged.items()}

    def forget_outside(self, window_actors: np.ndarray, window_first_rows: np.ndarray) -> None:
        """Drop the entries of positions that have left the training window, given as the actor and first
        row of each game in it (ReplayReader.window_games), so memory follows the window."""
        if not len(self.keys):
            return
        order = np.lexsort((window_first_rows, window_actors))
        by_actor, by_first = np.asarray(window_actors, np.int64)[order], np.asarray(window_first_rows, np.int64)[order]
        lead = np.r_[True, by_actor[1:] != by_actor[:-1]] if len(by_actor) else np.zeros(0, bool)
        ids, oldest = by_actor[lead], by_first[lead]  # per actor in the window, its oldest row there
        actors = self.columns["actor_id"].astype(np.int64)
        at = np.minimum(np.searchsorted(ids, actors), max(len(ids) - 1, 0))
        known = ids[at] == actors if len(ids) else np.zeros(len(actors), bool)
        floor = np.where(known, oldest[at] if len(ids) else 0, np.iinfo(np.int64).max)
        keep = self.columns["row"] >= floor
        if not keep.all():
            self.keys = self.keys[keep]
            self.columns = {name: column[keep] for name, column in self.columns.items()}

    def apply(self, rows: dict[str, np.ndarray]) -> int:
        """Lay the fresh targets over sampled replay rows (ReplayReader.sample: `actor_id` and `row` name
        them), in place; a reanalysed row becomes a full search (a policy target). Returns how many rows
        took one."""
        if not len(self.keys) or not len(rows["row"]):
            return 0
        keys = position_key(rows["actor_id"], rows["row"])
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        hit = self.keys[at] == keys
        for name in FRESH_COLUMNS:
            rows[name][hit] = self.columns[name][at[hit]]
        rows["full_search"][hit] = True
        return int(hit.sum())

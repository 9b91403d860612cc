"""The table behind `selfplay.tree_search.evaluators.CachedEvaluator`: network answers by position in plain arrays, and
the numba kernels that read and fill it.

Why kernels: a search on the clock asks about a dozen positions a call, and the network answers them in a
few hundred microseconds. A cache in Python (a dict from each row's bytes, an array copy per row) spent
about 100 microseconds a call, a fifth of the search's step; here one kernel hashes a batch, one gathers
its hits and lists the positions to ask, and one stores the answers and fills in the misses. The search's
own selection kernel (`selfplay.tree_search.mcts.select_leaves`) recalls a leaf's answer with `recall`, so that a
position the table holds never waits in a network batch.

A position's key is a 64-bit hash of its planes: the XOR, over the planes' nonzero values, of a mixed word
of the value's index and bits (Zobrist keys, computed instead of drawn). Two different positions share a
key with probability 2^-64; key 0 marks an empty slot, so a hash of 0 is taken as 1.

The table has `buckets` buckets of WAYS slots; a key lives in bucket key % buckets. A new key takes its
bucket's slot used longest ago (an empty one first): each slot keeps the number of its last use, from a
count of uses (hits and stores) the table keeps in `clock`. With one bucket this is exactly "the least
recently used position is forgotten".

`ReferenceAnswerTable` is the plain-Python twin of the kernels, slot for slot; a test holds them equal.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
from numba import njit

from zero.net.encoding import NUM_ACTIONS

WAYS = 4  # slots a bucket: a position has this many places to live, and pushes out the oldest of them


class AnswerArrays(NamedTuple):
    """The table as plain arrays, the argument of the kernels (numba takes it as a tuple)."""

    keys: np.ndarray  # uint64 [slots]: each slot's position key, 0 for an empty slot
    last_used: np.ndarray  # int64 [slots]: each slot's last use (-1: none yet)
    clock: np.ndarray  # int64 [1]: uses so far
    logits: np.ndarray  # float32 [slots, NUM_ACTIONS]
    wdl: np.ndarray  # float32 [slots, 3]
    # float32 [slots]: the moves-left head's plies left (0 where the evaluator has no such head): a search
    # that weighs the plies left (SearchConfig.moves_left_weight) recalls them with the rest of the answer.
    plies: np.ndarray


def new_answer_arrays(capacity: int) -> AnswerArrays:
    """An empty table of at least `capacity` slots (whole buckets); `capacity` 0 gives a table that holds
    nothing, what the search's kernels get when no table is used."""
    slots = -(-capacity // WAYS) * WAYS
    return AnswerArrays(np.zeros(slots, dtype=np.uint64), np.full(slots, -1, dtype=np.int64),
                        np.zeros(1, dtype=np.int64),
                        np.zeros((slots, NUM_ACTIONS), dtype=np.float32),  # pages touched only when used
                        np.zeros((slots, 3), dtype=np.float32), np.zeros(slots, dtype=np.float32))


class AnswerTable:
    """A table and the lock its users take: the calls of a search with several in flight (and the search's
    own selection, which recalls answers) come from several threads."""

    def __init__(self, capacity: int):
        self.arrays = new_answer_arrays(capacity)
        self.lock = threading.Lock()
        self.hits = 0  # answers recalled, by the evaluator and by a search's selection
        self.misses = 0  # positions asked of the wrapped evaluator

_SPLIT1 = np.uint64(0xBF58476D1CE4E5B9)
_SPLIT2 = np.uint64(0x94D049BB133111EB)


@njit(cache=True, inline="always")
def _mix(x):
    """splitmix64's finalizer: every input bit reaches every output bit."""
    x = (x ^ (x >> np.uint64(30))) * _SPLIT1
    x = (x ^ (x >> np.uint64(27))) * _SPLIT2
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def row_key(words):
    """The key of one position (`words`: uint32 [W], its planes' float32 bits)."""
    h = np.uint64(0)
    for i in range(words.shape[0]):
        v = words[i]
        if v != 0:
            h ^= _mix((np.uint64(i) << np.uint64(32)) | np.uint64(v))
    return h if h != 0 else np.uint64(1)


@njit(cache=True)
def hash_rows(words, keys):
    """keys[r] = the key of row r of `words` (uint32 [N, W]: the planes' float32 bits, a row a position)."""
    for r in range(words.shape[0]):
        keys[r] = row_key(words[r])


@njit(cache=True, inline="always")
def _bucket(table_keys, key):
    """The first slot of `key`'s bucket."""
    return np.int64(key % np.uint64(table_keys.shape[0] // WAYS)) * WAYS


@njit(cache=True, inline="always")
def _find(table_keys, key):
    """The slot holding `key`, or -1."""
    base = _bucket(table_keys, key)
    for w in range(WAYS):
        if table_keys[base + w] == key:
            return base + w
    return -1


@njit(cache=True)
def recall(table, key):
    """The slot holding `key`'s answer, marked used (table.clock counts the uses), or -1 where the table
    does not hold it. The table has at least one bucket (the search asks no table of no slots)."""
    slot = _find(table.keys, key)
    if slot >= 0:
        table.clock[0] += 1
        table.last_used[slot] = table.clock[0]
    return slot


@njit(cache=True)
def gather_hits(table, keys, out_logits, out_wdl, out_plies, ask, answer_of):
    """Copy the remembered answers of the batch's positions (`keys`) into out_*; list in `ask` the first
    batch row of each position not remembered (once, however often it repeats), and in answer_of[r] the
    index in `ask` of row r's position (-1 for a hit). Returns how many positions to ask."""
    asked = 0
    for r in range(keys.shape[0]):
        slot = recall(table, keys[r])
        if slot >= 0:
            out_logits[r, :] = table.logits[slot]
            out_wdl[r, :] = table.wdl[slot]
            out_plies[r] = table.plies[slot]
            answer_of[r] = -1
            continue
        answer_of[r] = asked
        for j in range(asked):
            if keys[ask[j]] == keys[r]:
                answer_of[r] = j
                break
        if answer_of[r] == asked:
            ask[asked] = r
            asked += 1
    return asked


@njit(cache=True)
def store_answers(table, keys, ask, asked, logits, wdl, plies, answer_of, out_logits, out_wdl, out_plies):
    """Remember the answers (logits[j], wdl[j], plies[j]) of the positions asked (keys[ask[j]]), each in its bucket's
    slot used longest ago, and copy them into the batch rows that wanted them (answer_of >= 0)."""
    for j in range(asked):
        key = keys[ask[j]]
        slot = _find(table.keys, key)  # another thread's call may have stored it meanwhile
        if slot < 0:
            base = _bucket(table.keys, key)
            slot = base
            for w in range(1, WAYS):
                if table.last_used[base + w] < table.last_used[slot]:
                    slot = base + w
        table.keys[slot] = key
        table.clock[0] += 1
        table.last_used[slot] = table.clock[0]
        table.logits[slot, :] = logits[j]
        table.wdl[slot, :] = wdl[j]
        table.plies[slot] = plies[j]
    for r in range(keys.shape[0]):
        j = answer_of[r]
        if j >= 0:
            out_logits[r, :] = logits[j]
            out_wdl[r, :] = wdl[j]
            out_plies[r] = plies[j]


class ReferenceAnswerTable:
    """The kernels' plain-Python twin: the same keys, the same slots, the same answers, written out."""

    def __init__(self, buckets: int):
        self.buckets = buckets
        # slot -> (key, its last use, logits, wdl, plies left); a missing slot is empty (never used: -1)
        self.slots: dict[int, tuple[int, int, np.ndarray, np.ndarray, float]] = {}
        self.clock = 0  # uses so far

    @staticmethod
    def key(row: np.ndarray) -> int:
        mask = (1 << 64) - 1

        def mix(x: int) -> int:
            x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
            x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
            return x ^ (x >> 31)

        h = 0
        for i, value in enumerate(np.ascontiguousarray(row, dtype=np.float32).reshape(-1).view(np.uint32)):
            if value:
                h ^= mix((i << 32) | int(value))
        return h or 1

    def _bucket(self, key: int) -> range:
        base = key % self.buckets * WAYS
        return range(base, base + WAYS)

    def _find(self, key: int) -> int:
        return next((s for s in self._bucket(key) if self.slots.get(s, (0,))[0] == key), -1)

    def lookup(self, key: int) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The remembered (logits, wdl, plies left) of `key`, or None."""
        slot = self._find(key)
        if slot < 0:
            return None
        stored = self.slots[slot]
        self.clock += 1
        self.slots[slot] = (key, self.clock, *stored[2:])
        return stored[2], stored[3], stored[4]

    def store(self, key: int, logits: np.ndarray, wdl: np.ndarray, plies: float = 0.0) -> None:
        slot = self._find(key)
        if slot < 0:
            slot = min(self._bucket(key), key=lambda s: self.slots.get(s, (0, -1))[1])  # first on ties
        self.clock += 1
        self.slots[slot] = (key, self.clock, logits.copy(), wdl.copy(), float(np.float32(plies)))

    def evaluate(self, evaluator, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CachedEvaluator.evaluate over this table: hits in batch order, then each missing position asked
        once and stored in the order first met."""
        logits, wdl, _ = self.predict(evaluator, planes)
        return logits, wdl

    def predict(self, evaluator, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CachedEvaluator.predict over this table: evaluate's answer and the plies left (0 from an evaluator
        without a moves-left head; one with it is asked through its `predict`, as the cache asks it)."""
        keys = [self.key(row) for row in planes]
        answers = [self.lookup(key) for key in keys]
        ask = list(dict.fromkeys(key for key, answer in zip(keys, answers) if answer is None))
        if ask:
            rows = planes[[keys.index(key) for key in ask]]
            if getattr(evaluator, "plies_left_head", False):
                logits, wdl, plies = evaluator.predict(rows)
            else:
                (logits, wdl), plies = evaluator.evaluate(rows), np.zeros(len(rows), dtype=np.float32)
            for key, row_logits, row_wdl, row_plies in zip(ask, logits, wdl, plies):
                self.store(key, row_logits, row_wdl, row_plies)
            new = {key: (logits[j], wdl[j], float(np.float32(plies[j]))) for j, key in enumerate(ask)}
            answers = [answer if answer is not None else new[key] for key, answer in zip(keys, answers)]
        return (np.stack([a[0] for a in answers]), np.stack([a[1] for a in answers]),
                np.array([a[2] for a in answers], dtype=np.float32))

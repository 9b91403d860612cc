"""What the search asks a position's network for, and evaluators that need no network.

Any object with `evaluate(planes) -> (policy_logits, wdl)` serves: planes float32 [N, NUM_PLANES, 8, 8]
(zero.encoding), policy_logits float32 [N, NUM_ACTIONS], wdl float32 [N, 3] probabilities (win, draw,
loss) for the side to move. `zero.inference.Evaluator` is the network one; the ones here measure the
search on its own (uniform), give tests a deterministic position-dependent answer without torch (hash),
or value material (a simple yardstick that knows nothing about moves). `CachedEvaluator` remembers another
evaluator's answers by position.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Protocol

import numpy as np

from zero.encoding import NUM_ACTIONS, PLANE_OPP_KINGS, PLANE_OPP_MEN, PLANE_OWN_KINGS, PLANE_OWN_MEN


class PositionEvaluator(Protocol):
    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


class UniformEvaluator:
    """Equal logits for every action and one fixed win/draw/loss answer: search with no knowledge."""

    def __init__(self, wdl: tuple[float, float, float] = (0.0, 1.0, 0.0)):
        self.wdl = np.asarray(wdl, dtype=np.float32)
        self._logits = np.zeros((0, NUM_ACTIONS), dtype=np.float32)

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = planes.shape[0]
        if self._logits.shape[0] < n:
            self._logits = np.zeros((n, NUM_ACTIONS), dtype=np.float32)
        return self._logits[:n], np.broadcast_to(self.wdl, (n, 3))


class HashEvaluator:
    """Pseudo-random logits and win/draw/loss that depend only on the position's planes (a hash of them
    seeds a generator): deterministic whatever the batch it comes in, different for every position, no
    torch. Tests use it to compare searches exactly."""

    def __init__(self, seed: int = 0, logit_scale: float = 1.0):
        self.seed = seed
        self.logit_scale = logit_scale

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = planes.shape[0]
        logits = np.empty((n, NUM_ACTIONS), dtype=np.float32)
        wdl = np.empty((n, 3), dtype=np.float32)
        for i in range(n):
            digest = hashlib.blake2b(np.ascontiguousarray(planes[i]).tobytes(), digest_size=8).digest()
            rng = np.random.default_rng([self.seed, int.from_bytes(digest, "little")])
            logits[i] = rng.standard_normal(NUM_ACTIONS) * self.logit_scale
            wdl[i] = rng.dirichlet((1.0, 1.0, 1.0))
        return logits, wdl


class MaterialEvaluator:
    """Uniform policy; the value leans toward the side with more material (a king counts 1.5 men)."""

    def __init__(self, scale: float = 0.5):
        self.scale = scale

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = planes.shape[0]
        own = planes[:, PLANE_OWN_MEN].sum(axis=(1, 2)) + 1.5 * planes[:, PLANE_OWN_KINGS].sum(axis=(1, 2))
        opp = planes[:, PLANE_OPP_MEN].sum(axis=(1, 2)) + 1.5 * planes[:, PLANE_OPP_KINGS].sum(axis=(1, 2))
        value = np.tanh(self.scale * (own - opp))
        wdl = np.zeros((n, 3), dtype=np.float32)
        wdl[:, 0] = np.maximum(value, 0)
        wdl[:, 2] = np.maximum(-value, 0)
        wdl[:, 1] = 1 - np.abs(value)
        return np.zeros((n, NUM_ACTIONS), dtype=np.float32), wdl


class CachedEvaluator:
    """Another evaluator's answers, remembered by position (the planes' bytes: everything the network sees,
    the no-progress and repetition planes included), the least recently used forgotten past `capacity`.

    Checkers transposes often, and a game searched move after move meets again the positions of the last
    search's tree: those cost no network call. About 4 KB a position (1,024 float32 logits), so the
    default holds 64 MB. Answers are the same arrays the wrapped evaluator gave, row for row.
    """

    def __init__(self, evaluator: PositionEvaluator, capacity: int = 16_384):
        if capacity < 1:
            raise ValueError(f"a cache holds at least one position, got capacity {capacity}")
        self.evaluator = evaluator
        self.capacity = capacity
        self._answers: OrderedDict[bytes, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()  # calls may come from several threads at once
        self.hits = 0
        self.misses = 0

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = planes.shape[0]
        keys = [planes[i].tobytes() for i in range(n)]
        out_logits = np.empty((n, NUM_ACTIONS), dtype=np.float32)
        out_wdl = np.empty((n, 3), dtype=np.float32)
        first: dict[bytes, int] = {}  # each missing position's row in the network call: once, however often
        rows, missing = [], []
        with self._lock:
            for i, key in enumerate(keys):
                if key in self._answers:
                    out_logits[i], out_wdl[i] = self._answers[key]
                    self._answers.move_to_end(key)
                else:
                    missing.append(i)
                    if key not in first:
                        first[key] = len(rows)
                        rows.append(i)
        if rows:
            # Outside the lock: a search with calls in flight (SearchConfig.threads) makes them at once.
            logits, wdl = self.evaluator.evaluate(planes[rows])
            for i in missing:
                out_logits[i], out_wdl[i] = logits[first[keys[i]]], wdl[first[keys[i]]]
        with self._lock:
            for key, k in first.items():
                self._answers[key] = (np.array(logits[k]), np.array(wdl[k]))
            while len(self._answers) > self.capacity:
                self._answers.popitem(last=False)
            self.misses += len(rows)
            self.hits += n - len(rows)
        return out_logits, out_wdl

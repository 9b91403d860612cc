"""What the search asks a position's network for, and evaluators that need no network.

Any object with `evaluate(planes) -> (policy_logits, wdl)` serves: planes float32 [N, NUM_PLANES, 8, 8]
(zero.net.encoding), policy_logits float32 [N, NUM_ACTIONS], wdl float32 [N, 3] probabilities (win, draw,
loss) for the side to move. `zero.net.inference.Evaluator` is the network one; the ones here measure the
search on its own (uniform), give tests a deterministic position-dependent answer without torch (hash),
or value material (a simple yardstick that knows nothing about moves). `CachedEvaluator` remembers another
evaluator's answers by position; `SearchedValueEvaluator` keeps another's policy and values its positions by a
short search.

An evaluator with a moves-left head says so with a true `plies_left_head` attribute and also answers
`predict(planes) -> (policy_logits, wdl, plies_left)`, plies_left float32 [N]: the plies to the end of the
game from each position (the same for both sides, so never negated). The search asks for it only where it
weighs the plies left (SearchConfig.moves_left_weight > 0); everywhere else `evaluate` is all it calls, so
an evaluator needs nothing more. The network's Evaluator has the head when its network does; the hash
evaluator has a deterministic one for the tests; uniform and material have none (a search with them
leaves the moves-left utility off: plies of 0 everywhere would make it steer by the tree's shape).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Protocol

import numpy as np

from selfplay.tree_search.answer_table import AnswerTable, gather_hits, hash_rows, store_answers
from zero.net.encoding import (
    NUM_ACTIONS, PLANE_OPP_KINGS, PLANE_OPP_MEN, PLANE_OWN_KINGS, PLANE_OWN_MEN, planes_board,
)


class PositionEvaluator(Protocol):
    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


def gives_plies_left(evaluator: PositionEvaluator) -> bool:
    """Whether `evaluator` has a moves-left head (see the module doc): `predict`'s third answer is real."""
    return bool(getattr(evaluator, "plies_left_head", False))


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
    """Pseudo-random logits, win/draw/loss and plies left that depend only on the position's planes (a hash
    of them seeds a generator): deterministic whatever the batch it comes in, different for every position,
    no torch. Tests use it to compare searches exactly. Its plies left are uniform in [0, max_plies), drawn
    after the rest, so the logits and win/draw/loss are the same whether or not they are asked for."""

    plies_left_head = True

    def __init__(self, seed: int = 0, logit_scale: float = 1.0, max_plies: float = 60.0):
        self.seed = seed
        self.logit_scale = logit_scale
        self.max_plies = max_plies

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, wdl, _ = self.predict(planes)
        return logits, wdl

    def predict(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = planes.shape[0]
        logits = np.empty((n, NUM_ACTIONS), dtype=np.float32)
        wdl = np.empty((n, 3), dtype=np.float32)
        plies = np.empty(n, dtype=np.float32)
        for i in range(n):
            digest = hashlib.blake2b(np.ascontiguousarray(planes[i]).tobytes(), digest_size=8).digest()
            rng = np.random.default_rng([self.seed, int.from_bytes(digest, "little")])
            logits[i] = rng.standard_normal(NUM_ACTIONS) * self.logit_scale
            wdl[i] = rng.dirichlet((1.0, 1.0, 1.0))
            plies[i] = rng.uniform(0.0, self.max_plies)
        return logits, wdl, plies


def value_wdl(value: np.ndarray) -> np.ndarray:
    """Win, draw and loss (float32 [N, 3]) of values in [-1, 1] for evaluators that know only a value: win - loss
    is the value, the rest a draw."""
    value = np.asarray(value, dtype=np.float32)
    return np.stack([np.maximum(value, 0), 1 - np.abs(value), np.maximum(-value, 0)], axis=1)


class MaterialEvaluator:
    """Uniform policy; the value leans toward the side with more material (a king counts 1.5 men)."""

    def __init__(self, scale: float = 0.5):
        self.scale = scale

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = planes.shape[0]
        own = planes[:, PLANE_OWN_MEN].sum(axis=(1, 2)) + 1.5 * planes[:, PLANE_OWN_KINGS].sum(axis=(1, 2))
        opp = planes[:, PLANE_OPP_MEN].sum(axis=(1, 2)) + 1.5 * planes[:, PLANE_OPP_KINGS].sum(axis=(1, 2))
        return np.zeros((n, NUM_ACTIONS), dtype=np.float32), value_wdl(np.tanh(self.scale * (own - opp)))


class SearchedValueEvaluator:
    """Another evaluator's policy (and plies left) with the values of a short search of each position: MCTS
    leaves valued by a shallow alpha-beta over the distilled evaluation (issue 75's MCTS variant; the spec's
    `:distilledN`). `value(own, opponent, kings)` is the side to move's expected score of a position given as
    zero.net.encoding.planes_board gives it (own pieces Black, Black to move); the answer spreads it over win,
    draw and loss (value_wdl), so that the search's value (win - loss) is 2 * score - 1."""

    def __init__(self, evaluator: PositionEvaluator, value: Callable[[int, int, int], float]):
        self.evaluator = evaluator
        self.value = value

    @property
    def plies_left_head(self) -> bool:
        return gives_plies_left(self.evaluator)

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, wdl, _ = self.predict(planes)
        return logits, wdl

    def predict(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        if self.plies_left_head:
            logits, _, plies = self.evaluator.predict(planes)
        else:
            (logits, _), plies = self.evaluator.evaluate(planes), None
        return logits, value_wdl(np.array([2.0 * self.value(*planes_board(p)) - 1.0 for p in planes])), plies


# The most positions a cache may hold: 16 GiB of answers (about 4 KB each).
MOST_CACHE_POSITIONS = 1 << 22


class CachedEvaluator:
    """Another evaluator's answers, remembered by position (a 64-bit hash of the planes: everything the
    network sees, the no-progress and repetition planes included), in a table of `capacity` positions where
    a new position pushes out the one of its bucket used longest ago (`selfplay.tree_search.answer_table`).

    Checkers transposes often, and a game searched move after move meets again the positions of the last
    search's tree: those cost no network call. A search given this evaluator (`selfplay.tree_search.search`) recalls
    them while it selects its leaves, so that its network calls carry only positions the table lacks.
    About 4 KB a position (1,024 float32 logits), so the default holds 64 MB. Answers are the same values
    the wrapped evaluator gave, row for row. A wrapped evaluator with a moves-left head is always asked
    through its `predict` (the network computes every head in one pass), so the table holds the plies left
    of every position it remembers and `predict` answers them too, for a search that weighs them.
    """

    def __init__(self, evaluator: PositionEvaluator, capacity: int = 16_384):
        if capacity < 1:
            raise ValueError(f"a cache holds at least one position, got capacity {capacity}")
        self.evaluator = evaluator
        self.capacity = capacity
        self.table = AnswerTable(capacity)

    @property
    def plies_left_head(self) -> bool:
        return gives_plies_left(self.evaluator)

    @property
    def hits(self) -> int:
        return self.table.hits

    @property
    def misses(self) -> int:
        return self.table.misses

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, wdl, _ = self.predict(planes)
        return logits, wdl

    def predict(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """evaluate's answer and the plies left (None where the wrapped evaluator has no moves-left head)."""
        n = planes.shape[0]
        keys = np.empty(n, dtype=np.uint64)
        hash_rows(np.ascontiguousarray(planes, dtype=np.float32).reshape(n, -1).view(np.uint32), keys)
        out_logits = np.empty((n, NUM_ACTIONS), dtype=np.float32)
        out_wdl = np.empty((n, 3), dtype=np.float32)
        out_plies = np.empty(n, dtype=np.float32)
        ask, answer_of = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        table = self.table
        with table.lock:
            asked = gather_hits(table.arrays, keys, out_logits, out_wdl, out_plies, ask, answer_of)
            table.misses += asked
            table.hits += n - asked
        if asked:
            # Outside the lock: a search with calls in flight (SearchConfig.threads) makes them at once.
            rows = planes[ask[:asked]]
            plies = None
            if self.plies_left_head:
                logits, wdl, plies = self.evaluator.predict(rows)
            else:
                logits, wdl = self.evaluator.evaluate(rows)
            plies = np.zeros(asked, dtype=np.float32) if plies is None else np.ascontiguousarray(plies, np.float32)
            with table.lock:
                store_answers(table.arrays, keys, ask, asked, np.ascontiguousarray(logits, dtype=np.float32),
                              np.ascontiguousarray(wdl, dtype=np.float32), plies, answer_of, out_logits, out_wdl,
                              out_plies)
        return out_logits, out_wdl, out_plies if self.plies_left_head else None

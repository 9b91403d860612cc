"""Sequential probability ratio test on game pairs: the promotion rule of gating.

Each ballot opening is played twice with colours swapped; the pair's score (0, 1/2, 1, 3/2 or 2 points for
the candidate) is one observation. Pairing removes most of the opening's bias, and scoring pairs instead of
games copes with many draws: a drawn pair is just the middle outcome, and the variance is measured from the
pairs rather than assumed. The log-likelihood ratio is the normal (generalized SPRT) approximation used by
engine-testing frameworks:

    LLR = n * (s1 - s0) * (2 m - s0 - s1) / (2 v)

with m and v the mean and variance of the per-game pair score, and s0, s1 the expected scores at elo0 and
elo1. H1 (candidate stronger by elo1) is accepted when LLR >= log((1 - beta) / alpha), H0 (no stronger than
elo0) when LLR <= log(beta / (1 - alpha)). A test that reaches the pair cap undecided promotes only when the
lower end of the 95 % interval of the Elo difference is above elo0. No decision is taken before
min_pairs pairs.

Pairs are counted in ballot order (`add_game`): a finished pair waits until every earlier opening's pair has
finished. With many games in flight the first pairs to finish are the shortest games, a sample chosen by
how the games went, and a test stopped early would decide on it: a gate on a GPU (the whole ballot in
flight) promoted a candidate on the 19 pairs that finished first, scoring 0.632, while the 67 other games it
had finished scored 0.448.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from train.arena.match import elo_from_score
from zero.run.config import MOST_GAMES, setting

# Variance floor: an all-draw sample has zero variance; a floor keeps the LLR finite (and strongly negative).
_MIN_VARIANCE = 1e-4


def expected_score(elo: float) -> float:
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


@dataclass(frozen=True)
class SprtConfig:
    elo0: float = 0.0  # H0: the candidate is no stronger than this
    # H1: the candidate is at least this much stronger. 40 rather than a finer 20: within the 144-pair cap
    # an SPRT for +20 almost never decides (a level candidate played 140 of 144 pairs on average), while
    # +40 decides a level one in 89 pairs and a weaker one in 61, with about the same promotion rates
    # (benchmarks/sprt_bench.py; benchmarks/RESULTS.md). A good candidate missed is gated again soon: the
    # next one carries the same training and more.
    elo1: float = 40.0
    alpha: float = setting(0.05, above=0, below=1)  # false promotion rate
    beta: float = setting(0.05, above=0, below=1)  # false rejection rate
    # The whole 3-move ballot, each opening with both colours; a smaller cap plays the ballot's first openings.
    max_pairs: int = setting(144, low=1, high=MOST_GAMES)
    # No decision before this many pairs: the variance estimate of a handful of (often drawn) pairs is too
    # small to trust, and the approximate LLR would stop the test on noise.
    min_pairs: int = setting(10, low=1, high=MOST_GAMES)


@dataclass
class PairSprt:
    config: SprtConfig = field(default_factory=SprtConfig)
    pair_scores: list[float] = field(default_factory=list)  # candidate's points per pair, 0..2
    # Candidate's points of the finished games not yet counted, by ballot opening (0, 1, ... in ballot order).
    waiting: dict[int, list[float]] = field(default_factory=dict)

    @property
    def lower_bound(self) -> float:
        return math.log(self.config.beta / (1 - self.config.alpha))

    @property
    def upper_bound(self) -> float:
        return math.log((1 - self.config.beta) / self.config.alpha)

    def add_game(self, opening_index: int, candidate_points: float) -> None:
        """One finished game of the pair of ballot opening `opening_index`; pairs are counted in ballot order."""
        self.waiting.setdefault(opening_index, []).append(candidate_points)
        while len(self.waiting.get(len(self.pair_scores), ())) == 2:
            self.add_pair(sum(self.waiting.pop(len(self.pair_scores))))

    def add_pair(self, candidate_points: float) -> None:
        if not 0 <= candidate_points <= 2:
            raise ValueError(f"a pair scores 0..2 points, got {candidate_points}")
        self.pair_scores.append(candidate_points)

    def _mean_var(self) -> tuple[float, float]:
        n = len(self.pair_scores)
        per_game = [p / 2 for p in self.pair_scores]
        mean = sum(per_game) / n
        var = sum((x - mean) ** 2 for x in per_game) / n
        return mean, max(var, _MIN_VARIANCE)

    def llr(self) -> float:
        if not self.pair_scores:
            return 0.0
        mean, var = self._mean_var()
        s0 = expected_score(self.config.elo0)
        s1 = expected_score(self.config.elo1)
        return len(self.pair_scores) * (s1 - s0) * (2 * mean - s0 - s1) / (2 * var)

    def elo_interval(self) -> tuple[float, float, float]:
        """Elo difference estimate and its 95 % interval from the pair scores."""
        mean, var = self._mean_var()
        half = 1.96 * math.sqrt(var / len(self.pair_scores))
        return (elo_from_score(mean), elo_from_score(max(0.0, mean - half)), elo_from_score(min(1.0, mean + half)))

    def decision(self) -> str | None:
        """'promote', 'reject', or None while the test should go on."""
        if len(self.pair_scores) < min(self.config.min_pairs, self.config.max_pairs):
            return None
        llr = self.llr()
        if llr >= self.upper_bound:
            return "promote"
        if llr <= self.lower_bound:
            return "reject"
        if len(self.pair_scores) >= self.config.max_pairs:
            return self._interval_rule()
        return None

    def final_decision(self) -> str:
        """The decision of a match that has ended: the SPRT's, else (a match cut short of the pair cap) the
        rule at the cap, promote only when the interval's lower end is above elo0."""
        return self.decision() or self._interval_rule()

    def _interval_rule(self) -> str:
        _, low, _ = self.elo_interval()
        return "promote" if low > self.config.elo0 else "reject"

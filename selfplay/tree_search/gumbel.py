"""Gumbel AlphaZero (Danihelka et al., "Policy improvement by planning with Gumbel", ICLR 2022): the policy
target from completed Q-values, and the root searched by sequential halving.

A search's visit counts are a poor target when the search is small: a move the search never tried gets
nothing, however good the network thinks it is, and two moves with equal values split their visits by
chance. The improved policy is softmax(log prior + sigma(completed Q)) instead: the network's own policy,
moved towards the moves the search found better. A visited move's completed Q is its search value; an
unvisited one's is the mixed value, the root value blended with the prior-weighted mean of the visited
moves' values (so an unvisited move is assumed as good as what the search saw, weighted by belief).
sigma rescales the completed Q-values to [0, 1] by their minimum and maximum and multiplies them by
(c_visit + the most visits of a move) x c_scale, so the target trusts the search more as it grows.

Sequential halving at the root (`SequentialHalving`): Gumbel noise g is drawn once per root child, the m
children with the highest g + log prior contend, and the simulations are split into ceil(log2 m) phases:
in each, every contender is searched up to an equal number of visits, then the half with the lowest
g + log prior + sigma(completed Q) drops out, until one remains. Sampling the contenders with Gumbel noise
explores without replacement, so few simulations still try several moves, and the move played (the last
contender) is an improvement on the prior in expectation however small the search (the paper's guarantee,
which PUCT with Dirichlet noise lacks). Below the root the search is PUCT as everywhere.

The paper's mixed value starts from the network's value of the root, which the search does not keep; the
mean value of the root's children over their visits (what the root's own mean is, less its first visit)
stands in for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from selfplay.tree_search.search import RootChildren, per_action

# mctx's defaults for the completed-Q transform (maxvisit_init, value_scale).
C_VISIT = 50.0
C_SCALE = 0.1


def completed_q(children: RootChildren, prior: np.ndarray) -> np.ndarray:
    """Each child's value for the side to move at the root: its proven value, its search mean when visited,
    else the mixed value (0 when nothing was visited)."""
    visits = children.visits.astype(np.float64)
    visited = visits > 0
    q = np.where(visited, children.value_sum / np.maximum(visits, 1.0), 0.0)
    mixed = 0.0
    if visited.any():
        root_value = float(children.value_sum[visited].sum() / visits.sum())
        believed = float(prior[visited].sum())
        mean = float((prior[visited] * q[visited]).sum() / believed) if believed > 0 else float(q[visited].mean())
        mixed = (root_value + visits.sum() * mean) / (1.0 + visits.sum())
    q = np.where(visited, q, mixed)
    return np.where(np.isnan(children.proven), q, children.proven)


def sigma(children: RootChildren, prior: np.ndarray, c_visit: float = C_VISIT,
          c_scale: float = C_SCALE) -> np.ndarray:
    """sigma(completed Q): the completed Q-values scaled to [0, 1], times (c_visit + most visits) x c_scale."""
    q = completed_q(children, prior)
    spread = float(q.max() - q.min())
    scaled = (q - q.min()) / spread if spread > 1e-12 else np.zeros_like(q)
    return (c_visit + float(children.visits.max())) * c_scale * scaled


def log_prior(prior: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(prior, 1e-30))


def improved_policy(children: RootChildren, prior: np.ndarray, c_visit: float = C_VISIT,
                    c_scale: float = C_SCALE) -> np.ndarray:
    """softmax(log prior + sigma(completed Q)) over the root's children (see the module doc); `prior` is the
    network's (without exploration noise)."""
    logits = log_prior(prior) + sigma(children, prior, c_visit, c_scale)
    p = np.exp(logits - logits.max())
    return p / p.sum()


@dataclass
class GumbelRoot:
    """How a search's root is searched by sequential halving: the source of its Gumbel noise and how many
    moves contend at most (the paper's m; 16 in its Go and chess runs)."""

    rng: np.random.Generator
    considered: int = 16

    def begin(self, prior: np.ndarray, simulations: int) -> "SequentialHalving":
        return SequentialHalving(prior, simulations, self.considered, self.rng)


class SequentialHalving:
    """The root of one search by sequential halving (see the module doc). `limit[k]` is root child k's visit
    limit in the current phase (0: out of the contest), `score[k]` its g + log prior; the search kernel
    (selfplay.tree_search.mcts) sends each descent to the contender below its limit with the fewest visits."""

    def __init__(self, prior: np.ndarray, simulations: int, considered: int, rng: np.random.Generator) -> None:
        """`prior`: the network's priors of the root's children; `simulations`: the visits this search adds
        at the root. The limits count a reused tree's visits too: a child already past its limit has had
        its phase."""
        n = len(prior)
        self.score = rng.gumbel(size=n) + log_prior(prior)
        m = max(1, min(considered, n))
        self.contenders = np.sort(np.argsort(-self.score, kind="stable")[:m])
        self.phases = max(1, math.ceil(math.log2(m)))
        self.simulations = simulations
        self.limit = np.zeros(n)
        self._open_phase()

    def _open_phase(self) -> None:
        if len(self.contenders) == 1:
            self.limit[self.contenders] = np.inf  # the winner takes what is left of the search
            return
        self.limit[self.contenders] += max(1, self.simulations // (self.phases * len(self.contenders)))

    def due(self, visits: np.ndarray) -> bool:
        """Whether every contender has its phase's visits (`visits`: the root children's), so that the phase
        ends: a cheap check before `advance`, which reads the whole root."""
        return len(self.contenders) > 1 and bool((visits[self.contenders] >= self.limit[self.contenders]).all())

    def advance(self, children: RootChildren, prior: np.ndarray) -> bool:
        """When every contender has its phase's visits, the worse half drops out and the next phase opens;
        returns whether the limits changed. `prior` is the network's."""
        if not self.due(children.visits):
            return False
        ranked = self.contenders[np.argsort(-(self.score + sigma(children, prior))[self.contenders], kind="stable")]
        dropped = ranked[math.ceil(len(ranked) / 2):]
        self.limit[dropped] = 0
        self.contenders = np.sort(ranked[:math.ceil(len(ranked) / 2)])
        self._open_phase()
        return True

    def choice(self, children: RootChildren, prior: np.ndarray) -> int:
        """The move to play: of the contenders with the most visits, the highest g + log prior + sigma."""
        most = self.contenders[children.visits[self.contenders] == children.visits[self.contenders].max()]
        return int(most[np.argmax((self.score + sigma(children, prior))[most])])


def improved_policy_target(children: RootChildren, prior: np.ndarray,
                           black_to_move: bool) -> tuple[np.ndarray, np.ndarray]:
    """The improved policy in the form a policy target is stored in (selfplay.tree_search.search.per_action)."""
    return per_action(children, black_to_move, improved_policy(children, prior))

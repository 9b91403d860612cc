"""Gumbel AlphaZero's policy improvement (Danihelka et al., "Policy improvement by planning with Gumbel",
ICLR 2022): the policy target from completed Q-values.

A search's visit counts are a poor target when the search is small: a move the search never tried gets
nothing, however good the network thinks it is, and two moves with equal values split their visits by
chance. The improved policy is softmax(log prior + sigma(completed Q)) instead: the network's own policy,
moved towards the moves the search found better. A visited move's completed Q is its search value; an
unvisited one's is the mixed value, the root value blended with the prior-weighted mean of the visited
moves' values (so an unvisited move is assumed as good as what the search saw, weighted by belief).
sigma rescales the completed Q-values to [0, 1] by their minimum and maximum and multiplies them by
(c_visit + the most visits of a move) x c_scale, so the target trusts the search more as it grows.

The paper's mixed value starts from the network's value of the root, which the search does not keep; the
mean value of the root's children over their visits (what the root's own mean is, less its first visit)
stands in for it.
"""

from __future__ import annotations

import numpy as np

from selfplay.search import RootChildren, per_action

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


def improved_policy(children: RootChildren, prior: np.ndarray, c_visit: float = C_VISIT,
                    c_scale: float = C_SCALE) -> np.ndarray:
    """softmax(log prior + sigma(completed Q)) over the root's children (see the module doc); `prior` is the
    network's (without exploration noise)."""
    q = completed_q(children, prior)
    spread = float(q.max() - q.min())
    scaled = (q - q.min()) / spread if spread > 1e-12 else np.zeros_like(q)
    logits = np.log(np.maximum(prior, 1e-30)) + (c_visit + float(children.visits.max())) * c_scale * scaled
    p = np.exp(logits - logits.max())
    return p / p.sum()


def improved_policy_target(children: RootChildren, prior: np.ndarray,
                           black_to_move: bool) -> tuple[np.ndarray, np.ndarray]:
    """The improved policy in the form a policy target is stored in (selfplay.search.per_action)."""
    return per_action(children, black_to_move, improved_policy(children, prior))

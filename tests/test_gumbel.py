"""Gumbel AlphaZero's improved policy target (selfplay.gumbel): completed Q-values, the target on values
worked out by hand, on a position whose move values are known, and the network's priors without noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from selfplay.evaluators import HashEvaluator, UniformEvaluator
from selfplay.gumbel import C_SCALE, C_VISIT, completed_q, improved_policy, improved_policy_target
from selfplay.search import BatchedSearch, RootChildren, RootNoise, SearchConfig, visit_policy
from zero.encoding import move_action
from zero.game import Game
from zero.notation import fen_to_position, resolve_move


def _children(visits, value_sum, proven=None) -> RootChildren:
    n = len(visits)
    zeros = np.zeros(n, dtype=np.int64)
    proven = np.full(n, np.nan) if proven is None else np.array(proven, dtype=np.float64)
    return RootChildren(zeros, np.arange(n), zeros, np.array(visits, dtype=np.int64), np.full(n, 1.0 / n),
                        np.array(value_sum, dtype=np.float64), np.zeros(n), proven, np.full(n, -1))


def test_a_visited_move_keeps_its_value_and_an_unvisited_one_gets_the_mixed_value():
    q = completed_q(_children([4, 0, 0], [2.0, 0.0, 0.0]), np.array([0.5, 0.3, 0.2]))
    # Visited: 2/4. Unvisited: (the root's value, the visits' mean 0.5, + 4 visits x the prior-weighted mean
    # of the visited, 0.5) / 5.
    assert q == pytest.approx([0.5, 0.5, 0.5])
    q = completed_q(_children([4, 2, 0], [2.0, -1.0, 0.0]), np.array([0.5, 0.3, 0.2]))
    # The visits' mean: 1/6; the prior-weighted mean: (0.5 x 0.5 + 0.3 x -0.5) / 0.8 = 1/8.
    assert q == pytest.approx([0.5, -0.5, (1 / 6 + 6 / 8) / 7])


def test_a_proven_value_replaces_the_search_mean():
    children = _children([3, 1], [0.3, 0.2], proven=[np.nan, 1.0])
    assert completed_q(children, np.array([0.5, 0.5])) == pytest.approx([0.1, 1.0])


def test_the_target_on_values_worked_out_by_hand():
    # Equal priors, one visit each, values +1 and -1: rescaled to 1 and 0, sigma = (50 + 1) x 0.1 = 5.1 for
    # the better move, so its share is e^5.1 / (e^5.1 + 1).
    p = improved_policy(_children([1, 1], [1.0, -1.0]), np.array([0.5, 0.5]))
    assert (C_VISIT, C_SCALE) == (50.0, 0.1)
    assert p == pytest.approx([math.exp(5.1) / (math.exp(5.1) + 1), 1 / (math.exp(5.1) + 1)])
    # Equal values: the search taught nothing, and the target is the prior.
    prior = np.array([0.7, 0.2, 0.1])
    assert improved_policy(_children([5, 3, 0], [1.0, 0.6, 0.0]), prior) == pytest.approx(prior)


def test_the_target_finds_the_winning_move_that_a_small_search_barely_visits():
    # Black's king to 1 shuts in White's last man (5 can only move to 1): the one winning move of five.
    game = Game(fen_to_position("B:W5:BK6,28"))
    winning = resolve_move("6-1", game.legal_moves())
    search = BatchedSearch(1, SearchConfig(), game.rules, simulations=64)
    search.set_root(0, game)
    search.start(0, 16)
    search.run(UniformEvaluator())
    children = search.root_children(0)
    k = next(i for i in range(len(children.visits)) if children.move(i, game.position) == winning)
    assert children.proven[k] == 1.0
    actions, target = improved_policy_target(children, search.network_prior(0), True)
    visit_actions, visit_shares = visit_policy(children, True)
    assert sorted(actions) == sorted(visit_actions) and target.sum() == pytest.approx(1.0)
    win_action = move_action(winning, True)
    share = dict(zip(actions.tolist(), target.tolist()))[win_action]
    # Uniform priors and draw values elsewhere: the proven win takes almost all of the target, where the
    # visit shares give it what a 16-visit search happened to spend on it.
    assert share > 0.95
    assert share > dict(zip(visit_actions.tolist(), visit_shares.tolist()))[win_action]


def test_the_network_prior_is_the_root_prior_without_the_noise():
    game = Game()
    search = BatchedSearch(1, SearchConfig(), game.rules, simulations=64)
    search.set_root(0, game)
    search.start(0, 8)
    search.run(HashEvaluator())
    clean = search.root_children(0).prior
    search.start(0, 16, RootNoise(np.random.default_rng(0), alpha=1.0, fraction=0.25))
    search.run(HashEvaluator())
    assert not np.allclose(search.root_children(0).prior, clean)
    assert search.network_prior(0) == pytest.approx(clean)
    # After a move the new root's children were never noised: their stored priors are the network's.
    move = search.root_children(0).move(0, game.position)
    game.play(move)
    search.play(0, move, game)
    assert search.network_prior(0) == pytest.approx(search.root_children(0).prior)

"""Gumbel AlphaZero (selfplay.tree_search.gumbel): completed Q-values, the improved target on values worked out by hand
and on a position whose move values are known, the network's priors without noise; the root searched by
sequential halving, its phases on known values, and the numba search held to the plain-Python one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from selfplay.tree_search.evaluators import HashEvaluator, UniformEvaluator
from selfplay.tree_search.gumbel import (C_SCALE, C_VISIT, GumbelRoot, SequentialHalving, completed_q, improved_policy,
                             improved_policy_target, sigma)
from selfplay.tree_search.reference_mcts import ReferenceMcts
from selfplay.tree_search.search import BatchedSearch, RootChildren, RootNoise, SearchConfig, visit_policy
from zero.net.encoding import move_action
from zero.rules.game import Game
from zero.rules.notation import fen_to_position, resolve_move


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


def _searched_start(visits: int, largest: int) -> tuple[Game, BatchedSearch]:
    """The start position searched to `visits` root visits, in a search sized for `largest`."""
    game = Game()
    search = BatchedSearch(1, SearchConfig(), game.rules, simulations=largest)
    search.set_root(0, game)
    search.start(0, visits)
    search.run(HashEvaluator())
    return game, search


def test_the_network_prior_is_the_root_prior_without_the_noise():
    game, search = _searched_start(8, 64)
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


def _halve_to_the_end(seed: int, q: np.ndarray, simulations: int) -> tuple[SequentialHalving, list, np.ndarray]:
    """Sequential halving over moves of equal prior whose values are known, each phase's visits given at
    once: the halving, the contenders after each phase, and the visits."""
    n = len(q)
    halving = SequentialHalving(np.full(n, 1 / n), simulations, considered=n, rng=np.random.default_rng(seed))
    visits = np.zeros(n, dtype=np.int64)
    phases = []
    while len(halving.contenders) > 1:
        visits[halving.contenders] = halving.limit[halving.contenders]
        almost = visits.copy()
        almost[halving.contenders[0]] -= 1
        assert not halving.advance(_children(almost, q * almost), np.full(n, 1 / n))  # a visit short: not yet
        before = halving.contenders.copy()
        ranked = before[np.argsort(-(halving.score + sigma(_children(visits, q * visits), np.full(n, 1 / n)))[before],
                                   kind="stable")]
        assert halving.advance(_children(visits, q * visits), np.full(n, 1 / n))
        # The better half by g + log prior + sigma(completed Q) goes on, with the next phase's visits.
        assert sorted(halving.contenders.tolist()) == sorted(ranked[:len(ranked) // 2].tolist())
        assert (halving.limit[ranked[len(ranked) // 2:]] == 0).all()
        phases.append(halving.contenders.tolist())
    return halving, phases, visits


def test_sequential_halving_keeps_the_better_half_each_phase_until_one_remains():
    # Eight moves of equal prior, move k worth k / 7: 160 simulations in log2 8 = 3 phases of equal visits
    # per contender (160 // (3 x 8) = 6, then 160 // (3 x 4) = 13 more, then 160 // (3 x 2) = 26 more).
    q = np.arange(8) / 7.0
    halving, phases, visits = _halve_to_the_end(5, q, 160)
    assert halving.phases == 3 and [len(p) for p in phases] == [4, 2, 1]
    assert sorted(set(visits.tolist())) == [6, 19, 45]
    winner = phases[-1][0]
    assert halving.limit[winner] == np.inf and halving.choice(_children(visits, q * visits), np.full(8, 1 / 8)) == winner
    # The Gumbel noise (spread about 1.3) competes with sigma's 0.8 between neighbouring values, so the best
    # move does not always win, but the better it is the more often: over 400 draws the best wins most and
    # the worst half never.
    winners = np.bincount([_halve_to_the_end(seed, q, 160)[1][-1][0] for seed in range(400)], minlength=8)
    assert winners[7] > 0.6 * 400 and winners[:4].sum() < 0.03 * 400
    assert list(winners[4:]) == sorted(winners[4:])


def test_sequential_halving_samples_its_contenders_from_the_prior():
    prior = np.array([0.7, 0.2, 0.05, 0.03, 0.02])
    rng = np.random.default_rng(0)
    first = [SequentialHalving(prior, 64, considered=2, rng=rng).contenders.tolist() for _ in range(2000)]
    counts = np.bincount([k for pair in first for k in pair], minlength=5) / 2000
    # Gumbel top-2 is sampling two moves without replacement in proportion to the prior.
    assert counts[0] > 0.9 and counts[1] > 0.5 and 0 < counts[4] < counts[2]


@pytest.mark.parametrize("leaves_per_tree", [1, 3])
def test_the_halving_root_of_the_numba_search_matches_the_reference(leaves_per_tree):
    rng = np.random.default_rng(2)
    games = [Game()]
    for plies in (6, 15, 30):
        game = Game()
        for _ in range(plies):
            legal = game.legal_moves()
            game.play(legal[int(rng.integers(len(legal)))])
        games.append(game)
    config = SearchConfig(leaves_per_tree=leaves_per_tree)
    evaluator = HashEvaluator(seed=11)
    search = BatchedSearch(len(games), config, capacity=30_000)
    for g, game in enumerate(games):
        search.set_root(g, game)
        search.start(g, 200, halving=GumbelRoot(np.random.default_rng(g), considered=4))
    search.run(evaluator)
    for g, game in enumerate(games):
        reference = ReferenceMcts(game, evaluator, config)
        root = reference.run(200, halving=GumbelRoot(np.random.default_rng(g), considered=4))
        children = search.root_children(g)
        assert [c.visits for c in root.children] == children.visits.tolist()
        assert root.visits == search.root_visits(g) == 200
        assert search.halving_choice(g) == reference.halving.choice(reference.root_children(),
                                                                   reference.network_prior())
        # Only the contenders were searched; the one left standing was searched most.
        searched = np.flatnonzero(children.visits)
        assert len(searched) <= 4 and children.visits.argmax() == search.halving_choice(g)


def test_a_reused_tree_counts_its_visits_towards_the_phases():
    _, search = _searched_start(100, 400)
    before = search.root_children(0).visits.copy()
    search.start(0, 300, halving=GumbelRoot(np.random.default_rng(1), considered=4))
    search.run(HashEvaluator())
    after = search.root_children(0).visits
    assert search.root_visits(0) == 300 and (after >= before).all()
    # The reused visits count towards the target: the halving adds only the 200 it leaves.
    assert (after - before).sum() == 200

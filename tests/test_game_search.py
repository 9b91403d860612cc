"""The single-game search (play, analysis, a match player on the clock): full batches, its tree kept from
move to move, limits by simulations and time."""

from __future__ import annotations

import time

import pytest

from selfplay.analysis import SINGLE_GAME_LEAVES, GameSearch, analyse, best_move
from selfplay.evaluators import HashEvaluator
from selfplay.search import SearchConfig
from zero.game import Game


class _BatchLog:
    def __init__(self) -> None:
        self.inner = HashEvaluator(seed=4)
        self.sizes: list[int] = []

    def evaluate(self, planes):
        self.sizes.append(len(planes))
        return self.inner.evaluate(planes)


def test_network_calls_carry_many_leaves():
    log = _BatchLog()
    GameSearch(log).analyse(Game(), simulations=2000)
    # Virtual loss spreads the descents, so nearly every call is full (a call ends early only where a
    # descent meets a leaf already in the batch).
    full = sum(1 for n in log.sizes if n == SINGLE_GAME_LEAVES)
    assert max(log.sizes) == SINGLE_GAME_LEAVES and full >= 0.9 * len(log.sizes)
    assert sum(log.sizes) / len(log.sizes) >= 0.9 * SINGLE_GAME_LEAVES


def test_the_tree_follows_the_game_between_searches():
    game = Game()
    search = GameSearch(HashEvaluator(seed=4))
    first = search.analyse(game, simulations=1500)
    move = best_move(first)
    game.play(move)
    game.play(first.pv[1] if len(first.pv) > 1 else game.legal_moves()[0])
    # The two moves' subtree is kept: the next search starts with its visits and needs fewer new ones.
    kept = search._rooted_at(game).root_visits(0)  # (re-rooting again is a no-op: no new moves)
    assert kept > 0
    log = _BatchLog()
    search.evaluator = log
    again = search.analyse(game, simulations=1500)
    assert again.simulations >= 1500
    assert sum(log.sizes) <= 1500 - kept + SINGLE_GAME_LEAVES
    # The answer is the same search as a fresh one would be asked to make, only cheaper: same legal moves.
    assert sorted(str(s.move) for s in again.moves) == sorted(str(m) for m in game.legal_moves())


def test_a_different_game_gets_a_fresh_tree():
    search = GameSearch(HashEvaluator(seed=4), SearchConfig(leaves_per_tree=1))
    game = Game()
    game.play(game.legal_moves()[0])
    search.analyse(game, simulations=300)
    other = Game()
    other.play(other.legal_moves()[1])  # not a continuation of the first game
    fresh = search.analyse(other, simulations=300)
    # Same result as a search that never saw the first game (the evaluator is deterministic).
    alone = analyse(other, HashEvaluator(seed=4), 300, SearchConfig(leaves_per_tree=1))
    assert [(str(s.move), s.visits) for s in fresh.moves] == [(str(s.move), s.visits) for s in alone.moves]


def test_a_time_limit_stops_the_search_and_keeps_its_moves():
    search = GameSearch(HashEvaluator(seed=4))
    search.analyse(Game(), simulations=50)  # compile the kernels first
    started = time.perf_counter()
    analysis = search.analyse(Game(), seconds=0.3)
    elapsed = time.perf_counter() - started
    assert 0.3 <= elapsed < 1.5
    assert analysis.simulations > 50 and best_move(analysis) in Game().legal_moves()
    # With both limits, whichever comes first ends the search.
    quick = GameSearch(HashEvaluator(seed=4)).analyse(Game(), simulations=64, seconds=30)
    assert 64 <= quick.simulations < 64 + SINGLE_GAME_LEAVES


def test_a_time_limit_already_spent_still_gives_a_move():
    # On a loaded machine the time can run out before the first network call (re-rooting, compiling the
    # kernels): a player on the clock must still answer with a legal move, not an analysis without moves.
    search, game = GameSearch(HashEvaluator(seed=4)), Game()
    for _ in range(2):  # a fresh tree, then a kept one
        analysis = search.analyse(game, seconds=0.0)
        assert analysis.simulations >= 1 and best_move(analysis) in game.legal_moves()
        game.play(best_move(analysis))


def test_a_search_needs_a_limit():
    with pytest.raises(ValueError):
        GameSearch(HashEvaluator()).analyse(Game())

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


class _SlowFirstCall:
    """An evaluator whose first call takes `delay` seconds, as the first search after an install spends
    compiling its kernels."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0
        self.inner = HashEvaluator()

    def evaluate(self, planes):
        self.calls += 1
        if self.calls == 1:
            time.sleep(self.delay)
        return self.inner.evaluate(planes)


def _calls_at_first_timed_step(monkeypatch, module, slow: _SlowFirstCall) -> list[int]:
    """Cold search kernels, and a record of how many calls `slow` had had when the search that `module`
    makes (not warm_up's) took its first step."""
    import selfplay.search as search_module

    monkeypatch.setattr(search_module, "_warmed_up", False)
    record: list[int] = []

    class Recorded(search_module.BatchedSearch):
        def step(self, evaluator):
            if not record:
                record.append(slow.calls)
            return super().step(evaluator)

    monkeypatch.setattr(module, "BatchedSearch", Recorded)
    return record


def test_the_first_search_on_the_clock_gets_its_time(monkeypatch, capsys):
    """The kernels are compiled and the evaluator warmed before the clock starts, with a message while that
    takes long: the slow first call comes before the timed search's first step (before, it was that step,
    and the move's time was gone)."""
    import selfplay.analysis as analysis_module
    import selfplay.search as search_module

    monkeypatch.setattr(search_module, "WARM_UP_NOTICE_SECONDS", 0.1)
    slow = _SlowFirstCall(2.0)
    calls_at_first_step = _calls_at_first_timed_step(monkeypatch, analysis_module, slow)
    GameSearch(slow).analyse(Game(), seconds=0.05)
    assert calls_at_first_step[0] >= 1
    assert "preparing the search: compiling its kernels" in capsys.readouterr().err
    # Once per process: a second search warms nothing and says nothing.
    GameSearch(_SlowFirstCall(0.0)).analyse(Game(), seconds=0.05)
    assert capsys.readouterr().err == ""


def test_a_match_player_on_the_clock_is_warmed_before_its_first_move(monkeypatch):
    import train.match as match_module
    from train.match import NetworkPlayer, play_match
    from zero.openings import Opening
    from zero.players import RandomPlayer

    slow = _SlowFirstCall(0.3)
    calls_at_first_step = _calls_at_first_timed_step(monkeypatch, match_module, slow)
    player = NetworkPlayer("clock", slow, 20_000, SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES), seconds=0.05)
    play_match(player, RandomPlayer(0), [Opening("start", ())], games=1)
    assert calls_at_first_step[0] >= 1  # the slow first call came before the match's first search step

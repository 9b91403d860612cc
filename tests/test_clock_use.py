"""benchmarks/clock_use.py: a player's clock over a match, accounted move by move (issue 77's benchmark)."""

from __future__ import annotations

import itertools

import pytest

from selfplay.tree_search.time_manager import GameClock
from train.arena.match import play_match
from zero.corpus.openings import Opening
from zero.rules.game import Game
from zero.run.data import REPOSITORY
from zero.yardsticks.players import RandomPlayer

OPENINGS = [Opening("9-13 21-17 5-9", ("9-13", "21-17", "5-9")), Opening("11-15 23-19 8-11", ("11-15", "23-19", "8-11"))]
TICK = 0.15  # every move takes one tick of the match's clock


class _ClockedRandom(RandomPlayer):
    def __init__(self, seed: int, name: str) -> None:
        super().__init__(seed)
        self.name = name
        self.clock = GameClock(0.3, 0.1)

    def choose_on_clock(self, game: Game, left: float):
        return self.choose(game)


@pytest.fixture
def clock_use(monkeypatch):
    monkeypatch.syspath_prepend(str(REPOSITORY / "benchmarks"))
    import clock_use

    return clock_use


def test_a_players_clock_is_its_base_and_increments_and_each_overdrawn_move_is_counted(clock_use):
    ticks = itertools.count()
    a, b = _ClockedRandom(1, "a"), _ClockedRandom(2, "b")
    result = play_match(a, b, OPENINGS, clock=lambda: TICK * next(ticks))
    use = clock_use.clock_use(result, a, "a")
    moves = []  # a's timed moves, a game each
    for game, a_black in zip(result.games, result.a_is_black):
        opening_plies = len(game.moves) - len(game.move_seconds)
        # The side to move after the opening alternates; a moved on the plies of its colour.
        black_first = (opening_plies % 2 == 0) == game.opening.start.black_to_move
        moves.append(sum(1 for k in range(len(game.move_seconds)) if (k % 2 == 0) == (black_first == a_black)))
    assert sum(use.moves.values()) == sum(moves)
    assert use.clock == pytest.approx(0.3 * len(moves) + 0.1 * sum(moves))
    assert use.thinking == pytest.approx(TICK * sum(moves))
    # Each move takes 0.05 s more than its increment: the 0.3 s base lasts 6 moves.
    assert use.banks_left == pytest.approx([0.3 - 0.05 * n for n in moves])
    assert use.overdrawn_moves == sum(max(n - 6, 0) for n in moves)
    assert use.overdrawn_games == sum(n > 6 for n in moves)
    assert use.lowest_bank == pytest.approx(min(0.3 - 0.05 * n for n in moves))
    assert use.shares == pytest.approx([TICK * n / (0.3 + 0.1 * n) for n in moves])
    assert use.moves["book"] == use.moves["database"] == 0  # a random player has neither
    assert "a: thought" in clock_use.describe(use)

"""When a match starts its games: a ballot whose first pair goes on long after the others end, and a log of the
games a match starts and finishes, for the tests of play_match's may_start and of a gate's window."""

from __future__ import annotations

import pytest

from train.arena.match import MatchGame, MatchResult, match_schedule
from zero.corpus.openings import Opening
from zero.rules.game import Game
from zero.rules.notation import fen_to_position

# Two kings each: nothing to win, so the draw rules end it, tens of plies on.
LONG = Opening("two kings each", (), fen_to_position("B:WK31,K32:BK1,K2"))
# Black's one legal move takes White's last piece: over in one ply, unsearched.
SHORT = Opening("the last piece taken", (), fen_to_position("B:W18:B14"))


def long_first_pair(openings: int) -> list[Opening]:
    """A ballot whose first pair (the one a count in ballot order waits for) outlasts every later one."""
    return [LONG] + [SHORT] * (openings - 1)


class StartLog:
    """Each game a match starts (as play_match builds its Game: None) and finishes (`finished`, as on_game:
    its round), in order. The games start in schedule order, so the log says which game each start was."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[int | None] = []
        events = self.events

        class Logged(Game):
            def __post_init__(self) -> None:
                super().__post_init__()
                events.append(None)

        monkeypatch.setattr("train.arena.match.Game", Logged)

    def finished(self, game: MatchGame, _: MatchResult | None = None) -> None:
        self.events.append(game.round)

    def pairs_done(self, upto: int | None = None) -> int:
        """The pairs finished in ballot order (every earlier pair finished too) after the first `upto` events."""
        done = {e for e in self.events[:upto] if e is not None}
        pairs = 0
        while {2 * pairs + 1, 2 * pairs + 2} <= done:
            pairs += 1
        return pairs

    def pairs_ahead(self, openings: list[Opening]) -> list[int]:
        """For each game started, in order: how far its opening lay ahead of the first pair not finished then
        (0: that pair's own game). Games logged as finished before the first start came with the match (its
        `done`): they are not in its schedule."""
        first = self.events.index(None) if None in self.events else len(self.events)
        schedule = [entry for k, entry in enumerate(match_schedule(openings)) if k + 1 not in self.events[:first]]
        ahead = []
        for i, event in enumerate(self.events):
            if event is None:
                ahead.append(schedule[len(ahead)][0] - self.pairs_done(i))
        return ahead

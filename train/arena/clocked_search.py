"""The alpha-beta player (zero.alphabeta.player) on a game clock: each move's time from the time
manager (selfplay.tree_search.time_manager.move_time: the increment and a share of the bank, spread over fewer
moves once the endgame database is near), so that what book, database and forced moves save is spent later
in the game. The match keeps its clock (train.arena.match.ClockedPlayer)."""

from __future__ import annotations

from selfplay.tree_search.time_manager import GameClock, TimeManager, move_time
from zero.alphabeta.player import AlphaBetaSearchPlayer
from zero.rules.game import Game, Move


class ClockedSearchPlayer:
    """An alpha-beta player on `clock`, by the player's name (which says its clock: train.arena.player_specs);
    `choose_on_clock(game, left)` searches for the time manager's target."""

    def __init__(self, player: AlphaBetaSearchPlayer, clock: GameClock, manager: TimeManager | None = None) -> None:
        if player.seconds is None:
            raise ValueError("a player on a game clock searches by time, not to a fixed depth")
        self.player = player
        self.clock = clock
        self.manager = manager or TimeManager()
        self.name = player.name

    def reset(self, seed: int) -> None:
        self.player.reset(seed)

    def warm_up(self) -> None:
        self.player.warm_up()

    def choose_on_clock(self, game: Game, left: float) -> Move:
        egdb = self.player.egdb
        above = None if egdb is None else game.position.piece_count() - int(egdb.tables.max_pieces)
        budget = move_time(self.manager, self.clock.increment, left - self.clock.increment, above)
        # The manager's reserve covers what an iteration's node budget, estimated from its rate, overruns.
        self.player.seconds = max(budget.target, 1e-3)
        return self.player.choose(game)

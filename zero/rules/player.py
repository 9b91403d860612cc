"""The player interface: anything that, given a game, picks one of its legal moves (Player); the seeding every
player with randomness shares; and the base of the players that search (SearchingPlayer). The players
are built on it above this layer: the network's raw policy (zero.net.inference), the alpha-beta search
(zero.alphabeta), the yardsticks (zero.yardsticks), the match's players (train.arena)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from zero.rules.game import Game, Move


@runtime_checkable
class Player(Protocol):
    """Position in, move out.

    `choose` gets the whole game (position, history, legal moves) and must return one of
    `game.legal_moves()`. A player may also define `reset(seed: int) -> None`: the match runner calls it at
    the start of every game with that game's seed, and a player with randomness reseeds from it, so a game
    is a pure function of its inputs and seed (games can then be played in any order or in parallel). And
    `warm_up() -> None`: the match runner calls it once before the first move's clock starts.
    """

    name: str

    def choose(self, game: Game) -> Move: ...


def player_rng(seed: int, game_seed: int | None) -> np.random.Generator:
    return np.random.default_rng(seed if game_seed is None else [seed, game_seed])


# Deepest iteration of a search on the clock (an endgame with few moves can go deep within its time).
MAX_TIMED_DEPTH = 40


class SearchingPlayer:
    """A player whose move is its `search(game) -> (move, score, nodes)`'s; a forced move is played
    unsearched. Keeps the last search's score and nodes in last_score and last_nodes (benchmarks read them)."""

    def search(self, game: Game) -> tuple[Move, int, int]:
        raise NotImplementedError

    _warm = False

    def warm_up(self) -> None:
        """Search the start position once, before any clock starts: numba compiles the search's kernels on
        their first call (or loads them from its cache), which takes longer than many moves' time. Once a
        player: every match it plays after the first finds them ready."""
        if not self._warm:
            self.search(Game())
            self._warm = True

    def choose(self, game: Game) -> Move:
        legal = game.legal_moves()
        if len(legal) == 1:
            return legal[0]
        move, self.last_score, self.last_nodes = self.search(game)
        return move

"""The engine a person plays against: a checkpoint's network driving the search, at a chosen strength.

Strength is a search budget: a number of simulations (a named level or `--sims N`) or a time limit
(`--time SECONDS`). Everything the front ends show about the engine's thinking is its analysis as
`play.analysis_json` writes it (visit shares, win/draw/loss, principal variation).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from zero.rules.game import Game, Move
from zero.run.config import notify

if TYPE_CHECKING:  # the search (numba kernels) is imported only when an engine searches
    from selfplay.tree_search.analysis import Analysis, GameSearch
    from selfplay.tree_search.evaluators import PositionEvaluator
    from selfplay.tree_search.search import SearchConfig
    from zero.corpus.opening_book import OpeningBook
    from zero.endgames.egdb import Egdb


class EngineError(RuntimeError):
    """The engine cannot be built or asked (missing checkpoint, bad budget): the message says why."""


@dataclass(frozen=True)
class Level:
    """A named playing strength: how many search simulations the engine spends on a move."""

    name: str
    simulations: int
    description: str


LEVELS: dict[str, Level] = {
    level.name: level
    for level in (
        Level("beginner", 8, "a glance: mostly the network's first instinct"),
        Level("club", 64, "a short look ahead"),
        Level("expert", 256, "a careful search"),
        Level("master", 1024, "a deep search (several seconds a move on a laptop CPU)"),
    )
}
DEFAULT_LEVEL = "club"

# An agreed draw is accepted when the engine's expected score (win + half the draw chance, from its own
# side) is at most this: it takes the draw unless it believes it is clearly better.
DRAW_ACCEPT_MAX_SCORE = 0.55

@dataclass(frozen=True)
class Budget:
    """How much search a move gets: a fixed number of simulations, or as many as fit in `seconds`."""

    simulations: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if (self.simulations is None) == (self.seconds is None):
            raise EngineError("a search budget is either a number of simulations or a time, not both or neither")
        if self.simulations is not None and self.simulations < 1:
            raise EngineError(f"simulations must be at least 1, not {self.simulations}")
        if self.seconds is not None and not self.seconds > 0:
            raise EngineError(f"the time per move must be positive, not {self.seconds}")

    def __str__(self) -> str:
        if self.simulations is not None:
            return f"{self.simulations} simulations"
        return f"{self.seconds:g} s"


def budget_for(level: str | None = None, simulations: int | None = None, seconds: float | None = None) -> Budget:
    """The budget a command line asks for: --sims or --time win over --level; the default is DEFAULT_LEVEL."""
    if simulations is not None and seconds is not None:
        raise EngineError("give either --sims or --time, not both")
    if simulations is not None or seconds is not None:
        return Budget(simulations=simulations, seconds=seconds)
    name = level or DEFAULT_LEVEL
    if name not in LEVELS:
        raise EngineError(f"unknown level {name!r}; levels: {', '.join(LEVELS)}")
    return Budget(simulations=LEVELS[name].simulations)


def side_name(black: bool) -> str:
    return "Black" if black else "White"


def plies_left(evaluator: PositionEvaluator, game: Game) -> float | None:
    """The network's estimate of the plies left in the game (its moves-left head); None for an evaluator
    without one."""
    predict = getattr(evaluator, "predict", None)
    if predict is None:
        return None
    from zero.net.encoding import encode_game

    moves_left = predict(encode_game(game)[None])[2]
    return None if moves_left is None else float(moves_left[0])


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """--threads, for the commands a user searches with (play, analyze, serve, engine, review). The default
    is one: on a 2-core machine two searched about 1.3-1.5x the simulations but lost games at 0.1 s a move
    (the second call's pending leaves make the search less selective; benchmarks/RESULTS.md)."""
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="network calls the search keeps in flight, each on a core of its own (default 1; "
                             f"this machine has {os.cpu_count() or 1} cores)")


def add_book_argument(parser: argparse.ArgumentParser) -> None:
    """--no-book, for the commands whose engine plays moves (play, serve)."""
    parser.add_argument("--no-book", action="store_true",
                        help="search the opening too (by default the engine plays the OCA experts' main line from "
                             "an opening book, built from the data folder's OCA_2.0.pdn on first use)")


class Engine:
    """A checkpoint's network plus the search of one game at a time (selfplay.tree_search.analysis.GameSearch: its tree
    follows the game from move to move). Not thread-safe: callers that share one serialise calls."""

    def __init__(self, evaluator: PositionEvaluator, checkpoint: Path, search_config: SearchConfig | None = None,
                 egdb: Egdb | None = None, book: OpeningBook | None = None) -> None:
        self.evaluator = evaluator
        self.checkpoint = checkpoint
        self.search_config = search_config
        self.egdb = egdb  # positions it holds are exact in the search and in the analysis
        self.book = book  # where it has the position, `choose` plays its move unsearched
        self._search = None  # made on the first search, which imports the numba kernels

    @classmethod
    def load(cls, checkpoint: str | Path | None = None, endgame_database: bool = True, threads: int = 1,
             opening_book: bool = True) -> Engine:
        """The engine for a checkpoint file or a run directory (its best network), by default the shipped
        network; with the endgame database (the largest built, the 4-piece one built on first use in
        seconds) and the opening book (zero.corpus.opening_book, built from the data folder's OCA games on first
        use; none when that file is absent) unless told not to; its search keeps `threads` network calls in
        flight (selfplay.tree_search.search.SearchConfig.threads)."""
        from selfplay.tree_search.analysis import single_game_search
        from zero.net.checkpoint import CheckpointError, resolve_checkpoint
        from zero.net.inference import SMALL_BATCH_THREADS, Evaluator

        try:
            path = resolve_checkpoint(checkpoint)
        except CheckpointError as exc:
            raise EngineError(str(exc)) from None
        if not path.is_file():
            hint = "" if checkpoint is not None else " (the shipped checkpoint; name another with --checkpoint PATH)"
            raise EngineError(f"checkpoint {path} not found{hint}")
        import torch

        search_config = dataclasses.replace(single_game_search(), threads=threads)
        try:
            search_config.validate()
        except ValueError as exc:
            raise EngineError(str(exc)) from None
        # The search sends the network a few leaves at a time: on a CPU, intra-op threads only add
        # synchronisation at such batches (measured: 25x slower per batch of two with 2 threads on a busy
        # 2-core machine). More cores serve calls in flight side by side.
        torch.set_num_threads(SMALL_BATCH_THREADS)
        # What each front end (play, analyze, engine, review, serve) does before its first answer is said as
        # it begins (the network here, the database and the book in what they call): 20-40 s of silence
        # on a busy machine read as a hang (issue 85).
        notify(f"loading the network {path} ...")
        try:
            evaluator = Evaluator.from_checkpoint(path)
        except CheckpointError as exc:
            raise EngineError(str(exc)) from None
        egdb = None
        if endgame_database:
            from zero.endgames.egdb import EgdbFileError
            from zero.endgames.egdb_build import largest_available, say_which_database

            try:
                egdb = say_which_database(largest_available())
            except (EgdbFileError, OSError) as exc:
                raise EngineError(f"endgame database: {exc} (or play without it: --no-egdb)") from None
        book = None
        if opening_book:
            from zero.corpus.opening_book import ensure_book

            try:
                book = ensure_book()
            except FileNotFoundError as exc:
                # No OCA games to build it from: the engine searches its opening moves, and the person is told,
                # or its weaker openings would pass for the engine's best.
                notify(f"playing without the opening book ({exc})")
            except OSError as exc:
                raise EngineError(f"opening book: {exc} (or play without it: --no-book)") from None
        return cls(evaluator, path, search_config, egdb=egdb, book=book)

    @property
    def name(self) -> str:
        return f"checkers-zero {self.checkpoint.stem}"

    def warm_up(self) -> None:
        """Compile the search's kernels now (selfplay.tree_search.search.warm_up), not in the first search's time."""
        from selfplay.tree_search.search import warm_up

        warm_up(self.evaluator, self.search_config, egdb=self.egdb)

    def analyse(self, game: Game, budget: Budget) -> Analysis:
        """Search the game's current position within the budget (the game must not be over)."""
        if game.outcome is not None:
            raise EngineError("the game is over: there is nothing to search")
        return self._described(self._game_search().analyse(game, budget.simulations, budget.seconds), game)

    def choose(self, game: Game, budget: Budget) -> tuple[Move, Analysis | None]:
        """The engine's move and the search behind it (selfplay.tree_search.analysis.GameSearch.choose): a forced move
        and the opening book's move are played at once, unsearched (None); on the clock the search stops
        once its move cannot change."""
        if game.outcome is not None:
            raise EngineError("the game is over: there is nothing to search")
        if self.book is not None and (move := self.book.move(game.position)) is not None:
            return move, None
        move, analysis = self._game_search().choose(game, budget.simulations, budget.seconds)
        return move, None if analysis is None else self._described(analysis, game)

    def _game_search(self) -> GameSearch:
        from selfplay.tree_search.analysis import GameSearch
        from selfplay.tree_search.evaluators import CachedEvaluator

        if self._search is None:
            # Evaluations are remembered by position: the positions of the last searches come back in the
            # next (transpositions, and the replies the opponent's move left out of the kept subtree).
            self._search = GameSearch(CachedEvaluator(self.evaluator), self.search_config, egdb=self.egdb)
        return self._search

    def _described(self, analysis: Analysis, game: Game) -> Analysis:
        """The analysis of a search of the game's position with what the front ends show beside it: each
        move's line and the network's estimate of the plies left."""
        analysis.lines = self._search.candidate_lines(game.position, [stat.move for stat in analysis.moves])
        analysis.plies_left = plies_left(self.evaluator, game)
        return analysis

    def accepts_draw(self, game: Game, budget: Budget, engine_is_black: bool) -> tuple[bool, float]:
        """Whether the engine agrees to a draw offered by its opponent, and its expected score behind that.

        The search evaluates the position for the side to move; when that is the offerer, the engine's
        expected score is the complement.
        """
        win, draw, _loss = (float(x) for x in self.analyse(game, budget).root_wdl)
        score_for_mover = win + draw / 2
        score = score_for_mover if game.position.black_to_move == engine_is_black else 1 - score_for_mover
        return score <= DRAW_ACCEPT_MAX_SCORE, score

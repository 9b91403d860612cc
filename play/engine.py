"""The engine a person plays against: the default player (the alpha-beta search over the distilled evaluation,
the one the matches chose) or a network's MCTS, at a chosen strength, with the endgame database and the
opening book.

Which engine a checkpoint names (`engine_kind`): a distilled evaluation (`.npz`, by default
checkpoints/distilled.npz) is searched by alpha-beta (AlphaBetaEngine), a network (`.pt`, or a run directory's
best) by MCTS (MctsEngine). Strength is a search budget: a named level, a number of simulations (MCTS), a
depth (alpha-beta) or a time per move. Everything the front ends show about the engine's thinking is its
analysis as `play.analysis_json` writes it (win/draw/loss, principal variation; visit shares for MCTS, depth
and nodes for alpha-beta).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from zero.rules.game import Game, Move
from zero.run.config import notify

if TYPE_CHECKING:  # the searches (numba kernels) are imported only when an engine searches
    from selfplay.tree_search.analysis import Analysis, GameSearch
    from selfplay.tree_search.evaluators import PositionEvaluator
    from selfplay.tree_search.search import SearchConfig
    from zero.corpus.opening_book import OpeningBook
    from zero.distilled.model import DistilledEval
    from zero.endgames.egdb import Egdb
    from zero.alphabeta.player import DistilledPlayer


class EngineError(RuntimeError):
    """The engine cannot be built or asked (missing checkpoint, bad budget): the message says why."""


ALPHABETA, MCTS = "alphabeta", "mcts"
# The engine of `default` (train.arena.player_specs.DEFAULT_PLAYER, which a test holds equal): the alpha-beta
# player over the distilled evaluation since its generation 1 beat the whole player (MCTS over the network),
# +38 (+22 .. +54) in 288 games at 0.1 s a move (benchmarks/RESULTS.md).
DEFAULT_KIND = ALPHABETA


def engine_kind(checkpoint: str | Path | None) -> str:
    """Which engine a checkpoint names: a distilled evaluation (.npz) alpha-beta, a network or a run
    directory MCTS; none, the default player's."""
    if checkpoint is None or str(checkpoint) == "":
        return DEFAULT_KIND
    return ALPHABETA if Path(checkpoint).suffix == ".npz" else MCTS


@dataclass(frozen=True)
class Level:
    """A named playing strength: the simulations an MCTS engine spends on a move, the plies an alpha-beta
    one searches."""

    name: str
    simulations: int
    depth: int
    description: str

    def budget(self, kind: str) -> Budget:
        return Budget(depth=self.depth) if kind == ALPHABETA else Budget(simulations=self.simulations)


# The alpha-beta depths, on this project's 2-core machine: 2 and 6 plies in milliseconds, 12 about 0.03 s, 18
# about a second (a mid-opening position); the matches' 0.1 s a move reaches about 15.
LEVELS: dict[str, Level] = {
    level.name: level
    for level in (
        Level("beginner", 8, 2, "a glance: mostly the first instinct"),
        Level("club", 64, 6, "a short look ahead"),
        Level("expert", 256, 12, "a careful search"),
        Level("master", 1024, 18, "a deep search (a second or more a move on a laptop CPU)"),
    )
}
DEFAULT_LEVEL = "club"

# An agreed draw is accepted when the engine's expected score (win + half the draw chance, from its own
# side) is at most this: it takes the draw unless it believes it is clearly better.
DRAW_ACCEPT_MAX_SCORE = 0.55


@dataclass(frozen=True)
class Budget:
    """How much search a move gets: a number of simulations (MCTS), a depth in plies (alpha-beta), or as
    much as fits in `seconds` (either)."""

    simulations: int | None = None
    seconds: float | None = None
    depth: int | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.simulations, self.seconds, self.depth)) != 1:
            raise EngineError("a search budget is a number of simulations, a depth or a time: one of them")
        if self.simulations is not None and self.simulations < 1:
            raise EngineError(f"simulations must be at least 1, not {self.simulations}")
        if self.depth is not None and self.depth < 1:
            raise EngineError(f"the depth must be at least 1 ply, not {self.depth}")
        if self.seconds is not None and not 0 < self.seconds < math.inf:
            raise EngineError(f"the time per move must be a positive number of seconds, not {self.seconds}")

    def __str__(self) -> str:
        if self.simulations is not None:
            return f"{self.simulations} simulations"
        if self.depth is not None:
            return f"{self.depth} plies"
        return f"{self.seconds:g} s"


def budget_for(level: str | None = None, simulations: int | None = None, seconds: float | None = None,
               depth: int | None = None, kind: str = DEFAULT_KIND) -> Budget:
    """The budget a command line asks for: --sims, --depth or --time win over --level (whose measure is the
    engine `kind`'s); the default is DEFAULT_LEVEL."""
    if sum(x is not None for x in (simulations, seconds, depth)) > 1:
        raise EngineError("give one of --sims, --depth and --time")
    if simulations is not None or seconds is not None or depth is not None:
        return Budget(simulations=simulations, seconds=seconds, depth=depth)
    name = level or DEFAULT_LEVEL
    if name not in LEVELS:
        raise EngineError(f"unknown level {name!r}; levels: {', '.join(LEVELS)}")
    return LEVELS[name].budget(kind)


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


def score_wdl(expected: float) -> tuple[float, float, float]:
    """The win/draw/loss with this expected score that draws most: the distilled evaluation predicts an
    expected score, not a draw's chance, and in checkers the points a side does not expect are mostly draws."""
    edge = 2 * expected - 1
    return max(edge, 0.0), 1 - abs(edge), max(-edge, 0.0)


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """--threads, for the commands a user searches with (play, analyze, serve, engine, review). The default
    is one: on a 2-core machine two searched about 1.3-1.5x the simulations but lost games at 0.1 s a move
    (the second call's pending leaves make the search less selective; benchmarks/RESULTS.md)."""
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="network calls an MCTS engine keeps in flight, each on a core of its own (default 1; "
                             f"this machine has {os.cpu_count() or 1} cores; the alpha-beta engine searches on one)")


def add_book_argument(parser: argparse.ArgumentParser) -> None:
    """--no-book, for the commands whose engine plays moves (play, serve)."""
    parser.add_argument("--no-book", action="store_true",
                        help="search the opening too (by default the engine plays the OCA experts' main line from "
                             "an opening book, built from the data folder's OCA_2.0.pdn on first use)")


def add_engine_arguments(parser: argparse.ArgumentParser, plays: bool) -> None:
    """--checkpoint, --no-egdb, --threads, and for the commands whose engine plays moves --no-book."""
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="the engine: a distilled evaluation (.npz: the alpha-beta player) or a network (.pt, or "
                             "a run directory's best: MCTS); default the default player, the alpha-beta search over "
                             "checkpoints/distilled.npz")
    add_no_egdb_argument(parser)
    add_threads_argument(parser)
    if plays:
        add_book_argument(parser)


def add_no_egdb_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-egdb", action="store_true",
                        help="search without the endgame database (by default positions of few pieces are exact)")


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    """--level, --sims, --depth, --time: a search's budget (budget_for)."""
    strength = parser.add_mutually_exclusive_group()
    strength.add_argument("--level", choices=list(LEVELS),
                          help=f"named strength (default: {DEFAULT_LEVEL}): "
                               + ", ".join(f"{lv.name} {lv.depth} plies or {lv.simulations} sims" for lv in LEVELS.values()))
    strength.add_argument("--sims", type=int, metavar="N", help="search simulations per engine move (an MCTS engine)")
    strength.add_argument("--depth", type=int, metavar="PLIES", help="search depth per engine move (the alpha-beta engine)")
    strength.add_argument("--time", type=float, metavar="SECONDS", help="search time per engine move")


class Engine:
    """The engine of one game at a time: its search (MctsEngine, AlphaBetaEngine), the endgame database and the
    opening book. Not thread-safe: callers that share one serialise calls."""

    kind = ""

    def __init__(self, checkpoint: Path, egdb: Egdb | None = None, book: OpeningBook | None = None) -> None:
        self.checkpoint = checkpoint
        self.egdb = egdb  # positions it holds are exact in the search and in the analysis
        self.book = book  # where it has the position, `choose` plays its move unsearched

    @staticmethod
    def load(checkpoint: str | Path | None = None, endgame_database: bool = True, threads: int = 1,
             opening_book: bool = True) -> Engine:
        """The engine a checkpoint names (engine_kind; none: the default player's, the alpha-beta search over
        the shipped distilled evaluation); with the endgame database (the largest built of at most 6 pieces,
        the 4-piece one built on first use in seconds) and the opening book (zero.corpus.opening_book, built
        from the data folder's OCA games on first use; none when that file is absent) unless told not to. An
        MCTS engine keeps `threads` network calls in flight (selfplay.tree_search.search.SearchConfig.threads)."""
        if engine_kind(checkpoint) == MCTS:
            return MctsEngine.load(checkpoint, endgame_database, threads, opening_book)
        if threads != 1:
            raise EngineError(f"--threads {threads}: the alpha-beta engine searches on one core (--threads is for "
                              "a network's MCTS engine)")
        return AlphaBetaEngine.load(checkpoint, endgame_database, opening_book)

    @property
    def name(self) -> str:
        return f"checkers-zero {self.checkpoint.stem}"

    def warm_up(self) -> None:
        """Compile the search's kernels now, not in the first search's time."""
        raise NotImplementedError

    def analyse(self, game: Game, budget: Budget) -> Analysis:
        """Search the game's current position within the budget (the game must not be over)."""
        self._check(game, budget)
        return self._analyse(game, budget)

    def choose(self, game: Game, budget: Budget) -> tuple[Move, Analysis | None]:
        """The engine's move and the search behind it: a forced move and the opening book's move are played at
        once, unsearched (None)."""
        self._check(game, budget)
        if self.book is not None and (move := self.book.move(game.position)) is not None:
            return move, None
        return self._choose(game, budget)

    def accepts_draw(self, game: Game, budget: Budget, engine_is_black: bool) -> tuple[bool, float]:
        """Whether the engine agrees to a draw offered by its opponent, and its expected score behind that.

        The search evaluates the position for the side to move; when that is the offerer, the engine's
        expected score is the complement.
        """
        win, draw, _loss = (float(x) for x in self.analyse(game, budget).root_wdl)
        score_for_mover = win + draw / 2
        score = score_for_mover if game.position.black_to_move == engine_is_black else 1 - score_for_mover
        return score <= DRAW_ACCEPT_MAX_SCORE, score

    def check_budget(self, budget: Budget) -> None:
        """Refuse a budget this engine cannot search (EngineError): each engine names the measures it refuses."""
        raise NotImplementedError

    def _check(self, game: Game, budget: Budget) -> None:
        if game.outcome is not None:
            raise EngineError("the game is over: there is nothing to search")
        self.check_budget(budget)

    def _analyse(self, game: Game, budget: Budget) -> Analysis:
        raise NotImplementedError

    def _choose(self, game: Game, budget: Budget) -> tuple[Move, Analysis | None]:
        raise NotImplementedError


def _load_extras(endgame_database: bool, opening_book: bool) -> tuple[Egdb | None, OpeningBook | None]:
    """The endgame database and the opening book an engine plays with, each said as it loads."""
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
    return egdb, book


class MctsEngine(Engine):
    """A checkpoint's network plus the search of one game at a time (selfplay.tree_search.analysis.GameSearch:
    its tree follows the game from move to move)."""

    kind = MCTS

    def __init__(self, evaluator: PositionEvaluator, checkpoint: Path, search_config: SearchConfig | None = None,
                 egdb: Egdb | None = None, book: OpeningBook | None = None) -> None:
        super().__init__(checkpoint, egdb, book)
        self.evaluator = evaluator
        self.search_config = search_config
        self._search = None  # made on the first search, which imports the numba kernels

    @classmethod
    def load(cls, checkpoint: str | Path | None = None, endgame_database: bool = True, threads: int = 1,
             opening_book: bool = True, egdb: Egdb | None = None) -> MctsEngine:
        """The MCTS engine for a checkpoint file or a run directory (its best network), by default the shipped
        network (Engine.load says the rest); `egdb`: a database already loaded, shared rather than loaded again
        (its tables are only read)."""
        from selfplay.tree_search.analysis import single_game_search
        from zero.net.checkpoint import CheckpointError, resolve_checkpoint
        from zero.net.inference import SMALL_BATCH_THREADS, Evaluator

        try:
            path = resolve_checkpoint(checkpoint)
        except CheckpointError as exc:
            raise EngineError(str(exc)) from None
        if not path.is_file():
            hint = "" if checkpoint is not None else " (the shipped network; name another with --checkpoint PATH)"
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
        loaded, book = _load_extras(endgame_database and egdb is None, opening_book)
        return cls(evaluator, path, search_config, egdb=egdb or loaded, book=book)

    def warm_up(self) -> None:
        from selfplay.tree_search.search import warm_up

        warm_up(self.evaluator, self.search_config, egdb=self.egdb)

    def check_budget(self, budget: Budget) -> None:
        if budget.depth is not None:
            raise EngineError(f"a network's MCTS engine searches simulations or a time, not a depth ({budget})")

    def _analyse(self, game: Game, budget: Budget) -> Analysis:
        return self._described(self._game_search().analyse(game, budget.simulations, budget.seconds), game)

    def _choose(self, game: Game, budget: Budget) -> tuple[Move, Analysis | None]:
        # selfplay.tree_search.analysis.GameSearch.choose: a forced move unsearched, and on the clock the
        # search stops once its move cannot change.
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


class AlphaBetaEngine(Engine):
    """The default player: the alpha-beta search over a distilled evaluation (zero.alphabeta.player.
    DistilledPlayer, selective as in the matches), to a depth or for a time a move. Its analysis is the move it
    found, the score behind it (as win/draw/loss: score_wdl), its principal variation, the depth of the
    iteration its move came from and the nodes it visited."""

    kind = ALPHABETA

    def __init__(self, evaluation: DistilledEval, checkpoint: Path, egdb: Egdb | None = None,
                 book: OpeningBook | None = None) -> None:
        super().__init__(checkpoint, egdb, book)
        self.evaluation = evaluation
        self._player: DistilledPlayer | None = None  # made on the first search, which imports the numba kernels

    @classmethod
    def load(cls, checkpoint: str | Path | None = None, endgame_database: bool = True,
             opening_book: bool = True) -> AlphaBetaEngine:
        """The alpha-beta engine over a distilled evaluation file, by default the shipped one (Engine.load)."""
        from zero.distilled.model import DEFAULT_DISTILLED, DistilledFileError, load_eval

        path = Path(checkpoint) if checkpoint else DEFAULT_DISTILLED
        notify(f"loading the distilled evaluation {path} ...")
        try:
            evaluation = load_eval(path)
        except DistilledFileError as exc:
            raise EngineError(str(exc)) from None
        egdb, book = _load_extras(endgame_database, opening_book)
        return cls(evaluation, path, egdb, book)

    def warm_up(self) -> None:
        self._search(Game(), Budget(depth=1))

    def check_budget(self, budget: Budget) -> None:
        from zero.alphabeta.search import MAX_DEPTH

        if budget.simulations is not None:
            raise EngineError(f"the alpha-beta engine searches to a depth or for a time, not simulations ({budget})")
        if budget.depth is not None and budget.depth > MAX_DEPTH:
            raise EngineError(f"the depth must be at most {MAX_DEPTH} plies, not {budget.depth}")

    def _analyse(self, game: Game, budget: Budget) -> Analysis:
        return self._search(game, budget)

    def _choose(self, game: Game, budget: Budget) -> tuple[Move, Analysis | None]:
        legal = game.legal_moves()
        if len(legal) == 1:
            return legal[0], None
        analysis = self._search(game, budget)
        return analysis.moves[0].move, analysis

    def _searcher(self) -> DistilledPlayer:
        from zero.alphabeta.player import DistilledPlayer

        if self._player is None:
            # Each search sets its own budget: for a time its table is kept from the searches before (every
            # entry is exact for its depth), to a depth each starts afresh, its move a function of the game.
            self._player = DistilledPlayer(seconds=1.0, evaluation=self.evaluation, egdb=self.egdb)
        return self._player

    def _search(self, game: Game, budget: Budget) -> Analysis:
        from selfplay.tree_search.analysis import Analysis, MoveStats, Proven
        from zero.alphabeta.search import WIN_SCORE, WIN_THRESHOLD
        from zero.distilled.kernels import SCORE_UNITS

        player = self._searcher()
        player.depth, player.seconds = budget.depth, budget.seconds
        started = time.perf_counter()
        move, score, nodes = player.search(game)
        seconds = time.perf_counter() - started
        proven = None
        if abs(score) > WIN_THRESHOLD:
            proven = Proven(1 if score > 0 else -1, WIN_SCORE - abs(score))
            wdl = (1.0, 0.0, 0.0) if score > 0 else (0.0, 0.0, 1.0)
        else:
            wdl = score_wdl(1 / (1 + math.exp(-score / SCORE_UNITS)))
        pv = player.principal_variation(game.position, move)
        stat = MoveStats(move, visits=0, prior=0.0, q=wdl[0] - wdl[2], wdl=wdl, proven=proven)
        return Analysis(moves=[stat], pv=pv, root_wdl=wdl, simulations=0, root_value=wdl[0] - wdl[2],
                        proven=proven, nodes=nodes, seconds=seconds, lines={move: pv}, depth=player.last_depth)

"""The browser's analysis board (play.server routes to it): lines a person steps through, the engine's live
analysis of a position and game reviews, the last two as jobs that run in the background and are polled.

A job is one search the page asked for: an analysis (play.engine.Engine.analyse on the server's one engine
when it is a network's MCTS, else on an MCTS engine of the shipped network made on the first analysis: an
analysis shows every move's visits and win/draw/loss, which the alpha-beta player's search does not give; in
short rounds that each keep the tree of the one before, so the page polls a growing analysis and a game's
move waits at most a round for the engine) or a review (play.review.review_games, on an analysis engine of its
own, play.api.Engine, made on the first review). Both answer in play.analysis_json's shape. Jobs are bounded
as the server's games are: a client runs one analysis (a new one stops its last) and one review at a time,
an address at most `per_address` jobs, the server `most` (a finished job makes room, a running one does not);
a job nobody has asked about for `idle_seconds` stops itself, so a closed tab does not keep the engine busy.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from play.analysis_json import analysis_json
from play.engine import MCTS, Budget, Engine, EngineError, MctsEngine
from play.review import GameReview, ReviewSettings, review_games
from zero.corpus.pdn import PdnGame
from zero.rules.game import Game, Position
from zero.rules.notation import fen_to_position, resolve_move

if TYPE_CHECKING:
    from play.api import Engine as AnalysisEngine

# A round of live analysis aims at this long: the page sees the analysis grow about three times a second,
# and a move in a game waits no longer for the engine.
ROUND_SECONDS = 0.3
FIRST_ROUND_SIMULATIONS = 16


class ApiError(Exception):
    """A request the page's API (play.server and this board) refuses: HTTP status and a message for the person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def position_of(fen: str | None, moves: list[str]) -> Game:
    """The game of a start (a FEN, default the initial position) and moves played from it, read as the page's
    and a PDN's moves are."""
    game = Game(start=fen_to_position(fen) if fen else Position.initial())
    for ply, text in enumerate(moves):
        if game.outcome is not None:
            raise ApiError(422, f"the game is over after ply {ply} ({game.outcome.termination.value}); "
                                f"{text!r} cannot follow")
        game.play(resolve_move(text, game.legal_moves()))
    return game


def line_json(game: Game) -> dict[str, Any]:
    """A game as the page steps through it: the position before each move and after the last, and the legal
    moves in each (a person may play on from any of them)."""
    def legal(position: Position) -> list[dict[str, Any]]:
        return [{"move": str(m), "path": list(m.path)} for m in position.legal_moves()]

    return {
        "fen": game.positions[0].fen(),
        "moves": [str(m) for m in game.moves],
        "fens": [p.fen() for p in game.positions],
        "legal_moves": [legal(p) for p in game.positions[:-1]] + [[] if game.outcome else legal(game.position)],
        "outcome": None if game.outcome is None else {"result": game.outcome.pdn_result,
                                                      "termination": game.outcome.termination.value},
    }


def pdn_game_json(game: PdnGame) -> dict[str, Any]:
    """One game of a PDN file, for the page's list to choose from."""
    return {"index": game.index, "tags": game.tags, "result": game.result, "fen": game.start.fen(),
            "moves": [str(m) for m in game.moves]}


@dataclass(eq=False)
class Job:
    """One analysis or review: who asked, how far it is, its latest answer."""

    kind: str  # "analysis" or "review"
    client: str
    address: str
    total: int  # simulations (an analysis) or positions (a review) it will search at most
    id: str = field(default_factory=lambda: secrets.token_hex(8))
    state: str = "waiting"  # waiting, running, done, stopped, failed
    done: int = 0
    result: dict[str, Any] | None = None
    error: str | None = None
    asked: float = field(default_factory=time.monotonic)  # when the client last asked about it
    stopping: threading.Event = field(default_factory=threading.Event)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "stopped", "failed")

    def json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "state": self.state, "done": self.done, "total": self.total,
                "error": self.error, self.kind: self.result}


class Board:
    """The jobs of every client (see the module doc). `engine_lock` is the server's: the play engine is one."""

    def __init__(self, engine: Engine, engine_lock: threading.Lock, most: int, per_address: int,
                 idle_seconds: float, analysis_engine: Callable[[], AnalysisEngine] | None = None) -> None:
        self.engine = engine
        self.engine_lock = engine_lock
        # The network the analyses and reviews search: the play engine's, or the shipped one beside the
        # alpha-beta player (whose own engine and lock it then never takes).
        self.network = engine.checkpoint if engine.kind == MCTS else None
        self._analysis_search: tuple[Engine, threading.Lock] | None = (engine, engine_lock) if engine.kind == MCTS \
            else None
        self._load_lock = threading.Lock()  # one thread loads that network
        self.most = most
        self.per_address = per_address
        self.idle_seconds = idle_seconds
        self.jobs: OrderedDict[str, Job] = OrderedDict()  # least recently asked about first
        self.lock = threading.Lock()  # the table only
        self.review_lock = threading.Lock()  # the review engine searches one review at a time
        self._make_analysis_engine = analysis_engine or self._default_analysis_engine
        self._analysis_engine: AnalysisEngine | None = None

    def _default_analysis_engine(self) -> AnalysisEngine:
        from play.api import Engine as AnalysisEngine
        from play.queries import EngineSettings

        # A handful of trees: a review is one game, and the page's reviews run one at a time.
        return AnalysisEngine(self.network, EngineSettings(slots=16),
                              endgame_database=self.engine.egdb is not None)

    # ------------------------------------------------------------------------------------------ table

    def job(self, job_id: str, kind: str) -> Job:
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None or job.kind != kind:
                raise ApiError(404, f"no {kind} {job_id!r} (it may have made room for newer ones: start another)")
            job.asked = time.monotonic()
            self.jobs.move_to_end(job_id)
            return job

    def stop(self, job_id: str, kind: str) -> Job:
        job = self.job(job_id, kind)
        job.stopping.set()
        return job

    def _admit(self, job: Job) -> None:
        """Put a new job in the table, or refuse it (see the module doc)."""
        with self.lock:
            running = [j for j in self.jobs.values() if not j.finished]
            for other in running:
                if other.client == job.client and other.kind == job.kind:
                    if job.kind == "review":
                        raise ApiError(409, "a review of yours is running: stop it or wait for it first")
                    other.stopping.set()  # a new position to analyse: the last one is no longer shown
                    running.remove(other)
            if sum(j.address == job.address for j in running) >= self.per_address:
                raise ApiError(429, f"your address runs {self.per_address} analyses and reviews, the most one "
                                    f"address may run; stop one first")
            if len(self.jobs) >= self.most:
                gone = next((jid for jid, j in self.jobs.items() if j.finished), None)
                if gone is None:
                    raise ApiError(503, f"the server runs {len(self.jobs)} analyses and reviews, the most it "
                                        f"runs at once; try again when one is done")
                del self.jobs[gone]
            self.jobs[job.id] = job

    def _start(self, job: Job, work: Callable[[Job], None]) -> Job:
        self._admit(job)

        def run() -> None:
            try:
                work(job)
            except (EngineError, ValueError) as exc:
                job.error, job.state = str(exc), "failed"
            except Exception as exc:  # a bug: the job says so rather than hang "running" for ever
                job.error, job.state = f"internal error: {exc!r}", "failed"
                raise

        threading.Thread(target=run, name=f"board-{job.kind}", daemon=True).start()
        return job

    def _should_stop(self, job: Job) -> bool:
        if time.monotonic() - job.asked > self.idle_seconds:
            job.error = f"stopped: nobody asked about it for {self.idle_seconds:g} s"
            job.stopping.set()
        return job.stopping.is_set()

    # --------------------------------------------------------------------------------------- analysis

    def start_analysis(self, client: str, address: str, game: Game, simulations: int, top: int) -> Job:
        """The engine's analysis of the game's position, up to `simulations`, growing while the page polls."""
        if game.outcome is not None:
            raise ApiError(409, f"the game is over there ({game.outcome.termination.value}): nothing to analyse")
        return self._start(Job("analysis", client, address, simulations),
                           lambda job: self._analyse(job, game, simulations, top))

    def _analyse(self, job: Job, game: Game, simulations: int, top: int) -> None:
        job.state = "running"
        started = time.monotonic()
        step = FIRST_ROUND_SIMULATIONS
        while not self._should_stop(job):
            target = min(simulations, job.done + step)
            round_started = time.monotonic()
            engine, lock = self._live_search()
            with lock:
                # The engine keeps its tree when the game is the one it searched last: each round adds to it.
                analysis = engine.analyse(game, Budget(simulations=target))
            took = time.monotonic() - round_started
            analysis.seconds = time.monotonic() - started  # the whole analysis's, not this round's
            grew = analysis.simulations > job.done
            job.result = analysis_json(analysis, game.position, game.ply, query_id=job.id, top=top)
            job.done = analysis.simulations
            if job.done >= simulations or analysis.proven is not None or not grew:
                job.state = "done"
                return
            step = max(FIRST_ROUND_SIMULATIONS, min(4 * step, int(step * ROUND_SECONDS / max(took, 1e-3))))
        job.state = "stopped"

    def _live_search(self) -> tuple[Engine, threading.Lock]:
        """The MCTS engine the live analyses search with, and the lock that serialises its searches."""
        with self._load_lock:
            if self._analysis_search is None:
                engine = MctsEngine.load(self.network, endgame_database=False, opening_book=False,
                                         egdb=self.engine.egdb)
                self._analysis_search = engine, threading.Lock()
            return self._analysis_search

    # ----------------------------------------------------------------------------------------- review

    def start_review(self, client: str, address: str, game: PdnGame, simulations: int) -> Job:
        """The review `checkers-zero review` makes of one game, each position searched to `simulations`."""
        return self._start(Job("review", client, address, game.plies + 1),
                           lambda job: self._review(job, game, simulations))

    def _review(self, job: Job, game: PdnGame, simulations: int) -> None:
        class Stopped(Exception):
            pass

        def count_position() -> None:
            job.done += 1
            if self._should_stop(job):
                raise Stopped

        with self.review_lock:  # reviews wait here in turn; one stopped while waiting never starts
            if self._should_stop(job):
                job.state = "stopped"
                return
            job.state = "running"
            if self._analysis_engine is None:
                self._analysis_engine = self._make_analysis_engine()
            try:
                for result in review_games(self._analysis_engine, [game], {"simulations": simulations, "pv": True},
                                           ReviewSettings(), on_position=count_position):
                    if isinstance(result, GameReview):
                        job.result = result.json()
                    else:
                        raise EngineError(result[1])
            except BaseException as exc:
                # The engine still holds the rest of the game's positions: a fresh one serves the next review.
                self._analysis_engine = None
                if not isinstance(exc, Stopped):
                    raise
                job.state = "stopped"
                return
        job.done = job.total
        job.state = "done"


"""The engine protocol's queries and answers as data: reading a query (every field checked, every problem a
`QueryError` with a message for people), the version and error answers (an analysis's answer is
`play.analysis_json`'s). `play/ENGINE_PROTOCOL.md` is the reference; the JSON-lines front end
(`play.protocol`) and the Python API (`play.api`) both go through here.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from typing import Any

from selfplay.tree_search import mcts
from selfplay.tree_search.analysis import single_game_search
from selfplay.tree_search.evaluators import MOST_CACHE_POSITIONS
from selfplay.tree_search.search import MOST_SIMULATIONS, SearchConfig
from selfplay.tree_search.time_manager import TimeManager
from zero.corpus.pdn import MAX_PLIES
from zero.rules import movegen
from zero.rules.game import Game, Move, Position, RulesConfig
from zero.rules.notation import NotationError, fen_to_position, resolve_move
from zero.run.config import check_settings, setting

PROTOCOL_VERSION = 1
ENGINE_NAME = "checkers-zero"

# Fields a query may carry; anything else is refused (a misspelt limit must not silently search by default).
QUERY_FIELDS = ("id", "query", "fen", "moves", "simulations", "time", "clock", "increment", "nodes", "top", "pv", "wdl",
                "analyze_plies")
QUERY_KINDS = ("analyse", "analyze", "version")


class QueryError(ValueError):
    """A query the engine cannot answer; the message says why, and `id` is the query's id when it had a
    readable one."""

    def __init__(self, message: str, query_id: str | int | None = None):
        super().__init__(message)
        self.query_id = query_id


@dataclass
class EngineSettings:
    """How an analysis engine searches: shared by the `engine` and `review` commands and the Python API."""

    # Positions searched together: trees of the batched search, leaves in one network batch.
    slots: int = setting(32, low=1, high=4096)
    # Node pool per tree to begin with (~130 bytes a node, touched only as a tree grows): a search for time
    # or simulations that fills it doubles every tree's, up to a quarter of the process's memory over them
    # all; a query's `nodes` may not ask for more.
    tree_nodes: int = setting(250_000, low=movegen.MAX_MOVES + 1, high=mcts.MOST_NODES)
    default_simulations: int = setting(200, low=1, high=MOST_SIMULATIONS)  # the budget of a query that names no limit
    # The largest `simulations`; also where a search for time stops at the latest.
    max_simulations: int = setting(1_000_000, low=1, high=MOST_SIMULATIONS)
    max_seconds: float = 3600.0  # the largest `time`
    # Network answers remembered by position (consecutive plies of a game share most of their trees); 0 = no
    # cache.
    cache_positions: int = setting(16_384, low=0, high=MOST_CACHE_POSITIONS)
    # A game's positions are usually asked one at a time (a program playing through the engine), so each
    # tree fills the network's batches alone, as a game searched alone does (selfplay.tree_search.analysis).
    search: SearchConfig = field(default_factory=single_game_search)
    # Analysis has no game-length cap: a position 400 plies into a game is as analysable as any other.
    rules: RulesConfig = field(default_factory=lambda: RulesConfig(max_plies=0))
    # How a query's game clock (`clock`, `increment`) is spent: as a match player on a game clock spends it.
    time_manager: TimeManager = field(default_factory=TimeManager)

    def validate(self) -> None:
        check_settings(self)
        if self.default_simulations > self.max_simulations:
            raise ValueError(f"default simulations must be between 1 and {self.max_simulations}, "
                             f"not {self.default_simulations}")
        self.search.validate()
        self.time_manager.validate()


@dataclass(frozen=True)
class Limits:
    """When a search stops: at the first limit reached. `nodes` counts the nodes of the tree (positions
    expanded and their children), `seconds` runs from when the position gets a tree. A game clock
    (`clock_left`, the seconds the side to move has left with this move's increment, and `increment`, what
    it gains a move) is a time limit that the engine's time manager makes the move's time
    (play.analysis_pool)."""

    simulations: int | None = None
    seconds: float | None = None
    nodes: int | None = None
    clock_left: float | None = None
    increment: float = 0.0

    @property
    def clock_only(self) -> bool:
        """Only a time limit: a move played on the clock, which may search on in an earlier query's tree
        (play.analysis_pool). A budget of simulations or nodes is an analysis's, searched afresh."""
        timed = self.seconds is not None or self.clock_left is not None
        return timed and self.simulations is None and self.nodes is None


@dataclass(frozen=True)
class Query:
    """An analysis query: the game (start and moves played), the plies of it to analyse (the last by
    default), the limits and what each answer carries."""

    id: str | int | None
    game: Game  # every move played; `positions` gives the game as it stood at each ply to analyse
    plies: tuple[int, ...]
    limits: Limits
    top: int | None  # candidate moves in an answer; None = all legal moves
    pv: bool
    wdl: bool

    def positions(self) -> list[tuple[int, Game]]:
        """(ply, the game as it stood at that ply) for every ply to analyse."""
        return [(ply, game_at(self.game, ply)) for ply in self.plies]


@dataclass(frozen=True)
class VersionQuery:
    id: str | int | None


def game_at(game: Game, ply: int) -> Game:
    """The game as it stood after `ply` moves: the history the draw rules need, without replaying it
    (positions are immutable, so the lists are copied and the positions shared)."""
    earlier = copy.copy(game)
    earlier.moves = game.moves[:ply]
    earlier.positions = game.positions[: ply + 1]
    earlier.no_progress = game.no_progress[: ply + 1]
    earlier._legal = None  # the cached legal moves are those of the last position
    earlier._update_outcome()
    return earlier


def parse_query(obj: Any, settings: EngineSettings) -> Query | VersionQuery:
    """A query read from its JSON object; QueryError (with the id when it is readable) for anything wrong."""
    if not isinstance(obj, dict):
        raise QueryError(f"a query is a JSON object, not {_json_type(obj)}")
    query_id = obj.get("id")
    if query_id is not None and not (isinstance(query_id, str) or _is_int(query_id)):
        raise QueryError(f"id must be a string or an integer, not {_json_type(query_id)}")
    try:
        return _parse_fields(obj, query_id, settings)
    except QueryError as exc:
        exc.query_id = query_id
        raise


def _parse_fields(obj: dict, query_id: str | int | None, settings: EngineSettings) -> Query | VersionQuery:
    unknown = [name for name in obj if name not in QUERY_FIELDS]
    if unknown:
        raise QueryError(f"unknown field {unknown[0]!r}; a query may have {', '.join(QUERY_FIELDS)}")
    kind = obj.get("query", "analyse")
    if kind not in QUERY_KINDS:
        raise QueryError(f"unknown query {kind!r}; queries: {', '.join(QUERY_KINDS)}")
    if kind == "version":
        extra = [name for name in obj if name not in ("id", "query")]
        if extra:
            raise QueryError(f"a version query has only an id, not {extra[0]!r}")
        return VersionQuery(query_id)
    game = _game(obj, settings.rules)
    plies = _plies(obj, game)
    return Query(query_id, game, plies, _limits(obj, settings), _top(obj), _flag(obj, "pv"), _flag(obj, "wdl"))


def _game(obj: dict, rules: RulesConfig) -> Game:
    fen = obj.get("fen")
    if fen is None:
        start = Position.initial()
    elif not isinstance(fen, str):
        raise QueryError(f"fen must be a string, not {_json_type(fen)}")
    else:
        try:
            start = fen_to_position(fen)
        except NotationError as exc:
            raise QueryError(f"bad fen: {exc}") from None
    moves = obj.get("moves", [])
    if not isinstance(moves, list):
        raise QueryError(f"moves must be a list of moves, not {_json_type(moves)}")
    if len(moves) > MAX_PLIES:
        raise QueryError(f"{len(moves)} moves: a game has at most {MAX_PLIES}")
    game = Game(start=start, rules=rules)
    for k, text in enumerate(moves):
        if not isinstance(text, str):
            raise QueryError(f"move {k + 1} must be a string such as '11-15', not {_json_type(text)}")
        if game.outcome is not None:
            raise QueryError(f"move {k + 1} ({text}): the game is already over "
                             f"({game.outcome.termination.value} after {game.ply} moves)")
        try:
            # One rule for every front end (the terminal and the browser too): a mark that says the wrong kind
            # of move is refused, not read as the move the squares name.
            move: Move = resolve_move(text, game.legal_moves(), strict_capture_mark=True)
        except NotationError as exc:
            raise QueryError(f"move {k + 1}: {exc} (position {game.position})") from None
        game.play(move)
    return game


def _plies(obj: dict, game: Game) -> tuple[int, ...]:
    if "analyze_plies" not in obj:
        plies = [game.ply]
    else:
        plies = obj["analyze_plies"]
        if not isinstance(plies, list) or not plies:
            raise QueryError(f"analyze_plies must be a non-empty list of plies, not {_json_type(plies)}")
        seen = set()
        for ply in plies:
            if not _is_int(ply) or not 0 <= ply <= game.ply:
                raise QueryError(f"analyze_plies: {json_text(ply)} is not a ply of this game (0 to {game.ply}: "
                                 "the number of moves played before the position)")
            if ply in seen:
                raise QueryError(f"analyze_plies lists ply {ply} twice")
            seen.add(ply)
    for ply in plies:
        outcome = game_at(game, ply).outcome if ply < game.ply else game.outcome
        if outcome is not None:
            raise QueryError(f"the game is over at ply {ply} ({outcome.termination.value}): nothing to search")
    return tuple(plies)


def _limits(obj: dict, settings: EngineSettings) -> Limits:
    simulations, seconds, nodes = obj.get("simulations"), obj.get("time"), obj.get("nodes")
    if simulations is not None and not (_is_int(simulations) and 1 <= simulations <= settings.max_simulations):
        raise QueryError(f"simulations must be an integer from 1 to {settings.max_simulations}, "
                         f"not {json_text(simulations)}")
    if seconds is not None and not (_is_number(seconds) and 0 < seconds <= settings.max_seconds):
        raise QueryError(f"time must be a number of seconds above 0 and at most {settings.max_seconds:g}, "
                         f"not {json_text(seconds)}")
    if nodes is not None and not (_is_int(nodes) and 1 <= nodes <= settings.tree_nodes):
        raise QueryError(f"nodes must be an integer from 1 to {settings.tree_nodes} (the engine's tree size), "
                         f"not {json_text(nodes)}")
    clock_left, increment = _clock(obj, settings)
    if simulations is None and seconds is None and nodes is None and clock_left is None:
        simulations = settings.default_simulations
    return Limits(simulations, None if seconds is None else float(seconds), nodes, clock_left, increment)


def _clock(obj: dict, settings: EngineSettings) -> tuple[float | None, float]:
    """A game clock's seconds left (None without a clock) and its increment a move."""
    left, increment = obj.get("clock"), obj.get("increment")
    if left is None:
        if increment is not None:
            raise QueryError("increment needs clock: the seconds the side to move has left")
        return None, 0.0
    if not (_is_number(left) and 0 < left <= settings.max_seconds):
        raise QueryError(f"clock must be a number of seconds above 0 and at most {settings.max_seconds:g}, "
                         f"not {json_text(left)}")
    increment = 0.0 if increment is None else increment
    if not (_is_number(increment) and 0 <= increment <= left):
        raise QueryError(f"increment must be a number of seconds from 0 to the clock's {left:g}, "
                         f"not {json_text(increment)}")
    return float(left), float(increment)


def _top(obj: dict) -> int | None:
    top = obj.get("top")
    if top is not None and not (_is_int(top) and top >= 1):
        raise QueryError(f"top must be a positive integer (candidate moves to list), not {json_text(top)}")
    return top


def _flag(obj: dict, name: str) -> bool:
    value = obj.get(name, True)
    if not isinstance(value, bool):
        raise QueryError(f"{name} must be true or false, not {json_text(value)}")
    return value


# ---------------------------------------------------------------------------------------------------- answers

def version_answer(query: VersionQuery, network: str, settings: EngineSettings) -> dict[str, Any]:
    return {"id": query.id, "engine": ENGINE_NAME, "protocol": PROTOCOL_VERSION, "network": network,
            "slots": settings.slots, "tree_nodes": settings.tree_nodes,
            "default_simulations": settings.default_simulations}


def error_answer(message: str, query_id: str | int | None = None) -> dict[str, Any]:
    return {"id": query_id, "error": message}


# ---------------------------------------------------------------------------------------------- JSON helpers

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {json_text(value)}"
    if isinstance(value, str):
        return f"the string {json_text(value)}"
    return "a list" if isinstance(value, list) else "an object"


def json_text(value: Any, limit: int = 40) -> str:
    """A value as the query wrote it, cut short for a message."""
    try:
        text = json.dumps(value)
    except (ValueError, OverflowError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

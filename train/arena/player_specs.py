"""Player specs: the text a command line names a player by, turned into a player for the match engine.

    default[:BUDGET]       the default player: the one the matches chose, which every front end plays (play.engine.Engine
                           builds the same): today the distilled alpha-beta player, distilled:BUDGET:db:book
                           (DEFAULT_PLAYER), at the matches' 0.1 s a move on a game clock (t0+0.1) unless BUDGET
                           names another of its budgets (PLIES, tS or tB+I)
    random                 uniformly random legal moves
    alphabeta:N, abN       alpha-beta over material, N plies deep
    alphabeta:tS           the same on the clock: S seconds a move, by iterative deepening
    classical:N            the classical engine (zero.yardsticks.classical: alpha-beta with a transposition table,
                           quiescence and an evaluation fitted on the OCA games), N plies deep, with the
                           4-piece endgame database's values (built on first use, seconds)
    classical:tS           the same on the clock: S seconds a move, by iterative deepening
    distilled[:FILE]:N, distilled[:FILE]:tS, distilled[:FILE]:tB+I
                           the same alpha-beta search over the distilled evaluation (zero.distilled: a small
                           network learnt from the policy-value network's values; FILE, default
                           checkpoints/distilled.npz), N plies deep, S seconds a move, or on a game clock of B
                           seconds and I more a move (its time manager as mcts's: train.arena.clocked_search)
    distilled...:db, :dbN  with the largest endgame database built (of at most N pieces) as exact leaves
    distilled...:book      the experts' main line played at once where the opening book has it
    distilled...:KEY=VALUE what its search prunes (zero.alphabeta.player.Selectivity), e.g.
                           distilled:t0.1:reductions=0:deeper_cuts=false for the plain alpha-beta search
    policy[:NET]           the network's raw policy, no search
    mcts[:NET][:SIMS]      the network searching SIMS root visits a move (default 200), in lockstep with
                           the match's other games (train.arena.match.NetworkPlayer)
    mcts[:NET]:tS          the same on the clock: up to S seconds a move, no cap on its simulations (its
                           games are played one at a time, and it searches as `play` does: many leaves a
                           network call, evaluations cached, a forced move played at once, the search
                           stopped early once its move can no longer change)
    mcts[:NET]:tB+I        the same on a game clock: B seconds at the start and I more at each move (the
                           time a move saves stays on the clock; selfplay.tree_search.time_manager), thinking on past
                           a move's target while its choice is unstable; mcts:t0+0.1 spends 0.1 s a move
                           on average, as mcts:t0.1 spends at most
    mcts...:db             either of those with the endgame database, as `play` uses it: its positions are
                           played from it (the largest database built, the 4-piece one built on first use)
    mcts...:dbleaves       the same, and its positions are exact leaves of the search too
                           (search.database_leaves)
    mcts...:dbN, :dbleavesN
                           either, with the largest database of at most N pieces (2-8), so that one match
                           can set two sizes against each other
    mcts...:book           the experts' main line played at once where the opening book has it
                           (zero.corpus.opening_book: the OCA games' most played move at a position at least 10
                           of them reached in their first 30 plies; built from the OCA file on first use)
    mcts...:distilledN     its leaves valued by an N-ply search of the distilled player (with the spec's database)
                           instead of the network's value head, whose policy it keeps (issue 75's MCTS variant:
                           selfplay.tree_search.evaluators.SearchedValueEvaluator)
    policy...:f32, mcts...:f32
                           the network in float32 instead of its int8 model (on the CPU, where int8 is the
                           default: zero.net.quantized)
    policy...:int8raw, mcts...:int8raw
                           the int8 model's answers alone, the positions it nearly ties not answered again in
                           float32 (zero.net.inference)
    mcts...:KEY=VALUE      a search setting of that player (SearchConfig), e.g. mcts:t0.1:c_puct=2.0; several
                           may follow each other; they override what the command's search settings say. A
                           player on the clock also takes its time manager's settings so
                           (selfplay.tree_search.time_manager.TimeManager), e.g. mcts:t0+0.1:moves_to_go=10

NET is a checkpoint file or a run directory (its current best network); left out, the shipped network.
Every kind of player is wired here, explicitly: nothing registers itself on import.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TypeVar

from selfplay.tree_search.analysis import single_game_search
from selfplay.tree_search.evaluators import CachedEvaluator
from selfplay.tree_search.search import MOST_SIMULATIONS, SearchConfig
from selfplay.tree_search.time_manager import GAME_CLOCK_SETTINGS, GameClock, TimeManager
from train.arena.match import MATCH_CACHE_POSITIONS, MatchPlayer, NetworkPlayer
from zero.endgames.egdb import MOST_PIECES, MOST_PLAYED_PIECES
from zero.rules.player import MAX_TIMED_DEPTH
from zero.run.config import MOST_MOVE_SECONDS, ConfigError, notify, with_overrides
from zero.yardsticks.players import AlphaBetaPlayer, RandomPlayer

DEFAULT_MCTS_SIMULATIONS = 200
# The player the matches chose: the alpha-beta search over the shipped distilled evaluation with the largest
# endgame database and the opening book. Its loop's generation 1 beat the whole player (the shipped network's
# MCTS, mcts:t0+0.1:dbleaves:book, the default before it), +38 (+22 .. +54) in 288 games at 0.1 s a move
# (benchmarks/RESULTS.md, issue 84); play.engine.Engine plays the same by default (DEFAULT_KIND). Its budget
# is the spec's, DEFAULT_BUDGET (the matches' time control) when left out.
DEFAULT_PLAYER = "distilled:{budget}:db:book"
DEFAULT_BUDGET = "t0+0.1"
SPEC_HELP = ("default[:BUDGET] (the default player, the one every front end plays: " + DEFAULT_PLAYER
             + f", BUDGET {DEFAULT_BUDGET} when left out), "
             "random, alphabeta:N (or abN; alphabeta:tS searches S seconds a move), classical:N or classical:tS "
             "(the classical engine: table, quiescence, fitted evaluation), distilled[:FILE]:N or distilled[:FILE]:tS (the same "
             "search over the distilled network evaluation; :db and :book as below), policy[:NET] (raw network policy) or mcts[:NET][:SIMS] (network "
             "search, default 200 simulations; mcts[:NET]:tS searches up to S seconds a move, mcts[:NET]:tB+I on a game clock of B seconds and I more a move); NET is a checkpoint file or a run directory (its best network), "
             "the shipped network when left out; a trailing :db plays the endgame database's positions from it, :dbleaves also "
             "makes them exact leaves of the search, :book plays the OCA experts' main line from an opening book; a trailing :f32 runs the network in float32 instead of int8, :int8raw "
             "in int8 alone (near ties not answered again in float32); "
             "trailing :KEY=VALUE items set that mcts player's search settings, e.g. mcts:t0.1:c_puct=2.0, "
             "and a player on the clock's time manager, e.g. mcts:t0+0.1:moves_to_go=10")
# The KEY=VALUE items of a spec that set a player's time manager rather than its search.
TIME_MANAGER_SETTINGS = frozenset(f.name for f in dataclasses.fields(TimeManager))
T = TypeVar("T", SearchConfig, TimeManager)
_AB_SHORTHAND = re.compile(r"ab([0-9]+)")
OPTIONS = ("dbleaves", "db", "f32", "int8raw", "book")  # longest first: "db" also ends "dbleaves"
_DATABASE_SIZE = re.compile(r"(dbleaves|db)([0-9]+)")
_LEAF_SEARCH = re.compile(r"distilled([0-9]+)")
_DIGITS = re.compile(r"[0-9]+")  # str.isdigit also takes digits int() does not read, such as "²"
PRECISION_OPTIONS = {"f32": "float32", "int8raw": "int8-raw"}  # a spec's option -> Evaluator precision


class PlayerSpecError(ValueError):
    """A player spec that names no known player or has bad arguments."""


def make_player(spec: str, seed: int = 0, search: SearchConfig | None = None) -> MatchPlayer:
    """The player a spec names (see the module doc). `search` is the PUCT setting of mcts players."""
    spec = spec.strip()
    shorthand = _AB_SHORTHAND.fullmatch(spec)
    if shorthand:
        spec = f"alphabeta:{shorthand.group(1)}"
    name, _, args = spec.partition(":")
    if name == "default":
        return make_player(default_spec(args), seed, search)
    if name == "random":
        if args:
            raise PlayerSpecError(f"'random' takes no arguments, got {args!r}")
        return RandomPlayer(seed)
    if name == "alphabeta":
        if args.startswith("t"):
            seconds = _seconds(args[1:])
            if seconds is None:
                raise PlayerSpecError(f"alpha-beta on the clock needs a time above 0 and at most "
                                      f"{MOST_MOVE_SECONDS:g} s, e.g. alphabeta:t0.1, got {args!r}")
            return AlphaBetaPlayer(seed=seed, seconds=seconds)
        depth = _count(args, MAX_TIMED_DEPTH)
        if depth is None:
            raise PlayerSpecError(f"alpha-beta needs a depth of 1 to {MAX_TIMED_DEPTH} plies (e.g. alphabeta:6 or ab6) "
                                  f"or a time (alphabeta:t0.1), got {args!r}")
        return AlphaBetaPlayer(depth, seed=seed)
    if name == "classical":
        return _classical(args, seed)
    if name == "distilled":
        return _distilled(args, seed, spec)
    args, settings = _search_settings(args, spec)
    args, options, most_pieces = _trailing_options(args, spec)
    precisions = sorted(options & PRECISION_OPTIONS.keys())
    if len(precisions) > 1:
        raise PlayerSpecError(f"{spec!r}: one precision a player, :f32 or :int8raw")
    precision = PRECISION_OPTIONS[precisions[0]] if precisions else "auto"
    precision_tag = "".join(f":{option}" for option in precisions)
    if name == "policy":
        if options - PRECISION_OPTIONS.keys() or settings:
            raise PlayerSpecError(f"only mcts players take :db, :dbleaves, :book or search settings, got {spec!r}")
        from zero.net.inference import SMALL_BATCH_THREADS, PolicyPlayer

        # One position per call is too small a batch to gain from a GPU.
        return PolicyPlayer(_evaluator(args, "cpu", precision, SMALL_BATCH_THREADS),
                            name=f"policy:{args or 'default'}{precision_tag}", seed=seed)
    if name == "mcts":
        egdb, leaves = None, False
        if options & {"db", "dbleaves"}:
            from zero.endgames.egdb_build import largest_available, say_which_database

            most = most_pieces or MOST_PLAYED_PIECES
            egdb, leaves = say_which_database(largest_available(most=most), most), "dbleaves" in options
        tag = "" if egdb is None else (":dbleaves" if leaves else ":db") + (str(most_pieces) if most_pieces else "")
        tag += ":book" if "book" in options else ""
        tag += precision_tag
        leaf_depth = next((int(option[len("distilled"):]) for option in options if option.startswith("distilled")), None)
        tag += "" if leaf_depth is None else f":distilled{leaf_depth}"
        book = _book() if "book" in options else None
        tag += "".join(f":{item}" for item in settings)
        timing = [item for item in settings if item.partition("=")[0].strip() in TIME_MANAGER_SETTINGS]
        settings = [item for item in settings if item not in timing]
        config = dataclasses.replace(search or SearchConfig(), database_leaves=leaves)
        net, _, budget = args.rpartition(":")
        seconds = _seconds(budget[1:]) if budget.startswith("t") else None
        if seconds is None and budget.startswith("t") and _number(budget[1:]) is not None:
            raise PlayerSpecError(f"mcts on the clock needs a time above 0 and at most {MOST_MOVE_SECONDS:g} s a "
                                  f"move, got {spec!r}")
        clock = _game_clock(budget[1:], spec) if seconds is None and budget.startswith("t") and "+" in budget \
            else None
        clock_only = [item for item in timing if item.partition("=")[0].strip() in GAME_CLOCK_SETTINGS]
        if seconds is not None and clock_only:
            raise PlayerSpecError(f"{spec!r}: {', '.join(clock_only)} act only on a game clock (mcts:tB+I, e.g. "
                                  f"mcts:t0+0.1), and this player searches a budget a move")
        if seconds is not None or clock is not None:
            # (a checkpoint whose name starts with t is no time: t1.pt is no number.) Its games are played
            # one at a time, so its search fills its own batches and remembers the positions it evaluated,
            # as the engine of `play` does, a few leaves a network call.
            from zero.net.inference import SMALL_BATCH_THREADS

            config = _with_settings(single_game_search(config), settings, spec)
            return NetworkPlayer(f"mcts:{net or 'default'}:t{clock or f'{seconds:g}'}{tag}",
                                 CachedEvaluator(_leaf_values(_evaluator(net, None, precision, SMALL_BATCH_THREADS),
                                                              leaf_depth, egdb, seed)), None, config,
                                 seconds=seconds, egdb=egdb, clock=clock, book=book,
                                 time_manager=_with_settings(TimeManager(), timing, spec))
        if timing:
            raise PlayerSpecError(f"{spec!r}: {', '.join(timing)} set the time manager of a player on the clock "
                                  f"(mcts:tS or mcts:tB+I), and this one searches a fixed number of simulations")
        if not _DIGITS.fullmatch(budget):
            net, budget = args, ""
        simulations = _count(budget, MOST_SIMULATIONS) if budget else DEFAULT_MCTS_SIMULATIONS
        if simulations is None:
            raise PlayerSpecError(f"mcts needs 1 to {MOST_SIMULATIONS:,} simulations a move, got {spec!r}")
        return NetworkPlayer(f"mcts:{net or 'default'}:{simulations}{tag}",
                             CachedEvaluator(_leaf_values(_evaluator(net, None, precision), leaf_depth, egdb, seed),
                                             MATCH_CACHE_POSITIONS), simulations,
                             _with_settings(config, settings, spec), egdb=egdb, book=book)
    raise PlayerSpecError(f"unknown player {spec!r}; players: {SPEC_HELP}")


def default_spec(budget: str = "") -> str:
    """The spec of the default player searching `budget` (a distilled player's: PLIES, tS or tB+I;
    DEFAULT_BUDGET when empty)."""
    budget = budget or DEFAULT_BUDGET
    # tS or tB+I, each a number: anything more (t0+0.1:t1) is no budget, and would be read as a network's name
    on_the_clock = budget.startswith("t") and all(_number(part) is not None for part in budget[1:].split("+", 1))
    if not (_DIGITS.fullmatch(budget) or on_the_clock):
        # Anything else would be read as the network's name. Another network or database is another player.
        raise PlayerSpecError(f"'default' takes one budget, a depth or a time (e.g. default:14, default:t1 or "
                              f"default:t0+1), got {budget!r}; name another player as a distilled spec "
                              f"({DEFAULT_PLAYER.format(budget='...')})")
    return DEFAULT_PLAYER.format(budget=budget)


def _classical(args: str, seed: int) -> MatchPlayer:
    from zero.endgames.egdb_build import QUICK_PIECES, ensure_built
    from zero.yardsticks.classical import EvalFileError, ClassicalPlayer

    depth, seconds = _depth_or_time("classical", args)
    try:
        # The 4-piece database on every machine, so that classical:N plays the same moves everywhere.
        return ClassicalPlayer(depth, seed=seed, seconds=seconds, egdb=ensure_built(QUICK_PIECES))
    except EvalFileError as exc:
        raise PlayerSpecError(str(exc)) from None


def _depth_or_time(kind: str, args: str) -> tuple[int | None, float | None]:
    """(depth, None) or (None, seconds a move) of an alpha-beta player's spec arguments."""
    from zero.alphabeta.search import MAX_DEPTH

    if args.startswith("t"):
        seconds = _seconds(args[1:])
        if seconds is None:
            raise PlayerSpecError(f"the {kind} player on the clock needs a time above 0 and at most "
                                  f"{MOST_MOVE_SECONDS:g} s, e.g. {kind}:t0.1, got {args!r}")
        return None, seconds
    depth = _count(args, MAX_DEPTH)
    if depth is None:
        raise PlayerSpecError(f"the {kind} player needs a depth of 1 to {MAX_DEPTH} plies (e.g. {kind}:8) or "
                              f"a time ({kind}:t0.1), got {args!r}")
    return depth, None


def _distilled(args: str, seed: int, spec: str) -> MatchPlayer:
    """distilled[:FILE]:N|tS|tB+I[:db|:dbN][:book][:KEY=VALUE...]: the alpha-beta search over the distilled
    evaluation."""
    from zero.alphabeta.player import DistilledPlayer, Selectivity
    from zero.distilled.model import DistilledFileError, load_eval

    args, settings = _search_settings(args, spec)
    selectivity = _with_settings(Selectivity(), settings, spec)
    args, options, most_pieces = _trailing_options(args, spec)
    if options - {"db", "book"}:
        raise PlayerSpecError(f"{spec!r}: the distilled player takes :db, :dbN and :book, not "
                              f"{', '.join(sorted(options - {'db', 'book'}))}")
    path, _, budget = args.rpartition(":")
    clock = _game_clock(budget[1:], spec) if budget.startswith("t") and "+" in budget else None
    depth, seconds = (None, clock.increment or clock.base) if clock else _depth_or_time("distilled", budget)
    egdb = None
    if "db" in options:
        from zero.endgames.egdb_build import largest_available, say_which_database

        most = most_pieces or MOST_PLAYED_PIECES
        egdb = say_which_database(largest_available(most=most), most)
    try:
        player = DistilledPlayer(depth, seed=seed, seconds=seconds, evaluation=load_eval(path or None), egdb=egdb,
                                 book=_book() if "book" in options else None, selectivity=selectivity)
    except DistilledFileError as exc:
        raise PlayerSpecError(str(exc)) from None
    player.name = f"distilled:{path or 'default'}:{budget}" + (f":db{int(egdb.tables.max_pieces)}" if egdb else "") \
        + (":book" if "book" in options else "") + "".join(f":{item}" for item in settings)
    if clock is None:
        return player
    from train.arena.clocked_search import ClockedSearchPlayer

    return ClockedSearchPlayer(player, clock)


def _leaf_values(network, depth: int | None, egdb, seed: int):
    """The network's evaluator, or with a depth (:distilledN) one whose values are the distilled player's
    N-ply searches (its policy still the network's)."""
    if depth is None:
        return network
    from selfplay.tree_search.evaluators import SearchedValueEvaluator
    from zero.alphabeta.player import DistilledPlayer
    from zero.alphabeta.search import MAX_DEPTH
    from zero.distilled.model import DistilledFileError
    from zero.rules.game import Position

    if not 1 <= depth <= MAX_DEPTH:
        raise PlayerSpecError(f":distilled{depth}: a leaf search of 1 to {MAX_DEPTH} plies")
    try:
        searcher = DistilledPlayer(depth, seed=seed, egdb=egdb)
    except DistilledFileError as exc:
        raise PlayerSpecError(str(exc)) from None
    return SearchedValueEvaluator(network, lambda own, opponent, kings: searcher.expected_score(
        Position(own, opponent, kings, True)))


def _count(text: str, most: int) -> int | None:
    """The whole number 1..most that `text` writes in plain digits; None for any other text. A count is
    bounded as a setting's is (zero.run.config), so that one no machine can hold is refused here, not met by
    a player that tries to hold it."""
    if not _DIGITS.fullmatch(text):
        return None
    value = int(text)
    return value if 1 <= value <= most else None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _seconds(text: str) -> float | None:
    """The seconds `text` writes, above 0 and at most MOST_MOVE_SECONDS (NaN and infinity fail both); None
    otherwise."""
    value = _number(text)
    return value if value is not None and 0 < value <= MOST_MOVE_SECONDS else None


def _game_clock(text: str, spec: str) -> GameClock:
    try:
        clock = GameClock.parse(text)
    except ValueError as exc:
        raise PlayerSpecError(f"{spec!r}: {exc}") from None
    if max(clock.base, clock.increment) > MOST_MOVE_SECONDS:
        raise PlayerSpecError(f"{spec!r}: a game clock's base and increment are at most {MOST_MOVE_SECONDS:g} s each")
    return clock


def _with_settings(config: T, settings: list[str], spec: str) -> T:
    try:
        return with_overrides(config, settings)
    except ConfigError as exc:
        raise PlayerSpecError(f"{spec!r}: {exc}") from None


def _search_settings(args: str, spec: str) -> tuple[str, list[str]]:
    """A spec's arguments without its trailing KEY=VALUE items, and those (in the order written)."""
    parts = args.split(":")
    first = len(parts)
    while first > 0 and "=" in parts[first - 1]:
        first -= 1
    keys = [item.partition("=")[0].strip() for item in parts[first:]]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise PlayerSpecError(f"{spec!r} sets {', '.join(twice)} twice: one value a setting")
    return ":".join(parts[:first]), parts[first:]


def _trailing_options(args: str, spec: str) -> tuple[str, set[str], int]:
    """A spec's arguments without its trailing options (:db, :dbleaves, :f32, :int8raw, :book, :distilledN, in
    any order),
    those, and the most pieces of the database they ask for (:dbN, :dbleavesN; 0 where they name none)."""
    options: set[str] = set()
    most_pieces = 0

    def named(option: str) -> None:
        # Two of one option, or both database options, would leave one of them silently unused.
        if option in options:
            raise PlayerSpecError(f"{spec!r} names :{option} twice: each option once")
        if option in ("db", "dbleaves") and options & {"db", "dbleaves"}:
            raise PlayerSpecError(f"{spec!r}: one database option a player, :db or :dbleaves")
        options.add(option)

    while True:
        leaf_search = _LEAF_SEARCH.fullmatch(args.rpartition(":")[2])
        if leaf_search:
            if any(option.startswith("distilled") for option in options):
                raise PlayerSpecError(f"{spec!r}: one leaf search a player")
            options.add(leaf_search.group(0))
            args = args[: -len(leaf_search.group(0))].rstrip(":")
            continue
        sized = _DATABASE_SIZE.fullmatch(args.rpartition(":")[2])
        if sized:
            most_pieces = int(sized.group(2))
            if not 2 <= most_pieces <= MOST_PIECES:
                raise PlayerSpecError(f":{sized.group(0)}: a database has 2 to {MOST_PIECES} pieces")
            named(sized.group(1))
            args = args[: -len(sized.group(0))].rstrip(":")
            continue
        for option in OPTIONS:
            if args == option or args.endswith(":" + option):
                named(option)
                args = args[: -len(option)].rstrip(":")
                break
        else:
            return args, options, most_pieces


def _book():
    """The opening book (zero.corpus.opening_book), built from the OCA games on first use."""
    from zero.corpus.opening_book import ensure_book

    try:
        return ensure_book()
    except OSError as exc:  # no OCA file to build it from, or no room to save it
        raise PlayerSpecError(f"no opening book: {exc}") from None


def _evaluator(net: str, device: str | None, precision: str = "auto", threads: int | None = None):
    """The evaluator of a network named in a spec (on `device`, or the GPU when there is one; `threads` as
    zero.net.inference.Evaluator's)."""
    from zero.net.checkpoint import CheckpointError, resolve_checkpoint
    from zero.net.inference import Evaluator

    try:
        path = resolve_checkpoint(net)
        # Seconds each (the int8 model derived on first use): `match` sat about 100 s silent before its first
        # line while its players loaded (issue 85); the database and the book say so themselves.
        notify(f"loading the network {path} ...")
        return Evaluator.from_checkpoint(path, device=device, precision=precision, threads=threads)
    except CheckpointError as exc:
        raise PlayerSpecError(str(exc)) from None

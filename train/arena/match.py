"""Matches: two players over a ballot, each opening with both colours; one engine for every match.

The `match` command, gating, ratings and head-to-head comparisons all play through `play_match`. Up to
`parallel` games of the ballot schedule run at once. A `NetworkPlayer` owns one `BatchedSearch` with a
tree per game slot, searches the slots where it is to move, and evaluates all their leaves in one network
batch, so a 288-game ballot of network players costs about what one game of batches does. A network player
on the clock searches one game at a time as `play` does (selfplay.tree_search.analysis.GameSearch.choose). Plain players
(random, alpha-beta, raw policy) move as soon as it is their turn, and so does every player with a forced
move (the only legal one).

Time per move. Each move after the opening carries its player's time (MatchGame.move_seconds): the wall
clock of its choice, and for a network player in lockstep its share of each search step it took part in
(the step's time split evenly over the trees searched in it), so that games in flight do not multiply it.
The summary gives each player's mean and longest.

A game is a pure function of its inputs and its seed, whatever else is in flight: a network player searches
without noise, and a plain player is reseeded from the game's seed, its colour and the ply before every
move (its `reset(seed)`), so the interleaving of games never reaches its random choices.

Statistics. A match is scored from A's view (win 1, draw 1/2, loss 0). Games are grouped into units, one per
opening (normally the pair of games with swapped colours; a lone game when a run was cut short). The score
is s = points / games, and its standard error comes from the spread of the units' points around
s * games (the ratio-estimator variance, which for full pairs is the pentanomial variance of the pair
score). Pairing matters because the two games of an opening are correlated (a lopsided opening tends to
give one win each way); treating the games as independent trinomial draws would misstate the error, and
draws need no special care since they enter as half points. The 95 % interval is s +- 1.96 SE (normal
approximation), clipped to [0, 1], and the score and both bounds are mapped to Elo with
elo = -400 log10(1/s - 1). A score of 0 or 1 maps to -inf or +inf: no finite Elo fits a shut-out, and the
printout says so rather than inventing a number. When every unit scores alike (all draws, say) the spread seen is
0, which n units cannot prove: the standard error is then that of the units with one more on each side (one
that took all its points, one that took none), so that the interval keeps a width (see score_statistics).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from selfplay.tree_search.analysis import GameSearch
from selfplay.tree_search.evaluators import PositionEvaluator
from selfplay.tree_search.search import BatchedSearch, SearchConfig, warm_up
from selfplay.tree_search.time_manager import GameClock, TimeManager, move_time
from zero.corpus.opening_book import OpeningBook
from zero.corpus.openings import Opening
from zero.endgames.egdb import Egdb
from zero.endgames.endgame_judge import EndgameMistakes, judge_game
from zero.rules.game import Game, Move, Outcome, RulesConfig, Termination
from zero.rules.player import Player

Z_95 = 1.959963984540054
# Network answers a player searching a fixed number of simulations remembers by position
# (selfplay.tree_search.evaluators.CachedEvaluator, about 4 KB each): a ballot's games share their openings and each
# move's tree shares positions with the last one's, so at 64 simulations a move half the leaves are
# remembered and a match runs 1.7x as fast (benchmarks/RESULTS.md).
MATCH_CACHE_POSITIONS = 32_768


class IllegalMoveError(RuntimeError):
    """A player returned a move that is not legal in the position it was given."""


@dataclass
class NetworkPlayer:
    """A network with a fixed search budget: no noise, the best move (proven wins first, then the most
    visited). The budget is `simulations` root visits a move, or with `seconds` a time a move (its search
    stops when the time is up or its move can no longer change; `simulations`, if not None, is then the
    most a move may use), or with `clock` a game clock (each move's time from selfplay.tree_search.time_manager)."""

    name: str
    evaluator: PositionEvaluator
    simulations: int | None
    config: SearchConfig = field(default_factory=SearchConfig)
    seconds: float | None = None
    # An endgame database: its positions are played from it (and are exact leaves of the search when the
    # search config's database_leaves is on).
    egdb: Egdb | None = None
    clock: GameClock | None = None
    # An opening book: where it has the position, its move is played at once (zero.corpus.opening_book).
    book: OpeningBook | None = None
    # How a player on the clock spends it (when it stops early, thinks on, draws on its bank).
    time_manager: TimeManager = field(default_factory=TimeManager)

    @property
    def on_the_clock(self) -> bool:
        return self.seconds is not None or self.clock is not None


@runtime_checkable
class ClockedPlayer(Protocol):
    """A plain player on a game clock that the match keeps for it (a program speaking the JSON engine
    protocol, train.arena.program_player): asked for each move with the seconds its clock holds, this move's
    increment included. As for a network player on a game clock, what a move saves stays on the clock, and
    an overrun is a debt that later moves pay back."""

    name: str
    clock: GameClock

    def choose_on_clock(self, game: Game, left: float) -> Move: ...


MatchPlayer = NetworkPlayer | Player | ClockedPlayer


@dataclass(frozen=True)
class MatchGame:
    """A finished match game: who played which colour, every move from the opening's start, the outcome.
    Games finish in any order; `round` is the game's place in the schedule (1-based, the PDN Round tag)."""

    round: int
    opening: Opening
    black: str
    white: str
    moves: tuple[Move, ...]
    outcome: Outcome
    seed: int
    # The seconds each move after the opening took its player (see the module doc), in the order played;
    # the first len(moves) - len(move_seconds) moves came with the opening.
    move_seconds: tuple[float, ...] = ()

    @property
    def result(self) -> str:
        return self.outcome.pdn_result

    @property
    def truncated(self) -> bool:
        """Stopped at the length cap (scored as a draw)."""
        return self.outcome.termination == Termination.MAX_LENGTH

    def points_for_black(self) -> float:
        return (self.outcome.winner + 1) / 2

    def seconds_by_colour(self) -> tuple[list[float], list[float]]:
        """The move times of Black's moves and of White's."""
        first = len(self.moves) - len(self.move_seconds)
        black_first = self.opening.start.black_to_move == (first % 2 == 0)
        own, other = list(self.move_seconds[0::2]), list(self.move_seconds[1::2])
        return (own, other) if black_first else (other, own)

    def to_json(self) -> dict:
        return {"round": self.round, "black": self.black, "white": self.white,
                "moves": [str(m) for m in self.moves], "winner": self.outcome.winner,
                "termination": self.outcome.termination.value, "seed": self.seed,
                "move_seconds": [round(t, 6) for t in self.move_seconds]}

    @classmethod
    def from_json(cls, entry: dict, opening: Opening, rules: RulesConfig) -> "MatchGame":
        """The game `to_json` wrote, replayed under the rules from its opening's start: a move that is not
        legal there, or an outcome the replay does not reach, is a ValueError."""
        game = Game(start=opening.start, rules=rules)
        for text in entry["moves"]:
            if game.outcome is not None:
                raise ValueError(f"moves after the end of the game (round {entry['round']})")
            move = next((m for m in game.legal_moves() if str(m) == text), None)
            if move is None:
                raise ValueError(f"{text} is not legal at ply {game.ply} (round {entry['round']})")
            game.play(move)
        if game.outcome != Outcome(int(entry["winner"]), Termination(entry["termination"])):
            raise ValueError(f"round {entry['round']} does not end as recorded")
        seconds = tuple(float(t) for t in entry.get("move_seconds", ()))  # none in records from before them
        if len(seconds) > game.ply:
            raise ValueError(f"round {entry['round']} has more move times than moves")
        return cls(int(entry["round"]), opening, str(entry["black"]), str(entry["white"]), tuple(game.moves),
                   game.outcome, int(entry["seed"]), seconds)

    def pdn(self, event: str = "checkers-zero match") -> str:
        from zero.corpus.pdn import write_game

        tags = {"Event": event, "Round": str(self.round), "Black": self.black, "White": self.white,
                "Result": self.result,
                "Opening": self.opening.name, "Termination": self.outcome.termination.value}
        return write_game(self.moves, self.result, tags, start=self.opening.start)


def default_games_path(kind: str) -> Path:
    """Where a match script writes its games unless told: runs/matches/KIND-DATE-TIME.pdn under the current
    directory. runs/ is ignored by git wherever it lies, so a match started in a checkout leaves nothing beside
    the code, and the time keeps one match's games from replacing the last one's."""
    return Path("runs") / "matches" / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}.pdn"


def mix_seed(*parts: int) -> int:
    """One 63-bit seed from several non-negative integers (a match seed, a game number, a colour)."""
    low, high = (int(x) for x in np.random.SeedSequence(list(parts)).generate_state(2, np.uint32))
    return (high & 0x7FFFFFFF) << 32 | low


# ------------------------------------------------------------------------------------------------ statistics

def elo_from_score(score: float) -> float:
    """Elo difference that gives an expected score `score` (0..1); +-inf at 1 and 0."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"a score is a fraction in [0, 1], got {score}")
    if score == 1.0:
        return math.inf
    if score == 0.0:
        return -math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


@dataclass(frozen=True)
class ScoreStatistics:
    """Score of a match from its units (game pairs), its standard error, and the Elo view of both."""

    score: float
    stderr: float
    score_ci95: tuple[float, float]
    elo: float
    elo_ci95: tuple[float, float]
    units: int
    games: int


def score_statistics(units: Sequence[tuple[float, int]]) -> ScoreStatistics:
    """Statistics from (points, games) per unit, normally per opening pair (see the module doc)."""
    units = [(float(p), int(g)) for p, g in units if g > 0]
    games = sum(g for _, g in units)
    if not units:
        raise ValueError("no games to score")
    score = sum(p for p, _ in units) / games
    n = len(units)
    if n > 1:
        spread = units
        if sum((p - score * g) ** 2 for p, g in units) < 1e-12:
            # Every unit scored alike (all draws, a shut-out): no spread seen in n units is no proof of none,
            # and the interval would collapse to the point. The spread is taken as if one more unit of the
            # mean size had gone each way, all of its points and none (as the plus-two interval of a
            # proportion does), about the score seen.
            size = games / n
            spread = units + [(size, size), (0.0, size)]
        residual = sum((p - score * g) ** 2 for p, g in spread)
        stderr = math.sqrt(residual * len(spread) / (len(spread) - 1)) / sum(g for _, g in spread)
    else:
        stderr = math.nan  # one unit says nothing about the spread
    if math.isnan(stderr):
        low, high = 0.0, 1.0
    else:
        low = min(1.0, max(0.0, score - Z_95 * stderr))
        high = min(1.0, max(0.0, score + Z_95 * stderr))
    return ScoreStatistics(score, stderr, (low, high), elo_from_score(score),
                           (elo_from_score(low), elo_from_score(high)), n, games)


def format_elo(elo: float) -> str:
    """An Elo difference as printed: whole points, never "-0"; an infinite one (a shut-out's, which no finite
    Elo fits) is no result to print as a number."""
    if math.isinf(elo):
        return "no finite estimate"
    return f"{round(elo) + 0:+d}"


def format_elo_interval(low: float, high: float) -> str:
    """A 95 % Elo interval as printed: an infinite end (a bound's score of 0 or 1) is left open."""
    if math.isfinite(low) and math.isfinite(high):
        return f"{format_elo(low)} .. {format_elo(high)}"
    if math.isfinite(low):
        return f"from {format_elo(low)} up"
    if math.isfinite(high):
        return f"up to {format_elo(high)}"
    return "no finite bound"


# ------------------------------------------------------------------------------------------------- matches

@dataclass
class MatchResult:
    """Games of player A against player B, with A's results and the statistics over opening pairs."""

    a: str
    b: str
    games: list[MatchGame] = field(default_factory=list)
    a_is_black: list[bool] = field(default_factory=list)  # per game
    opening_index: list[int] = field(default_factory=list)  # per game: its ballot entry, which forms pairs

    def points_for_a(self, index: int) -> float:
        black_points = self.games[index].points_for_black()
        return black_points if self.a_is_black[index] else 1.0 - black_points

    def _count(self, points: float) -> int:
        return sum(1 for i in range(len(self.games)) if self.points_for_a(i) == points)

    @property
    def wins(self) -> int:
        return self._count(1.0)

    @property
    def draws(self) -> int:
        return self._count(0.5)

    @property
    def losses(self) -> int:
        return self._count(0.0)

    @property
    def truncated(self) -> int:
        return sum(1 for g in self.games if g.truncated)

    def units(self) -> list[tuple[float, int]]:
        """(A's points, games) per opening, in ballot order."""
        by_opening: dict[int, list[float]] = {}
        for i, g in enumerate(self.games):
            by_opening.setdefault(self.opening_index[i], []).append(self.points_for_a(i))
        return [(sum(p), len(p)) for p in by_opening.values()]

    def add(self, game: MatchGame, a_is_black: bool, opening_index: int) -> None:
        self.games.append(game)
        self.a_is_black.append(a_is_black)
        self.opening_index.append(opening_index)

    def pdn(self, event: str | None = None) -> str:
        """Every game as PDN in round order, whatever order they finished in; the event names both players
        unless given."""
        event = event or f"{self.a} vs {self.b}"
        return "\n".join(g.pdn(event) for g in sorted(self.games, key=lambda g: g.round))

    def endgame_mistakes(self, egdb: Egdb) -> tuple[EndgameMistakes, EndgameMistakes]:
        """A's and B's moves judged against the endgame database, their mistakes, and the database wins they
        held and let go (zero.endgames.endgame_judge)."""
        return self._by_player(lambda game: judge_game(egdb, game.opening.start, game.moves, game.outcome.winner),
                               EndgameMistakes(), EndgameMistakes())

    def move_seconds(self) -> tuple[list[float], list[float]]:
        """A's move times and B's, over every game."""
        return self._by_player(MatchGame.seconds_by_colour, [], [])

    def _by_player(self, by_colour, a, b):
        """Sums (+=) over the games of `by_colour(game)`'s (Black's, White's) parts, as (A's, B's)."""
        for game, a_black in zip(self.games, self.a_is_black):
            black, white = by_colour(game)
            a += black if a_black else white
            b += white if a_black else black
        return a, b

    def pentanomial(self) -> list[int]:
        """How many complete pairs gave A 0, 1/2, 1, 3/2 and 2 points."""
        counts = [0] * 5
        for points, games in self.units():
            if games == 2:
                counts[int(round(points * 2))] += 1
        return counts

    @property
    def stats(self) -> ScoreStatistics:
        return score_statistics(self.units())

    @property
    def score(self) -> float:
        return self.stats.score

    @property
    def elo(self) -> float:
        return self.stats.elo

    @property
    def elo_ci95(self) -> tuple[float, float]:
        return self.stats.elo_ci95

    def summary(self) -> str:
        s = self.stats
        low, high = s.elo_ci95
        lines = [
            f"{self.a} vs {self.b}: {len(self.games)} games over {s.units} openings"
            + (f", {self.truncated} stopped at the length cap (draws)" if self.truncated else ""),
            f"{self.a}: {self.wins} wins, {self.draws} draws, {self.losses} losses; "
            f"score {s.score:.3f} (95% CI {s.score_ci95[0]:.3f} .. {s.score_ci95[1]:.3f})",
            f"Elo difference {format_elo(s.elo)} (95% CI {format_elo_interval(low, high)}); "
            f"pairs by A's points 0/0.5/1/1.5/2: {'/'.join(str(c) for c in self.pentanomial())}",
        ]
        if math.isinf(s.elo):
            lines.append(f"{self.a if s.elo > 0 else self.b} scored every point: no finite Elo difference fits")
        times = [f"{name}: mean {statistics.fmean(seconds):.3f} s, max {max(seconds):.3f} s ({len(seconds)} moves)"
                 for name, seconds in zip((self.a, self.b), self.move_seconds()) if seconds]
        if times:
            lines.append("time per move: " + "; ".join(times))
        return "\n".join(lines)


def match_schedule(openings: Sequence[Opening], games: int | None = None) -> list[tuple[int, bool]]:
    """(opening index, A plays Black) per game: each opening with A as Black then as White; first `games`."""
    schedule = [(i, a_black) for i in range(len(openings)) for a_black in (True, False)]
    return schedule if games is None else schedule[:games]


@dataclass
class _Slot:
    round: int
    opening_index: int
    a_black: bool
    game: Game
    seed: int
    searching: bool = False
    thinking: float = 0.0  # seconds of the lockstep search for the move being searched
    move_seconds: list[float] = field(default_factory=list)
    # The seconds on each game-clock player's clock (by id), before its next move's increment.
    banks: dict[int, float] = field(default_factory=dict)


def play_match(
    a: MatchPlayer,
    b: MatchPlayer,
    openings: Sequence[Opening],
    rules: RulesConfig = RulesConfig(),
    seed: int = 0,
    games: int | None = None,
    parallel: int = 32,
    on_game: Callable[[MatchGame, MatchResult], None] | None = None,
    should_stop: Callable[[MatchResult], bool] | None = None,
    progress: bool = False,
    done: MatchResult | None = None,
    clock: Callable[[], float] = time.perf_counter,
    may_start: Callable[[int], bool] | None = None,
) -> MatchResult:
    """Play the ballot schedule (each opening with A as Black, then as White; its first `games` games),
    `parallel` games at a time. Game k's seed is mix_seed(seed, k); the rules end every game, their
    max_plies cap included.

    on_game(game, result_so_far) runs after each finished game; should_stop(result) is asked after each
    one and ends the match early (games still in flight are dropped and not counted).

    may_start(opening_index) is asked before the next game of the schedule starts: while it says no, that
    game waits, and so does every game after it (the schedule is in ballot order), and the games in flight
    go on with the slot left empty. With no game in flight the next one starts whatever it says, since
    nothing else could change its answer.

    `done` holds the finished games of an interrupted run of the same match: they start the result, and
    their rounds are not played again (a game is a function of its seed, so the rest is what an
    uninterrupted match would have played).

    A network player on the clock (NetworkPlayer.seconds or .clock), or a ClockedPlayer, plays one game at a
    time: its time a move is one game's, and games in flight would share the processor it measures. Such
    games are as reproducible as the clock. `clock` (seconds) times the moves and those players' searches.
    """
    timed = [p for p in (a, b) if isinstance(p, NetworkPlayer) and p.on_the_clock]
    lockstep = [p for p in (a, b) if isinstance(p, NetworkPlayer) and not p.on_the_clock]
    clocked = [p for p in (a, b) if isinstance(p, ClockedPlayer)]
    if timed or clocked:
        parallel = 1
    for player in timed:
        warm_up(player.evaluator, player.config, rules, player.egdb)  # before its first move's clock
    for player in (a, b):
        if hasattr(player, "warm_up"):  # a yardstick's kernels, compiled or loaded before any clock
            player.warm_up()
    for player in lockstep:
        if player.simulations is None:
            raise ValueError(f"{player.name}: a network player needs simulations, a time a move or both")
    result = MatchResult(a.name, b.name)
    for i, game in enumerate(done.games if done else []):
        result.add(game, done.a_is_black[i], done.opening_index[i])
    played = {game.round for game in result.games}
    schedule = [(k, entry) for k, entry in enumerate(match_schedule(openings, games)) if k + 1 not in played]
    searches = {id(p): BatchedSearch(parallel, p.config, rules, simulations=p.simulations, egdb=p.egdb)
                for p in lockstep}
    game_searches = {id(p): GameSearch(p.evaluator, p.config, egdb=p.egdb, clock=clock, time_manager=p.time_manager)
                     for p in timed}
    slots: list[_Slot | None] = [None] * parallel
    next_game = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(schedule) + len(played), initial=len(played), unit="game",
                   desc=f"{a.name} vs {b.name}", file=sys.stderr)

    def start(g: int) -> _Slot:
        k, (opening_index, a_black) = schedule[next_game]
        opening = openings[opening_index]
        game = Game(start=opening.start, rules=rules)
        for move in opening.replay():
            if game.outcome is not None:
                break
            game.play(move)
        for search in searches.values():
            search.set_root(g, game)
        banks = {id(p): p.clock.base for p in (*timed, *clocked) if p.clock is not None}
        return _Slot(k + 1, opening_index, a_black, game, mix_seed(seed, k), banks=banks)

    def finish(g: int, slot: _Slot) -> bool:
        game = slot.game
        if game.outcome is None:
            return False
        black, white = (a, b) if slot.a_black else (b, a)
        record = MatchGame(slot.round, openings[slot.opening_index], black.name, white.name, tuple(game.moves),
                           game.outcome, slot.seed, tuple(slot.move_seconds))
        result.add(record, slot.a_black, slot.opening_index)
        slots[g] = None
        for search in searches.values():
            search.stop(g)
        if on_game is not None:
            on_game(record, result)
        if bar is not None:
            bar.update()
            bar.set_postfix_str(f"W{result.wins} D{result.draws} L{result.losses}")
        return True

    def apply(g: int, slot: _Slot, move: Move, seconds: float, player: MatchPlayer) -> None:
        slot.game.play(move)
        slot.move_seconds.append(seconds)
        if id(player) in slot.banks:
            slot.banks[id(player)] += player.clock.increment - seconds
        slot.searching, slot.thinking = False, 0.0
        if slot.game.outcome is None:
            for search in searches.values():
                search.play(g, move, slot.game)

    def plain_move(slot: _Slot, player: Player | ClockedPlayer) -> Move:
        game = slot.game
        black = game.position.black_to_move
        reset = getattr(player, "reset", None)
        if reset is not None:
            reset(mix_seed(slot.seed, int(black), game.ply))
        if id(player) in slot.banks:
            move = player.choose_on_clock(game, slot.banks[id(player)] + player.clock.increment)
        else:
            move = player.choose(game)
        if move not in game.legal_moves():
            raise IllegalMoveError(f"{player.name} chose {move}, which is not legal in {game.position}")
        return move

    try:
        while True:
            stop = should_stop is not None and should_stop(result)
            in_flight = sum(s is not None for s in slots)
            for g in range(parallel):
                if slots[g] is None and next_game < len(schedule) and not stop:
                    if may_start is not None and in_flight and not may_start(schedule[next_game][1][0]):
                        break
                    slots[g] = start(g)
                    next_game += 1
                    in_flight += 1
            live = [(g, s) for g, s in enumerate(slots) if s is not None]
            if stop or not live:
                break
            for g, slot in live:
                if finish(g, slot):
                    continue
                black = slot.game.position.black_to_move
                player = a if black == slot.a_black else b
                started = clock()
                legal = slot.game.legal_moves()
                if len(legal) == 1:
                    move = legal[0]
                elif isinstance(player, NetworkPlayer) and player.book is not None and \
                        (book_move := player.book.move(slot.game.position)) is not None:
                    move = book_move
                elif isinstance(player, NetworkPlayer) and player.egdb is not None and \
                        slot.game.position.piece_count() <= player.egdb.max_pieces:
                    # A position the database holds is played from it, unsearched: never worse than its value,
                    # and a draw kept going while the opponent can still go wrong.
                    move = player.egdb.move_in_game(slot.game)
                elif id(player) in game_searches:
                    search = game_searches[id(player)]
                    if player.clock is None:
                        move, _ = search.choose(slot.game, player.simulations, player.seconds)
                    else:
                        above = None if player.egdb is None else \
                            slot.game.position.piece_count() - player.egdb.max_pieces
                        budget = move_time(search.time_manager, player.clock.increment, slot.banks[id(player)], above)
                        move, _ = search.choose(slot.game, player.simulations, budget.target, budget.most)
                elif isinstance(player, NetworkPlayer):
                    if not slot.searching:
                        searches[id(player)].start(g, player.simulations)
                        slot.searching = True
                    continue
                else:
                    move = plain_move(slot, player)
                apply(g, slot, move, clock() - started, player)
                finish(g, slot)
            for player in lockstep:
                search = searches[id(player)]
                if not search.active.any():
                    continue
                started = clock()
                in_step = np.flatnonzero(search.active)
                search.step(player.evaluator)
                share = (clock() - started) / len(in_step)
                for g in in_step:
                    slots[g].thinking += share
                for g in np.flatnonzero(search.complete()):
                    slot = slots[g]
                    children = search.root_children(g)
                    move = children.move(children.best(), slot.game.position)
                    search.stop(g)
                    apply(g, slot, move, slot.thinking, player)
                    finish(g, slot)
    finally:
        if bar is not None:
            bar.close()
    return result

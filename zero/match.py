"""`checkers-zero match`: two players over a ballot of openings, each opening played with both colours.

Reusable pieces: `load_openings` (ballot files), `play_game` (one game, a pure function of its inputs and
seed, so games can be spread over processes), `play_match` (the whole ballot, giving a `MatchResult`) and
the statistics `elo_from_score` / `score_statistics`.

Statistics. A match is scored from A's view (win 1, draw 1/2, loss 0). Games are grouped into units, one per
opening (normally the pair of games with swapped colours; a lone game when a run was cut short). The score
is s = points / games, and its standard error comes from the spread of the units' points around
s * games (the ratio-estimator variance, which for full pairs is the pentanomial variance of the pair
score). Pairing matters because the two games of an opening are correlated (a lopsided opening tends to
give one win each way); treating the games as independent trinomial draws would misstate the error, and
draws need no special care since they enter as half points. The 95 % interval is s +- 1.96 SE (normal
approximation), clipped to [0, 1], and the score and both bounds are mapped to Elo with
elo = -400 log10(1/s - 1). A score of 0 or 1 maps to -inf or +inf: no finite Elo fits a shut-out, and the
printout says so rather than inventing a number. When every unit scores alike (all draws, say) the standard
error is 0 and the interval collapses to the point: the normal approximation has nothing more to say.
"""

from __future__ import annotations

import csv
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zero.game import INITIAL_BLACK, INITIAL_WHITE, Game, Move, Outcome, Position, RulesConfig, Termination
from zero.notation import NotationError, fen_to_position, resolve_move
from zero.players import Player

DEFAULT_MAX_PLIES = 400
Z_95 = 1.959963984540054


class BallotError(ValueError):
    """A ballot file that cannot be read, or an opening in it that is not legal."""


class IllegalMoveError(RuntimeError):
    """A player returned a move that is not legal in the position it was given."""


@dataclass(frozen=True)
class Opening:
    """A ballot entry: the forced moves (as written) from a start position."""

    name: str
    moves: tuple[str, ...]
    start: Position = field(default_factory=Position.initial)

    def replay(self) -> list[Move]:
        """The opening's moves resolved against the legal moves (NotationError when one is illegal)."""
        pos = self.start
        played = []
        for text in self.moves:
            move = resolve_move(text, pos.legal_moves())
            played.append(move)
            pos = pos.play(move)
        return played


# ------------------------------------------------------------------------------------------------ ballots

def _checked(opening: Opening, where: str, fen_after: str | None = None) -> Opening:
    try:
        moves = opening.replay()
    except NotationError as exc:
        raise BallotError(f"{where}: opening {' '.join(opening.moves)!r}: {exc}") from None
    if fen_after:
        pos = opening.start
        for mv in moves:
            pos = pos.play(mv)
        if pos != fen_to_position(fen_after):
            raise BallotError(f"{where}: opening {' '.join(opening.moves)!r} does not reach its FEN {fen_after}")
    return opening


def _from_text(lines: list[str], path: Path) -> list[Opening]:
    """One opening per line, moves separated by spaces ('9-13 21-17 5-9'); '#' starts a comment."""
    out = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if text:
            moves = tuple(text.split())
            out.append(_checked(Opening(" ".join(moves), moves), f"{path}:{number}"))
    return out


def _squares_removed(start: Position, row: dict[str, str], where: str) -> Position:
    black, white = start.black, start.white
    for column, is_black in (("remove_black", True), ("remove_white", False)):
        for sq in re.findall(r"\d+", row.get(column) or ""):
            bit = 1 << (int(sq) - 1)
            if not (black if is_black else white) & bit:
                raise BallotError(f"{where}: {column} names square {sq}, which holds no such piece")
            if is_black:
                black &= ~bit
            else:
                white &= ~bit
    return Position(black, white, 0, True)


def _from_tsv(lines: list[str], path: Path) -> list[Opening]:
    """Tab-separated with a header: a `moves` column, optionally `remove_black`/`remove_white` (pieces taken
    off the initial position first, as in 11-man ballots) and `fen`/`fen_after` (checked after the moves).
    Rows whose `status`/`deck` is 'lost' or 'barred' are skipped: those openings are not played in matches."""
    reader = csv.DictReader(lines, delimiter="\t")
    if not reader.fieldnames or "moves" not in reader.fieldnames:
        raise BallotError(f"{path}: a .tsv ballot needs a header with a 'moves' column")
    out = []
    for number, row in enumerate(reader, 2):
        where = f"{path}:{number}"
        if (row.get("status") or row.get("deck") or "").strip() in ("lost", "barred"):
            continue
        moves = tuple((row.get("moves") or "").split())
        start = _squares_removed(Position(INITIAL_BLACK, INITIAL_WHITE), row, where)
        name = " ".join(moves)
        if start != Position.initial():
            name = f"-{row.get('remove_black')} -{row.get('remove_white')} {name}"
        out.append(_checked(Opening(name, moves, start), where, row.get("fen_after") or row.get("fen")))
    return out


_FEN_TAG = re.compile(r'\[FEN\s+"([^"]+)"\]')


def _from_fen_pdn(lines: list[str], path: Path) -> list[Opening]:
    """A PDN file of start positions (`[FEN "..."] *` per game): each FEN is an opening with no moves."""
    out = []
    for number, line in enumerate(lines, 1):
        for fen in _FEN_TAG.findall(line):
            try:
                out.append(Opening(fen, (), fen_to_position(fen)))
            except NotationError as exc:
                raise BallotError(f"{path}:{number}: {exc}") from None
    return out


def load_openings(path: str | Path) -> list[Opening]:
    """Openings from a ballot file: .txt (moves per line), .tsv (with a 'moves' column) or .pdn (FEN tags)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except OSError as exc:
        raise BallotError(f"cannot read ballot {path}: {exc.strerror or exc}") from None
    readers = {".txt": _from_text, ".tsv": _from_tsv, ".pdn": _from_fen_pdn}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise BallotError(f"{path}: unknown ballot format (expected {', '.join(readers)})")
    openings = reader(lines, path)
    if not openings:
        raise BallotError(f"{path}: no openings found")
    return openings


# ------------------------------------------------------------------------------------------------- games

@dataclass(frozen=True)
class GameRecord:
    """A finished game: who played which colour, every move from the opening's start, and the outcome."""

    opening: Opening
    black: str
    white: str
    moves: tuple[Move, ...]
    outcome: Outcome
    seed: int

    @property
    def result(self) -> str:
        return self.outcome.pdn_result

    @property
    def truncated(self) -> bool:
        """Stopped at the match's length cap (scored as a draw)."""
        return self.outcome.termination == Termination.MAX_LENGTH

    def points_for_black(self) -> float:
        return (self.outcome.winner + 1) / 2

    def pdn(self, event: str = "checkers-zero match") -> str:
        from zero.pdn import write_game

        tags = {"Event": event, "Black": self.black, "White": self.white, "Result": self.result,
                "Opening": self.opening.name, "Termination": self.outcome.termination.value}
        return write_game(self.moves, self.result, tags, start=self.opening.start)


def mix_seed(*parts: int) -> int:
    """One 63-bit seed from several non-negative integers (a match seed, a game number, a colour)."""
    low, high = (int(x) for x in np.random.SeedSequence(list(parts)).generate_state(2, np.uint32))
    return (high & 0x7FFFFFFF) << 32 | low


def start_game(black: Player, white: Player, opening: Opening, rules: RulesConfig, seed: int) -> Game:
    """A new game after the opening's forced moves; each player's reset(seed) (when it has one) is called
    with a seed derived from `seed` and its colour."""
    for colour, player in enumerate((black, white)):
        reset = getattr(player, "reset", None)
        if reset is not None:
            reset(mix_seed(seed, colour))
    game = Game(start=opening.start, rules=rules)
    for move in opening.replay():
        if game.outcome is not None:
            break
        game.play(move)
    return game


def play_game(black: Player, white: Player, opening: Opening, rules: RulesConfig = RulesConfig(),
              max_plies: int = DEFAULT_MAX_PLIES, seed: int = 0) -> GameRecord:
    """Play one game: the opening's moves forced, then the players, under `rules` (every draw rule applies).

    A game still going after max_plies plies (the opening's included) is a draw flagged as truncated.
    Each player's reset(seed) (when it has one) is called first with a seed derived from `seed`, so the
    game depends only on the arguments.
    """
    game = start_game(black, white, opening, rules, seed)
    while game.outcome is None:
        if game.ply >= max_plies:
            game.finish(0, Termination.MAX_LENGTH)
            break
        player = black if game.position.black_to_move else white
        move = player.choose(game)
        if move not in game.legal_moves():
            raise IllegalMoveError(f"{player.name} chose {move}, which is not legal in {game.position}")
        game.play(move)
    return GameRecord(opening, black.name, white.name, tuple(game.moves), game.outcome, seed)


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
        residual = sum((p - score * g) ** 2 for p, g in units)
        stderr = math.sqrt(residual * n / (n - 1)) / games
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
    if math.isinf(elo):
        return "+inf" if elo > 0 else "-inf"
    return f"{elo:+.0f}"


# ------------------------------------------------------------------------------------------------- matches

@dataclass
class MatchResult:
    """Games of player A against player B, with A's results and the statistics over opening pairs."""

    a: str
    b: str
    games: list[GameRecord] = field(default_factory=list)
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

    def pdn(self) -> str:
        """Every game as PDN, the event naming both players."""
        return "\n".join(g.pdn(event=f"{self.a} vs {self.b}") for g in self.games)

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
            f"Elo difference {format_elo(s.elo)} (95% CI {format_elo(low)} .. {format_elo(high)}); "
            f"pairs by A's points 0/0.5/1/1.5/2: {'/'.join(str(c) for c in self.pentanomial())}",
        ]
        if math.isinf(s.elo):
            lines.append(f"{self.a if s.elo > 0 else self.b} scored every point: no finite Elo difference fits")
        return "\n".join(lines)


def match_schedule(openings: Sequence[Opening], games: int | None = None) -> list[tuple[int, bool]]:
    """(opening index, A plays Black) per game: each opening with A as Black then as White; first `games`."""
    schedule = [(i, a_black) for i in range(len(openings)) for a_black in (True, False)]
    return schedule if games is None else schedule[:games]


def play_match(a: Player, b: Player, openings: Sequence[Opening], rules: RulesConfig = RulesConfig(),
               max_plies: int = DEFAULT_MAX_PLIES, seed: int = 0, games: int | None = None,
               on_game: Callable[[GameRecord], None] | None = None, progress: bool = False) -> MatchResult:
    """Play the ballot (or its first `games` games); game k's seed is mix_seed(seed, k).

    on_game is called with each finished game (to write it out as it comes); progress shows a tqdm bar.
    """
    schedule = match_schedule(openings, games)
    result = MatchResult(a.name, b.name)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(schedule), unit="game", desc=f"{a.name} vs {b.name}", file=sys.stderr)
    try:
        for k, (index, a_black) in enumerate(schedule):
            black, white = (a, b) if a_black else (b, a)
            record = play_game(black, white, openings[index], rules, max_plies, mix_seed(seed, k))
            result.games.append(record)
            result.a_is_black.append(a_black)
            result.opening_index.append(index)
            if on_game is not None:
                on_game(record)
            if bar is not None:
                bar.update()
                bar.set_postfix_str(f"W{result.wins} D{result.draws} L{result.losses}")
    finally:
        if bar is not None:
            bar.close()
    return result

"""How much of its game clock a player spends, and where the rest goes (issue 77): a match over the ballot
(train.arena.split_match), then, for each player on a game clock, its thinking time against its clock's
total (the base and every move's increment), game by game, and the clock split by the kind of move that
earned it: forced, from the book, from the endgame database (all instant) and searched.

    python benchmarks/clock_use.py "mcts:t0+0.1:dbleaves5:book" "distilled:t0+0.1:db5:book" --processes 2

The bank is what the clock holds after the player's last move; it is overdrawn after a move that took more
than the clock held (the match keeps the debt for later moves to pay back: a real clock would have fallen).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from split_match import match_parser, play_and_report

from train.arena.match import MatchResult, NetworkPlayer
from train.arena.player_specs import make_player
from zero.rules.game import Game

KINDS = ("forced", "book", "database", "searched")
# A bank below this is overdrawn: a move that took the clock's whole content to the nanosecond did not, though
# the float sums of its increments and times may land a hair below zero.
OVERDRAWN = -1e-9


@dataclass
class ClockUse:
    """One player's clock over a match's games."""

    name: str
    clock: float = 0.0  # seconds its clocks held in all: the bases and every move's increment
    thinking: float = 0.0
    earned: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.0))  # increments by kind
    spent: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.0))
    moves: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    shares: list[float] = field(default_factory=list)  # thinking / clock, a game each
    banks_left: list[float] = field(default_factory=list)
    banks_at_database: list[float] = field(default_factory=list)  # before its first database move
    overdrawn_moves: int = 0
    overdrawn_games: int = 0  # games a real clock would have lost on time
    lowest_bank: float = 0.0


def move_kind(player, game: Game) -> str:
    """Which way the match played this player's move in `game`'s position (train.arena.match.play_match's order)."""
    if len(game.legal_moves()) == 1:
        return "forced"
    player = getattr(player, "player", player)  # a clocked alpha-beta player's own player
    book, egdb = getattr(player, "book", None), getattr(player, "egdb", None)
    if book is not None and book.move(game.position) is not None:
        return "book"
    if egdb is not None and game.position.piece_count() <= egdb.max_pieces:
        return "database"
    return "searched"


def clock_use(result: MatchResult, player, name: str) -> ClockUse:
    """`player`'s (named `name` in `result`) clock over the match's games, replayed move by move."""
    use = ClockUse(name)
    base, increment = player.clock.base, player.clock.increment
    for match_game in result.games:
        game = Game(start=match_game.opening.start)
        first_timed = len(match_game.moves) - len(match_game.move_seconds)
        bank, clock, thinking, at_database, overdrawn = base, base, 0.0, None, False
        for k, move in enumerate(match_game.moves):
            mover = match_game.black if game.position.black_to_move else match_game.white
            if k >= first_timed and mover == name:
                seconds = match_game.move_seconds[k - first_timed]
                kind = move_kind(player, game)
                if kind == "database" and at_database is None:
                    at_database = bank
                bank += increment - seconds
                clock += increment
                thinking += seconds
                use.earned[kind] += increment
                use.spent[kind] += seconds
                use.moves[kind] += 1
                use.overdrawn_moves += bank < OVERDRAWN
                overdrawn = overdrawn or bank < OVERDRAWN
                use.lowest_bank = min(use.lowest_bank, bank)
            game.play(move)
        use.clock += clock
        use.thinking += thinking
        use.shares.append(thinking / clock)
        use.banks_left.append(bank)
        use.overdrawn_games += overdrawn
        if at_database is not None:
            use.banks_at_database.append(at_database)
    return use


def percentiles(values: list[float]) -> str:
    cuts = statistics.quantiles(values, n=10, method="inclusive")
    return f"min {min(values):.3f}, p10 {cuts[0]:.3f}, median {statistics.median(values):.3f}, " \
           f"p90 {cuts[-1]:.3f}, max {max(values):.3f}"


def describe(use: ClockUse) -> str:
    lines = [f"{use.name}: thought {use.thinking:.1f} s of its clocks' {use.clock:.1f} s: "
             f"{100 * use.thinking / use.clock:.1f} %",
             f"  share a game: {percentiles(use.shares)}",
             f"  bank after its last move (s): {percentiles(use.banks_left)}"]
    if use.banks_at_database:
        lines.append(f"  bank before its first database move (s), {len(use.banks_at_database)} games: "
                     f"{percentiles(use.banks_at_database)}")
    lines.append(f"  overdrawn after {use.overdrawn_moves} moves, in {use.overdrawn_games} of {len(use.shares)} games "
                 f"(lowest bank {use.lowest_bank:.3f} s)")
    for kind in KINDS:
        if use.moves[kind]:
            lines.append(f"  {kind:>8}: {use.moves[kind]:6d} moves, earned {100 * use.earned[kind] / use.clock:5.1f} % "
                         f"of the clock, spent {use.spent[kind]:.1f} s ({use.spent[kind] / use.moves[kind]:.3f} s a move)")
    return "\n".join(lines)


def main() -> None:
    args = match_parser(__doc__.splitlines()[0], "clock-use").parse_args()
    result = play_and_report(args, "clock-use")
    for spec, name in ((args.a, result.a), (args.b, result.b)):
        player = make_player(spec)
        if getattr(player, "clock", None) is not None:
            print(describe(clock_use(result, player, name)))
        elif isinstance(player, NetworkPlayer):
            print(f"{name}: on no game clock")


if __name__ == "__main__":
    main()

"""`checkers-zero match`: two players over a ballot of openings, each opening played with both colours."""

from __future__ import annotations

import argparse
import sys

from zero.match import (DEFAULT_MAX_PLIES, BallotError, GameRecord, IllegalMoveError, load_openings, mix_seed,
                        play_match)
from zero.players import PlayerSpecError, make_player


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="player A: random, alphabeta:N (or abN), or another registered name:args")
    p.add_argument("b", help="player B, same forms")
    p.add_argument("--openings", required=True,
                   help="ballot file: .txt (moves per line), .tsv (moves column) or .pdn (FEN tags)")
    p.add_argument("--games", type=int, default=None, help="play only the first N games (quick runs)")
    p.add_argument("--out", default=None, help="write every game to this PDN file")
    p.add_argument("--seed", type=int, default=0, help="match seed (players and games derive theirs from it)")
    p.add_argument("--max-plies", type=int, default=DEFAULT_MAX_PLIES,
                   help=f"stop a game at this many plies as a flagged draw (default {DEFAULT_MAX_PLIES})")
    p.add_argument("--event", default=None, help="PDN Event tag (default 'A vs B')")


def run(args: argparse.Namespace) -> int:
    if args.games is not None and args.games < 1:
        print("error: --games must be at least 1", file=sys.stderr)
        return 2
    try:
        openings = load_openings(args.openings)
        a = make_player(args.a, seed=mix_seed(args.seed, 0))
        b = make_player(args.b, seed=mix_seed(args.seed, 1))
    except (BallotError, PlayerSpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    event = args.event or f"{a.name} vs {b.name}"
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    try:
        def write(record: GameRecord) -> None:
            if out is not None:
                out.write(record.pdn(event))
                out.flush()

        result = play_match(a, b, openings, max_plies=args.max_plies, seed=args.seed, games=args.games,
                            on_game=write, progress=True)
    except IllegalMoveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if out is not None:
            out.close()
    print(result.summary())
    if args.out:
        print(f"games written to {args.out}")
    return 0

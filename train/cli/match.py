"""`checkers-zero match`: two players over a ballot of openings, each opening played with both colours.

Network players (`mcts:`) search as in gating (GatingConfig's search settings) and play all their games in
lockstep, so a whole ballot of them is practical on a CPU; the summary gives the score, the Elo difference
with its 95 % interval, the pentanomial counts of the game pairs that gating uses, and each player's
solved-endgame mistake rate (zero.endgames.endgame_judge).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from train.arena.gating import GatingConfig
from train.arena.match import IllegalMoveError, MatchGame, MatchResult, mix_seed, play_match
from train.arena.player_specs import SPEC_HELP, PlayerSpecError, make_player
from zero.corpus.openings import BallotError, load_openings
from zero.rules.game import RulesConfig
from zero.run.config import append_whole, atomic_write_bytes, disk_problem, notify


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help=f"player A: {SPEC_HELP}")
    p.add_argument("b", help="player B, same forms")
    p.add_argument("--openings", required=True,
                   help="ballot file: .txt (moves per line), .tsv (moves column) or .pdn (FEN tags)")
    p.add_argument("--games", type=int, default=None, help="play only the first N games (quick runs)")
    p.add_argument("--parallel", type=int, default=GatingConfig.parallel_games,
                   help=f"games in flight, whose network leaves share one batch (default {GatingConfig.parallel_games})")
    p.add_argument("--out", type=Path, default=None,
                   help="write every game to this PDN file (each as it ends, then all in round order at the end)")
    p.add_argument("--seed", type=int, default=0, help="match seed (players and games derive theirs from it)")
    p.add_argument("--max-plies", type=int, default=RulesConfig.max_plies,
                   help=f"stop a game at this many plies as a flagged draw (default {RulesConfig.max_plies})")
    p.add_argument("--event", default=None, help="PDN Event tag (default 'A vs B')")
    p.add_argument("--no-endgame-judge", action="store_true",
                   help="leave out each player's solved-endgame mistake rate (moves judged against the largest "
                        "endgame database built; the 4-piece one is built on first use, in seconds)")


def run(args: argparse.Namespace) -> int:
    if args.games is not None and args.games < 1:
        print("error: --games must be at least 1", file=sys.stderr)
        return 2
    if args.parallel < 1 or args.max_plies < 1:
        print("error: --parallel and --max-plies must be at least 1", file=sys.stderr)
        return 2
    search = GatingConfig().search
    try:
        openings = load_openings(args.openings)
        a = make_player(args.a, seed=mix_seed(args.seed, 0), search=search)
        b = make_player(args.b, seed=mix_seed(args.seed, 1), search=search)
    except (BallotError, PlayerSpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    event = args.event or f"{a.name} vs {b.name}"
    # Each game is written as it ends, so that a crash keeps the games played; games end in any order, so
    # the finished match rewrites the file in round order.
    out = open(args.out, "wb", buffering=0) if args.out else None
    try:
        def write(game: MatchGame, _result: MatchResult) -> None:
            if out is not None:
                append_whole(out, game.pdn(event).encode())

        result = play_match(a, b, openings, RulesConfig(max_plies=args.max_plies), seed=args.seed,
                            games=args.games, parallel=args.parallel, on_game=write, progress=True)
    except IllegalMoveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if out is not None:
            out.close()
    if args.out:
        try:
            atomic_write_bytes(args.out, result.pdn(event).encode())
        except OSError as exc:  # needs a second copy's room: the games written as they ended are whole
            print(f"warning: {args.out} keeps the games in the order they ended ({disk_problem(exc) or exc})",
                  file=sys.stderr)
    print(result.summary())
    if not args.no_endgame_judge and result.games:
        from zero.endgames.egdb_build import largest_available

        notify("judging the games' endgame moves against the endgame database (--no-endgame-judge: not) ...")
        egdb = largest_available()
        mistakes_a, mistakes_b = result.endgame_mistakes(egdb)
        print(f"solved-endgame mistakes ({egdb.max_pieces}-piece database): {a.name}: {mistakes_a}; "
              f"{b.name}: {mistakes_b}")
    if args.out:
        print(f"games written to {args.out}")
    return 0

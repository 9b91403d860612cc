"""A ballot match of two programs that speak the JSON engine protocol, each asked for its moves as a program
playing through the engine asks (train.arena.program_player): two checkers-zero engines of different code,
networks or settings, or another engine with that protocol. On a game clock (`--clock BASE+INCREMENT`, the
default 0+0.1: 0.1 s a move on average) each program's own time manager decides its moves' times; the
summary reports each player's mean and longest. The openings are split over `--processes` pairs of programs
run side by side (each program one thread; one of a pair searches at a time), as split_match.py splits them.

    python benchmarks/engine_match.py "checkers-zero engine" "python -m play engine" --b-dir ../old-checkout \\
        --names now before --processes 2 --out engine-match.pdn

The games go to --out, by default runs/matches/engine-match-DATE-TIME.pdn in the current directory.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from selfplay.actors.actor import load_ballot
from selfplay.tree_search.time_manager import GameClock
from split_match import report
from train.arena.match import MatchGame, MatchResult, default_games_path, play_match
from train.arena.program_player import ProgramError, ProgramPlayer
from train.arena.split_match import joined_shares, share_bounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="A's command line, e.g. \"checkers-zero engine --checkpoint runs/x\"")
    parser.add_argument("b", help="B's command line")
    parser.add_argument("--a-dir", type=Path, help="the folder A runs in (another checkout: \"python -m play engine\")")
    parser.add_argument("--b-dir", type=Path, help="the folder B runs in")
    parser.add_argument("--names", nargs=2, default=("A", "B"), metavar=("A", "B"))
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--clock", default="0+0.1", help="each player's game clock, BASE+INCREMENT seconds")
    limit.add_argument("--time", type=float, help="seconds a move instead of a game clock")
    parser.add_argument("--openings", default="openings/acf_3move_144.txt",
                        help="ballot file, relative to the data folder or absolute (default: the ACF 3-move 144)")
    parser.add_argument("--processes", type=int, default=2, help="pairs of programs playing side by side")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="every game, in round order (default: runs/matches/"
                                                 "engine-match-DATE-TIME.pdn, which git ignores)")
    args = parser.parse_args()
    try:
        budget = {"seconds": args.time} if args.time is not None else {"clock": GameClock.parse(args.clock)}
        ProgramPlayer(args.names[0], args.a, **budget)  # checks the budget; no program starts before a move
    except ValueError as exc:
        parser.error(str(exc))
    if args.processes < 1:
        parser.error(f"--processes must be at least 1, got {args.processes}")
    try:
        openings = load_ballot(args.openings)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    shares = share_bounds(len(openings), args.processes)
    started = time.time()
    print(f"{args.names[0]} vs {args.names[1]}, {args.time or args.clock}: {2 * len(openings)} games over "
          f"{len(shares)} pairs of programs, load average {os.getloadavg()[0]:.1f}", flush=True)
    bar = tqdm(total=2 * len(openings), unit=" games", dynamic_ncols=True)
    lock = threading.Lock()

    def count(_game: MatchGame, _result: MatchResult) -> None:
        with lock:
            bar.update()

    def play_share(bounds: tuple[int, int]) -> MatchResult:
        first, last = bounds
        a = ProgramPlayer(args.names[0], args.a, cwd=args.a_dir, **budget)
        b = ProgramPlayer(args.names[1], args.b, cwd=args.b_dir, **budget)
        try:
            # A program that fails ends the other shares at their next game: their results would not be used.
            return play_match(a, b, openings[first:last], seed=args.seed, on_game=count,
                              should_stop=lambda _result: failed.is_set())
        except BaseException:
            failed.set()
            raise
        finally:
            a.close()
            b.close()

    failed = threading.Event()
    try:
        with ThreadPoolExecutor(len(shares)) as pool:
            results = list(pool.map(play_share, shares))
    except ProgramError as exc:
        bar.close()
        raise SystemExit(f"engine_match: {exc}") from None
    bar.close()
    report(joined_shares([first for first, _ in shares], results), args.out or default_games_path("engine-match"),
           started)


if __name__ == "__main__":
    main()

"""A match over the whole ballot, the openings split over several processes of one thread each: for
players on the clock, whose games run one at a time, so that a 288-game ballot takes hours / processes
(train.arena.split_match). The summary combines every opening pair into one score, Elo and 95 % interval, as one
match would.

    python benchmarks/split_match.py "mcts:t0.1" "mcts:190" --processes 2 [--openings FILE] [--first N] [--out games.pdn]

The games go to --out, by default runs/matches/split-match-DATE-TIME.pdn in the current directory.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from selfplay.actors.actor import load_ballot
from train.arena.match import MatchResult, default_games_path
from train.arena.split_match import play_split_match
from zero.run.config import atomic_write_bytes


def main() -> None:
    play_and_report(match_parser(__doc__.splitlines()[0], "split-match").parse_args(), "split-match")


def match_parser(description: str, games_name: str) -> argparse.ArgumentParser:
    """The arguments of a match over the ballot split over processes (this script's and those built on it)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--openings", default="openings/acf_3move_144.txt",
                        help="ballot file, relative to the data folder or absolute (default: the ACF 3-move 144)")
    parser.add_argument("--first", type=int, help="only the ballot's first N openings (2N games)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help=f"every game, in round order (default: runs/matches/"
                                                 f"{games_name}-DATE-TIME.pdn, which git ignores)")
    return parser


def play_and_report(args: argparse.Namespace, games_name: str) -> MatchResult:
    """Play the match `args` (from match_parser) asks for, then write its games and print its summary."""
    openings = load_ballot(args.openings)[:args.first]
    started = time.time()
    print(f"{args.a} vs {args.b}: {2 * len(openings)} games over {args.processes} processes, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    result = play_split_match(args.a, args.b, openings, args.processes, args.seed, progress=True)
    report(result, args.out or default_games_path(games_name), started)
    return result


def report(result: MatchResult, out: Path, started: float) -> None:
    """Write a match's games to `out` and print its summary, its minutes since `started` and the load."""
    atomic_write_bytes(out, result.pdn().encode())
    print(result.summary())
    print(f"{(time.time() - started) / 60:.1f} minutes, load average {os.getloadavg()[0]:.1f} at the end; "
          f"games in {out}")


if __name__ == "__main__":
    main()

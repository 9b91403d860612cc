"""The distilled alpha-beta search's speed, as a pure ratio: nodes a second at a fixed depth (the same tree
whatever the code's speed, so that two versions of the kernels compare by their time alone; the line's
signature, a digest of every position's move, score and node count, must match between them), then the mean
depth the player on the clock reaches.

    python benchmarks/alphabeta_speed.py [--eval checkpoints/distilled.npz] [--depth 11] [--seconds 0.1]
        [--every 12] [--repeat 3] [--db] [--set aspiration=40 --set countermoves=true]

--set changes the player's Selectivity (zero.alphabeta.player): a setting that changes only the order or the
root's window keeps the minimax score with the rest of the selectivity off, and its nodes to a fixed depth are
then a measure of its gain that no load on the machine changes.

Positions: players_bench's (ballot openings, then 10, 20 and 30 plies of a seeded game). To compare two
versions of the code, run this script in turn with PYTHONPATH set to each checkout (a `git worktree` of the
old commit), alternately a few times on the same machine; each checkout compiles its kernels once into its own
numba cache, before the timing starts.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from players_bench import bench_positions, searches_on_the_clock  # noqa: E402

from zero.alphabeta.player import DistilledPlayer, Selectivity  # noqa: E402
from zero.distilled.model import load_eval  # noqa: E402
from zero.run.config import with_overrides  # noqa: E402


def fixed_depth(evaluation, games, depth: int, repeat: int, egdb=None, selectivity: Selectivity = Selectivity()) -> None:
    DistilledPlayer(depth=1, evaluation=evaluation, egdb=egdb).search(games[0])  # compile (or load from numba's cache)
    best, nodes, digest = float("inf"), 0, ""
    for _ in range(repeat):
        # A new player each pass: the history heuristic's table carries over from one search to the next.
        player = DistilledPlayer(depth=depth, evaluation=evaluation, seed=1, egdb=egdb, selectivity=selectivity)
        signature = hashlib.sha256()
        seconds, nodes = 0.0, 0
        for game in games:
            start = time.perf_counter()
            move, score, visited = player.search(game)
            seconds += time.perf_counter() - start
            nodes += visited
            signature.update(f"{move} {score} {visited};".encode())
        best = min(best, seconds)
        digest = signature.hexdigest()[:12]
    print(f"depth {depth}: {nodes / best:,.0f} nodes/s ({nodes:,} nodes in {best:.2f} s, best of {repeat}); "
          f"signature {digest}")


def on_the_clock(evaluation, games, seconds: float, egdb=None, selectivity: Selectivity = Selectivity()) -> None:
    rate, depths = searches_on_the_clock(DistilledPlayer(seconds=seconds, evaluation=evaluation, seed=1, egdb=egdb,
                                                         selectivity=selectivity), games)
    print(f"{seconds:g} s a move: depth {statistics.mean(depths):.2f} on average (min {min(depths)}, "
          f"max {max(depths)}), {rate:,.0f} nodes/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", default=None, help="distilled evaluation file (default: the shipped one)")
    parser.add_argument("--depth", type=int, default=11)
    parser.add_argument("--seconds", type=float, default=0.1, help="0: no search on the clock")
    parser.add_argument("--every", type=int, default=12, help="take every N-th ballot opening")
    parser.add_argument("--repeat", type=int, default=3, help="time the fixed-depth pass this many times, keep the best")
    parser.add_argument("--db", action="store_true",
                        help="with the largest endgame database built as exact leaves, as the players' :db")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a Selectivity setting of the player (repeatable), e.g. --set aspiration=40")
    args = parser.parse_args()
    selectivity = with_overrides(Selectivity(), args.set)
    evaluation = load_eval(args.eval)
    egdb = None
    if args.db:
        from zero.endgames.egdb_build import largest_available

        egdb = largest_available()
    games = bench_positions(args.every)
    database = f"the {egdb.max_pieces}-piece database" if egdb is not None else "no database"
    print(f"{len(games)} positions, {database}, {selectivity}; load average {os.getloadavg()[0]:.2f}")
    fixed_depth(evaluation, games, args.depth, args.repeat, egdb, selectivity)
    if args.seconds:
        on_the_clock(evaluation, games, args.seconds, egdb, selectivity)


if __name__ == "__main__":
    main()

"""Classical engine speed and strength: nodes a second, depth reached on the clock, and (with --games) its
score against material alpha-beta at equal time over the ACF ballot.

Positions as benchmarks/players_bench.py takes them: every 12th ACF 3-move opening, right after the ballot
moves and after 10, 20 and 30 more plies of seeded alphabeta:2 self-play (48 positions).

    python benchmarks/classical_bench.py [--depths 6 8 10] [--seconds 0.1] [--games 288 --processes 2]

--games N plays the first N/2 openings of the ballot, each with both colours, classical:tS against
alphabeta:tS (S = --seconds), the openings split over --processes processes of one thread each
(train.arena.split_match); the issue's target is a score of at least 75 % over the whole ballot (--games 288).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from players_bench import bench_positions  # noqa: E402

from zero.endgames.egdb_build import QUICK_PIECES, ensure_built  # noqa: E402
from zero.yardsticks.classical import ClassicalPlayer  # noqa: E402
from zero.yardsticks.players import AlphaBetaPlayer  # noqa: E402


def fixed_depth(games, depths: list[int], egdb) -> None:
    print(f"{'player':<14} {'mean ms':>9} {'max ms':>8} {'mean nodes':>11} {'k nodes/s':>10}")
    for depth in depths:
        for make in (lambda: ClassicalPlayer(depth, seed=1, egdb=egdb), lambda: AlphaBetaPlayer(depth, seed=1)):
            player = make()
            times, nodes = [], []
            for game in games:
                start = time.perf_counter()
                _, _, visited = player.search(game)
                times.append(time.perf_counter() - start)
                nodes.append(visited)
            print(f"{player.name:<14} {1e3 * statistics.mean(times):>9.2f} {1e3 * max(times):>8.2f} "
                  f"{statistics.mean(nodes):>11.0f} {sum(nodes) / sum(times) / 1e3:>10.0f}")


def on_the_clock(games, seconds: float, egdb) -> None:
    for player in (ClassicalPlayer(seed=1, seconds=seconds, egdb=egdb), AlphaBetaPlayer(seed=1, seconds=seconds)):
        times, depths, nodes = [], [], []
        for game in games:
            start = time.perf_counter()
            _, _, visited = player.search(game)
            times.append(time.perf_counter() - start)
            depths.append(player.last_depth)
            nodes.append(visited)
        print(f"{player.name}: {1e3 * statistics.mean(times):.1f} ms a move (max {1e3 * max(times):.1f}); depth "
              f"mean {statistics.mean(depths):.1f}, min {min(depths)}, max {max(depths)}; "
              f"{sum(nodes) / sum(times) / 1e3:.0f} k nodes/s")


def match(games: int, seconds: float, processes: int, seed: int) -> None:
    from selfplay.actors.actor import load_ballot
    from train.arena.split_match import play_split_match

    openings = load_ballot("openings/acf_3move_144.txt")[: (games + 1) // 2]
    a, b = f"classical:t{seconds:g}", f"alphabeta:t{seconds:g}"
    started = time.time()
    print(f"{a} vs {b}: {2 * len(openings)} games over {processes} processes, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    result = play_split_match(a, b, openings, processes, seed, progress=True)
    print(result.summary())
    print(f"{(time.time() - started) / 60:.1f} minutes, load average {os.getloadavg()[0]:.1f} at the end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="*", default=[6, 8, 10])
    parser.add_argument("--seconds", type=float, default=0.1, help="time a move on the clock (default 0.1)")
    parser.add_argument("--every", type=int, default=12, help="take every N-th ballot opening for the positions")
    parser.add_argument("--games", type=int, default=0, help="also play this many ballot games (288: all)")
    parser.add_argument("--processes", type=int, default=2, help="processes for the games (one thread each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    egdb = ensure_built(QUICK_PIECES)  # what classical:N and classical:tS use
    games = bench_positions(args.every)
    ClassicalPlayer(2, egdb=egdb).search(games[0])  # compile before timing
    AlphaBetaPlayer(1).search(games[0])
    print(f"{len(games)} positions; load average {os.getloadavg()[0]:.1f}")
    if args.depths:
        fixed_depth(games, args.depths, egdb)
    on_the_clock(games, args.seconds, egdb)
    if args.games:
        match(args.games, args.seconds, args.processes, args.seed)


if __name__ == "__main__":
    main()

"""Alpha-beta yardstick speed: time per move at several depths over positions from ballot openings.

Positions: every 12th opening of the ACF 3-move ballot, taken right after the ballot moves and after 10, 20
and 30 more plies of a seeded alphabeta:2 self-play game (opening, early and middle game).

    python benchmarks/players_bench.py [--depths 4 6 8] [--every 12] [--repeat 3] [--seconds 0.1]

With --seconds, the player on the clock (alphabeta:tS) is measured on the same positions too: the time it
took per move and the depth its move came from.
"""

from __future__ import annotations

import argparse
import statistics
import time

from train.arena.match import mix_seed
from zero.corpus.openings import load_openings
from zero.rules.game import Game
from zero.run.data import require_data_file
from zero.yardsticks.players import AlphaBetaPlayer


def bench_positions(every: int) -> list[Game]:
    openings = load_openings(require_data_file("openings/acf_3move_144.txt"))[::every]
    driver = AlphaBetaPlayer(2)
    games = []
    for k, opening in enumerate(openings):
        driver.reset(mix_seed(k))
        game = Game(start=opening.start, moves=opening.replay())
        for extra in range(31):
            if game.outcome is not None:
                break
            if extra % 10 == 0:
                games.append(Game(start=opening.start, moves=list(game.moves)))
            game.play(driver.choose(game))
    return games


def searches_on_the_clock(player, games: list[Game]) -> tuple[float, list[int]]:
    """A timed alpha-beta player's search of each position (compiled first): its nodes a second and the depth
    each search reached."""
    player.warm_up()
    nodes, spent, depths = 0, 0.0, []
    for game in games:
        start = time.perf_counter()
        _, _, visited = player.search(game)
        spent += time.perf_counter() - start
        nodes += visited
        depths.append(player.last_depth)
    return nodes / spent, depths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[4, 6, 8])
    parser.add_argument("--every", type=int, default=12, help="take every N-th ballot opening")
    parser.add_argument("--repeat", type=int, default=3, help="time each search this many times, keep the best")
    parser.add_argument("--seconds", type=float, nargs="*", default=[], help="also alpha-beta on the clock")
    args = parser.parse_args()
    games = bench_positions(args.every)
    AlphaBetaPlayer(1).search(games[0])  # compile before timing
    print(f"{len(games)} positions; time per move = full search of the position (best of {args.repeat})")
    print(f"{'depth':>5} {'mean ms':>9} {'median ms':>10} {'max ms':>8} {'mean nodes':>11} {'M nodes/s':>10}")
    for depth in args.depths:
        player = AlphaBetaPlayer(depth, seed=1)
        times, nodes = [], []
        for game in games:
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                _, _, visited = player.search(game)
                best = min(best, time.perf_counter() - start)
            times.append(best)
            nodes.append(visited)
        print(f"{depth:>5} {1e3 * statistics.mean(times):>9.2f} {1e3 * statistics.median(times):>10.2f} "
              f"{1e3 * max(times):>8.2f} {statistics.mean(nodes):>11.0f} {sum(nodes) / sum(times) / 1e6:>10.2f}")
    for seconds in args.seconds:
        player = AlphaBetaPlayer(seed=1, seconds=seconds)
        times, depths = [], []
        for game in games:
            start = time.perf_counter()
            player.search(game)
            times.append(time.perf_counter() - start)
            depths.append(player.last_depth)
        print(f"alphabeta:t{seconds:g}: mean {1e3 * statistics.mean(times):.1f} ms, max {1e3 * max(times):.1f} ms a "
              f"move; depth mean {statistics.mean(depths):.1f}, min {min(depths)}, max {max(depths)}")


if __name__ == "__main__":
    main()

"""A match over the whole ballot, the openings split over several processes of one thread each: for
players on the clock, whose games run one at a time, so that a 288-game ballot takes hours / processes.

Each process plays its share of the openings (both colours each, as `checkers-zero match` does; the game
seeds count from the share's first game, which changes only the random tie-breaks of plain players); the
summary combines every opening pair into one score, Elo and 95 % interval, as one match would.

    python benchmarks/split_match.py "mcts:t0.1" "mcts:190" --processes 2 [--openings FILE] [--out games.pdn]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

from zero.data import data_file


def _play_share(args: tuple) -> list[tuple]:
    spec_a, spec_b, ballot, first, last, seed, out = args
    import torch

    torch.set_num_threads(1)
    from train.gating import GatingConfig
    from train.match import mix_seed, play_match
    from train.player_specs import make_player
    from zero.openings import load_openings

    openings = load_openings(ballot)
    search = GatingConfig().search
    a = make_player(spec_a, seed=mix_seed(seed, 0), search=search)
    b = make_player(spec_b, seed=mix_seed(seed, 1), search=search)
    result = play_match(a, b, openings[first:last], seed=seed, parallel=1)
    games = []
    with open(out, "w", encoding="utf-8") as fh:
        for i, game in enumerate(result.games):
            fh.write(game.pdn(f"{a.name} vs {b.name}"))
            games.append((first + result.opening_index[i], result.points_for_a(i), game.truncated))
    return games


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--openings", default=None, help="ballot file (default: the ACF 3-move 144 of the data folder)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="split-match", help="prefix of the per-process PDN files")
    args = parser.parse_args()
    ballot = args.openings or str(data_file("openings/acf_3move_144.txt"))
    from zero.openings import load_openings
    from train.match import score_statistics, format_elo

    n = len(load_openings(ballot))
    bounds = [round(k * n / args.processes) for k in range(args.processes + 1)]
    jobs = [(args.a, args.b, ballot, bounds[k], bounds[k + 1], args.seed, f"{args.out}-{k}.pdn")
            for k in range(args.processes)]
    started = time.time()
    print(f"{args.a} vs {args.b}: {2 * n} games over {args.processes} processes, load average {os.getloadavg()[0]:.1f}",
          flush=True)
    with mp.get_context("spawn").Pool(args.processes) as pool:
        shares = pool.map(_play_share, jobs)
    games = [g for share in shares for g in share]
    by_opening: dict[int, list[float]] = {}
    for opening, points, _ in games:
        by_opening.setdefault(opening, []).append(points)
    stats = score_statistics([(sum(p), len(p)) for p in by_opening.values()])
    points = [p for _, p, _ in games]
    pairs = [0] * 5
    for p in by_opening.values():
        if len(p) == 2:
            pairs[int(round(2 * sum(p)))] += 1
    print(f"{args.a}: {points.count(1.0)} wins, {points.count(0.5)} draws, {points.count(0.0)} losses "
          f"({sum(t for _, _, t in games)} stopped at the length cap); score {stats.score:.3f} "
          f"(95% CI {stats.score_ci95[0]:.3f} .. {stats.score_ci95[1]:.3f})")
    print(f"Elo difference {format_elo(stats.elo)} (95% CI {format_elo(stats.elo_ci95[0])} .. "
          f"{format_elo(stats.elo_ci95[1])}); pairs 0/0.5/1/1.5/2: {'/'.join(map(str, pairs))}")
    print(f"{(time.time() - started) / 60:.1f} minutes, load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

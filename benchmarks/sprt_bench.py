"""How long gating's pair SPRT takes to decide, and how often it promotes, by the candidate's true strength.

Each gating game is drawn at random with the candidate's expected score at the given Elo and a fixed draw
rate (the loop's gating matches drew about 40 %); pairs are scored as gating scores them, and the test
stops as gating stops it (an SPRT decision, else the pair cap and the interval rule). Prints, per elo1
setting, the mean number of pairs played and the share of matches that promote.

    python benchmarks/sprt_bench.py [--matches 400] [--draw-rate 0.4] [--elo1 20 30 40]
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq

import numpy as np

from train.arena.sprt import PairSprt, SprtConfig, expected_score
from train.learner.pretrain_dataset import RESULT_OF_PDN
from zero.corpus.pdn import PdnError, read_pdn


def simulate(true_elo: float, config: SprtConfig, matches: int, draw_rate: float, rng) -> tuple[float, float]:
    """(mean pairs played, share promoted) over `matches` simulated gating matches."""
    score = expected_score(true_elo)
    win = score - draw_rate / 2
    probabilities = [win, draw_rate, 1 - draw_rate - win]
    pairs = promoted = 0
    for _ in range(matches):
        sprt = PairSprt(config)
        while len(sprt.pair_scores) < config.max_pairs and sprt.decision() is None:
            sprt.add_pair(float(rng.choice([1.0, 0.5, 0.0], size=2, p=probabilities).sum()))
        decision = sprt.final_decision()
        pairs += len(sprt.pair_scores)
        promoted += decision == "promote"
    return pairs / matches, promoted / matches


def read_match(path: str) -> list[tuple[int, float, int, float]]:
    """Per ballot opening, in order: (plies, points for A) of its game with A as Black, then as White."""
    games = {}
    first_black = None
    for game in read_pdn(path):
        if isinstance(game, PdnError):
            raise SystemExit(f"{path}: {game}")
        round_ = int(game.tags["Round"])
        black_points = (RESULT_OF_PDN[game.result] + 1) / 2
        if round_ == 1:
            first_black = game.tags["Black"]
        games[round_] = (game.plies, game.tags["Black"], black_points)
    pairs = []
    for k in range(1, len(games), 2):
        if k not in games or k + 1 not in games:
            break
        (p1, black1, pts1), (p2, black2, pts2) = games[k], games[k + 1]
        if black1 != first_black or black2 == first_black:
            raise SystemExit(f"{path}: rounds {k} and {k + 1} are not one opening with A as Black, then White")
        pairs.append((p1, pts1, p2, 1.0 - pts2))
    return pairs


def gate_in_flight(pairs, in_flight: int, config: SprtConfig) -> tuple[int, int, int, int, str]:
    """(lockstep steps until the SPRT decides, game-moves played by then, games started, pairs counted,
    decision) for one ballot order."""
    games = [(plies, points) for p1, a1, p2, a2 in pairs[:config.max_pairs] for plies, points in ((p1, a1), (p2, a2))]
    sprt = PairSprt(config)
    running: list[tuple[int, int]] = []  # (step it ends on, game index)
    began: list[int] = []  # step each started game began on
    now = 0
    while True:
        while len(running) < in_flight and len(began) < len(games):
            heapq.heappush(running, (now + max(1, games[len(began)][0]), len(began)))
            began.append(now)
        if not running:
            break
        now, k = heapq.heappop(running)
        sprt.add_game(k // 2, games[k][1])
        if sprt.decision() is not None:
            break
    moves = sum(min(now - start, max(1, games[k][0])) for k, start in enumerate(began))
    return now, moves, len(began), len(sprt.pair_scores), sprt.final_decision()


def replay_gates(path: str, in_flight: list[int], matches: int, level: bool, rng) -> None:
    pairs = read_match(path)
    config = SprtConfig()
    points = sum(a1 + a2 for _, a1, _, a2 in pairs)
    print(f"{path}: {len(pairs)} pairs, A scored {points / (2 * len(pairs)):.3f}, game length "
          f"mean {np.mean([p for p1, _, p2, _ in pairs for p in (p1, p2)]):.0f} plies, longest "
          f"{max(max(p1, p2) for p1, _, p2, _ in pairs)}; {matches} ballot orders"
          + (", each pair mirrored half the time (a level candidate)" if level else ""))

    def ballot_order() -> list:
        shuffled = [pairs[i] for i in rng.permutation(len(pairs))]
        if level:
            shuffled = [(p1, 1 - a1, p2, 1 - a2) if rng.random() < 0.5 else (p1, a1, p2, a2)
                        for p1, a1, p2, a2 in shuffled]
        return shuffled

    print(f"{'in flight':>9}  {'steps (mean, p90)':>18}  {'games started':>13}  {'pairs counted':>13}  "
          f"{'promoted':>8}  {'game-moves played':>17}")
    for width in in_flight:
        runs = [gate_in_flight(ballot_order(), width, config) for _ in range(matches)]
        steps = np.array([r[0] for r in runs])
        print(f"{width:>9}  {steps.mean():>10.0f}, {np.percentile(steps, 90):>6.0f}  "
              f"{np.mean([r[2] for r in runs]):>13.0f}  {np.mean([r[3] for r in runs]):>13.1f}  "
              f"{np.mean([r[4] == 'promote' for r in runs]):>8.1%}  {np.mean([r[1] for r in runs]):>17.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=400)
    parser.add_argument("--draw-rate", type=float, default=0.4)
    parser.add_argument("--elo1", type=float, nargs="+", default=[20.0, 30.0, 40.0])
    parser.add_argument("--true-elo", type=float, nargs="+", default=[-20.0, 0.0, 20.0, 36.0, 60.0])
    parser.add_argument("--games", help="a match's PDN: replay its games with --in-flight games at a time")
    parser.add_argument("--in-flight", type=int, nargs="+", default=[24, 48, 96, 144, 288])
    parser.add_argument("--level", action="store_true", help="with --games: mirror each pair's points half the time")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    if args.games:
        replay_gates(args.games, args.in_flight, args.matches, args.level, rng)
        return
    print(f"{'elo1':>6}  " + "  ".join(f"{f'true {e:+.0f}: pairs, promoted':>26}" for e in args.true_elo))
    for elo1 in args.elo1:
        config = dataclasses.replace(SprtConfig(), elo1=elo1)
        cells = [simulate(e, config, args.matches, args.draw_rate, rng) for e in args.true_elo]
        print(f"{elo1:>6.0f}  " + "  ".join(f"{pairs:>17.1f}, {share:>6.1%}" for pairs, share in cells))


if __name__ == "__main__":
    main()

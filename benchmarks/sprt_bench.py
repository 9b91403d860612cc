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

import numpy as np

from train.sprt import PairSprt, SprtConfig, expected_score


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
        decision = sprt.decision() or ("promote" if sprt.elo_interval()[1] > config.elo0 else "reject")
        pairs += len(sprt.pair_scores)
        promoted += decision == "promote"
    return pairs / matches, promoted / matches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=400)
    parser.add_argument("--draw-rate", type=float, default=0.4)
    parser.add_argument("--elo1", type=float, nargs="+", default=[20.0, 30.0, 40.0])
    parser.add_argument("--true-elo", type=float, nargs="+", default=[-20.0, 0.0, 20.0, 36.0, 60.0])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'elo1':>6}  " + "  ".join(f"{f'true {e:+.0f}: pairs, promoted':>26}" for e in args.true_elo))
    for elo1 in args.elo1:
        config = dataclasses.replace(SprtConfig(), elo1=elo1)
        cells = [simulate(e, config, args.matches, args.draw_rate, rng) for e in args.true_elo]
        print(f"{elo1:>6.0f}  " + "  ".join(f"{pairs:>17.1f}, {share:>6.1%}" for pairs, share in cells))


if __name__ == "__main__":
    main()

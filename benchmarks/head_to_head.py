"""Strength gained by a run: two checkpoints over the whole 3-move ballot, each opening with both colours.

Both networks search with the gating settings (GATING_SEARCH, and GatingConfig's simulations, games in
flight and length cap; no noise, most visited move), in the lockstep arena the gatekeeper uses, but over
all 288 games with no early stop: a plain match of the run's best against where it started, where the
gating log only chains one-step comparisons.

    python benchmarks/head_to_head.py runs/demo-cpu-v3/checkpoints/candidate-0007400.pt \
        runs/demo-cpu-v3/checkpoints/initial-oca-small.pt [--sims 64] [--out games.pdn]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from train.arena import NetworkPlayer, play_lockstep_match
from train.gating import GATING_SEARCH, GatingConfig
from zero.checkpoint import load_checkpoint
from zero.data import require_data_file
from zero.inference import Evaluator, default_device
from zero.match import load_openings


def main() -> None:
    defaults = GatingConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="checkpoint A (the one whose score is reported)")
    parser.add_argument("b", type=Path, help="checkpoint B")
    parser.add_argument("--sims", type=int, default=defaults.simulations, help="root visits per move")
    parser.add_argument("--parallel", type=int, default=defaults.parallel_games, help="games in flight")
    parser.add_argument("--games", type=int, default=None, help="only the first N games of the schedule")
    parser.add_argument("--out", type=Path, default=None, help="write the games to this PDN file")
    args = parser.parse_args()

    device = default_device()
    players = [
        NetworkPlayer(path.stem, Evaluator(load_checkpoint(path).build_network(), device), args.sims,
                      GATING_SEARCH)
        for path in (args.a, args.b)
    ]
    openings = load_openings(require_data_file("openings/acf_3move_144.txt"))
    started = time.perf_counter()
    result = play_lockstep_match(*players, openings, max_plies=defaults.max_plies, seed=defaults.seed,
                                 games=args.games, parallel=args.parallel, progress=True)
    seconds = time.perf_counter() - started
    print(result.summary())
    print(f"{len(result.games)} games in {seconds:.0f} s on {device} ({args.sims} simulations per move)")
    if args.out:
        args.out.write_text(result.pdn())


if __name__ == "__main__":
    main()

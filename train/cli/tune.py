"""`checkers-zero tune`: SPSA tuning of the search constants (c_puct, the FPU reductions, virtual loss, leaves
a network call) by the network on the clock playing itself, at 0.1 s a move (train.arena.tuning).

    checkers-zero tune [--out runs/tune] [--network NET] [--iterations N] [--processes P]
                       [--config FILE] [--set KEY=VALUE]

Rerun it into a new --out whenever the network changes. Ctrl-C stops it, and the same command continues it
after its last finished iteration. At the end (or on Ctrl-C) it prints the tuned values as `--set search.X=V`
lines and as a player spec. Whether they play better is a separate step, a match at equal time over the
whole ballot (288 games, about 35 minutes on 2 cores):

    python benchmarks/split_match.py "mcts:t0.1:c_puct=V:..." "mcts:t0.1" --processes 2

With `--set clock="0+0.1"` both players play on that game clock instead, and the default table adds the time
manager's settings (how much of the bank a move takes, how long an unstable search thinks on).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zero.run.config import add_config_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("runs/tune"),
                   help="output directory: trajectory, settings, records (default runs/tune); rerunning the "
                        "command with it continues the run")
    p.add_argument("--network", default=None,
                   help="checkpoint file or run directory (its best network) to tune for (default: the shipped one)")
    p.add_argument("--iterations", type=int, default=None,
                   help="game pairs in the whole run, where the gain schedules end (default 1000)")
    p.add_argument("--processes", type=int, default=None,
                   help="iterations played at once, one core each (default 2)")
    add_config_arguments(p)


def run(args: argparse.Namespace) -> int:
    from train.arena.player_specs import PlayerSpecError
    from train.arena.tuning import TRAJECTORY, TrajectoryError, load_tune_config, read_trajectory, summary, tune
    from zero.corpus.openings import BallotError
    from zero.net.checkpoint import CheckpointError
    from zero.run.config import ConfigError

    overrides = list(args.overrides)
    for name, value in (("iterations", args.iterations), ("processes", args.processes)):
        if value is not None:
            overrides.append(f"{name}={value}")
    if args.network is not None:
        overrides.append(f"network={json.dumps(args.network)}")  # a JSON string is a TOML string
    try:
        cfg = load_tune_config(args.out, args.config, overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        steps = tune(cfg, args.out, progress=True)
    except (ConfigError, CheckpointError, BallotError, PlayerSpecError, TrajectoryError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(summary(cfg, read_trajectory(args.out / TRAJECTORY, cfg.params)))
        print(f"stopped; the same command continues the run in {args.out}", file=sys.stderr)
        return 130
    print(summary(cfg, steps))
    return 0

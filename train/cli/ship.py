"""`checkers-zero ship CANDIDATE`: the promotion match against the shipped network; ships the candidate only
when it wins by the rule (see train.shipping.ship)."""

from __future__ import annotations

import argparse
import sys

from zero.run.config import add_config_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("candidate", help="checkpoint file, or a run directory (its best network)")
    p.add_argument("--simulations", type=int, default=None,
                   help="root visits a move for both networks of one shape (default: gating's, 64)")
    p.add_argument("--seconds", type=float, default=None,
                   help="seconds a move for each network when their shapes differ (default 0.1; the ballot is "
                        "split over --set processes=N processes of one core each, default 2)")
    p.add_argument("--games", type=int, default=None,
                   help="play only the first N games: a quick look that never ships")
    p.add_argument("--half", action="store_true", help="store the shipped weights in float16")
    add_config_arguments(p)


def run(args: argparse.Namespace) -> int:
    from train.shipping.ship import ShipConfig, ship
    from zero.corpus.openings import BallotError
    from zero.net.checkpoint import CheckpointError
    from zero.run.config import ConfigError, load_config

    overrides = list(args.overrides)
    for name, value in (("simulations", args.simulations), ("seconds", args.seconds), ("games", args.games)):
        if value is not None:
            overrides.append(f"{name}={value}")
    if args.half:
        overrides.append("half=true")
    try:
        cfg = load_config(ShipConfig, args.config, overrides)
        outcome = ship(args.candidate, cfg, progress=True)
    except (ConfigError, CheckpointError, BallotError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(outcome.result.summary())
    print(outcome.verdict())
    if outcome.promoted:
        print("the model card (checkpoints/README.md) has the new link:\n\n" + outcome.entry)
    return 0 if outcome.promoted else 1

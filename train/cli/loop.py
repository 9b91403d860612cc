"""`checkers-zero loop`: the whole self-play loop in one resumable command (see train.loop.driver)."""

from __future__ import annotations

import argparse
import math

from zero.run.config import add_config_arguments

DEFAULT_RUN_DIR = "runs/default"


def _actor_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number of processes, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"cannot run {value} actors")
    return value


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of minutes, not {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"the time limit must be a positive number of minutes, not {text}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default=DEFAULT_RUN_DIR, help=f"run directory (default {DEFAULT_RUN_DIR})")
    p.add_argument("--actors", type=_actor_count, default=None, help="self-play processes (overrides the config)")
    p.add_argument("--minutes", type=_minutes, default=None, help="stop cleanly after this many minutes")
    p.add_argument("--cluster", metavar="ADDRESS", default=None,
                   help="run the roles on the Ray cluster at ADDRESS (HEAD:PORT, or auto), not on this machine; "
                        "the run directory must be on storage every node sees")
    p.add_argument("--wandb", action="store_true", help="log to wandb (offline unless WANDB_MODE says otherwise)")
    p.add_argument("--from", dest="source", default=None, metavar="RUN_OR_CHECKPOINT",
                   help="start a new run from this checkpoint, or from this run's best network "
                        "(sets initial_checkpoint)")
    p.add_argument("--take-replay", action="store_true",
                   help="with --from RUN: also take that run's newest replay window and its trainer state "
                        "(optimizer and step), so training goes on from it (sets take_replay)")
    add_config_arguments(p)


def run(args: argparse.Namespace) -> int:
    from train.loop.driver import run_loop

    return run_loop(args)

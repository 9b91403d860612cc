"""`checkers-zero loop`: the whole self-play loop in one resumable command (see train.loop)."""

from __future__ import annotations

import argparse

from zero.config import add_config_arguments

DEFAULT_RUN_DIR = "runs/default"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default=DEFAULT_RUN_DIR, help=f"run directory (default {DEFAULT_RUN_DIR})")
    p.add_argument("--actors", type=int, default=None, help="self-play processes (overrides the config)")
    p.add_argument("--minutes", type=float, default=None, help="stop cleanly after this many minutes")
    p.add_argument("--wandb", action="store_true", help="log to wandb (offline unless WANDB_MODE says otherwise)")
    add_config_arguments(p)


def run(args: argparse.Namespace) -> int:
    from train.loop import run_loop

    return run_loop(args)

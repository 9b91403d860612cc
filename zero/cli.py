"""The `checkers-zero` console script: one subcommand per module.

Each command module exposes `add_arguments(parser)` and `run(args) -> int`; it keeps heavy imports (torch,
zarr) inside `run` so that building the parser stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "perft": ("zero.perft", "count move-tree leaves (rules check and speed)"),
    "selfplay": ("selfplay.selfplay_cli", "self-play actors writing games to a run's replay store"),
    "pretrain": ("train.pretrain_cli", "build an expert-game dataset from PDN and pretrain the network on it"),
    "replay": ("selfplay.replay_cli", "replay store of a run: stats, export games as PDN"),
    "pdn": ("zero.pdn_cli", "read and check PDN files"),
    "match": ("zero.match", "play a ballot match between two players"),
    "play": ("zero.play.terminal", "play against a checkpoint in the terminal"),
    "serve": ("zero.play.server", "play against a checkpoint in the browser (local web page)"),
    "analyze": ("zero.play.analyze", "search a position: top moves, win/draw/loss, principal variation"),
    "loop": ("train.loop_cli", "the self-play loop: actors, trainer and gating in one resumable command"),
    "ratings": ("train.ratings_cli", "Elo table of a run's checkpoints against the yardsticks, with a plot"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="checkers-zero", description="AlphaZero-style English checkers")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_module", None):
        parser.print_help()
        return 0
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""The `checkers-zero` console script: one subcommand per command module, each in its layer's `cli` package.

This is the top of the house, so it may import every layer; the command modules are wired here explicitly.
Each exposes `add_arguments(parser)` and `run(args) -> int` and keeps heavy imports (torch, zarr) inside
`run`, so building the parser stays fast.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from play.cli import analyze, engine, play, review, serve
from selfplay.cli import replay, selfplay
from train.cli import classical, distilled, loop, match, pretrain, ratings, report, ship, tune
from zero.cli import egdb, pdn, perft
from zero.run.config import disk_problem

# name -> (command module, one-line help)
COMMANDS: dict[str, tuple[ModuleType, str]] = {
    "perft": (perft, "count move-tree leaves (rules check and speed)"),
    "pdn": (pdn, "read and check PDN files"),
    "egdb": (egdb, "endgame databases: build (every position with at most N pieces) and probe"),
    "pretrain": (pretrain, "build an expert-game dataset from PDN and pretrain the network on it"),
    "distilled": (distilled, "the distilled evaluation: label positions by the network's value, train it on them"),
    "selfplay": (selfplay, "self-play actors writing games to a run's replay store"),
    "replay": (replay, "replay store of a run: stats, export games as PDN"),
    "loop": (loop, "the self-play loop: actors, trainer and gating in one resumable command"),
    "match": (match, "play a ballot match between two players (network players in lockstep)"),
    "ship": (ship, "play a candidate against the shipped network; ship it only if it proves stronger"),
    "tune": (tune, "SPSA tuning of the search constants by the network playing itself on the clock"),
    "classical": (classical, "the classical engine (a yardstick): fit its evaluation on the OCA games' results"),
    "ratings": (ratings, "Elo table of a run's checkpoints against the yardsticks, with a plot"),
    "report": (report, "training quality per checkpoint: losses, policy entropy and KL, value calibration"),
    "play": (play, "play against a checkpoint in the terminal"),
    "serve": (serve, "play against a checkpoint in the browser (local web page)"),
    "analyze": (analyze, "search a position: top moves, win/draw/loss, principal variation"),
    "engine": (engine, "JSON-lines analysis engine on stdin/stdout for other programs (many queries batched)"),
    "review": (review, "annotate every move of PDN games: evaluation, best move, mistakes and blunders"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="checkers-zero", description="AlphaZero-style English checkers")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_run=module.run)
        module.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 0
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        # A full or read-only disk can meet any command at any write: one line, never a traceback.
        problem = disk_problem(exc)
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

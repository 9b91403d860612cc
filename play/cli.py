"""The `checkers-zero` console script: one subcommand per command module.

This is the top of the house, so it may import every layer; the command modules are wired here explicitly.
Each exposes `add_arguments(parser)` and `run(args) -> int` and keeps heavy imports (torch, zarr) inside
`run`, so building the parser stays fast.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from play import analyze, engine_cli, review_cli, server, terminal
from selfplay import replay_cli, selfplay_cli
from train import classical_cli, loop_cli, match_cli, pretrain_cli, ratings_cli, report_cli, ship_cli, tune_cli
from zero import egdb_cli, pdn_cli, perft
from zero.config import disk_problem

# name -> (command module, one-line help)
COMMANDS: dict[str, tuple[ModuleType, str]] = {
    "perft": (perft, "count move-tree leaves (rules check and speed)"),
    "pdn": (pdn_cli, "read and check PDN files"),
    "egdb": (egdb_cli, "endgame databases: build (every position with at most N pieces) and probe"),
    "pretrain": (pretrain_cli, "build an expert-game dataset from PDN and pretrain the network on it"),
    "selfplay": (selfplay_cli, "self-play actors writing games to a run's replay store"),
    "replay": (replay_cli, "replay store of a run: stats, export games as PDN"),
    "loop": (loop_cli, "the self-play loop: actors, trainer and gating in one resumable command"),
    "match": (match_cli, "play a ballot match between two players (network players in lockstep)"),
    "ship": (ship_cli, "play a candidate against the shipped network; ship it only if it proves stronger"),
    "tune": (tune_cli, "SPSA tuning of the search constants by the network playing itself on the clock"),
    "classical": (classical_cli, "the classical engine (a yardstick): fit its evaluation on the OCA games' results"),
    "ratings": (ratings_cli, "Elo table of a run's checkpoints against the yardsticks, with a plot"),
    "report": (report_cli, "training quality per checkpoint: losses, policy entropy and KL, value calibration"),
    "play": (terminal, "play against a checkpoint in the terminal"),
    "serve": (server, "play against a checkpoint in the browser (local web page)"),
    "analyze": (analyze, "search a position: top moves, win/draw/loss, principal variation"),
    "engine": (engine_cli, "JSON-lines analysis engine on stdin/stdout for other programs (many queries batched)"),
    "review": (review_cli, "annotate every move of PDN games: evaluation, best move, mistakes and blunders"),
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

"""`checkers-zero play`: play against the default player or a checkpoint in the terminal (play.terminal)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from play.engine import (
    Budget, EngineError, add_budget_arguments, add_engine_arguments, budget_for, engine_kind, side_name,
)
from play.session import HumanGame, PlayError, load_start
from play.terminal import TerminalGame, default_save_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_engine_arguments(parser, plays=True)
    add_budget_arguments(parser)
    parser.add_argument("--color", "--colour", dest="color", choices=["black", "white"], default="black",
                        help="your colour (Black moves first; default: black)")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--fen", help="start from this position, e.g. 'W:W18,K27:B14,K5'")
    start.add_argument("--pdn", metavar="FILE", help="continue the first game of this PDN file")
    parser.add_argument("--save", metavar="FILE",
                        help="where the game is saved as PDN (default: checkers-zero-DATE-TIME.pdn in the games "
                             "folder, $CHECKERS_ZERO_GAMES or ~/.local/share/checkers-zero/games)")
    parser.add_argument("--analysis", action="store_true",
                        help="show the engine's search after each of its moves (the `analysis` command toggles it)")


def run(args: argparse.Namespace) -> int:
    from play.engine import DEFAULT_LEVEL, Engine

    try:
        budget: Budget = budget_for(args.level, args.sims, args.time, args.depth, engine_kind(args.checkpoint))
        start, moves = load_start(args.fen, args.pdn)
        engine = Engine.load(args.checkpoint, endgame_database=not args.no_egdb, threads=args.threads,
                             opening_book=not args.no_book)
        engine.check_budget(budget)  # before the game, not at the engine's first move
    except (EngineError, PlayError) as exc:
        print(f"checkers-zero play: {exc}", file=sys.stderr)
        return 2
    human_black = args.color == "black"
    level = args.level or (None if args.sims or args.time or args.depth else DEFAULT_LEVEL)
    session = HumanGame(engine, human_black, budget, level=level, start=start, moves=moves)
    ui = TerminalGame(session, Path(args.save) if args.save else default_save_path(), sys.stdout,
                      show_analysis=args.analysis)
    ui.say(f"You play {side_name(human_black)} against {engine.name} ({level or budget}). "
           "Type a move such as 11-15, or help.")
    ui.say(f"The game will be saved to {ui.save_path} (save FILE saves elsewhere).")
    ui.loop(sys.stdin)
    return 0

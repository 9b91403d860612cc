"""`checkers-zero play`: play against a checkpoint in the terminal (play.terminal)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from play.engine import LEVELS, Budget, EngineError, add_book_argument, add_threads_argument, budget_for, side_name
from play.session import HumanGame, PlayError, load_start
from play.terminal import TerminalGame, default_save_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="network: a checkpoint file or a run directory (its best network); default the shipped one")
    parser.add_argument("--no-egdb", action="store_true",
                        help="search without the endgame database (by default positions of few pieces are exact)")
    add_threads_argument(parser)
    add_book_argument(parser)
    strength = parser.add_mutually_exclusive_group()
    strength.add_argument("--level", choices=list(LEVELS), help="named strength (default: club)")
    strength.add_argument("--sims", type=int, metavar="N", help="search simulations per engine move")
    strength.add_argument("--time", type=float, metavar="SECONDS", help="search time per engine move")
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
    from play.engine import Engine

    try:
        budget: Budget = budget_for(args.level, args.sims, args.time)
        start, moves = load_start(args.fen, args.pdn)
        engine = Engine.load(args.checkpoint, endgame_database=not args.no_egdb, threads=args.threads,
                             opening_book=not args.no_book)
    except (EngineError, PlayError) as exc:
        print(f"checkers-zero play: {exc}", file=sys.stderr)
        return 2
    human_black = args.color == "black"
    level = args.level or (None if args.sims or args.time else "club")
    session = HumanGame(engine, human_black, budget, level=level, start=start, moves=moves)
    ui = TerminalGame(session, Path(args.save) if args.save else default_save_path(), sys.stdout,
                      show_analysis=args.analysis)
    ui.say(f"You play {side_name(human_black)} against {engine.name} ({level or budget}). "
           "Type a move such as 11-15, or help.")
    ui.say(f"The game will be saved to {ui.save_path} (save FILE saves elsewhere).")
    ui.loop(sys.stdin)
    return 0

"""`checkers-zero analyze`: search one position and print what the engine thinks of it.

An MCTS engine (a network) gives its top moves with visits, prior and win/draw/loss (for the side to move),
the alpha-beta engine (the default player) its best move with the depth, the nodes and the win/draw/loss of
its score; both the principal variation. --json prints the same as one JSON object for programs: an engine
protocol answer (`play.analysis_json`).
"""

from __future__ import annotations

import argparse
import json
import sys

from play.analysis_json import analysis_json
from play.engine import (
    MCTS, Budget, EngineError, add_engine_arguments, budget_for, engine_kind, side_name,
)
from play.session import PlayError, load_start, new_game

DEFAULT_SIMULATIONS = 400  # an MCTS engine's
DEFAULT_DEPTH = 16  # the alpha-beta engine's: a few tenths of a second


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--fen", help="the position, e.g. 'B:W21-32:B1-12'")
    where.add_argument("--pdn", metavar="FILE", help="the final position of the first game in this PDN file")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--sims", type=int, metavar="N",
                        help=f"search simulations (an MCTS engine; default {DEFAULT_SIMULATIONS})")
    budget.add_argument("--depth", type=int, metavar="PLIES",
                        help=f"search depth (the alpha-beta engine; default {DEFAULT_DEPTH})")
    budget.add_argument("--time", type=float, metavar="SECONDS", help="search for this long instead")
    add_engine_arguments(parser, plays=False)
    parser.add_argument("--top", type=int, default=10, metavar="K", help="moves to show (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def report_text(result: dict) -> str:
    """The analysis as a table for people."""
    side = result["side"].capitalize()
    win, draw, loss = (100 * result["wdl"][k] for k in ("win", "draw", "loss"))
    # An alpha-beta search has a depth and one move, the best it found; an MCTS search visits every move.
    by_depth = result["depth"] is not None
    searched = (f"depth {result['depth']}, {result['nodes']:,} nodes" if by_depth
                else f"{result['simulations']} simulations")
    lines = [
        f"Position {result['fen']} ({side} to move), {searched}",
        (f"{side}: proven {result['proven']['text']}" if result["proven"] else
         f"{side}: win {win:.1f}%  draw {draw:.1f}%  loss {loss:.1f}%")
        + (f"; the network expects about {result['plies_left']:.0f} more plies" if result["plies_left"] is not None
           else ""),
        "",
        f"{'move':<16}" + ("" if by_depth else f"{'visits':>8}{'share':>8}{'prior':>8}")
        + f"{'win':>8}{'draw':>8}{'loss':>8}  proven",
    ]
    for m in result["moves"]:
        wdl = "".join(f"{100 * x:7.1f}%" for x in m["wdl"].values()) if m["wdl"] else f"{'-':>8}" * 3
        visits = "" if by_depth else f"{m['visits']:>8}{100 * m['share']:7.1f}%{100 * m['prior']:7.1f}%"
        lines.append(f"{m['move']:<16}{visits}{wdl}  {m['proven']['text'] if m['proven'] else ''}".rstrip())
    lines.append("")
    lines.append("Principal variation: " + (" ".join(result["pv"]) or "(none)"))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from play.engine import Engine

    try:
        if args.top < 1:
            raise PlayError(f"--top {args.top}: must be at least 1")
        if args.sims is None and args.time is None and args.depth is None:
            budget: Budget = (Budget(simulations=DEFAULT_SIMULATIONS) if engine_kind(args.checkpoint) == MCTS
                              else Budget(depth=DEFAULT_DEPTH))
        else:
            budget = budget_for(simulations=args.sims, seconds=args.time, depth=args.depth)
        game = new_game(*load_start(args.fen, args.pdn))
        if game.outcome is not None:
            raise PlayError(f"the game is over in that position ({game.outcome.termination.value}, "
                            f"{side_name(game.position.black_to_move)} to move)")
        engine = Engine.load(args.checkpoint, endgame_database=not args.no_egdb, threads=args.threads,
                             opening_book=False)  # analysis searches every position
        result = analysis_json(engine.analyse(game, budget), game.position, game.ply, top=args.top)
    except (EngineError, PlayError) as exc:
        print(f"checkers-zero analyze: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else report_text(result))
    return 0

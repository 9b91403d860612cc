"""`checkers-zero analyze`: search one position and print what the engine thinks of it.

Top moves with visits, prior and win/draw/loss (for the side to move), and the principal variation; --json
prints the same as one JSON object for programs: an engine protocol answer (`play.analysis_json`).
"""

from __future__ import annotations

import argparse
import json
import sys

from play.analysis_json import analysis_json
from play.engine import Budget, EngineError, add_threads_argument, budget_for, side_name
from play.session import PlayError, load_start, new_game

DEFAULT_SIMULATIONS = 400


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--fen", help="the position, e.g. 'B:W21-32:B1-12'")
    where.add_argument("--pdn", metavar="FILE", help="the final position of the first game in this PDN file")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--sims", type=int, metavar="N", help=f"search simulations (default {DEFAULT_SIMULATIONS})")
    budget.add_argument("--time", type=float, metavar="SECONDS", help="search for this long instead")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="network: a checkpoint file or a run directory (its best network); "
                             "default the shipped one")
    parser.add_argument("--no-egdb", action="store_true",
                        help="search without the endgame database (by default positions of few pieces are exact)")
    add_threads_argument(parser)
    parser.add_argument("--top", type=int, default=10, metavar="K", help="moves to show (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def report_text(result: dict) -> str:
    """The analysis as a table for people."""
    side = result["side"].capitalize()
    win, draw, loss = (100 * result["wdl"][k] for k in ("win", "draw", "loss"))
    lines = [
        f"Position {result['fen']} ({side} to move), {result['simulations']} simulations",
        (f"{side}: proven {result['proven']['text']}" if result["proven"] else
         f"{side}: win {win:.1f}%  draw {draw:.1f}%  loss {loss:.1f}%")
        + (f"; the network expects about {result['plies_left']:.0f} more plies" if result["plies_left"] is not None
           else ""),
        "",
        f"{'move':<16}{'visits':>8}{'share':>8}{'prior':>8}{'win':>8}{'draw':>8}{'loss':>8}  proven",
    ]
    for m in result["moves"]:
        wdl = "".join(f"{100 * x:7.1f}%" for x in m["wdl"].values()) if m["wdl"] else f"{'-':>8}" * 3
        lines.append(f"{m['move']:<16}{m['visits']:>8}{100 * m['share']:7.1f}%{100 * m['prior']:7.1f}%{wdl}"
                     f"  {m['proven']['text'] if m['proven'] else ''}".rstrip())
    lines.append("")
    lines.append("Principal variation: " + (" ".join(result["pv"]) or "(none)"))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from play.engine import Engine

    try:
        if args.top < 1:
            raise PlayError(f"--top {args.top}: must be at least 1")
        searched_for_time = args.time is not None
        budget: Budget = budget_for(simulations=None if searched_for_time else args.sims or DEFAULT_SIMULATIONS,
                                    seconds=args.time)
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

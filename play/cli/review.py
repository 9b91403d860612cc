"""`checkers-zero review GAMES.pdn [--out REVIEWED.pdn]`: every move of every game judged by the engine
(play/review.py), written back as PDN with a comment and a `?`/`??` mark per move, and a per-player summary."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

from play.cli.engine import add_analysis_engine_arguments, engine_settings
from play.review import ReviewSettings

DEFAULTS = ReviewSettings()
DEFAULT_SIMULATIONS = 64
# A review always has thousands of positions waiting: bigger network batches pay on a CPU (100 OCA games at
# 64 simulations: 33 s with 32 trees, 20 s with 128; benchmarks/RESULTS.md).
DEFAULT_SLOTS = 128


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Analyse every position of every game in a PDN file with the engine (many positions "
                          "searched together) and write the games back with a comment per move: Black's "
                          "win/draw/loss and expected score after it, the best move where it differs, mistakes "
                          "(?) and blunders (??) by the fall in the mover's expected score. The moves of a match "
                          "game's ballot opening (its Opening tag) are not judged: no player chose them. Prints "
                          "a summary per player. Games that cannot be read are reported and skipped.")
    parser.add_argument("pdn", type=Path, metavar="GAMES.pdn")
    parser.add_argument("--out", type=Path, metavar="REVIEWED.pdn",
                        help="where to write the reviewed games (default GAMES.reviewed.pdn in the current directory)")
    parser.add_argument("--games", type=int, metavar="N", help="review only the first N games of the file")
    budget = parser.add_argument_group("search per position (the first limit reached stops it)")
    budget.add_argument("--sims", type=int, metavar="N", help=f"simulations (default {DEFAULT_SIMULATIONS} when no limit is given)")
    budget.add_argument("--time", type=float, metavar="SECONDS", help="seconds")
    budget.add_argument("--nodes", type=int, metavar="N", help="tree nodes")
    parser.add_argument("--mistake", type=float, default=DEFAULTS.mistake, metavar="FALL",
                        help=f"fall in expected score (0-1) that marks a mistake '?' (default {DEFAULTS.mistake})")
    parser.add_argument("--blunder", type=float, default=DEFAULTS.blunder, metavar="FALL",
                        help=f"fall in expected score that marks a blunder '??' (default {DEFAULTS.blunder})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_analysis_engine_arguments(parser, slots=DEFAULT_SLOTS)


def run(args: argparse.Namespace) -> int:
    from itertools import islice

    from tqdm import tqdm

    from play.api import Engine
    from play.engine import EngineError
    from play.review import GameReview, ReviewSummary, review_games
    from zero.corpus.pdn import PdnError, read_pdn

    def fail(message: str) -> int:
        print(f"checkers-zero review: {message}", file=sys.stderr)
        return 2

    if not args.pdn.is_file():
        return fail(f"no such file: {args.pdn}")
    if args.games is not None and args.games < 1:
        return fail("--games must be at least 1")
    settings = ReviewSettings(args.mistake, args.blunder)
    try:
        settings.validate()
    except ValueError as exc:
        return fail(str(exc))
    for flag, value in (("--sims", args.sims), ("--nodes", args.nodes)):
        if value is not None and value < 1:
            return fail(f"{flag} {value}: must be at least 1")
    if args.time is not None and not (math.isfinite(args.time) and args.time > 0):
        return fail(f"--time {args.time}: must be a finite number of seconds above 0")
    limits = {name: value for name, value in (("simulations", args.sims), ("time", args.time), ("nodes", args.nodes))
              if value is not None} or {"simulations": DEFAULT_SIMULATIONS}
    items = list(islice(read_pdn(args.pdn), args.games))
    games = [item for item in items if not isinstance(item, PdnError)]
    unreadable: list[str] = [str(item) for item in items if isinstance(item, PdnError)]

    def nothing_reviewed() -> int:
        for line in unreadable:
            print(f"  skipped {line}", file=sys.stderr)
        return fail(f"no game in {args.pdn} could be reviewed ({len(unreadable)} skipped)" if unreadable
                    else f"no game in {args.pdn}")

    if not games:  # before the engine loads, which takes seconds
        return nothing_reviewed()
    try:
        engine = Engine(args.checkpoint, endgame_database=not args.no_egdb,
                        settings=engine_settings(args, DEFAULT_SIMULATIONS))
    except (EngineError, ValueError) as exc:
        return fail(str(exc))
    out = args.out or Path(args.pdn.stem + ".reviewed.pdn")
    # Written beside the output and renamed over it at the end: an earlier review there is kept until a new
    # one is complete (a review stopped or refused used to leave it deleted).
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # as `replay export --out` and `play --save` do
    except OSError as exc:
        return fail(f"cannot make the folder {out.parent} for {out.name}: {exc.strerror}")

    started = time.perf_counter()
    positions = sum(len(g.moves) + 1 for g in games)  # an upper bound: the rules may end a game early
    summary = ReviewSummary()
    annotator = f"checkers-zero review ({engine.network}, " + ", ".join(f"{k} {v}" for k, v in limits.items()) + ")"
    reviewed = ended_early = analysed = ballot_moves = ballot_games = 0
    try:
        with open(partial, "w", encoding="utf-8") as sink, tqdm(total=positions, unit="pos", desc=args.pdn.name,
                                                                 disable=args.no_progress, file=sys.stderr) as bar:
            def count_position() -> None:
                nonlocal analysed
                analysed += 1
                bar.update()

            for result in review_games(engine, games, limits, settings, on_position=count_position):
                if isinstance(result, GameReview):
                    sink.write(result.pdn(annotator))
                    summary.add(result)
                    reviewed += 1
                    ended_early += result.ended_by_rule is not None
                    ballot_moves += result.ballot
                    ballot_games += result.ballot > 0
                else:
                    game, message = result
                    unreadable.append(f"game {game.index} (line {game.line}): the engine refused it: {message}")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    seconds = time.perf_counter() - started
    if not reviewed:  # the engine refused every game: an empty file is no review
        partial.unlink()
        return nothing_reviewed()
    os.replace(partial, out)
    print(f"{args.pdn}: {reviewed} games reviewed into {out} in {seconds:.1f} s ({analysed} positions, "
          f"{', '.join(f'{k} {v}' for k, v in limits.items())} each)")
    if ballot_moves:
        print(f"  {ballot_moves} moves of ballot openings in {ballot_games} games not judged: no player chose them")
    if ended_early:
        print(f"  {ended_early} games went on after the rules had drawn them; moves after that are not judged")
    print(f"  skipped:     {len(unreadable)}")
    for line in unreadable:
        print(f"    {line}")
    print()
    print(summary.table())
    return 0

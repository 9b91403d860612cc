"""`checkers-zero egdb ...`: endgame databases. `egdb build --pieces N` solves every position with at most N
pieces into the cache (or --out DIR); `egdb probe FEN` prints a position's value, distance and best move."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="egdb_command", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="solve every position with at most N pieces",
                           description="Solve every position with at most N pieces (win/draw/loss and plies to "
                                       "the end with best play) into one file per slice. Finished slices are kept, "
                                       "so an interrupted build resumes. N = 4 takes seconds, 5 a few minutes.")
    build.add_argument("--pieces", type=int, required=True, metavar="N")
    build.add_argument("--out", type=Path, default=None, metavar="DIR",
                       help="where the files go (default: $CHECKERS_ZERO_EGDB or ~/.cache/checkers-zero/egdb)")
    build.add_argument("--no-progress", action="store_true", help="no progress bar")
    probe = sub.add_parser("probe", help="value, distance and best move of a position",
                           description="Probe a position (FEN, e.g. W:WK6,K9:BK15) in the databases.")
    probe.add_argument("fen")
    probe.add_argument("--pieces", type=int, default=None, metavar="N",
                       help="database size to load (default: the position's piece count)")
    probe.add_argument("--dir", type=Path, default=None, metavar="DIR", help="database folder (default: the cache)")


def run(args: argparse.Namespace) -> int:
    from zero.endgames.egdb import MOST_PIECES, EgdbFileError

    if args.pieces is not None and not 2 <= args.pieces <= MOST_PIECES:
        print(f"error: --pieces {args.pieces}: endgame databases hold 2 to {MOST_PIECES} pieces", file=sys.stderr)
        return 2
    try:
        if args.egdb_command == "build":
            return _build(args.pieces, args.out, progress=not args.no_progress)
        if args.egdb_command == "probe":
            return _probe(args.fen, args.pieces, args.dir)
    except EgdbFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    raise AssertionError(args.egdb_command)


def _build(pieces: int, out: Path | None, progress: bool) -> int:
    from zero.endgames.egdb import EgdbFileError, built, load
    from zero.endgames.egdb_build import build

    if built(pieces, out):
        try:
            db = load(pieces, out)  # sound files: nothing to solve (a damaged one is solved again below)
        except EgdbFileError:
            pass
        else:
            print(f"{db.directory}: already built ({db.tables.codes.size} positions with at most {pieces} pieces); "
                  f"nothing to do")
            return 0
    started = time.perf_counter()
    db = build(pieces, out, progress=progress)
    seconds = time.perf_counter() - started
    size = sum(f.stat().st_size for f in db.directory.glob("*.egdb"))
    print(f"{db.directory}: {db.tables.codes.size} positions with at most {pieces} pieces "
          f"({size / 1e6:.1f} MB in the folder) in {seconds:.1f} s")
    return 0


def _probe(fen: str, pieces: int | None, directory: Path | None) -> int:
    from zero.endgames.egdb import MOST_PIECES, EgdbFileError, built, default_dir, load
    from zero.rules.notation import NotationError, fen_to_position

    try:
        position = fen_to_position(fen)
    except NotationError as exc:
        print(f"error: {fen!r} is not a position in FEN, e.g. W:WK6,K9:BK15 ({exc})", file=sys.stderr)
        return 2
    held = position.piece_count()
    if held > MOST_PIECES:
        print(f"error: {fen} has {held} pieces; endgame databases hold at most {MOST_PIECES}", file=sys.stderr)
        return 2
    pieces = pieces or max(2, held)
    if pieces < held:
        print(f"error: {fen} has {held} pieces, more than the {pieces}-piece database holds", file=sys.stderr)
        return 2
    build = f"checkers-zero egdb build --pieces {pieces}" + (f" --out {directory}" if directory is not None else "")
    if not built(pieces, directory):
        print(f"error: the {pieces}-piece database is not in {directory or default_dir()}; build it: {build}",
              file=sys.stderr)
        return 2
    try:
        db = load(pieces, directory)
    except EgdbFileError as exc:
        print(f"error: {exc}; rebuild it: {build}", file=sys.stderr)
        return 2
    print(f"{fen}: {db.probe(position)}")
    best = db.best_move(position)
    if best is not None:
        print(f"best move: {best}")
    return 0

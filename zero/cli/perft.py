"""`checkers-zero perft`: leaf counts of the move tree against the published series, with the speed."""

from __future__ import annotations

import argparse
import sys
import time

from zero.rules.notation import INITIAL_FEN, NotationError, fen_to_position
from zero.rules.perft import divide, perft, published_count


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--depth", type=int, required=True, help="plies to search")
    p.add_argument("--fen", default=INITIAL_FEN, help="start position (default: the initial position)")
    p.add_argument("--count-paths", action="store_true", help="count duplicate king-capture paths separately")
    p.add_argument("--divide", action="store_true", help="print the count below each root move")
    p.add_argument("--no-bulk", action="store_true", help="make every leaf move instead of counting them")


def run(args: argparse.Namespace) -> int:
    if args.depth < 0:
        print(f"checkers-zero perft: --depth {args.depth}: must be 0 or more", file=sys.stderr)
        return 2
    try:
        pos = fen_to_position(args.fen)
    except NotationError as exc:
        print(f"checkers-zero perft: --fen {args.fen!r} is not a position in FEN ({exc})", file=sys.stderr)
        return 2
    perft(pos, 1)  # compile before timing
    start = time.perf_counter()
    if args.divide and args.depth > 0:
        rows = divide(pos, args.depth, args.count_paths)
        for move, n in rows:
            print(f"{move:>14} {n}")
        total = sum(n for _, n in rows)
    else:
        total = perft(pos, args.depth, args.count_paths, bulk=not args.no_bulk)
    elapsed = time.perf_counter() - start
    rate = total / elapsed / 1e6 if elapsed > 0 else float("inf")
    print(f"perft({args.depth}) = {total}  [{elapsed:.3f} s, {rate:.1f} M nodes/s]")
    try:
        expected = published_count(pos, args.depth, args.count_paths)
    except FileNotFoundError as exc:
        print(f"cannot compare with the published count: {exc}")
        return 0
    rule = "paths counted" if args.count_paths else "duplicate king paths merged"
    if expected is None:
        print(f"no published count for this position and depth ({rule}) in perft.txt to compare with")
        return 0
    if expected != total:
        print(f"MISMATCH: perft.txt gives {expected} ({rule})")
        return 1
    print(f"matches the published count in perft.txt ({rule})")
    return 0

"""`checkers-zero perft`: leaf counts of the move tree, the standard check of a move generator."""

from __future__ import annotations

import argparse
import time

from zero import movegen
from zero.game import Position
from zero.notation import INITIAL_FEN, fen_to_position


def perft(pos: Position, depth: int, count_paths: bool = False, bulk: bool = True) -> int:
    """Leaves at `depth`: duplicate king-capture paths merged unless count_paths."""
    return int(movegen.perft(pos.black, pos.white, pos.kings, pos.black_to_move, depth, not count_paths, bulk))


def divide(pos: Position, depth: int, count_paths: bool = False) -> list[tuple[str, int]]:
    """Per root move, the leaves below it."""
    return [
        (str(mv), perft(pos.play(mv), depth - 1, count_paths)) for mv in pos.legal_moves(count_paths=count_paths)
    ]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--depth", type=int, required=True, help="plies to search")
    p.add_argument("--fen", default=INITIAL_FEN, help="start position (default: the initial position)")
    p.add_argument("--count-paths", action="store_true", help="count duplicate king-capture paths separately")
    p.add_argument("--divide", action="store_true", help="print the count below each root move")
    p.add_argument("--no-bulk", action="store_true", help="make every leaf move instead of counting them")


def run(args: argparse.Namespace) -> int:
    pos = fen_to_position(args.fen)
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
    return 0

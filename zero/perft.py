"""`checkers-zero perft`: leaf counts of the move tree, the standard check of a move generator."""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

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


Counts = dict[int, tuple[int, int]]  # depth -> (paths counted, duplicates removed)


def read_perft_table(path: Path) -> tuple[Counts, dict[str, tuple[str, Counts]]]:
    """The start-position series and the extra positions by name (with their FEN)."""
    start: Counts = {}
    extra: dict[str, tuple[str, Counts]] = {}
    for line in path.read_text().splitlines():
        if m := re.fullmatch(r"(\d+)\s+(\d+)\s+(\d+|-)\s*", line):
            if m.group(3) != "-":
                start[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
        elif m := re.fullmatch(r"(P\d+)\s+(\S+)\s*\|(.*)", line):
            counts = {}
            for depth, a, b in re.findall(r"(\d+):(\d+)(?:/(\d+))?", m.group(3)):
                counts[int(depth)] = (int(a), int(b or a))
            extra[m.group(1)] = (m.group(2), counts)
    return start, extra


def published_count(pos: Position, depth: int, count_paths: bool) -> int | None:
    """The count ../shared/data/perft.txt gives for this position and depth under the same counting rule,
    or None where it gives none (or the file is absent)."""
    from zero.data import data_file

    path = data_file("perft.txt")
    if path is None:
        return None
    start, extra = read_perft_table(path)
    table = start if pos == Position.initial() else next(
        (counts for fen, counts in extra.values() if fen_to_position(fen) == pos), {})
    counts = table.get(depth)
    return None if counts is None else counts[0 if count_paths else 1]


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
    expected = published_count(pos, args.depth, args.count_paths)
    rule = "paths counted" if args.count_paths else "duplicate king paths merged"
    if expected is None:
        print(f"no published count for this position and depth ({rule}) in perft.txt to compare with")
        return 0
    if expected != total:
        print(f"MISMATCH: perft.txt gives {expected} ({rule})")
        return 1
    print(f"matches the published count in perft.txt ({rule})")
    return 0

"""Perft: leaf counts of the move tree, the standard check of a move generator, and the published series."""

from __future__ import annotations

import re
from pathlib import Path

from zero.rules import movegen
from zero.rules.game import Position
from zero.rules.notation import fen_to_position


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
    """The count the data folder's perft.txt gives for this position and depth under the same counting rule,
    or None where it gives none. FileNotFoundError, naming the path, when the file is absent: that is no
    answer about the count."""
    from zero.run.data import require_data_file

    start, extra = read_perft_table(require_data_file("perft.txt"))
    table = start if pos == Position.initial() else next(
        (counts for fen, counts in extra.values() if fen_to_position(fen) == pos), {})
    counts = table.get(depth)
    return None if counts is None else counts[0 if count_paths else 1]



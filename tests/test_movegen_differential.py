"""Differential test: the numba move generator and the plain-Python reference list exactly the same moves.

Positions come from seeded random playouts, from the start and from random boards with kings, with a policy
biased toward captures, crowning and king moves so that the rare cases (king loops with duplicate paths,
crowning captures, long multi-jumps) turn up often. Coverage counters prove they did.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from zero.rules import movegen
from zero.rules.game import Move, Position
from zero.rules.reference import reference_moves, reference_play

BLACK_CROWN_ROW = 0xF0000000  # squares 29-32
WHITE_CROWN_ROW = 0x0000000F  # squares 1-4
MAX_GAME_PLIES = 150
# Random boards are the rich source; a short playout from each adds the positions play leads to.
RANDOM_BOARD_PLIES = 4
GAMES_FROM_START_EVERY = 20


def _random_board(rng: random.Random) -> Position:
    """A legal-looking board rich in captures: few attackers, many targets, often kings.

    No man stands on its own crowning row. Dense targets around few, mostly crowned attackers are where
    long king captures and king loops (duplicate paths) happen.
    """
    black_to_move = rng.random() < 0.5
    n_mover, n_other = rng.randint(1, 6), rng.randint(5, 12)
    squares = rng.sample(range(1, 33), n_mover + n_other)
    king_share = rng.uniform(0.3, 1.0)
    black = white = kings = 0
    for i, sq in enumerate(squares):
        bit = 1 << (sq - 1)
        is_black = (i < n_mover) == black_to_move
        if is_black:
            black |= bit
        else:
            white |= bit
        on_crown_row = bit & (BLACK_CROWN_ROW if is_black else WHITE_CROWN_ROW)
        if on_crown_row or rng.random() < king_share:
            kings |= bit
    return Position(black, white, kings, black_to_move)


def _crowns(pos: Position, move: Move) -> bool:
    mover_is_king = pos.kings >> (move.from_square - 1) & 1
    crown_row = BLACK_CROWN_ROW if pos.black_to_move else WHITE_CROWN_ROW
    return not mover_is_king and bool(crown_row >> (move.to_square - 1) & 1)


def _weight(pos: Position, move: Move) -> float:
    """Favour what makes rare positions: long captures, crowning, king moves."""
    weight = 1.0
    if len(move.path) > 2:
        weight *= 4
    if _crowns(pos, move):
        weight *= 4
    if pos.kings >> (move.from_square - 1) & 1:
        weight *= 2
    return weight


def collect_positions(count: int, seed: int) -> list[Position]:
    """`count` distinct positions: whole random games from the start, short playouts from random boards."""
    rng = random.Random(seed)
    seen: dict[Position, None] = {}
    playout = 0
    while len(seen) < count:
        from_start = playout % GAMES_FROM_START_EVERY == 0
        playout += 1
        pos = Position.initial() if from_start else _random_board(rng)
        for _ in range(MAX_GAME_PLIES if from_start else RANDOM_BOARD_PLIES):
            seen[pos] = None
            if len(seen) >= count:
                break
            moves = pos.legal_moves()
            if not moves:
                break
            pos = pos.play(rng.choices(moves, weights=[_weight(pos, mv) for mv in moves])[0])
    return list(seen)


def _numba_moves(pos: Position, count_paths: bool) -> list[tuple[tuple[int, ...], int, Position]]:
    return [(mv.path, mv.captured, pos.play(mv)) for mv in pos.legal_moves(count_paths=count_paths)]


def _reference(pos: Position, count_paths: bool) -> list[tuple[tuple[int, ...], int, Position]]:
    out = []
    for path, captured in reference_moves(pos.black, pos.white, pos.kings, pos.black_to_move, count_paths):
        b, w, k = reference_play(pos.black, pos.white, pos.kings, pos.black_to_move, path)
        out.append((path, captured, Position(b, w, k, not pos.black_to_move)))
    return out


def _key(move: tuple[tuple[int, ...], int, Position]) -> tuple[int, int, int, Position]:
    path, captured, result = move
    return path[0], path[-1], captured, result


def compare_generators(positions: list[Position]) -> Counter:
    """Assert both generators agree on every position; return coverage counters."""
    coverage: Counter = Counter()
    buffer = movegen.new_move_buffer()
    for pos in positions:
        args = (pos.black, pos.white, pos.kings, pos.black_to_move)
        all_paths = _numba_moves(pos, count_paths=True)
        expected_paths = _reference(pos, count_paths=True)
        # Every path, as a multiset: a path listed twice would be a bug too.
        assert Counter(all_paths) == Counter(expected_paths), f"count_paths moves differ in {pos}"

        merged = _numba_moves(pos, count_paths=False)
        expected_merged = _reference(pos, count_paths=False)
        assert len({_key(m) for m in merged}) == len(merged), f"duplicate move kept in {pos}"
        assert {_key(m) for m in merged} == {_key(m) for m in expected_merged}, f"merged moves differ in {pos}"
        # Which of several equivalent paths represents the move is free, but it must be a real path.
        assert {m for m in merged} <= set(expected_paths), f"merged move is not a legal path in {pos}"

        has_capture = any(captured for _, captured, _ in expected_paths)
        assert movegen.can_capture(*args) == has_capture, f"can_capture wrong in {pos}"
        assert movegen.count_moves(*args, True, buffer) == len(merged), f"count_moves wrong in {pos}"
        assert movegen.count_moves(*args, False, buffer) == len(all_paths), f"count_moves wrong in {pos}"

        coverage["positions"] += 1
        coverage["with kings"] += pos.kings != 0
        coverage["no legal move"] += not merged
        coverage["multi-jump"] += any(len(path) > 2 for path, _, _ in merged)
        coverage["crowning capture"] += any(
            captured and _crowns(pos, Move(path, captured)) for path, captured, _ in merged
        )
        coverage["2+ capture choices"] += has_capture and len(merged) >= 2
        coverage["duplicate king paths"] += len(all_paths) > len(merged)
        coverage["king passes its origin"] += any(path[0] in path[1:] for path, _, _ in all_paths)
    return coverage


def _check(count: int, seed: int, minimum: dict[str, int]) -> None:
    coverage = compare_generators(collect_positions(count, seed))
    print(dict(coverage))
    assert coverage["positions"] == count
    for name, least in minimum.items():
        assert coverage[name] >= least, f"too few positions with {name}: {dict(coverage)}"


def _minimum_coverage(count: int) -> dict[str, int]:
    """About half of what the seeded runs produce, so a policy change that loses the rare cases fails."""
    shares = {
        "with kings": 0.5,
        "multi-jump": 0.04,
        "crowning capture": 0.01,
        "2+ capture choices": 0.06,
        "no legal move": 0.005,
        "duplicate king paths": 0.0002,
        "king passes its origin": 0.0002,
    }
    return {name: max(1, int(share * count)) for name, share in shares.items()}


def test_generators_agree_quick():
    _check(5_000, seed=1, minimum=_minimum_coverage(5_000))


@pytest.mark.slow
def test_generators_agree_on_100k_positions():
    _check(100_000, seed=2, minimum=_minimum_coverage(100_000))

"""Endgame databases: the index, the file format and the probe (zero.endgames.egdb_build solves and writes them).

Value: win, loss or draw for the side to move under our rules (a side with no legal move loses), with no
draw by count or repetition inside the database. Distance: plies to the end of the game with best play,
the winner hurrying and the loser delaying (distance to win, DTW). A position with no legal move is lost in
0; a win is always odd and a loss even, since the side that makes the last move wins. So one byte per
position holds both: code d in 0..MAX_DISTANCE is that distance (odd = win, even = loss), DRAW_CODE a draw.

Only Black-to-move positions are stored; a White-to-move position is probed as the board turned round
(square s -> 33-s, colours swapped), which maps the rules onto themselves.

Index. Slices by piece counts (bm, bk, wm, wk): the side to move's men and kings, then the other side's.
Within a slice a position is (men configuration) * K + (kings' placement), K the number of ways to put the
kings on the squares the men leave free (a colex rank of each side's kings among those squares). Men
configurations (Black's men on 1-28, White's on 5-32, never on one square) are numbered in decreasing order
of advancement, the sum over men of the rows each has moved forward. A man's move adds one and the board
turned round keeps it, so every man move leads to an earlier configuration: the build solves them in index
order, and within one configuration (and its turned-round twin) only king moves remain. This plays the part
of the classic split by the leading man's rank, with no holes in the index (a rank table maps the two
colex ranks of the men to their configuration's number).

Files. One per slice, `bm{bm}bk{bk}wm{wm}wk{wk}.egdb`: a fixed header (magic, format version, the slice's
counts, the number of positions, sha256 of the codes) followed by the codes.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numba import njit

from zero.rules import movegen
from zero.rules.bitboard import FULL, ROW0, ROW7, lowest_bit_index, popcount
from zero.rules.game import Game, Move, Position
from zero.run.config import UnusableFile, read_bounded

ENV_VAR = "CHECKERS_ZERO_EGDB"

# Values for the side to move. UNKNOWN: not in the database (too many pieces, or not a reachable board).
LOSS, DRAW, WIN, UNKNOWN = -1, 0, 1, 2
VALUE_NAMES = {LOSS: "loss", DRAW: "draw", WIN: "win", UNKNOWN: "unknown"}

MAX_DISTANCE = 253
MOST_PIECES = 8  # the largest database the index lays out
# The largest one the players look for: 7 and 8 pieces take more memory and build hours than a player has.
MOST_PLAYED_PIECES = 6
UNSOLVED_CODE = 254  # only while a build runs; a file holding it is refused
DRAW_CODE = 255

FORMAT_VERSION = 1
MAGIC = b"CZ-EGDB\n"
# magic, version, bm, bk, wm, wk, positions, sha256 of the codes
HEADER = struct.Struct("<8sH4B2xQ32s")

MEN_SQUARES = 28  # a man never stands on its own crowning row


class EgdbFileError(RuntimeError):
    """A database file that is missing, truncated, of another format version or fails its checksum."""


def default_dir() -> Path:
    """Where databases live unless told otherwise: $CHECKERS_ZERO_EGDB, else ~/.cache/checkers-zero/egdb."""
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else Path.home() / ".cache" / "checkers-zero" / "egdb"


class Tables(NamedTuple):
    """The database as plain arrays, the argument of every kernel here (numba takes it as a tuple)."""

    codes: np.ndarray  # uint8, every slice's codes end to end
    slice_offset: np.ndarray  # int64 [bm, bk, wm, wk] -> the slice's first code; -1 for no slice
    rank_offset: np.ndarray  # int64 [bm, wm] -> start of that rank table in men_index
    men_index: np.ndarray  # int32 [rank_offset + black rank * C(28, wm) + white rank] -> configuration, -1 overlap
    conf_offset: np.ndarray  # int64 [bm, wm] -> start of that configuration list in men_black / men_white
    men_black: np.ndarray  # int64 masks of each configuration's Black men
    men_white: np.ndarray  # int64 masks of each configuration's White men
    binom: np.ndarray  # int64 [n, k] = C(n, k), n and k up to 32
    max_pieces: int


# ---- index kernels ----------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def flip(x):
    """The mask with square s moved to 33 - s (bit b to 31 - b): the board turned round."""
    x = ((x >> 1) & 0x55555555) | ((x & 0x55555555) << 1)
    x = ((x >> 2) & 0x33333333) | ((x & 0x33333333) << 2)
    x = ((x >> 4) & 0x0F0F0F0F) | ((x & 0x0F0F0F0F) << 4)
    x = ((x >> 8) & 0x00FF00FF) | ((x & 0x00FF00FF) << 8)
    return ((x >> 16) & 0xFFFF) | ((x & 0xFFFF) << 16)


@njit(cache=True, inline="always")
def colex_rank(mask, binom):
    """Rank of the set of bit positions in mask among the sets of its size (colex order = numeric order)."""
    r = 0
    i = 1
    while mask:
        r += binom[lowest_bit_index(mask), i]
        mask &= mask - 1
        i += 1
    return r


@njit(cache=True, inline="always")
def compress(mask, free):
    """mask's bits renumbered by their rank among free's bits (mask must lie inside free)."""
    out = 0
    while mask:
        b = lowest_bit_index(mask)
        mask &= mask - 1
        out |= np.int64(1) << popcount(free & ((np.int64(1) << b) - 1))
    return out


@njit(cache=True)
def kings_index(black, white, kings, binom):
    """Index of the kings' placement within their men configuration (Black's kings, then White's)."""
    men = (black | white) & ~kings
    free = ~men & FULL
    bkm = black & kings
    wkm = white & kings
    f = 32 - popcount(men)
    rb = colex_rank(compress(bkm, free), binom)
    rw = colex_rank(compress(wkm, free & ~bkm), binom)
    return rb * binom[f - popcount(bkm), popcount(wkm)] + rw


@njit(cache=True)
def men_conf(t, black_men, white_men):
    """Number of the men configuration (Black's men on bits 0-27, White's on 4-31) within its (bm, wm)."""
    bm = popcount(black_men)
    wm = popcount(white_men)
    rb = colex_rank(black_men, t.binom)
    rw = colex_rank(white_men >> 4, t.binom)
    return np.int64(t.men_index[t.rank_offset[bm, wm] + rb * t.binom[MEN_SQUARES, wm] + rw])


@njit(cache=True)
def position_index(t, black, white, kings):
    """Index into t.codes of a Black-to-move position, or -1 when it is not in the database."""
    bmen = black & ~kings
    wmen = white & ~kings
    bm = popcount(bmen)
    wm = popcount(wmen)
    bk = popcount(black & kings)
    wk = popcount(white & kings)
    if bm + bk + wm + wk > t.max_pieces or (bmen & ROW7) or (wmen & ROW0):
        return -1
    off = t.slice_offset[bm, bk, wm, wk]
    if off < 0:
        return -1
    k_count = t.binom[32 - bm - wm, bk] * t.binom[32 - bm - wm - bk, wk]
    return off + men_conf(t, bmen, wmen) * k_count + kings_index(black, white, kings, t.binom)


@njit(cache=True)
def probe_code(t, black, white, kings, black_to_move):
    """The position's code (see the module doc), or UNSOLVED_CODE when it is not in the database."""
    if not black_to_move:
        black, white, kings = flip(white), flip(black), flip(kings)
    if black == 0:
        return 0
    if white == 0:
        # Never reached in a game (the side to move has just lost its last piece), but defined: no capture
        # can exist, so the move count needs no move buffer.
        return 1 if movegen.count_moves(black, white, kings, True, True, np.empty((0, 0), np.int64)) else 0
    i = position_index(t, black, white, kings)
    if i < 0:
        return UNSOLVED_CODE
    return int(t.codes[i])


@njit(cache=True, inline="always")
def decode(code):
    """(value, distance) of a code: distance -1 for a draw or an unknown position."""
    if code == DRAW_CODE:
        return DRAW, -1
    if code > MAX_DISTANCE:
        return UNKNOWN, -1
    return (WIN if code & 1 else LOSS), code


@njit(cache=True)
def probe(t, black, white, kings, black_to_move):
    """(value, distance) for the side to move: value LOSS, DRAW, WIN or UNKNOWN (not in the database),
    distance the plies to the end with best play (-1 for a draw or unknown). Constant time."""
    return decode(probe_code(t, black, white, kings, black_to_move))


@njit(cache=True)
def probe_values(t, black, white, kings, black_to_move, out):
    """probe's value for each of many positions (arrays of one length) into out: UNKNOWN where not held."""
    for i in range(len(black)):
        out[i] = probe(t, black[i], white[i], kings[i], black_to_move[i])[0]


# ---- layout: slices, configurations and offsets --------------------------------------------------------


def _binomials() -> np.ndarray:
    binom = np.zeros((33, 33), dtype=np.int64)
    for n in range(33):
        binom[n, 0] = 1
        for k in range(1, n + 1):
            binom[n, k] = binom[n - 1, k - 1] + binom[n - 1, k]
    return binom


BINOM = _binomials()

Slice = tuple[int, int, int, int]  # (bm, bk, wm, wk), the side to move first


def mirror(s: Slice) -> Slice:
    """The slice of the children of s's king moves: the other side to move, so the counts swap."""
    return s[2], s[3], s[0], s[1]


def slices(pieces: int) -> list[Slice]:
    """Every slice with at most `pieces` pieces and at least one per side, in an order the build can solve
    them: by pieces (captures lead to fewer), then by men (a crowning leads to fewer men)."""
    out = []
    for n in range(2, pieces + 1):
        for men in range(n + 1):
            for bm in range(men + 1):
                for bk in range(n - men + 1):
                    wm, wk = men - bm, n - men - bk
                    if bm + bk and wm + wk:
                        out.append((bm, bk, wm, wk))
    return out


def kings_count(s: Slice) -> int:
    """K: the kings' placements per men configuration."""
    bm, bk, wm, wk = s
    return int(BINOM[32 - bm - wm, bk] * BINOM[32 - bm - wm - bk, wk])


def _combination_masks(k: int, shift: int) -> np.ndarray:
    """Masks of every k-subset of 28 squares starting at bit `shift`, in colex order (= numeric order)."""
    import itertools

    masks = [sum(1 << (b + shift) for b in c) for c in itertools.combinations(range(MEN_SQUARES), k)]
    return np.array(sorted(masks), dtype=np.int64)


def _advancement(masks: np.ndarray, black: bool) -> np.ndarray:
    """Rows moved forward, summed over each mask's men."""
    rows = np.arange(32) // 4
    forward = rows if black else 7 - rows
    bitset = (masks[:, None] >> np.arange(32)) & 1
    return bitset @ forward


def men_configurations(bm: int, wm: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Black men masks, White men masks, rank table) of the (bm, wm) configurations in index order: most
    advanced first, ties by the men's colex ranks. rank table[rb * C(28, wm) + rw] = configuration or -1."""
    mb = _combination_masks(bm, 0)
    mw = _combination_masks(wm, 4)
    valid = (mb[:, None] & mw[None, :]) == 0
    advance = _advancement(mb, True)[:, None] + _advancement(mw, False)[None, :]
    flat = np.flatnonzero(valid.ravel())
    # lexsort's last key is the primary one; the flat position breaks ties (black rank, then white rank)
    order = flat[np.lexsort((flat, -advance.ravel()[flat]))]
    table = np.full(mb.size * mw.size, -1, dtype=np.int32)
    table[order] = np.arange(order.size, dtype=np.int32)
    return mb[order // mw.size], mw[order % mw.size], table


@dataclass(frozen=True)
class Layout:
    """Where every slice of the databases with at most `pieces` pieces sits in one codes array."""

    pieces: int
    slices: tuple[Slice, ...]
    offsets: dict[Slice, int]
    sizes: dict[Slice, int]
    total: int
    rank_offset: np.ndarray
    men_index: np.ndarray
    conf_offset: np.ndarray
    men_black: np.ndarray
    men_white: np.ndarray

    def locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For indices into the codes: each one's slice (rows of bm, bk, wm, wk) and index within it."""
        starts = np.array([self.offsets[s] for s in self.slices], dtype=np.int64)
        row = np.searchsorted(starts, indices, side="right") - 1
        return np.array(self.slices, dtype=np.int64)[row], np.asarray(indices, dtype=np.int64) - starts[row]

    def tables(self, codes: np.ndarray) -> Tables:
        slice_offset = np.full((self.pieces + 1,) * 4, -1, dtype=np.int64)
        for s, off in self.offsets.items():
            slice_offset[s] = off
        return Tables(codes, slice_offset, self.rank_offset, self.men_index, self.conf_offset,
                      self.men_black, self.men_white, BINOM, self.pieces)


@functools.lru_cache(maxsize=4)
def layout(pieces: int) -> Layout:
    """The layout for `pieces`; the one for fewer pieces is its prefix."""
    if not 2 <= pieces <= MOST_PIECES:
        raise ValueError(f"endgame databases hold 2 to {MOST_PIECES} pieces, not {pieces}")
    rank_offset = np.zeros((pieces + 1, pieces + 1), dtype=np.int64)
    conf_offset = np.zeros((pieces + 1, pieces + 1), dtype=np.int64)
    tables, blacks, whites = [], [], []
    n_ranks = n_confs = 0
    confs = {}
    for bm in range(pieces + 1):
        for wm in range(pieces + 1 - bm):
            mb, mw, table = men_configurations(bm, wm)
            rank_offset[bm, wm], conf_offset[bm, wm] = n_ranks, n_confs
            n_ranks += table.size
            n_confs += mb.size
            confs[bm, wm] = mb.size
            tables.append(table)
            blacks.append(mb)
            whites.append(mw)
    order = slices(pieces)
    offsets, sizes = {}, {}
    total = 0
    for s in order:
        offsets[s] = total
        sizes[s] = confs[s[0], s[2]] * kings_count(s)
        total += sizes[s]
    return Layout(pieces, tuple(order), offsets, sizes, total, rank_offset, np.concatenate(tables),
                  conf_offset, np.concatenate(blacks), np.concatenate(whites))


# ---- files -----------------------------------------------------------------------------------------


def slice_path(directory: Path, s: Slice) -> Path:
    return Path(directory) / "bm{}bk{}wm{}wk{}.egdb".format(*s)


def encode_slice(s: Slice, codes: np.ndarray) -> bytes:
    """A slice file's bytes: header then codes."""
    payload = np.ascontiguousarray(codes, dtype=np.uint8).tobytes()
    return HEADER.pack(MAGIC, FORMAT_VERSION, *s, len(payload), hashlib.sha256(payload).digest()) + payload


def read_slice(path: Path, s: Slice, size: int) -> np.ndarray:
    """The codes of a slice file, checked against its header and the layout; EgdbFileError otherwise."""
    try:
        data = read_bounded(Path(path), HEADER.size + size, "this slice's file")
    except FileNotFoundError:
        raise EgdbFileError(f"{path}: missing endgame database file (build it: checkers-zero egdb build)") from None
    except UnusableFile as exc:
        raise EgdbFileError(f"{path}: {exc}") from None
    if len(data) < HEADER.size:
        raise EgdbFileError(f"{path}: truncated endgame database file")
    magic, version, *rest = HEADER.unpack_from(data)
    counts, positions, digest = tuple(rest[:4]), rest[4], rest[5]
    if magic != MAGIC:
        raise EgdbFileError(f"{path}: not an endgame database file")
    if version != FORMAT_VERSION:
        raise EgdbFileError(f"{path}: format version {version}, this code reads {FORMAT_VERSION} (rebuild it)")
    if counts != tuple(s) or positions != size or len(data) - HEADER.size != size:
        raise EgdbFileError(f"{path}: holds {counts} with {positions} positions in {len(data) - HEADER.size} "
                            f"bytes, expected {tuple(s)} with {size}")
    payload = memoryview(data)[HEADER.size:]
    if hashlib.sha256(payload).digest() != digest:
        raise EgdbFileError(f"{path}: checksum mismatch (corrupt endgame database file)")
    codes = np.frombuffer(payload, dtype=np.uint8)
    if (codes == UNSOLVED_CODE).any():
        raise EgdbFileError(f"{path}: holds unsolved positions")
    return codes


def no_tables() -> Tables:
    """Tables that hold no position (every probe is UNKNOWN): what a kernel gets when no database is used,
    of the same types as real ones, so the kernels compile once."""
    empty = np.zeros((1, 1), dtype=np.int64)
    return Tables(np.zeros(0, dtype=np.uint8), np.full((1, 1, 1, 1), -1, dtype=np.int64), empty,
                  np.zeros(0, dtype=np.int32), empty, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                  BINOM, 0)


# ---- the Python face ---------------------------------------------------------------------------------


class Probe(NamedTuple):
    """A database answer for the side to move."""

    value: int  # LOSS, DRAW, WIN or UNKNOWN
    distance: int  # plies to the end with best play; -1 for a draw or unknown

    def __str__(self) -> str:
        if self.value in (WIN, LOSS):
            return f"database {VALUE_NAMES[self.value]} in {self.distance}"
        return f"database {VALUE_NAMES[self.value]}"


@dataclass(frozen=True)
class Egdb:
    """Loaded databases: every position with at most `tables.max_pieces` pieces."""

    tables: Tables
    directory: Path

    @property
    def max_pieces(self) -> int:
        return self.tables.max_pieces

    def probe(self, position: Position) -> Probe:
        value, distance = probe(self.tables, position.black, position.white, position.kings,
                                position.black_to_move)
        return Probe(int(value), int(distance))

    def values(self, black: np.ndarray, white: np.ndarray, kings: np.ndarray,
               black_to_move: np.ndarray) -> np.ndarray:
        """Value for the side to move (int8: LOSS, DRAW, WIN, or UNKNOWN where not held) of many positions."""
        out = np.empty(len(black), np.int8)
        probe_values(self.tables, np.asarray(black, np.int64), np.asarray(white, np.int64),
                     np.asarray(kings, np.int64), np.asarray(black_to_move, np.bool_), out)
        return out

    def move_values(self, position: Position) -> list[tuple[Move, Probe]]:
        """Each legal move with its value for the mover: the child's answer turned round, one ply longer."""
        out = []
        for move in position.legal_moves():
            child = self.probe(position.play(move))
            if child.value == UNKNOWN:
                raise ValueError(f"{position}: not in the {self.max_pieces}-piece database")
            out.append((move, Probe(-child.value, child.distance + 1 if child.value != DRAW else -1)))
        return out

    def best_move(self, position: Position) -> Move | None:
        """A move that keeps the value: the fastest win, else a draw, else the slowest loss; None when the
        side to move has no move."""

        values = self.move_values(position)
        return max(values, key=lambda item: _keeping_value(item[1]))[0] if values else None

    def line(self, position: Position, most: int) -> list[Move]:
        """The database's line from `position`: best_move repeatedly, at most `most` moves (a won or lost
        position's line ends with the game, within its distance)."""
        moves = []
        while len(moves) < most and (move := self.best_move(position)) is not None:
            moves.append(move)
            position = position.play(move)
        return moves

    def move_in_game(self, game: Game) -> Move | None:
        """The move a player with the database plays in `game`, whose position it holds: the fastest win;
        else a draw that goes on, giving the opponent the largest share of losing replies, at the position the
        game has seen least; else a draw by the rules; else the slowest loss. None when there is no move.

        The database knows no repetition or no-progress count, and its first drawing move in move order
        tends to shuffle back into a threefold repetition within a few moves, ending a game that a fallible
        opponent could still lose. A drawn game goes on at no risk (every move keeps the draw), and a lost
        one is better drawn by the rules than lost."""

        def score(item: tuple[Move, Probe]) -> tuple:
            move, probe = item
            game.play(move)
            try:
                if game.outcome is not None and game.outcome.winner == 0:
                    # Drawn by the rules: the database's value no longer counts, but where every move draws
                    # so (the no-progress count's last ply) one that keeps it leaves no mistake to judge.
                    return (1, _keeping_value(probe))
                if probe.value == WIN:
                    return (3, _keeping_value(probe))
                if probe.value == LOSS:
                    return (0, _keeping_value(probe))
                replies = [self.probe(game.position.play(reply)).value for reply in game.legal_moves()]
                return (2, replies.count(WIN) / len(replies), -game.repetitions())
            finally:
                game.undo()

        values = self.move_values(game.position)
        return max(values, key=score)[0] if values else None


def _keeping_value(probe: Probe) -> tuple[int, int]:
    """Orders a mover's answers as the database plays them: wins, the fastest first; then draws; then
    losses, the slowest first."""
    value, distance = probe
    return (value, -distance if value == WIN else distance if value == LOSS else 0)


def present(path: Path) -> bool:
    """Whether anything is at a slice's path: a link, a FIFO or a device there is a damaged file that load
    names, not a missing one that lets a smaller database stand in without a word."""
    return os.path.lexists(path)


def built(pieces: int, directory: Path | None = None) -> bool:
    """Whether every file of the databases of at most `pieces` pieces is in `directory` (default_dir()); load
    checks what they hold."""
    directory = Path(directory) if directory is not None else default_dir()
    return all(present(slice_path(directory, s)) for s in layout(pieces).slices)


def load(pieces: int, directory: Path | None = None) -> Egdb:
    """The databases of at most `pieces` pieces from `directory` (default_dir()); EgdbFileError names the
    first missing or corrupt file."""
    directory = Path(directory) if directory is not None else default_dir()
    lay = layout(pieces)
    codes = np.empty(lay.total, dtype=np.uint8)
    for s in lay.slices:
        off = lay.offsets[s]
        codes[off : off + lay.sizes[s]] = read_slice(slice_path(directory, s), s, lay.sizes[s])
    return Egdb(lay.tables(codes), directory)

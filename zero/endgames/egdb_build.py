"""Solving the endgame databases (zero.endgames.egdb holds the index, the files and the probe).

Slices are solved in zero.endgames.egdb.slices' order, a slice together with its mirror (the counts swapped, where
its king moves lead). Within the pair, men configurations go in index order, most advanced first, each with
its turned-round twin: every capture, man move or crowning leads to a position already solved, and only king
moves stay inside this group of positions. The group is solved by retrograde analysis in order of distance
(a bucket queue, Dijkstra-style): a position's moves out of the group give it a starting point (a win in
1 + the fastest losing child, or a loss no sooner than 1 + the slowest winning child), and each position
settled at distance d tells its predecessors in the group, found by unmaking king moves, as a loss (they
win in d + 1) or as a win (one winning child fewer; a predecessor left with none loses). What is never
settled is a draw.
"""

from __future__ import annotations

import fcntl
import multiprocessing as mp
from pathlib import Path
from typing import Callable

import numpy as np
from numba import njit

from zero.rules import movegen
from zero.rules.bitboard import FULL, NEIGHBOUR, lowest_bit_index
from zero.run.config import atomic_write_bytes, notify, remove_leftover_temp_files
from zero.endgames.egdb import (
    DRAW, DRAW_CODE, LOSS, MAX_DISTANCE, MOST_PLAYED_PIECES, UNSOLVED_CODE, WIN, Egdb, EgdbFileError, Slice, built,
    default_dir, encode_slice, flip, kings_count, kings_index, layout, load, men_conf, mirror, present, probe,
    read_slice, slice_path, slices,
)

# What ensure_built builds on first use: a few seconds.
QUICK_PIECES = 4
# CPU-minutes a build of this many pieces took (docs/search.md's table), for the notice of a smaller one.
BUILD_MINUTES = {5: 2, 6: 35}
_NEVER = 32767  # a distance no position reaches (int16 work arrays)


@njit(cache=True, inline="always")
def _colex_unrank(r, k, binom):
    """The k-subset (as a mask of bit positions) of colex rank r."""
    out = 0
    for i in range(k, 0, -1):
        p = i - 1
        while binom[p + 1, i] <= r:
            p += 1
        r -= binom[p, i]
        out |= np.int64(1) << p
    return out


@njit(cache=True, inline="always")
def _expand(compressed, free):
    """Inverse of zero.endgames.egdb.compress: bit j of compressed goes to free's j-th set bit."""
    out = 0
    j = 0
    while free:
        b = lowest_bit_index(free)
        free &= free - 1
        if (compressed >> j) & 1:
            out |= np.int64(1) << b
        j += 1
    return out


@njit(cache=True)
def decode_position(t, s, conf, kidx):
    """(black, white, kings) of the Black-to-move position number conf * K + kidx of slice s."""
    bm, bk, wm, wk = s
    mb = t.men_black[t.conf_offset[bm, wm] + conf]
    mw = t.men_white[t.conf_offset[bm, wm] + conf]
    free = ~(mb | mw) & FULL
    per_black = t.binom[32 - bm - wm - bk, wk]
    bkm = _expand(_colex_unrank(kidx // per_black, bk, t.binom), free)
    wkm = _expand(_colex_unrank(kidx % per_black, wk, t.binom), free & ~bkm)
    return mb | bkm, mw | wkm, bkm | wkm


@njit(cache=True)
def _push(d, g, head, e_slot, e_next, n_entries):
    if d > MAX_DISTANCE:
        raise ValueError("a distance exceeds the one-byte code (MAX_DISTANCE)")
    e_slot[n_entries] = g
    e_next[n_entries] = head[d]
    head[d] = n_entries
    return n_entries + 1


@njit(cache=True)
def _solve_group(t, s, m, s2, m2, work_b, work_w, work_k, n_int, ext_loss, cand, code, e_slot, e_next, moves):
    """Solve the positions of men configuration m of slice s and its twin m2 of s2 (slots 0..K-1 and
    K..2K-1; one block when the group is its own twin) and write their codes into t.codes."""
    k_count = t.binom[32 - s[0] - s[2], s[1]] * t.binom[32 - s[0] - s[2] - s[1], s[3]]
    single = s == s2 and m == m2
    size = k_count if single else 2 * k_count
    head = np.full(MAX_DISTANCE + 1, -1, dtype=np.int64)
    n_entries = 0
    for g in range(size):
        if g < k_count:
            b, w, k = decode_position(t, s, m, g)
        else:
            b, w, k = decode_position(t, s2, m2, g - k_count)
        work_b[g], work_w[g], work_k[g] = b, w, k
        code[g] = UNSOLVED_CODE
        n = movegen.generate(b, w, k, True, True, moves)
        win_at = _NEVER
        loss_at = 0
        draw = False
        inside = 0
        for j in range(n):
            frm = moves[j, movegen.F_FROM]
            captured = moves[j, movegen.F_CAPTURED]
            if captured == 0 and (k >> frm) & 1:
                inside += 1
                continue
            cb, cw, ck = movegen.make(b, w, k, True, frm, moves[j, movegen.F_TO], captured)
            value, dist = probe(t, cb, cw, ck, False)
            if value == LOSS:
                win_at = min(win_at, dist + 1)
            elif value == WIN:
                loss_at = max(loss_at, dist + 1)
            elif value == DRAW:
                draw = True
            else:
                raise ValueError("a child is not solved yet: slices out of dependency order")
        n_int[g] = inside
        ext_loss[g] = -1 if draw else loss_at  # -1: a drawing way out, so never lost
        cand[g] = win_at
        if win_at < _NEVER:
            n_entries = _push(win_at, g, head, e_slot, e_next, n_entries)
        elif inside == 0 and not draw:
            n_entries = _push(loss_at, g, head, e_slot, e_next, n_entries)
    popped = 0
    d = -1
    while popped < n_entries:  # the buckets beyond the last entry are all empty
        d += 1
        e = head[d]
        while e >= 0:
            g = e_slot[e]
            e = e_next[e]
            popped += 1
            if code[g] != UNSOLVED_CODE:
                continue  # settled sooner by a faster win
            code[g] = d
            # Predecessors in the group: the other side's king stepped here from an empty neighbour, in a
            # position where it had no capture (a capture would have been compulsory).
            b, w, k = work_b[g], work_w[g], work_k[g]
            empty = ~(b | w) & FULL
            own_block = 0 if g < k_count else 1
            wkings = w & k
            while wkings:
                to = lowest_bit_index(wkings)
                wkings &= wkings - 1
                for direction in range(4):
                    frm = NEIGHBOUR[to, direction]
                    if frm < 0 or not (empty >> frm) & 1:
                        continue
                    moved = (np.int64(1) << to) | (np.int64(1) << frm)
                    pw, pk = w ^ moved, k ^ moved
                    if movegen.can_capture(b, pw, pk, False):
                        continue
                    p = kings_index(flip(pw), flip(b), flip(pk), t.binom)
                    if not single and own_block == 0:
                        p += k_count
                    if code[p] != UNSOLVED_CODE:
                        continue
                    if d % 2 == 0:  # settled lost: the predecessor wins one ply later
                        if d + 1 < cand[p]:
                            cand[p] = d + 1
                            n_entries = _push(d + 1, p, head, e_slot, e_next, n_entries)
                    else:
                        n_int[p] -= 1
                        if n_int[p] == 0 and cand[p] == _NEVER and ext_loss[p] >= 0:
                            n_entries = _push(max(ext_loss[p], d + 1), p, head, e_slot, e_next, n_entries)
    off_a = t.slice_offset[s] + m * k_count
    off_b = t.slice_offset[s2] + m2 * k_count
    for g in range(size):
        c = DRAW_CODE if code[g] == UNSOLVED_CODE else code[g]
        if g < k_count:
            t.codes[off_a + g] = c
        else:
            t.codes[off_b + g - k_count] = c


@njit(cache=True)
def solve_pair(t, s, s2, n_confs):
    """Solve slice s and its mirror s2 (the same slice when s == s2) into t.codes."""
    k_count = t.binom[32 - s[0] - s[2], s[1]] * t.binom[32 - s[0] - s[2] - s[1], s[3]]
    size = 2 * k_count
    work_b = np.empty(size, np.int64)
    work_w = np.empty(size, np.int64)
    work_k = np.empty(size, np.int64)
    n_int = np.empty(size, np.int16)
    ext_loss = np.empty(size, np.int16)
    cand = np.empty(size, np.int16)
    code = np.empty(size, np.int16)
    # Pushes per position: its start, one faster win from inside, one loss: at most three.
    e_slot = np.empty(3 * size, np.int64)
    e_next = np.empty(3 * size, np.int64)
    moves = np.zeros((movegen.BUFFER_ROWS, movegen.MOVE_FIELDS), dtype=np.int64)
    bm, wm = s[0], s[2]
    for m in range(n_confs):
        mb = t.men_black[t.conf_offset[bm, wm] + m]
        mw = t.men_white[t.conf_offset[bm, wm] + m]
        m2 = men_conf(t, flip(mw), flip(mb))
        if s == s2 and m2 < m:
            continue  # solved with its twin
        _solve_group(t, s, m, s2, m2, work_b, work_w, work_k, n_int, ext_loss, cand, code, e_slot, e_next, moves)


@njit(cache=True)
def count_disagreements(t, slice_rows, local):
    """How many of the given positions (Black to move: slice_rows[i] = bm, bk, wm, wk, local[i] the index
    within the slice) hold another code than the best over their children's (Egdb.move_values, in Python)."""
    moves = np.zeros((movegen.BUFFER_ROWS, movegen.MOVE_FIELDS), dtype=np.int64)
    wrong = 0
    for i in range(local.size):
        s = (slice_rows[i, 0], slice_rows[i, 1], slice_rows[i, 2], slice_rows[i, 3])
        k_count = t.binom[32 - s[0] - s[2], s[1]] * t.binom[32 - s[0] - s[2] - s[1], s[3]]
        b, w, k = decode_position(t, s, local[i] // k_count, local[i] % k_count)
        n = movegen.generate(b, w, k, True, True, moves)
        win_at = _NEVER
        loss_at = 0
        draw = False
        for j in range(n):
            cb, cw, ck = movegen.make(b, w, k, True, moves[j, movegen.F_FROM], moves[j, movegen.F_TO],
                                      moves[j, movegen.F_CAPTURED])
            value, dist = probe(t, cb, cw, ck, False)
            if value == LOSS:
                win_at = min(win_at, dist + 1)
            elif value == WIN:
                loss_at = max(loss_at, dist + 1)
            else:
                draw = True  # an unknown child counts as a draw, so that it cannot hide
        best = win_at if win_at < _NEVER else DRAW_CODE if draw else loss_at
        if t.codes[t.slice_offset[s] + local[i]] != best:
            wrong += 1
    return wrong


def _lock(directory: Path):
    """An exclusive flock on the directory's build lock: concurrent first uses build once, not twice."""
    directory.mkdir(parents=True, exist_ok=True)
    handle = open(directory / "build.lock", "w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def _read_if_valid(path: Path, s: Slice, size: int) -> np.ndarray | None:
    """The slice's codes, or None when it is to be solved: missing (a build resumed) or damaged, which is
    said in one line, as a build that silently discarded a file would hide what went wrong with it."""
    try:
        return read_slice(path, s, size)
    except EgdbFileError as exc:
        if present(path):
            notify(f"{exc}: solving it again")
        return None


def build(pieces: int, directory: Path | None = None, progress: bool = True) -> Egdb:
    """Solve every position with at most `pieces` pieces into `directory` (default_dir()), one file per
    slice. Slices whose files are already there and sound are read, not solved again, so an interrupted
    build resumes where it stopped."""
    from tqdm import tqdm

    directory = Path(directory) if directory is not None else default_dir()
    lay = layout(pieces)
    codes = np.full(lay.total, UNSOLVED_CODE, dtype=np.uint8)
    t = lay.tables(codes)
    with _lock(directory), tqdm(total=lay.total, unit="pos", unit_scale=True, disable=not progress,
                                desc=f"egdb {pieces} pieces") as bar:
        remove_leftover_temp_files(directory)
        done: set[Slice] = set()
        for s in lay.slices:
            if s in done:
                continue
            pair = (s,) if mirror(s) == s else (s, mirror(s))
            found = [_read_if_valid(slice_path(directory, x), x, lay.sizes[x]) for x in pair]
            if all(f is not None for f in found):
                for x, f in zip(pair, found):
                    codes[lay.offsets[x] : lay.offsets[x] + lay.sizes[x]] = f
            else:
                solve_pair(t, s, mirror(s), lay.sizes[s] // kings_count(s))
                for x in pair:
                    part = codes[lay.offsets[x] : lay.offsets[x] + lay.sizes[x]]
                    atomic_write_bytes(slice_path(directory, x), encode_slice(x, part))
            done.update(pair)
            bar.update(sum(lay.sizes[x] for x in pair))
    return Egdb(t, directory)


class BuildInterrupted(Exception):
    """A build broken off because its caller had more urgent work; the slices it finished are kept."""


def _build_in_a_child(pieces: int, directory: Path | None, should_stop: Callable[[], bool]) -> None:
    """build() in a process of its own, ended as soon as should_stop() says so (raising BuildInterrupted):
    the first build compiles the solver, which no check between slices could break off (minutes at a low
    priority on a busy machine). What it leaves is what a killed build leaves: whole slice files, which the
    next build reads, and temporary ones, which it removes."""
    child = mp.get_context("spawn").Process(target=build, args=(pieces, directory, False), daemon=True)
    child.start()
    while child.is_alive():
        if should_stop():
            child.kill()
            child.join()
            raise BuildInterrupted(f"the {pieces}-piece endgame database's build was broken off")
        child.join(0.5)
    if child.exitcode != 0:
        raise RuntimeError(f"building the {pieces}-piece endgame database failed (exit status {child.exitcode})")


def ensure_built(pieces: int = QUICK_PIECES, directory: Path | None = None,
                 should_stop: Callable[[], bool] | None = None) -> Egdb:
    """The databases of at most `pieces` (<= 4) pieces, built on first use (seconds) and loaded after. With
    `should_stop`, a build breaks off (BuildInterrupted) as soon as it says so."""
    if pieces > QUICK_PIECES:
        raise ValueError(f"{pieces} pieces take minutes: build them with `checkers-zero egdb build --pieces {pieces}`")
    if built(pieces, directory):
        # Loaded without the build lock: a larger build holds it for half an hour, and every player would
        # wait that long for files that are already whole (each is written atomically, checked on loading).
        try:
            return load(pieces, directory)
        except EgdbFileError:
            pass  # a damaged file: rebuilt below, under the lock
    if should_stop is not None and should_stop():
        raise BuildInterrupted(f"the {pieces}-piece endgame database is not built yet")
    # Some seconds of silence read as a hang to a person starting `play` for the first time.
    notify(f"building the {pieces}-piece endgame database in {directory or default_dir()} (once, some seconds) ...")
    if should_stop is None:
        return build(pieces, directory, progress=False)
    _build_in_a_child(pieces, directory, should_stop)
    return load(pieces, directory)


def largest_available(directory: Path | None = None, most: int = MOST_PLAYED_PIECES,
                      should_stop: Callable[[], bool] | None = None) -> Egdb:
    """The largest database whose files are all in `directory` (default_dir()), at most `most` pieces: a
    larger one built with `checkers-zero egdb build`, else the 4-piece one, built here on first use (broken
    off when `should_stop` says so: ensure_built). What play, analysis and the search players use."""
    directory = Path(directory) if directory is not None else default_dir()
    for pieces in range(most, QUICK_PIECES, -1):
        # Only the slices of exactly this many pieces: those of fewer are the smaller databases' own. Their
        # names alone: the 6-piece layout's index tables took 6.6 s to compute on a busy machine, in every
        # front end's start on a machine without that database (issue 85).
        files = [slice_path(directory, s) for s in slices(pieces) if sum(s) == pieces]
        found = sum(present(path) for path in files)
        if not found:
            continue
        # A database that is there in part or damaged is the user's lost work or a failed build: playing on
        # with a smaller one is right, doing so without a word is not.
        rebuild = f"rebuild it: checkers-zero egdb build --pieces {pieces}"
        if found < len(files):
            notify(f"the {pieces}-piece endgame database in {directory} is incomplete ({found} of {len(files)} "
                   f"files; {rebuild}): using a smaller one")
            continue
        # Seconds to tens of seconds (the 6-piece one's 2.6 GB: 17 s), which read as a hang unsaid.
        notify(f"loading the {pieces}-piece endgame database from {directory} ...")
        try:
            return load(pieces, directory)
        except EgdbFileError as exc:
            notify(f"the {pieces}-piece endgame database is unusable ({exc}; "
                   f"{rebuild}): using a smaller one")
    return ensure_built(min(most, QUICK_PIECES), directory, should_stop)


def say_which_database(egdb: Egdb, most: int = MOST_PLAYED_PIECES) -> Egdb:
    """Say on the console which database a player got when it is smaller than the `most` pieces it would
    take, and how to build the larger one: a spec's `:db` became the 4-piece database without a word, where
    the README's figures are the 6-piece one's. Returns egdb."""
    pieces = egdb.max_pieces
    if pieces < most:
        notify(f"using the {pieces}-piece endgame database: the {most}-piece one, which the README's figures use, "
               f"is not built in {egdb.directory} (checkers-zero egdb build --pieces {most}: "
               f"{BUILD_MINUTES.get(most, 'many')} CPU-minutes, once)")
    return egdb

"""Endgame databases: build time, size and positions per second for N = 2 .. max, an estimate for N + 1, the
numba probe's speed, and a check that sampled positions hold the best value over their children.

    python benchmarks/egdb_bench.py [--max-pieces 5] [--out DIR] [--samples 100000]

Each N is built on top of the files of N - 1 in DIR (default: a temporary folder, removed afterwards), so
its time is the time to solve the slices with exactly N pieces. DIR must hold no database files yet: slices
already there would be read, not solved, and the times would mean nothing. Single thread.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit

from zero.endgames import egdb
from zero.endgames.egdb_build import build, count_disagreements, decode_position


@njit(cache=True)
def _probe_all(t, black, white, kings, black_to_move):
    """Probe every position once; the distances' sum keeps the loop from being optimised away."""
    total = 0
    for i in range(black.size):
        total += egdb.probe(t, black[i], white[i], kings[i], black_to_move[i])[1]
    return total


@njit(cache=True)
def _positions_at(t, slice_rows, local, black_to_move):
    """The stored positions, turned round where White is to move."""
    n = local.size
    black, white, kings = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    for i in range(n):
        s = (slice_rows[i, 0], slice_rows[i, 1], slice_rows[i, 2], slice_rows[i, 3])
        k_count = t.binom[32 - s[0] - s[2], s[1]] * t.binom[32 - s[0] - s[2] - s[1], s[3]]
        b, w, k = decode_position(t, s, local[i] // k_count, local[i] % k_count)
        if not black_to_move[i]:
            b, w, k = egdb.flip(w), egdb.flip(b), egdb.flip(k)
        black[i], white[i], kings[i] = b, w, k
    return black, white, kings


def _slice_files_size(directory: Path, pieces: int) -> int:
    lay = egdb.layout(pieces)
    return sum(egdb.slice_path(directory, s).stat().st_size for s in lay.slices if sum(s) == pieces)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-pieces", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="build here and keep the files")
    parser.add_argument("--samples", type=int, default=100_000, help="positions checked against their children")
    parser.add_argument("--probes", type=int, default=2_000_000)
    args = parser.parse_args()

    directory = args.out or Path(tempfile.mkdtemp(prefix="egdb-bench-"))
    if any(directory.glob("*.egdb")):
        parser.error(f"{directory} already holds database files: the build times would not be measured")
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as warm:
        build(2, Path(warm), progress=False)  # numba compilation, outside the timings
    try:
        rates = {}
        print(f"{'N':>2} {'positions (exactly N)':>22} {'all <= N':>12} {'seconds':>8} {'pos/s':>10} {'MB (N)':>8}"
              f" {'max plies':>9} {'draws':>6}")
        for n in range(2, args.max_pieces + 1):
            started = time.perf_counter()
            db = build(n, directory, progress=False)
            seconds = time.perf_counter() - started
            lay = egdb.layout(n)
            new = lay.total - (egdb.layout(n - 1).total if n > 2 else 0)
            rates[n] = new / seconds
            codes = db.tables.codes[lay.total - new :]
            solved = codes[codes <= egdb.MAX_DISTANCE]
            print(f"{n:>2} {new:>22,} {lay.total:>12,} {seconds:>8.1f} {rates[n]:>10,.0f} "
                  f"{_slice_files_size(directory, n) / 1e6:>8.1f} {solved.max():>9} "
                  f"{(codes == egdb.DRAW_CODE).mean():>6.1%}")

        top = args.max_pieces
        nxt = egdb.layout(top + 1)
        new = nxt.total - egdb.layout(top).total
        # The rate fell from N-1 to N (bigger groups, more moves per position); assume it falls as much again.
        rate = rates[top] * (rates[top] / rates[top - 1] if top - 1 in rates else 1.0)
        print(f"estimate N = {top + 1}: {new:,} positions with exactly {top + 1} pieces ({nxt.total:,} in all), "
              f"{new / 1e6:,.0f} MB of files, about {new / rate / 60:,.0f} min at {rate:,.0f} pos/s, "
              f"{nxt.total / 1e9:.1f} GB of memory for the codes")

        t = db.tables
        rng = np.random.default_rng(0)
        lay = egdb.layout(top)
        first = egdb.layout(top - 1).total if top > 2 else 0
        rows, local = lay.locate(rng.integers(first, lay.total, size=args.probes))
        side = rng.random(args.probes) < 0.5
        black, white, kings = _positions_at(t, rows, local, side)
        _probe_all(t, black[:10], white[:10], kings[:10], side[:10])
        started = time.perf_counter()
        _probe_all(t, black, white, kings, side)
        seconds = time.perf_counter() - started
        print(f"numba probe: {args.probes:,} random {top}-piece positions (half White to move) in {seconds:.3f} s, "
              f"{seconds / args.probes * 1e9:.0f} ns per probe")

        rows, local = lay.locate(rng.integers(first, lay.total, size=args.samples))
        started = time.perf_counter()
        wrong = count_disagreements(t, rows, local)
        print(f"check: {args.samples:,} random {top}-piece positions, {wrong} whose value is not the best over "
              f"their children ({time.perf_counter() - started:.1f} s)")
    finally:
        if args.out is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

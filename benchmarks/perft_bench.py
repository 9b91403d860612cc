"""Rules-engine speed: perft nodes per second (with and without leaf bulk-counting) and random playouts.

    python benchmarks/perft_bench.py [--max-depth 13] [--playout-plies 5000000]

Single thread. Depths 12 and 13 are run in both series (duplicate king paths merged, the game's rule, and
counted, Bik's series) and checked against ../shared/data/perft.txt when it is found.
"""

from __future__ import annotations

import argparse
import platform
import re
import time

from zero.rules import movegen
from zero.rules.game import Position
from zero.run.data import data_file


def _expected_counts() -> dict[int, tuple[int, int]]:
    """{depth: (paths counted, duplicates merged)} from perft.txt, or {} when it is absent."""
    path = data_file("perft.txt")
    if path is None:
        return {}
    table = {}
    for line in path.read_text().splitlines():
        if m := re.fullmatch(r"(\d+)\s+(\d+)\s+(\d+)\s*", line):
            table[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    return table


def _timed(fn, *args) -> tuple[int, float, float]:
    """fn(*args) with its wall time and this process's CPU time: on a shared machine the CPU time is the
    better measure of the code, the wall time of what a user waits."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = int(fn(*args))
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _perft(depth: int, count_paths: bool, bulk: bool) -> tuple[int, float, float]:
    pos = Position.initial()
    return _timed(movegen.perft, pos.black, pos.white, pos.kings, pos.black_to_move, depth, not count_paths, bulk)


def _rates(count: int, wall: float, cpu: float) -> str:
    return f"{wall:8.2f} s wall {count / wall / 1e6:7.1f} M/s, {cpu:8.2f} s CPU {count / cpu / 1e6:7.1f} M/s"


def _report(label: str, depth: int, count_paths: bool, bulk: bool, expected: dict[int, tuple[int, int]]) -> bool:
    nodes, wall, cpu = _perft(depth, count_paths, bulk)
    want = expected.get(depth, (None, None))[0 if count_paths else 1]
    check = "no reference" if want is None else ("ok" if nodes == want else f"MISMATCH, expected {want}")
    print(f"{label:<34} depth {depth:>2}: {nodes:>14,} nodes {_rates(nodes, wall, cpu)}  [{check}]", flush=True)
    return want is None or nodes == want


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-depth", type=int, default=13, help="deepest perft run in both series (12 or 13)")
    parser.add_argument("--playout-plies", type=int, default=5_000_000, help="random-playout positions to time")
    args = parser.parse_args()

    print(f"machine: {platform.machine()} {platform.processor() or ''}, python {platform.python_version()}")
    expected = _expected_counts()
    if not expected:
        print("perft.txt not found: counts are not checked")
    for count_paths, bulk in ((False, True), (True, True), (False, False)):
        _perft(2, count_paths, bulk)  # compile before timing

    ok = _report("merged paths, bulk-counted leaves", 11, False, True, expected)
    ok &= _report("merged paths, every leaf made", 11, False, False, expected)
    for depth in range(12, args.max_depth + 1):
        ok &= _report("merged paths (game rule), bulk", depth, False, True, expected)
        ok &= _report("paths counted (Bik series), bulk", depth, True, True, expected)

    start_pos = Position.initial()
    movegen.random_playout_steps(start_pos.black, start_pos.white, start_pos.kings, True, 1000, 0)
    done, wall, cpu = _timed(
        movegen.random_playout_steps, start_pos.black, start_pos.white, start_pos.kings, True, args.playout_plies, 1
    )
    print(f"random playouts (generate, pick, make): {done:>14,} positions {_rates(done, wall, cpu)}",
          flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

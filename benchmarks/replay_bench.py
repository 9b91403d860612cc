"""Replay store speed: append rate (positions/s) for a few commit/chunk settings, and sample rate (batch 1024).

    python benchmarks/replay_bench.py [--positions 60000] [--dir DIR]

Games are random legal games (selfplay.replay.random_records), generated once and appended over and over, so the
figures are the store's alone. Each setting writes to a fresh store in a temporary directory (or --dir).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from selfplay.replay.random_records import random_game_record
from selfplay.replay.replay_buffer import ReplayReader, ReplayWriter, store_path

SETTINGS = [  # (commit_positions, chunk_rows)
    (1, 4096),
    (1, 1024),
    (1024, 4096),
    (1024, 1024),
    (4096, 4096),
]


def store_bytes(run: Path) -> int:
    return sum(f.stat().st_size for f in store_path(run).rglob("*") if f.is_file())


def append(run: Path, records, positions: int, commit_positions: int,
           chunk_rows: int) -> tuple[float, float, int, int]:
    """(wall s, CPU s, positions written, commits) appending games until `positions` are committed."""
    written = commits = 0
    with tqdm(total=positions, unit="pos", desc=f"commit {commit_positions}, chunk {chunk_rows}", leave=False) as bar:
        started, cpu_started = time.perf_counter(), time.process_time()
        with ReplayWriter(run, 0, commit_positions=commit_positions, commit_seconds=3600,
                          chunk_rows=chunk_rows) as writer:
            k = 0
            while written < positions:
                before = writer.committed_games
                writer.append_game(records[k % len(records)])
                commits += writer.committed_games != before
                written += records[k % len(records)].length
                bar.update(records[k % len(records)].length)
                k += 1
            commits += writer.pending_games > 0
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return seconds, cpu, written, commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", type=int, default=60_000, help="positions appended per setting")
    parser.add_argument("--games", type=int, default=48, help="distinct random games to cycle through")
    parser.add_argument("--dir", type=Path, help="where to put the stores (default: a temporary directory)")
    args = parser.parse_args()

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    records = [random_game_record(seed, max_plies=200) for seed in tqdm(range(args.games), desc="games", leave=False)]
    print(f"{len(records)} random games, mean length {np.mean([r.length for r in records]):.1f} plies")
    base = Path(tempfile.mkdtemp(prefix="replay-bench-", dir=args.dir))
    try:
        print(f"\nappend ({args.positions} positions per setting, one actor)")
        print("(wall: elapsed time on this machine as loaded; CPU: process time of all the writer's threads)")
        print(f"{'commit every':>14} {'chunk rows':>11} {'pos/s wall':>11} {'pos/s CPU':>10} "
              f"{'ms/commit wall':>15} {'ms/commit CPU':>14} {'bytes/position':>15}")
        for commit_positions, chunk_rows in SETTINGS:
            run = base / f"append-{commit_positions}-{chunk_rows}"
            seconds, cpu, written, commits = append(run, records, args.positions, commit_positions, chunk_rows)
            label = "game" if commit_positions == 1 else f"{commit_positions} pos"
            print(f"{label:>14} {chunk_rows:>11} {written / seconds:>11.0f} {written / cpu:>10.0f} "
                  f"{1000 * seconds / commits:>15.1f} {1000 * cpu / commits:>14.1f} {store_bytes(run) / written:>15.0f}")

        run = base / "append-1024-4096"  # the default settings
        reader = ReplayReader(run)
        rng = np.random.default_rng(0)
        window = reader.total_positions()
        started = time.perf_counter()
        reader.sample(1024, window, rng)
        cold = time.perf_counter() - started
        rounds = 200
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(rounds):
            reader.sample(1024, window, rng)
        hot = (time.perf_counter() - started) / rounds
        hot_cpu = (time.process_time() - cpu_started) / rounds
        started = time.perf_counter()
        reader.refresh()
        refresh = time.perf_counter() - started
        print(f"\nsample (batch 1024, window {window} positions, {reader.total_games()} games, one actor)")
        print(f"  first batch (loads the window): {1000 * cold:.0f} ms")
        print(f"  then: {1000 * hot:.2f} ms per batch wall = {1024 / hot:,.0f} positions/s "
              f"({1000 * hot_cpu:.2f} ms CPU = {1024 / hot_cpu:,.0f} positions/s)")
        print(f"  refresh with nothing new: {1000 * refresh:.1f} ms")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

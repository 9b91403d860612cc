"""`checkers-zero pdn ...`: PDN file tools. `pdn check FILE...` reads and replays every game and reports."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from zero.corpus.pdn import bounded_lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pdn_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="replay every game; print counts, results and each failure",
                           description="Read PDN files, replay every game through the rules and report: "
                                       "games read, games valid, positions, results, and each game that fails. "
                                       "Exit status 1 when any game fails, 2 when a file is missing.")
    check.add_argument("files", nargs="+", type=Path, metavar="FILE")
    check.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    if args.pdn_command == "check":
        return _check(args.files, progress=not args.no_progress)
    raise AssertionError(args.pdn_command)


def _counted_lines(handle: Iterable[str], bar) -> Iterator[str]:
    """The file's lines, moving the progress bar by characters (bytes for ASCII files) every few lines."""
    pending = 0
    for k, line in enumerate(bounded_lines(handle)):
        pending += len(line)
        if k % 2048 == 0:
            bar.update(pending)
            pending = 0
        yield line
    bar.update(pending)


def _check(files: list[Path], progress: bool) -> int:
    from tqdm import tqdm

    from zero.corpus.pdn import RESULTS, PdnError, read_pdn

    folders = [str(f) for f in files if f.is_dir()]
    if folders:
        print(f"error: a directory, not a PDN file: {', '.join(folders)}", file=sys.stderr)
        return 2
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        print(f"error: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    any_failure = False
    for path in files:
        started = time.perf_counter()
        read = valid = positions = 0
        results: Counter[str] = Counter()
        failures: list[PdnError] = []
        with open(path, encoding="utf-8-sig", errors="replace", newline=None) as handle, tqdm(
            total=os.path.getsize(path), unit="B", unit_scale=True, desc=path.name, disable=not progress,
            file=sys.stderr,
        ) as bar:
            for item in read_pdn(_counted_lines(handle, bar)):
                read += 1
                if isinstance(item, PdnError):
                    failures.append(item)
                    continue
                valid += 1
                positions += item.plies + 1
                results[item.result] += 1
        seconds = time.perf_counter() - started
        print(f"{path}")
        print(f"  games read:  {read}")
        print(f"  games valid: {valid}")
        print(f"  positions:   {positions} (in valid games, start position included: plies + 1 per game)")
        print("  results:     " + ", ".join(f"{r} {results[r]}" for r in RESULTS if results[r]))
        print(f"  failures:    {len(failures)}")
        for failure in failures:
            print(f"    {failure}")
        print(f"  time:        {seconds:.1f} s")
        any_failure = any_failure or bool(failures)
    return 1 if any_failure else 0

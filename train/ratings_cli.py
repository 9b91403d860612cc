"""`checkers-zero ratings --run DIR`: the run's ratings table and a PNG plot of rating against step."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default="runs/default", help="run directory (default runs/default)")
    p.add_argument("--plot", default=None, help="PNG file for the plot (default RUN/ratings.png)")


def run(args: argparse.Namespace) -> int:
    from train.gating import RATINGS_FILE
    from train.ratings import RatingsTable, format_table, plot

    run_dir = Path(args.run)
    path = run_dir / RATINGS_FILE
    if not path.exists():
        print(f"error: no ratings in {run_dir} yet ({path} is missing)")
        return 2
    table = RatingsTable.load(path)
    print(format_table(table))
    png = plot(table, Path(args.plot) if args.plot else run_dir / "ratings.png")
    print(f"plot written to {png}")
    return 0

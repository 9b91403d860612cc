"""`checkers-zero ratings --run DIR`: the run's ratings table and a PNG plot of rating against step."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default="runs/default", help="run directory (default runs/default)")
    p.add_argument("--plot", default=None, help="PNG file for the plot (default RUN/ratings.png)")


def run(args: argparse.Namespace) -> int:
    from train.arena.ratings import RatingsTable, checkpoint_points, format_table, plot
    from zero.run.rundir import RunDir

    run = RunDir(args.run)
    if not run.ratings.exists():
        print(f"error: no ratings in {run.root} yet ({run.ratings} is missing)")
        return 2
    table = RatingsTable.load(run.ratings)
    print(format_table(table))
    png = plot(table, Path(args.plot) if args.plot else run.ratings_plot)
    if checkpoint_points(table, table.fit()):
        print(f"plot written to {png}")
    else:  # before: an empty plot, with nothing said
        print(f"plot written to {png}: the yardsticks only, as no checkpoint of {run.root} is rated yet (the "
              f"gatekeeper rates the starting network and each promoted one with gating.rating_games games)")
    return 0

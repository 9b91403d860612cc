"""`checkers-zero report --run DIR`: training quality per checkpoint (train.arena.report) with a calibration plot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default="runs/default", help="run directory (default runs/default)")
    p.add_argument("--all", action="store_true",
                   help="every candidate still in the run (the gatekeeper deletes rejected and skipped ones), "
                        "not only the run's start and the promoted networks")
    p.add_argument("--selfplay-positions", type=int, default=4096, metavar="N",
                   help="self-play positions drawn (once, then kept in the run) for the held-out set")
    p.add_argument("--oca-positions", type=int, default=8192, metavar="N",
                   help="positions of the expert dataset's test split")
    p.add_argument("--expert-data", metavar="DIR",
                   help="expert dataset for the OCA set (default: the run's own, RUN/expert-oca)")
    p.add_argument("--plot", metavar="PNG", help="calibration plot (default RUN/report/calibration.png)")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from selfplay.replay.replay_buffer import ReplayError
    from train.arena.report import (checkpoint_quality, expert_held_out, format_report, plot_calibration,
                              report_checkpoints, selfplay_held_out)
    from zero.net.checkpoint import CheckpointError
    from zero.run.rundir import RunDir

    run_dir = RunDir(args.run)
    if not run_dir.is_run():
        print(f"error: {run_dir.root} is not a run directory", file=sys.stderr)
        return 2
    held_out = {}
    try:
        selfplay = selfplay_held_out(run_dir.root, args.selfplay_positions)
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if selfplay is not None:
        held_out["selfplay"] = selfplay
    expert = expert_held_out(Path(args.expert_data) if args.expert_data else run_dir.expert_data, args.oca_positions)
    if expert is not None:
        held_out["oca"] = expert
    if not held_out:
        print(f"error: nothing to score on: {run_dir.root} has no self-play positions and no expert dataset",
              file=sys.stderr)
        return 2
    checkpoints = report_checkpoints(run_dir.root, args.all)
    rows = []
    for name, step, path in tqdm(checkpoints, unit="checkpoint", desc="report", file=sys.stderr):
        try:
            rows.append((name, step, checkpoint_quality(path, held_out)))
        except CheckpointError as exc:
            print(f"skipped {path}: {exc}", file=sys.stderr)
    print(format_report(rows))
    png = plot_calibration(rows, Path(args.plot) if args.plot else run_dir.report_plot)
    print(f"calibration plot written to {png}")
    return 0

"""`checkers-zero distilled label|search|train|loop|ship`: label quiet positions with the shipped network's value,
score them by searches over a distilled evaluation, train the distilled evaluation (zero.distilled) that the
deep alpha-beta player searches with, run its own loop of generations, and ship the loop's best."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from zero.run.config import ConfigError, add_config_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="distilled_command", metavar="STEP", required=True)
    lb = sub.add_parser("label", help="value a dataset's quiet positions and random walks off them by a network "
                                      "(resumable)",
                        description="Label the quiet positions of a pretraining dataset, and of short random "
                                    "walks off them, with a network's win/draw/loss, the game's result and the "
                                    "endgame database's value, in chunk files beside the dataset; a run killed "
                                    "at any moment continues where it stopped.")
    lb.add_argument("--data", required=True, help="dataset directory written by `pretrain dataset`")
    lb.add_argument("--teacher", default=None, metavar="CHECKPOINT", help="the network (default: the shipped one)")
    lb.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_arguments(lb)
    se = sub.add_parser("search", help="score a label store's positions by fixed-depth searches over a distilled "
                                       "evaluation (resumable)",
                        description="Search every EVERY-th position of a label store DEPTH plies deep with the "
                                    "alpha-beta player over a distilled evaluation and its endgame database, in "
                                    "chunk files inside the store, for `distilled train --searched`; a run killed "
                                    "at any moment continues where it stopped.")
    se.add_argument("--labels", required=True, help="a label store written by `distilled label`")
    se.add_argument("--eval", default=None, help="the distilled evaluation (default: checkpoints/distilled.npz)")
    se.add_argument("--depth", type=int, default=6, help="plies of each search (default 6)")
    se.add_argument("--every", type=int, default=2, help="search every N-th position of each chunk (default 2)")
    se.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    se.add_argument("--quiet", action="store_true", help="no progress bar")
    tr = sub.add_parser("train", help="train the distilled evaluation on its labels",
                        description="Learn the distilled evaluation from label stores (of one teacher) and write "
                                    "it (the shipped one is checkpoints/distilled.npz); prints its held-out "
                                    "loss.")
    tr.add_argument("--labels", required=True, action="append", metavar="STORE",
                    help="a label store written by `distilled label`; repeat it to learn several stores together "
                         "(say, the OCA games' and the player's own games')")
    tr.add_argument("--out", required=True, help="the evaluation file to write, e.g. runs/distilled.npz "
                                                 "(checkpoints/distilled.npz, the shipped one, only with --force)")
    tr.add_argument("--force", action="store_true",
                    help="replace checkpoints/distilled.npz, the evaluation every distilled: player loads")
    tr.add_argument("--searched", default=None, metavar="DIR",
                    help="search scores of the labels (`distilled search`; one --labels store), blended in by "
                         "searched_weight")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_arguments(tr)
    lp = sub.add_parser("loop", help="generations of the distilled player learning from its own games (resumable)",
                        description="Cycles of self-play by the alpha-beta player at a fixed depth into the "
                                    "run's replay store, a candidate evaluation trained on its newest games, and "
                                    "an SPRT gate against the best at a bullet budget confirmed at 0.1 s a move; "
                                    "the winner becomes the run's best (train/loop/distilled_loop.py). Ctrl-C "
                                    "stops it; the same command resumes it. Settings: docs/distilled-loop.md.")
    lp.add_argument("--run", required=True, help="the run directory (made on the first start)")
    lp.add_argument("--cycles", type=int, default=None, help="cycles to run now (default: the config's, 0 = until "
                                                             "stopped)")
    add_config_arguments(lp)
    sh = sub.add_parser("ship", help="make a distilled loop's best generation the shipped evaluation",
                        description="Copy the run's best generation over checkpoints/distilled.npz, the "
                                    "evaluation every distilled: player loads, when the run started from it "
                                    "(its gates then played the chain back to it); prints the lineage for the "
                                    "model card (checkpoints/README.md).")
    sh.add_argument("--run", required=True, help="the distilled loop's run directory")
    sh.add_argument("--force", action="store_true",
                    help="ship it even when the run's generation 0 is not the shipped evaluation")


def destination_problem(out: Path, force: bool) -> str | None:
    """Why the evaluation cannot be written to `out`, said before the training it would lose (None: it can):
    the shipped evaluation without --force, a directory, a folder that is a file or cannot be made or written."""
    from zero.distilled.model import DEFAULT_DISTILLED

    if not force and out.resolve() == DEFAULT_DISTILLED.resolve() and DEFAULT_DISTILLED.exists():
        # The tracked file: every distilled: player would play whatever a trial training wrote, without a word.
        return (f"{DEFAULT_DISTILLED} is the evaluation every distilled: player loads; give another --out, or "
                f"--force to replace it")
    if out.is_dir():
        return f"{out}: a directory, not an evaluation file"
    folder = out.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # A file made and dropped there: the one test that every place a write can fail (/proc, a read-only
        # or full disk, permissions) answers as the write would.
        tempfile.TemporaryFile(dir=folder).close()
    except (FileExistsError, NotADirectoryError):
        return f"cannot write {out}: a file stands where its folder {folder} would be"
    except OSError as exc:
        return f"cannot write {out}: {exc.strerror or exc}"
    return None


def run(args: argparse.Namespace) -> int:
    from train.learner.distilled.labels import (
        DistilledLabelConfig, DistilledLabelError, label, read_label_stores)
    from train.learner.distilled.searched import read_searched, search_label
    from train.learner.distilled.training import DistilledTrainConfig, train
    from train.learner.pretrain_dataset import DatasetError, PretrainDataset
    from zero.distilled.model import DEFAULT_DISTILLED, DistilledFileError
    from zero.net.checkpoint import DEFAULT_CHECKPOINT, CheckpointError
    from zero.run.config import load_config

    if args.distilled_command == "loop":
        return _loop(args)
    if args.distilled_command == "ship":
        return _ship(args)
    try:
        if args.distilled_command == "label":
            from zero.endgames.egdb_build import largest_available

            cfg = load_config(DistilledLabelConfig, args.config, args.overrides)
            store = label(PretrainDataset.open(args.data), args.teacher or DEFAULT_CHECKPOINT, cfg,
                          largest_available(), progress=not args.quiet)
            print(f"labels in {store}")
            return 0
        if args.distilled_command == "search":
            store = search_label(Path(args.labels), Path(args.eval or DEFAULT_DISTILLED), args.depth, args.every,
                                 args.workers, progress=not args.quiet)
            print(f"search scores in {store}")
            return 0
        from zero.endgames.egdb_build import largest_available

        cfg = load_config(DistilledTrainConfig, args.config, args.overrides)
        problem = destination_problem(Path(args.out), args.force)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        stores = [Path(store) for store in args.labels]
        if args.searched and len(stores) > 1:
            raise DistilledLabelError(f"--searched scores the labels of one store, and {len(stores)} are given")
        labels, made_by = read_label_stores(stores)
        searched = read_searched(Path(args.searched), stores[0]) if args.searched else None
        made_from = ({"labels": str(stores[0]), **made_by[0]} if len(stores) == 1
                     else {"labels": [str(store) for store in stores], "made_by": made_by})
        made_from["labels_positions"] = len(labels["black"])
        if searched is not None:
            made_from["searched"] = str(args.searched)
        held = train(labels, cfg, args.out, made_from, progress=not args.quiet, egdb=largest_available(),
                     searched=searched)
    except (ConfigError, DatasetError, DistilledLabelError, DistilledFileError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.out}: held-out cross-entropy {held.loss_vs_teacher:.4f} against the teacher's value "
          f"(its own entropy {held.teacher_entropy:.4f}, a constant guess {held.constant_vs_teacher:.4f}), "
          f"{held.loss_vs_target:.4f} against the blended target; {held.positions:,} test positions")
    if "endgame_mistake_rate" in held.extra:
        print(f"solved-endgame mistakes of its one-ply choice: {held.extra['endgame_mistake_rate']:.2%} of "
              f"{held.extra['endgame_moves_judged']:,} database moves with a choice")
    return 0


def _ship(args: argparse.Namespace) -> int:
    from train.shipping.distilled import ShipError, ship_best
    from zero.distilled.model import DEFAULT_DISTILLED, DistilledFileError
    from zero.run.rundir import RunDirError

    try:
        lines = ship_best(Path(args.run), DEFAULT_DISTILLED, args.force)
    except (ShipError, DistilledFileError, RunDirError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


def _loop(args: argparse.Namespace) -> int:
    import logging

    from selfplay.replay.replay_buffer import ReplayError
    from train.learner.distilled.labels import DistilledLabelError
    from train.loop.distilled_loop import resolve_config, run_distilled_loop
    from zero.distilled.model import DistilledFileError
    from zero.net.checkpoint import CheckpointError
    from zero.run.rundir import RunDir, RunDirError

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        cfg = resolve_config(RunDir(args.run), args.config, args.overrides + (
            [f"cycles={args.cycles}"] if args.cycles is not None else []))
        return run_distilled_loop(Path(args.run), cfg)
    except (ConfigError, ValueError, CheckpointError, DistilledFileError, DistilledLabelError, ReplayError,
            RunDirError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

"""`checkers-zero pretrain dataset|label|train`: build an expert-game dataset from PDN, label its positions with
deeper searches of a player, train the network on it."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from zero.run.config import ConfigError, add_config_arguments

if TYPE_CHECKING:
    from zero.net.network import NetworkConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pretrain_command", metavar="STEP", required=True)

    ds = sub.add_parser("dataset", help="turn a PDN file into a zarr dataset split by game",
                        description="Replay every game of a PDN file and store its positions, expert moves "
                                    "and results as a zarr dataset with a train/val/test split by game.")
    ds.add_argument("--pdn", required=True, help="PDN file, e.g. ../shared/data/OCA_2.0.pdn")
    ds.add_argument("--out", required=True, help="dataset directory to write (replaced if it exists)")
    ds.add_argument("--quiet", action="store_true", help="no progress bars")
    add_config_arguments(ds)

    lb = sub.add_parser("label", help="label a dataset's positions with deeper searches of a player (resumable)",
                        description="Search the dataset's train positions with a player's network and add "
                                    "their visit shares and values to a store beside the dataset, in one fixed "
                                    "order, so that every run (and every session) continues where the last "
                                    "stopped; `pretrain train --teacher ... --set search_labels=auto` trains on "
                                    "them. Ctrl-C keeps what is finished.")
    lb.add_argument("--data", required=True, help="dataset directory written by `pretrain dataset`")
    lb.add_argument("--teacher", required=True, metavar="CHECKPOINT",
                    help="the network whose searches label the positions, e.g. checkpoints/shipped.pt")
    lb.add_argument("--simulations", help="root visits a position (default 800; the same as --set simulations=N)")
    lb.add_argument("--minutes", help="stop after this many minutes (--set minutes=M)")
    lb.add_argument("--positions", help="stop after this many more labels (--set positions=N)")
    lb.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_arguments(lb)

    tr = sub.add_parser("train", help="train the policy-value network on a dataset",
                        description="Train on the train split, validate periodically, resume from the run "
                                    "directory's last checkpoint, and report test-split metrics and baselines.")
    tr.add_argument("--data", required=True, help="dataset directory written by `pretrain dataset`")
    tr.add_argument("--out", required=True, help="final checkpoint file, e.g. runs/my-model.pt (`checkers-zero ship` makes a network the shipped one)")
    tr.add_argument("--run-dir", help="where resumable checkpoints, the run record and wandb files go "
                                      "(default runs/pretrain-<name of --out>)")
    tr.add_argument("--net", choices=("small", "large"),
                    help="network preset (default small); it replaces the config file's [network] values, "
                         "and --set network.KEY=VALUE still changes single fields")
    tr.add_argument("--teacher", metavar="CHECKPOINT",
                    help="distil: learn this network's policy, win/draw/loss and plies left (e.g. "
                         "checkpoints/shipped.pt) instead of the games' moves and results; --set "
                         "teacher_positions=N adds N positions of its own games")
    tr.add_argument("--init", metavar="CHECKPOINT",
                    help="fine-tune: start from this network's weights, in its shape (--set init=... takes the "
                         "shape from --net and the config instead, and must match it)")
    tr.add_argument("--no-wandb", action="store_true", help="no wandb logging at all (default: offline files)")
    tr.add_argument("--compile", action="store_true", help="torch.compile the network")
    tr.add_argument("--restart", action="store_true", help="ignore an existing run and start from step 0")
    tr.add_argument("--quiet", action="store_true", help="no progress bars")
    add_config_arguments(tr)


def run(args: argparse.Namespace) -> int:
    from zero.run.config import load_config

    if args.pretrain_command == "dataset":
        from train.learner.pretrain_dataset import DatasetConfig, DatasetError, build_dataset, format_summary

        try:
            cfg = load_config(DatasetConfig, args.config, args.overrides)
            summary = build_dataset(args.pdn, args.out, cfg, progress=not args.quiet)
        except (ConfigError, DatasetError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(format_summary(summary))
        print(f"dataset written to {args.out}")
        return 0

    if args.pretrain_command == "label":
        return _label(args)

    from pathlib import Path

    from train.learner.pretrain import PretrainConfig, PretrainError, train
    from train.learner.pretrain_dataset import DatasetError
    from zero.net.network import NetworkConfig

    if args.net and args.init:
        print("error: --init trains in its checkpoint's shape; drop --net", file=sys.stderr)
        return 2
    overrides = []
    if args.net:
        overrides = _network_settings(NetworkConfig.large() if args.net == "large" else NetworkConfig.small())
    if args.init:
        from zero.net.checkpoint import CheckpointError, load_checkpoint

        try:
            overrides = _network_settings(load_checkpoint(args.init).net_config) + [f"init={args.init}"]
        except CheckpointError as exc:
            print(f"error: --init: {exc}", file=sys.stderr)
            return 2
    if args.compile:
        overrides.append("compile=true")
    if args.teacher:
        overrides.append(f"teacher={args.teacher}")
    if args.no_wandb:
        overrides.append("wandb_mode=disabled")
    try:
        cfg = load_config(PretrainConfig, args.config, overrides + args.overrides)
        run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / f"pretrain-{Path(args.out).stem}"
        train(cfg, args.data, args.out, run_dir, restart=args.restart, progress=not args.quiet)
    except (ConfigError, DatasetError, PretrainError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _label(args: argparse.Namespace) -> int:
    from train.learner.pretrain_dataset import DatasetError, PretrainDataset
    from train.learner.search_labels import LabelConfig, LabelError, label
    from zero.net.checkpoint import CheckpointError
    from zero.run.config import load_config

    flags = [f"{name}={value}" for name in ("simulations", "minutes", "positions")
             if (value := getattr(args, name)) is not None]
    try:
        cfg = load_config(LabelConfig, args.config, flags + args.overrides)
        summary = label(PretrainDataset.open(args.data), args.teacher, cfg, progress=not args.quiet)
    except (ConfigError, DatasetError, LabelError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rate = summary.added / max(summary.seconds, 1e-9)
    print(f"{summary.added:,} labels added in {summary.seconds:.0f} s ({rate:.2f} positions/s); {summary.path} "
          f"holds {summary.total:,} of the {summary.order:,} positions to label")
    return 0


def _network_settings(network: NetworkConfig) -> list[str]:
    """A network's shape as --set overrides, which replace the config file's [network] values."""
    return [f"network.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in network.to_dict().items()]

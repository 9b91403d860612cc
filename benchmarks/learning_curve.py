"""Learning curves: how much stronger a loop configuration makes the network per minute of this machine.

    python benchmarks/learning_curve.py NAME [--config FILE] [--set KEY=VALUE ...] [--minutes 30]
        [--every 10] [--from checkpoints/shipped.pt] [--out runs/curves] [--dataset runs/expert-oca]
        [--games 24] [--calibration-games 24]

1. Training. `checkers-zero loop` runs configuration NAME (the loop's defaults, a TOML file and --set
   overrides, as the loop takes them) from a fixed start, with the loop's fixed seeds, on the whole machine,
   in segments of --every minutes up to --minutes: after each segment the run's best network (what the
   promotion rule has promoted by then) is kept as a snapshot. The loop's own rating and calibration games
   are off (the ladder below rates the networks). A CPU-minute is a minute of one core: the loop
   uses every core, so the curves are drawn against minutes x cores.
2. Strength. Every snapshot, and the start, plays the fixed ladder (LADDER: yardsticks that do not change
   with the code's networks) with the gatekeeper's rating games (gating's fixed search, --games games per
   yardstick, both colours), all recorded in one ratings table under --out with the yardsticks calibrated
   once: every configuration measured under one --out is on one Elo scale, with 95 % intervals.
3. Judgement. Each snapshot's top-1 against the expert's move and value cross-entropy on the OCA test split
   (the dataset of `checkers-zero pretrain dataset`).

Prints the curves as a table and writes OUT/curves.png with every configuration measured so far. The first
configuration under --out fixes the start (copied to OUT/start.pt); a later one must name the same network.
Everything resumes: a finished segment, a recorded rating match or a scored snapshot is not done again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from train.arena.gating import Gatekeeper, GatingConfig
from train.arena.ratings import RatingsTable
from train.shipping.ship import raw_policy_on_test_split
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint, resolve_checkpoint
from zero.run.config import atomic_write_bytes

# Above the random and shallow yardsticks that every network passes, near the network at gating's search: the
# ones whose results move as the network learns (alphabeta:12 would add little to classical:10 at three times
# its time a move).
LADDER = ["alphabeta:6", "alphabeta:8", "classical:10"]
START = "start"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fixed_start(out: Path, source: Path) -> Path:
    """OUT/start.pt, copied from `source` on first use; a later configuration must start from the same
    network, or its curve would not be comparable."""
    start = out / f"{START}.pt"
    if not start.exists():
        load_checkpoint(source)  # a bad file is refused before anything is written
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(start, source.read_bytes())
    elif sha256(start) != sha256(source):
        sys.exit(f"error: {out} holds curves from {start} (another network than {source}); use another --out")
    return start


def train_segments(name: str, args: argparse.Namespace, start: Path, curve: dict, save) -> None:
    """The loop in segments of --every minutes up to --minutes, a snapshot of its best network after each."""
    run = args.out / name / "run"
    start_digest = sha256(start)
    # The benchmark rates the networks on its own ladder: the loop's own rating and calibration games would
    # only take CPU from the learning (a --set may still ask for them).
    loop = [sys.executable, "-m", "play.cli.main", "loop", "--run", str(run), "--from", str(start),
            "--set", "gating.rating_games=0", "--set", "gating.calibration_games=0"]
    if args.config:
        loop += ["--config", args.config]
    for override in args.set:
        loop += ["--set", override]
    done = max((p["minutes"] for p in curve["points"]), default=0.0)
    while done < args.minutes - 1e-9:
        segment = min(args.every, args.minutes - done)
        print(f"{name}: loop minutes {done:g} .. {done + segment:g}", flush=True)
        code = subprocess.run(loop + ["--minutes", f"{segment:g}"]).returncode
        if code != 0:
            sys.exit(f"error: the loop ended with exit status {code}; fix the cause and run this again to resume")
        done += segment
        best = resolve_checkpoint(run)
        digest = sha256(best)
        earlier = [p for p in curve["points"] if p["sha256"] == digest]
        if digest == start_digest:  # nothing promoted yet (the run's copy of the start is byte for byte)
            stem = START
        elif earlier:  # nothing promoted since: the same network, rated and scored once
            stem = earlier[-1]["snapshot"]
        else:
            snapshot = args.out / "snapshots" / f"{name}-{done:g}m.pt"
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(best, snapshot)
            stem = snapshot.stem
        curve["points"].append({"minutes": done, "snapshot": stem, "sha256": digest,
                                "step": load_checkpoint(best).step})
        save()


def rate(args: argparse.Namespace, snapshots: list[Path]) -> dict:
    """Every snapshot against the ladder, in the ratings table shared under --out; the fitted ratings."""
    ladder = args.out / "ladder"
    keeper = Gatekeeper(ladder, GatingConfig(rating_games=args.games, rating_yardsticks=LADDER,
                                             calibration_games=args.calibration_games,
                                             torch_threads=os.cpu_count() or 1))
    keeper.calibrate_yardsticks()
    for path in snapshots:
        print(f"rating {path.stem} against {', '.join(LADDER)} ({args.games} games each)", flush=True)
        keeper.rate(path, load_checkpoint(path).step)
    return RatingsTable.load(keeper.ratings_path).fit()


def judgement(args: argparse.Namespace, path: Path, scores: dict) -> dict:
    """Top-1 and value cross-entropy of a snapshot on the OCA test split, computed once."""
    if path.stem not in scores:
        measured = raw_policy_on_test_split(load_checkpoint(path), args.dataset)
        if measured is None:
            sys.exit(f"error: no pretraining dataset at {args.dataset} (checkers-zero pretrain dataset --out "
                     f"{args.dataset})")
        scores[path.stem] = {"top1": measured["top1"], "value_ce": measured["value_ce"]}
    return scores[path.stem]


def plot(curves: dict, ratings: dict, scores: dict, cores: int, out_png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (elo_ax, top1_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, curve in curves.items():
        points = [{"minutes": 0.0, "snapshot": START}] + curve["points"]
        x = [p["minutes"] * cores for p in points]
        rated = [(xi, ratings[p["snapshot"]]) for xi, p in zip(x, points) if p["snapshot"] in ratings]
        elo_ax.errorbar([xi for xi, _ in rated], [r.elo for _, r in rated], yerr=[r.ci95_ref for _, r in rated],
                        marker="o", capsize=3, label=name)
        scored = [(xi, scores[p["snapshot"]]["top1"] * 100) for xi, p in zip(x, points) if p["snapshot"] in scores]
        top1_ax.plot([xi for xi, _ in scored], [t for _, t in scored], marker="o", label=name)
    elo_ax.set(xlabel="CPU-minutes", ylabel="Elo (95 % interval)", title="Strength against the ladder")
    top1_ax.set(xlabel="CPU-minutes", ylabel="top-1 on the OCA test split (%)", title="Raw policy")
    for ax in (elo_ax, top1_ax):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the configuration's name (its curve and snapshots are kept under it)")
    parser.add_argument("--config", default=None, help="the loop's TOML settings file")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a loop setting")
    parser.add_argument("--minutes", type=float, default=30.0, help="wall minutes of loop in all")
    parser.add_argument("--every", type=float, default=10.0, help="wall minutes between snapshots")
    parser.add_argument("--from", dest="source", default=str(DEFAULT_CHECKPOINT), help="the start network")
    parser.add_argument("--out", type=Path, default=Path("runs/curves"))
    parser.add_argument("--dataset", default="runs/expert-oca", help="a pretraining dataset (its test split)")
    parser.add_argument("--games", type=int, default=24, help="rating games per yardstick and snapshot")
    parser.add_argument("--calibration-games", type=int, default=24,
                        help="games between neighbouring yardsticks, played once under --out")
    args = parser.parse_args()
    if not (args.minutes > 0 and args.every > 0 and args.games > 0):
        sys.exit("error: --minutes, --every and --games must be positive")
    start = fixed_start(args.out, resolve_checkpoint(args.source))

    record = args.out / "curves.json"
    state = json.loads(record.read_text()) if record.exists() else {"curves": {}, "scores": {}}
    curve = state["curves"].setdefault(args.name, {"config": args.config, "set": args.set, "points": []})
    if (curve["config"], curve["set"]) != (args.config, args.set):
        sys.exit(f"error: {args.name} was measured with --config {curve['config']} --set {curve['set']}; "
                 f"name a changed configuration differently")

    def save() -> None:
        atomic_write_bytes(record, json.dumps(state, indent=1).encode())

    train_segments(args.name, args, start, curve, save)
    snapshots = [start] + [args.out / "snapshots" / f"{stem}.pt"
                           for stem in dict.fromkeys(p["snapshot"] for p in curve["points"]) if stem != START]
    ratings = rate(args, snapshots)
    for path in snapshots:
        judgement(args, path, state["scores"])
        save()

    cores = os.cpu_count() or 1
    print(f"\n{args.name}: the loop on {cores} cores from {args.source}; Elo against the ladder "
          f"(interval of the difference to a fixed yardstick), OCA test split")
    print("| CPU-minutes | network | step | Elo | top-1 | value CE |")
    print("|---:|---|---:|---:|---:|---:|")
    for p in [{"minutes": 0.0, "snapshot": START, "step": load_checkpoint(start).step}] + curve["points"]:
        r, s = ratings.get(p["snapshot"]), state["scores"][p["snapshot"]]
        elo = f"{r.elo:+.0f} ± {r.ci95_ref:.0f}" if r else "-"
        print(f"| {p['minutes'] * cores:g} | {p['snapshot']} | {p['step']} | {elo} | {s['top1']:.2%} | "
              f"{s['value_ce']:.4f} |")
    plot(state["curves"], ratings, state["scores"], cores, args.out / "curves.png")
    print(f"\nplot: {args.out / 'curves.png'}")


if __name__ == "__main__":
    main()

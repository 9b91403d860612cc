"""Network size study (issue 13 part 2): which tower plays best at 0.1 s a move on one CPU core?

    python benchmarks/size_study.py --minutes 25 [--sizes 4x48 6x64 8x96] [--out runs/size-study]
    python benchmarks/size_study.py --epochs 4 --sizes 4x48 6x64 --out runs/converge
    python benchmarks/split_match.py "mcts:runs/size-study/4x48.pt:t0.1" "mcts:runs/size-study/6x64.pt:t0.1"

1. Pretraining, in one of two ways. Everything else is `pretrain train`'s defaults; only the tower (blocks x
   channels) and the steps change.
   - With one time budget (--minutes): every size trains on OCA at the same time, one torch thread each, so
     they share the machine equally. A probe first measures each size's training rate under that sharing; each
     run is then given the steps that fit in --minutes, so that every one-cycle schedule completes (a run cut by
     a time limit would end at a high learning rate and look worse than it is).
   - To convergence (--epochs): every size sees the same number of epochs of the train split, one size after
     another with all of torch's threads, validated twice an epoch so the learning curve shows where it flattens.
2. Quality: the test split's top-1 on expert moves and value cross-entropy, as `pretrain train` reports them.
3. Speed, each size alone on one thread with the fastest CPU backend (ONNX Runtime): positions/s at 16
   positions a call (what GameSearch sends), and the simulations a move in a game at 0.1 s a move
   (GameSearch, cache on, tree kept: what `play` and a `mcts:NET:tS` match player do).
Then the equal-time match (the second command) says which plays best. A finished size is not trained again:
delete its .pt to redo it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from network_bench import planes_of, random_positions, timed
from selfplay.tree_search.analysis import SINGLE_GAME_LEAVES
from single_game_bench import play_one_game
from selfplay.tree_search.evaluators import CachedEvaluator
from selfplay.tree_search.search import SearchConfig
from train.learner.learning import HeadWeights, Learner, OptimConfig
from train.learner.pretrain_dataset import PretrainDataset
from zero.net.checkpoint import load_checkpoint
from zero.net.inference import Evaluator
from zero.net.network import NetworkConfig, PolicyValueNet, parameter_count
from zero.run.data import require_data_file


def tower(size: str) -> NetworkConfig:
    blocks, channels = (int(x) for x in size.split("x"))
    return NetworkConfig(blocks=blocks, channels=channels)


def probe_rate(size: str, data_dir: str, seconds: float, batch: int, queue: mp.Queue) -> None:
    """Training samples/s of one size on one thread (run beside the other sizes' probes)."""
    torch.set_num_threads(1)
    data = PretrainDataset.open(data_dir)
    learner = Learner(PolicyValueNet(tower(size)), OptimConfig(), HeadWeights(), torch.device("cpu"))
    rows = data.rows("train")
    rng = np.random.default_rng(0)
    learner.step(data.samples(np.sort(rng.choice(rows, batch))), 1e-3)  # warm-up
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        learner.step(data.samples(np.sort(rng.choice(rows, batch))), 1e-3)
        steps += 1
    queue.put((size, steps * batch / (time.perf_counter() - start)))


def pretrain_command(size: str, data_dir: str, out: Path, steps: int, batch: int, *settings: str) -> list[str]:
    net = tower(size)
    command = [sys.executable, "-m", "play.cli.main", "pretrain", "train", "--data", data_dir,
               "--out", str(out / f"{size}.pt"), "--run-dir", str(out / f"pretrain-{size}"), "--no-wandb",
               "--quiet", "--restart", "--set", f"network.blocks={net.blocks}",
               "--set", f"network.channels={net.channels}", "--set", f"steps={steps}",
               "--set", f"batch_size={batch}", "--set", "baseline_positions=1"]
    for setting in settings:
        command += ["--set", setting]
    return command


def start_pretraining(size: str, out: Path, command: list[str]) -> tuple[str, subprocess.Popen, object]:
    log = open(out / f"pretrain-{size}.log", "w")
    return size, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log


def finish_pretraining(out: Path, size: str, proc: subprocess.Popen, log) -> None:
    if proc.wait() != 0:
        raise SystemExit(f"pretraining {size} failed: see {out / f'pretrain-{size}.log'}")
    log.close()


def pretrain_with_budget(todo: list[str], data_dir: str, out: Path, minutes: float, probe_seconds: float,
                         batch: int) -> dict[str, float]:
    queue: mp.Queue = mp.get_context("spawn").Queue()
    probes = [mp.get_context("spawn").Process(target=probe_rate, args=(s, data_dir, probe_seconds, batch, queue))
              for s in todo]
    for p in probes:
        p.start()
    rates = dict(queue.get() for _ in probes)
    for p in probes:
        p.join()
    runs = []
    for size in todo:
        steps = max(int(rates[size] * minutes * 60 / batch), 20)
        print(f"{size}: {rates[size]:.0f} samples/s while sharing -> {steps} steps "
              f"({steps * batch:,} samples) in {minutes:g} minutes", flush=True)
        every = max(steps // 5, 1)
        runs.append(start_pretraining(size, out, pretrain_command(
            size, data_dir, out, steps, batch, "threads=1", f"eval_every={every}", f"checkpoint_every={every}",
            "val_positions=4096", f"max_minutes={minutes * 1.5:g}")))
    for run in runs:
        finish_pretraining(out, *run)
    return rates


def pretrain_for_epochs(todo: list[str], data_dir: str, out: Path, epochs: float, batch: int) -> None:
    per_epoch = len(PretrainDataset.open(data_dir).rows("train")) // batch
    steps = max(int(epochs * per_epoch), 20)
    for size in todo:
        print(f"{size}: {epochs:g} epochs = {steps} steps of {batch}", flush=True)
        finish_pretraining(out, *start_pretraining(size, out, pretrain_command(
            size, data_dir, out, steps, batch, f"eval_every={max(per_epoch // 2, 1)}")))


def speed(net: PolicyValueNet, seconds: float, plies: int) -> dict:
    """Inference positions/s at 16 a call and simulations a move at `seconds` a move, one thread."""
    torch.set_num_threads(1)
    evaluator = Evaluator(net, "cpu")
    planes = planes_of(random_positions(SINGLE_GAME_LEAVES)[0], SINGLE_GAME_LEAVES)
    per_s = timed(lambda: evaluator.evaluate(planes), SINGLE_GAME_LEAVES, 3.0)
    config = SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES)
    game = play_one_game(CachedEvaluator(evaluator), config, seconds, plies)
    return {"backend": evaluator.backend, "inference_16": per_s, "sims_per_move": game["sims"],
            "root_visits_per_move": game["root"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["4x48", "6x64", "8x96"], help="towers, BLOCKSxCHANNELS")
    parser.add_argument("--minutes", type=float, default=25.0, help="pretraining budget of every size")
    parser.add_argument("--epochs", type=float, default=0.0,
                        help="instead of --minutes: train every size for this many epochs, one after another")
    parser.add_argument("--probe-seconds", type=float, default=60.0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--data", default=None, help="pretraining dataset (default: build one from OCA in OUT/oca)")
    parser.add_argument("--out", default="runs/size-study")
    parser.add_argument("--seconds", type=float, default=0.1, help="time a move for the speed figure")
    parser.add_argument("--plies", type=int, default=30)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data_dir = args.data or str(out / "oca")
    if not Path(data_dir).exists():
        subprocess.run([sys.executable, "-m", "play.cli.main", "pretrain", "dataset", "--quiet", "--out", data_dir,
                        "--pdn", str(require_data_file("OCA_2.0.pdn"))], check=True)
    print(f"load average {os.getloadavg()[0]:.1f} at start", flush=True)
    todo = [s for s in args.sizes if not (out / f"{s}.pt").exists()]
    rates: dict[str, float] = {}
    if todo and args.epochs:
        pretrain_for_epochs(todo, data_dir, out, args.epochs, args.batch)
    elif todo:
        rates = pretrain_with_budget(todo, data_dir, out, args.minutes, args.probe_seconds, args.batch)
    results = {}
    for size in args.sizes:
        ck = load_checkpoint(out / f"{size}.pt")
        net, m = ck.build_network(), ck.metrics or {}
        results[size] = {"parameters": parameter_count(net), "steps": m.get("steps"),
                         "samples": m.get("samples_seen"), "probe_samples_per_s": rates.get(size),
                         "top1": m["policy"]["top1"], "value_ce": m["value"]["ce"],
                         **speed(net, args.seconds, args.plies)}
        print(size, json.dumps(results[size]), flush=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(f"\n| tower | parameters | samples seen | test top-1 | value CE | ONNX pos/s at 16 | sims/move at "
          f"{args.seconds:g} s |\n|---|---:|---:|---:|---:|---:|---:|")
    for size, r in results.items():
        print(f"| {size} | {r['parameters']:,} | {r['samples']:,} | {r['top1']:.1%} | {r['value_ce']:.3f} | "
              f"{r['inference_16']:,.0f} | {r['sims_per_move']:,.0f} |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

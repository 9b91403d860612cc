"""Network speed: inference positions/s at several batch sizes and training samples/s, per network size.

    python benchmarks/network_bench.py                      # small and large presets, CPU (and CUDA if present)
    python benchmarks/network_bench.py --nets small --threads 1 --seconds 5
    python benchmarks/network_bench.py --nets --checkpoint checkpoints/shipped.pt --threads 1 --compile

Inference goes through zero.net.inference.Evaluator (numpy in and out, bf16 autocast on CUDA), so the figures
include the host-device copies a search pays. Training runs the one training step (train.learner.learning.Learner:
masked policy loss, WDL and moves-left losses, AdamW, gradient clipping) on samples of random legal
positions, batches built as for any source (planes and legal masks encoded per batch by the numba kernels).
Each figure is the median of repeated timed windows after a warm-up; it prints wall time, so on a shared
machine it measures what the process got, and says the load average next to it.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from train.learner.learning import SOURCES, HeadWeights, Learner, OptimConfig, Samples
from zero.net.checkpoint import load_checkpoint
from zero.net.encoding import NUM_PLANES, encode_batch, move_action
from zero.net.inference import Evaluator
from zero.net.network import NetworkConfig, PolicyValueNet, parameter_count
from zero.rules.game import Position

PRESETS = {"small": NetworkConfig.small, "large": NetworkConfig.large}


def random_positions(n: int, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """n positions from random games (with a random legal move as the "expert" move) as dataset columns."""
    rng = np.random.default_rng(seed)
    cols = {k: [] for k in ("black", "white", "kings", "black_to_move")}
    actions = []
    pos = Position.initial()
    while len(actions) < n:
        moves = pos.legal_moves()
        if not moves or rng.random() < 0.01:
            pos = Position.initial()
            continue
        move = moves[int(rng.integers(len(moves)))]
        for k in cols:
            cols[k].append(getattr(pos, k))
        actions.append(move_action(move, pos.black_to_move))
        pos = pos.play(move)
    arrays = {k: np.array(v, dtype=np.bool_ if k == "black_to_move" else np.int64) for k, v in cols.items()}
    return arrays, np.array(actions, dtype=np.int64)


def samples_of(cols: dict[str, np.ndarray], actions: np.ndarray, rows: np.ndarray) -> Samples:
    """Training samples of the given rows: the random move as a one-hot policy target, arbitrary results."""
    n = len(rows)
    ones = np.ones(n, dtype=np.float32)
    return Samples(
        black=cols["black"][rows], white=cols["white"][rows], kings=cols["kings"][rows],
        black_to_move=cols["black_to_move"][rows], no_progress=np.zeros(n, np.int64), repetitions=np.ones(n, np.int64),
        policy_actions=actions[rows, None], policy_probs=ones[:, None], wdl=(rows % 3).astype(np.int64),
        moves_left=np.full(n, 40.0, np.float32), policy_weight=ones, value_weight=ones, moves_left_weight=ones,
        source=np.full(n, SOURCES.index("expert"), np.int8))


def planes_of(cols: dict[str, np.ndarray], count: int) -> np.ndarray:
    b, w, k, s = (cols[x][:count] for x in ("black", "white", "kings", "black_to_move"))
    planes = np.empty((count, NUM_PLANES, 8, 8), dtype=np.float32)
    encode_batch(b, w, k, s, np.zeros(count, dtype=np.int64), np.ones(count, dtype=np.int64), planes)
    return planes


def timed(fn, items_per_call: int, seconds: float, warmup: int = 2) -> float:
    """Median items/s over windows of about 0.5 s, for `seconds` in total."""
    for _ in range(warmup):
        fn()
    rates = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(rates) < 3:
        start = time.perf_counter()
        calls = 0
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed > 0.5:
                break
        rates.append(calls * items_per_call / elapsed)
    return float(np.median(rates))


def bench_inference(net: PolicyValueNet, device: str, batches: list[int], seconds: float,
                    planes_pool: np.ndarray) -> dict[int, float]:
    ev = Evaluator(net, device=device)
    out = {}
    for bs in batches:
        planes = planes_pool[:bs]
        out[bs] = timed(lambda: ev.evaluate(planes), bs, seconds)
    return out


def bench_training(cfg: NetworkConfig, device: str, batch_size: int, seconds: float,
                   cols: dict[str, np.ndarray], actions: np.ndarray, compile: bool = False,
                   bf16: bool | None = None, contiguous: bool = False) -> float:
    dev = torch.device(device)
    learner = Learner(PolicyValueNet(cfg), OptimConfig(), HeadWeights(), dev, compile=compile, bf16=bf16)
    if contiguous:
        # The layout the CPU trainer had before it went channels-last; in place, so the optimizer keeps its
        # parameters.
        learner.net.to(memory_format=torch.contiguous_format)
    rng = np.random.default_rng(1)

    def step() -> None:
        rows = np.sort(rng.choice(len(actions), size=batch_size, replace=False))
        learner.step(samples_of(cols, actions, rows), 1e-3)
        if dev.type == "cuda":
            torch.cuda.synchronize()

    return timed(step, batch_size, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", nargs="*", default=["small", "large"], choices=sorted(PRESETS))
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 64, 1024])
    parser.add_argument("--train-batch", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per figure")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    parser.add_argument("--checkpoint", default="",
                        help="also time the network shape of this checkpoint (the loop's is the shipped one's)")
    parser.add_argument("--compile", action="store_true",
                        help="also time the training step under torch.compile (trainer.compile)")
    parser.add_argument("--bf16", action="store_true",
                        help="also time the training step in bf16 autocast (trainer.precision = bfloat16)")
    parser.add_argument("--contiguous", action="store_true",
                        help="also time the training step with the weights in the default (NCHW) layout, where "
                             "the CPU trainer keeps them channels-last")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    cols, actions = random_positions(max(4096, max(args.batches), args.train_batch * 4))
    pool = planes_of(cols, max(args.batches))
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch threads "
          f"{torch.get_num_threads()}, GPU {gpu}; load average {os.getloadavg()[0]:.1f} at start")
    print("| net | params | device | " + " | ".join(f"inference b={b} pos/s" for b in args.batches)
          + f" | training b={args.train_batch} samples/s |")
    print("|---|---:|---|" + "---:|" * (len(args.batches) + 1))
    shapes = [(name, PRESETS[name]()) for name in args.nets]
    if args.checkpoint:
        shapes.append((Path(args.checkpoint).name, load_checkpoint(args.checkpoint).net_config))
    for name, cfg in shapes:
        torch.manual_seed(0)
        net = PolicyValueNet(cfg)
        for device in devices:
            inf = bench_inference(net, device, args.batches, args.seconds, pool)
            tr = bench_training(cfg, device, args.train_batch, args.seconds * 2, cols, actions)
            print(f"| {name} {cfg.blocks}x{cfg.channels} | {parameter_count(net):,} | {device} | "
                  + " | ".join(f"{inf[b]:,.0f}" for b in args.batches) + f" | {tr:,.0f} |", flush=True)
            variants = ([("trainer.compile", {"compile": True})] if args.compile else []) + (
                [("bf16 autocast", {"bf16": True})] if args.bf16 else []) + (
                [("weights contiguous (NCHW)", {"contiguous": True})] if args.contiguous else [])
            for label, options in variants:
                figure = bench_training(cfg, device, args.train_batch, args.seconds * 2, cols, actions, **options)
                print(f"| {name} {cfg.blocks}x{cfg.channels}, {label} | | {device} | "
                      + " | " * (len(args.batches) - 1) + f" | {figure:,.0f} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

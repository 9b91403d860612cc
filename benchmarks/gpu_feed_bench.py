"""Feeding one GPU from many self-play actors: what to run on the first GPU machine (issue 14, part 2).

    python benchmarks/gpu_feed_bench.py [--seconds 60] [--actors 1,4,8,14] [--sizes 256x4,512x4,1024x4]

Each actor is its own process with its own CUDA context (today's design: no shared inference server). For
every actor count and every size (games in flight x leaves per tree, so the network batch is their
product), actors play self-play with the shipped network for --seconds, and the script prints:
network evaluations/s and positions/hour of all actors together, the GPU's busy share (nvidia-smi's
utilization, sampled every 0.5 s; "n/a" without nvidia-smi), and each actor's time per stage: tree
(selection, expansion, backup), encode (input planes), and evaluate split into transfer (planes to the
GPU and outputs back) and inference (the forward pass in bf16), the split taken from a separate timing of
one batch of that size. If evaluations/s stop growing with actors while the GPU is far from busy, the CPU
side (tree + encode) is the limit; if they stop while it is busy, a larger batch or a shared inference
server (one context, batches gathered from all actors) is what would help.

Without CUDA it runs on the CPU (--device cpu), which only checks that the script works.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

from mcts_bench import _ensure_network, actors_total, bench_actors
from selfplay.actors.actor import SelfPlayConfig, current_best
from zero.net.encoding import NUM_PLANES
from zero.net.inference import Evaluator


class GpuBusy:
    """nvidia-smi's utilization.gpu sampled in a thread: the mean share of time the GPU was busy."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True).stdout.split()
            if out:
                self.samples.append(float(out[0]))

    def __enter__(self) -> "GpuBusy":
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def share(self) -> str:
        return f"{np.mean(self.samples):.0f}%" if self.samples else "n/a"


def transfer_share(evaluator: Evaluator, batch: int, repeats: int = 20) -> float:
    """Share of one evaluation of `batch` positions spent moving planes to the device and outputs back."""
    planes = np.random.default_rng(0).random((batch, NUM_PLANES, 8, 8), dtype=np.float32)
    device = evaluator.device
    if device.type != "cuda":
        return 0.0
    evaluator.predict(planes)  # warm up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        x = torch.from_numpy(planes).to(device)
        torch.cuda.synchronize()
    to_device = time.perf_counter() - t0
    x = torch.from_numpy(planes).to(device)
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        out = evaluator.net(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(repeats):
            out = evaluator.net(x)
        torch.cuda.synchronize()
        forward = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(repeats):
            out.policy_logits.float().cpu(), out.wdl_logits.float().cpu()
        back = time.perf_counter() - t0
    return (to_device + back) / (to_device + back + forward)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="self-play time per measurement")
    parser.add_argument("--actors", default="1,4,8,14", help="actor counts, e.g. 1,4,8,14")
    parser.add_argument("--sizes", default="256x4,512x4,1024x4", help="games in flight x leaves per tree")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--checkpoint", help="network (default: the shipped checkpoint)")
    args = parser.parse_args()

    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "none (CPU dry run)"
    print(f"machine: {os.cpu_count()} CPUs, GPU {gpu}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        print(_ensure_network(run_dir, args.checkpoint))
        evaluator = Evaluator.from_checkpoint(current_best(run_dir).path, device=args.device)
        print("| actors | games x leaves | batch | evals/s | positions/hour | GPU busy | tree | encode "
              "| transfer | inference |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size in args.sizes.split(","):
            games, leaves = (int(v) for v in size.split("x"))
            moved = transfer_share(evaluator, games * leaves)
            base = SelfPlayConfig(device=args.device)
            config = dataclasses.replace(base, games_in_flight=games, gpu_games_in_flight=games,
                                         gpu_leaves_per_tree=leaves,
                                         search=dataclasses.replace(base.search, leaves_per_tree=leaves))
            for actors in (int(a) for a in args.actors.split(",")):
                with GpuBusy() as busy:
                    t = actors_total(bench_actors(actors, args.seconds, run_dir, config))
                transfer, inference = t["evaluate_share"] * moved, t["evaluate_share"] * (1 - moved)
                print(f"| {actors} | {games} x {leaves} | {games * leaves} | {t['evals_per_s']:.0f} "
                      f"| {t['positions_per_hour']:.0f} | {busy.share()} | {t['tree_share']:.0f}% "
                      f"| {t['encode_share']:.0f}% | {transfer:.0f}% | {inference:.0f}% |")


if __name__ == "__main__":
    main()

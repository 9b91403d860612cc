"""Distilled students against their teacher: judgement on the OCA test split and speed, as the search runs them.

    python benchmarks/distill_bench.py runs/distill/4x32.pt [more students] [--teacher checkpoints/shipped.pt]
        [--dataset runs/expert-oca] [--batches 16 128]

Judgement, on the test split's positions with a choice: the share where each network plays the float32
teacher's move, its top-1 against the expert's move and value cross-entropy against the game result. Speed:
positions/s at one thread of the float32 teacher and of each network's default CPU model (int8,
zero.net.quantized), every network taking a second in turn so that their ratios hold on a shared machine.
Which one plays best is for an equal-time match to say (`checkers-zero ship`, benchmarks/split_match.py).
"""

from __future__ import annotations

import argparse
import os
import platform

import numpy as np
import torch

from int8_bench import expert_scores, interleaved_rates, judgement, test_split
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from zero.net.inference import Evaluator
from zero.net.network import parameter_count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("students", nargs="+")
    parser.add_argument("--teacher", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--dataset", default="runs/expert-oca", help="a pretraining dataset (its test split)")
    parser.add_argument("--batches", nargs="+", type=int, default=[16, 128])
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per speed figure")
    args = parser.parse_args()
    torch.set_num_threads(1)
    # The teacher in float32 is the reference: its moves are the ones to keep, its speed the one to beat.
    paths = {"teacher float32": args.teacher, "teacher": args.teacher, **{s: s for s in args.students}}
    models = {name: Evaluator.from_checkpoint(path, "cpu", precision="float32" if name == "teacher float32" else "auto")
              for name, path in paths.items()}
    data, rows, batches = test_split(args.dataset)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, one thread; "
          f"load average {os.getloadavg()[0]:.1f} at start; teacher {args.teacher}")

    answers = {name: judgement(ev, batches) for name, ev in models.items()}
    chosen = ~data.arrays["forced"][rows]
    rates = interleaved_rates(models, batches[0].planes.numpy(), args.batches, args.seconds)
    reference = "teacher float32"

    print(f"\ntest split: {len(rows):,} positions, {chosen.sum():,} with a choice")
    print("| network | tower | precision | parameters | teacher's move | top-1 (expert) | value CE | "
          + " | ".join(f"b={b} pos/s" for b in args.batches) + " |")
    print("|---|---|---|---:|---:|---:|---:|" + "---:|" * len(args.batches))
    for name, a in answers.items():
        net = load_checkpoint(paths[name]).build_network()
        same = (a["choice"] == answers[reference]["choice"])[chosen].mean()
        top1, ce = expert_scores(a, data, rows)
        speed = " | ".join(f"{r:,.0f} ({r / t:.2f}x)" for r, t in zip(rates[name], rates[reference]))
        print(f"| {name} | {net.config.blocks}x{net.config.channels} | {models[name].precision} | "
              f"{parameter_count(net):,} | {same:.2%} | {top1:.2%} | {ce:.4f} | {speed} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

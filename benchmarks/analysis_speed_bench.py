"""Simulations a single-game search (play, analyze) runs in a fixed time from the start position, by CPU
inference backend and precision, with the shipped network (or the networks named) on one thread.

    python benchmarks/analysis_speed_bench.py [--seconds 0.1 0.5] [--repeat 5] [--checkpoints A.pt B.pt]
        [--models "onnxruntime float32" "onnxruntime int8"]

Every search starts with an empty evaluation cache (a new engine, as a fresh `checkers-zero analyze` has),
after one warm-up search has compiled the kernels and started the backend. The models take turns, one
search each, so that a change of load falls on all alike.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import torch

from play.engine import Budget, Engine
from zero.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from zero.game import Game
from zero.inference import Evaluator

MODELS = {"torch float32": ("torch", "float32"), "onnxruntime float32": ("onnxruntime", "float32"),
          "onnxruntime int8": ("onnxruntime", "int8")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, nargs="+", default=[0.1, 0.5])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--checkpoints", nargs="+", type=Path, default=[DEFAULT_CHECKPOINT])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    evaluators = {}
    for checkpoint in args.checkpoints:
        net = load_checkpoint(checkpoint).build_network()
        for model in args.models:
            backend, precision = MODELS[model]
            evaluators[(checkpoint, f"{checkpoint.stem} {model}")] = Evaluator(
                net, "cpu", backend=backend, precision=precision, source=checkpoint)
    for (checkpoint, _), evaluator in evaluators.items():
        Engine(evaluator, checkpoint).analyse(Game(), Budget(seconds=0.3))  # warm-up
    for seconds in args.seconds:
        sims: dict[str, list[int]] = {name: [] for _, name in evaluators}
        for _ in range(args.repeat):
            for (checkpoint, name), evaluator in evaluators.items():
                engine = Engine(evaluator, checkpoint)
                sims[name].append(engine.analyse(Game(), Budget(seconds=seconds)).simulations)
        for name, counts in sims.items():
            print(f"{name:<32} {seconds:g} s a move: simulations {counts}, mean {np.mean(counts):.0f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

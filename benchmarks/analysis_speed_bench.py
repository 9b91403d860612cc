"""Simulations a single-game search (play, analyze) runs in a fixed time from the start position, by CPU
inference backend, with the shipped network on one thread.

    python benchmarks/analysis_speed_bench.py [--seconds 0.1 0.5] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os

import torch

from play.engine import Budget, Engine
from zero.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from zero.game import Game
from zero.inference import Evaluator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, nargs="+", default=[0.1, 0.5])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    for backend in ("torch", "onnxruntime"):
        net = load_checkpoint(DEFAULT_CHECKPOINT).build_network()
        engine = Engine(Evaluator(net, "cpu", backend=backend), DEFAULT_CHECKPOINT)
        engine.analyse(Game(), Budget(seconds=0.3))  # warm-up: compile the kernels, start the backend
        for seconds in args.seconds:
            sims = [engine.analyse(Game(), Budget(seconds=seconds)).simulations for _ in range(args.repeat)]
            print(f"{backend:<12} {seconds:g} s a move: simulations {sims}, mean {sum(sims) / len(sims):.0f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

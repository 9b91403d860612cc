"""Simulations a single-game search (play, analyze) runs in a fixed time from the start position, by CPU
inference backend and precision, with the shipped network (or the networks named), with 1 or more network
calls in flight (SearchConfig.threads, `--threads` of play and analyze).

    python benchmarks/analysis_speed_bench.py [--seconds 0.1 0.5] [--repeat 5] [--checkpoints A.pt B.pt]
        [--models "onnxruntime float32" "onnxruntime int8-raw" "onnxruntime int8"] [--threads 1 2]

Every search starts with an empty evaluation cache (a new engine, as a fresh `checkers-zero analyze` has),
after one warm-up search has compiled the kernels and started the backend. The models take turns, one
search each, so that a change of load falls on all alike. Beside the simulations in the time, each line gives
the simulations a second of this process's CPU time: a figure that a loaded machine changes little, so that
two commits measured on different days, or beside other work, compare (issue 85's regression hunt: the
wall-clock counts of one commit ranged 7,000-13,600 at 0.5 s as the machine's load moved, its CPU rate 21,000-
23,900).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from play.engine import Budget, Engine
from selfplay.tree_search.analysis import SINGLE_GAME_LEAVES
from selfplay.tree_search.search import SearchConfig
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from zero.net.inference import Evaluator
from zero.rules.game import Game

MODELS = {"torch float32": ("torch", "float32"), "onnxruntime float32": ("onnxruntime", "float32"),
          "onnxruntime int8-raw": ("onnxruntime", "int8-raw"), "onnxruntime int8": ("onnxruntime", "int8")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, nargs="+", default=[0.1, 0.5])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--checkpoints", nargs="+", type=Path, default=[DEFAULT_CHECKPOINT])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    players = {}
    for checkpoint in args.checkpoints:
        net = load_checkpoint(checkpoint).build_network()
        for model in args.models:
            backend, precision = MODELS[model]
            evaluator = Evaluator(net, "cpu", backend=backend, precision=precision, source=checkpoint)
            for threads in args.threads:
                config = SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES, threads=threads)
                players[f"{checkpoint.stem} {model}, {threads} thr"] = (checkpoint, evaluator, config)
    for checkpoint, evaluator, config in players.values():
        Engine(evaluator, checkpoint, config).analyse(Game(), Budget(seconds=0.3))  # warm-up
    for seconds in args.seconds:
        sims: dict[str, list[int]] = {name: [] for name in players}
        cpu: dict[str, list[float]] = {name: [] for name in players}
        for _ in range(args.repeat):
            for name, (checkpoint, evaluator, config) in players.items():
                engine = Engine(evaluator, checkpoint, config)
                started = time.process_time()
                sims[name].append(engine.analyse(Game(), Budget(seconds=seconds)).simulations)
                cpu[name].append(sims[name][-1] / max(time.process_time() - started, 1e-9))
        for name, counts in sims.items():
            print(f"{name:<36} {seconds:g} s a move: simulations {counts}, mean {np.mean(counts):.0f}; "
                  f"{np.mean(cpu[name]):,.0f} a CPU second")
    for name, (_, evaluator, _) in players.items():
        if evaluator.precision == "int8":
            print(f"{name}: {evaluator.near_ties / max(1, evaluator.positions):.1%} of the positions evaluated "
                  f"were near ties, answered in float32")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

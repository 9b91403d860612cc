"""Tower shapes by speed, before any is trained: the int8 model's positions/s at one thread for each shape.

    python benchmarks/tower_bench.py board:3x32 squares:4x48 squares:6x48:se8 [--checkpoint checkpoints/shipped.pt]

A shape is TOWER:BLOCKSxCHANNELS[:seN] (N hidden units of each block's squeeze-excitation), with the heads of the
shipped network's config. Each is built with seeded weights, saved to a temporary checkpoint and run as its int8
model alone (zero.net.quantized; "int8-raw": a seeded network's policy is near ties everywhere, which the default
would answer again in float32), taking turns a second at a time with the others (int8_bench's interleaved_rates),
on positions of the shipped network's games. The shipped network is the first row, the ratio's
reference. What the same budget buys in judgement is for training and an equal-time match to say.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import tempfile
from pathlib import Path

import torch

from int8_bench import interleaved_rates
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint, save_checkpoint
from zero.net.inference import Evaluator
from zero.net.network import NetworkConfig, PolicyValueNet, parameter_count
from zero.net.sampled_games import sampled_positions


def shape_config(spec: str, heads: NetworkConfig) -> NetworkConfig:
    """TOWER:BLOCKSxCHANNELS[:seN] -> the config with the heads of `heads`."""
    tower, size, *rest = spec.split(":")
    blocks, channels = (int(n) for n in size.split("x"))
    excitation = int(rest[0].removeprefix("se")) if rest else 0
    return dataclasses.replace(heads, tower=tower, blocks=blocks, channels=channels, squeeze_excitation=excitation)


def multiply_adds(cfg: NetworkConfig) -> int:
    """The tower's multiply-adds a position (the stem and the blocks' convolutions; the heads are alike)."""
    if cfg.tower == "squares":
        per_conv, stem = 32 * 5 * cfg.channels**2, 32 * 5 * cfg.input_planes * cfg.channels
    else:
        per_conv, stem = 64 * 9 * cfg.channels**2, 64 * 9 * cfg.input_planes * cfg.channels
    return stem + 2 * cfg.blocks * per_conv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shapes", nargs="+")
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="the reference network")
    parser.add_argument("--batches", nargs="+", type=int, default=[16, 128])
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per speed figure")
    args = parser.parse_args()
    torch.set_num_threads(1)
    reference = load_checkpoint(args.checkpoint)
    configs = {"shipped": reference.net_config}
    configs.update({spec: shape_config(spec, reference.net_config) for spec in args.shapes})
    models = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in configs.items():
            path = Path(args.checkpoint)
            if name != "shipped":
                torch.manual_seed(0)
                path = Path(tmp) / f"{len(models)}.pt"
                save_checkpoint(path, net=PolicyValueNet(cfg), net_config=cfg, step=1)
            models[name] = Evaluator.from_checkpoint(path, "cpu", precision="int8-raw")
    planes = sampled_positions(lambda p: models["shipped"].evaluate(p)[0], 2048, seed=1, games=64)[1]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, one thread; "
          f"load average {os.getloadavg()[0]:.1f} at start; reference {args.checkpoint}")
    rates = interleaved_rates(models, planes, args.batches, args.seconds)
    print("| shape | parameters | tower multiply-adds | " + " | ".join(f"b={b} pos/s" for b in args.batches) + " |")
    print("|---|---:|---:|" + "---:|" * len(args.batches))
    for name, cfg in configs.items():
        label = f"shipped {cfg.tower}:{cfg.blocks}x{cfg.channels}" if name == "shipped" else name
        speed = " | ".join(f"{r:,.0f} ({r / t:.2f}x)" for r, t in zip(rates[name], rates["shipped"]))
        print(f"| {label} | {parameter_count(PolicyValueNet(cfg)):,} | "
              f"{multiply_adds(cfg) / 1e6:.2f} M | {speed} |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

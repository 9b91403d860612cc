"""CPU inference speed of the network by backend: positions/s at several batch sizes, one thread.

    python benchmarks/inference_bench.py [--checkpoint PATH] [--batches 1 8 32 64 256] [--threads 1]

Backends: torch eager and ONNX Runtime through zero.net.inference.Evaluator (numpy in and out, as a search calls
it), torch.compile of the same network, and OpenVINO compiling the same exported ONNX graph (measured for
the choice of backend only; it runs when the `openvino` package is installed). Each figure is the median of
timed windows after a warm-up; the load average is printed beside it, since a busy machine lowers them all.
"""

from __future__ import annotations

import argparse
import os
import platform

import numpy as np
import torch

from network_bench import planes_of, random_positions, timed
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from zero.net.inference import Evaluator
from zero.net.network import parameter_count
from zero.net.onnx_model import export_onnx


def openvino_runner(net):
    """evaluate(planes) through OpenVINO on the CPU, or None when openvino is not installed."""
    try:
        import openvino
    except ImportError:
        return None
    core = openvino.Core()
    model = core.read_model(export_onnx(net), b"")
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": torch.get_num_threads(),
                                                 "PERFORMANCE_HINT": "LATENCY"})
    return lambda planes: compiled(planes)


def compiled_runner(net):
    model = torch.compile(net)

    def run(planes: np.ndarray):
        with torch.inference_mode():
            out = model(torch.from_numpy(planes))
            return out.policy_logits.numpy(), torch.softmax(out.wdl_logits, 1).numpy()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32, 64, 256])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per figure")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    net = load_checkpoint(args.checkpoint).build_network().eval()
    cols, _ = random_positions(max(args.batches))
    pool = planes_of(cols, max(args.batches))
    runners = {
        "torch eager": Evaluator(net, "cpu", backend="torch").evaluate,
        "torch.compile": compiled_runner(net),
        "onnxruntime": Evaluator(net, "cpu", backend="onnxruntime").evaluate,
    }
    openvino = openvino_runner(net)
    if openvino is not None:
        runners["openvino"] = openvino
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, threads {args.threads}; "
          f"network {args.checkpoint} ({net.config.blocks}x{net.config.channels}, {parameter_count(net):,} "
          f"parameters); load average {os.getloadavg()[0]:.1f} at start")
    print("| backend | " + " | ".join(f"b={b} pos/s" for b in args.batches) + " |")
    print("|---|" + "---:|" * len(args.batches))
    for name, run in runners.items():
        rates = [timed(lambda: run(pool[:b]), b, args.seconds) for b in args.batches]
        print(f"| {name} | " + " | ".join(f"{r:,.0f}" for r in rates) + " |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

"""The int8 model against float32: judgement on the OCA test split, speed, and where the time goes.

    python benchmarks/int8_bench.py [--checkpoint PATH] [--dataset runs/expert-oca] [--batches 16 128] [--margins ...] [--bfloat16]

(the dataset: `checkers-zero pretrain dataset --pdn ../shared/data/OCA_2.0.pdn --out runs/expert-oca`)

Models: float32, int8-raw (the int8 model's answers alone) and int8 (the evaluator's default: positions the
int8 model nearly ties answered again in float32, zero.net.inference).
Judgement, on the test split's positions with a choice (not forced): the share where each model plays
the float32 network's move (the legal action with the highest logit), each model's top-1 against the
expert's move and value cross-entropy against the game result, and the largest and mean change of the WDL;
then, from int8-raw's and float32's answers, the agreement and the share answered in float32 at other
near-tie margins (--margins).
Speed: positions/s at one thread through zero.net.inference.Evaluator (numpy in and out, as the search calls
it), the two models taking turns a second at a time in one process, so their ratio holds on a shared
machine. Time per operator:
ONNX Runtime's own profile of each model at the first batch size (convolutions, matrix products,
quantize/dequantize, the rest), and the share of a call spent outside the operators (the runtime's
overhead per call).
--bfloat16 adds the third CPU precision the evaluator has, torch eager under bfloat16 autocast (this CPU has
AVX-512 BF16), to the judgement and speed tables.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import platform
import tempfile

import numpy as np
import torch

from network_bench import timed
from train.learner.pretrain_dataset import open_dataset
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from zero.net.encoding import legal_logit_gaps
from zero.net.inference import NEAR_TIE_LOGITS, Evaluator
from zero.net.onnx_model import export_onnx
from zero.net.quantized import int8_graph


def judgement(evaluator: Evaluator, batches: list) -> dict[str, np.ndarray]:
    """The chosen legal action, how far its logit lies above the next legal one's (as the evaluator's
    near-tie check measures it), and the WDL of every position, batch by batch."""
    choice, gap, wdl = [], [], []
    for b in batches:
        planes = b.planes.numpy()
        logits, w = evaluator.evaluate(planes)
        choice.append(np.where(b.legal.numpy(), logits, -np.inf).argmax(axis=1))
        gap.append(np.empty(len(planes), dtype=np.float32))
        legal_logit_gaps(planes, logits, gap[-1])
        wdl.append(w)
    return {"choice": np.concatenate(choice), "gap": np.concatenate(gap), "wdl": np.concatenate(wdl)}


def near_tie_curve(raw: dict[str, np.ndarray], float32: dict[str, np.ndarray], chosen: np.ndarray,
                   margins: list[float]) -> None:
    """Move agreement with float32 if the positions int8 alone nearly ties (gap under a margin) were answered
    in float32, and the share of positions that would be, by margin (zero.net.inference.NEAR_TIE_LOGITS)."""
    print("\n| near-tie margin (logits) | positions answered in float32 | same move as float32 |")
    print("|---:|---:|---:|")
    for margin in margins:
        near = raw["gap"] < margin
        choice = np.where(near, float32["choice"], raw["choice"])
        print(f"| {margin:g} | {near.mean():.1%} | {(choice == float32['choice'])[chosen].mean():.2%} |")


def test_split(dataset: str) -> tuple:
    """A pretraining dataset, its test split's rows, and those rows as batches of 1,024."""
    data = open_dataset(dataset)
    rows = data.rows("test")
    return data, rows, [data.samples(rows[i:i + 1024]).to_batch(torch.device("cpu")) for i in range(0, len(rows), 1024)]


def expert_scores(answer: dict[str, np.ndarray], data, rows: np.ndarray) -> tuple[float, float]:
    """Top-1 against the expert's move (positions with a choice) and value cross-entropy against the result."""
    chosen = ~data.arrays["forced"][rows]
    target = (1 - data.arrays["result"][rows]).astype(np.int64)
    top1 = (answer["choice"] == data.arrays["action"][rows])[chosen].mean()
    return top1, -np.log(np.maximum(answer["wdl"][np.arange(len(rows)), target], 1e-12)).mean()


def interleaved_rates(models: dict[str, Evaluator], planes: np.ndarray, batch_sizes: list[int],
                      seconds: float) -> dict[str, list[float]]:
    """Positions/s of each model at each batch size; the models take turns, a second each, so that a change
    of load falls on all alike. Each call takes the next `b` of the `planes` (round and round), so that a
    model whose cost depends on the positions (int8's near ties) is timed over many."""
    rates = {name: [] for name in models}
    for b in batch_sizes:
        rounds = {name: [] for name in models}
        starts = itertools.cycle(range(0, len(planes) - b + 1, b))
        for _ in range(max(1, round(seconds))):
            for name, ev in models.items():
                rounds[name].append(timed(lambda: ev.evaluate(planes[next(starts):][:b]), b, 1.0, warmup=1))
        for name in models:
            rates[name].append(float(np.median(rounds[name])))
    return rates


def operator_profile(graph: bytes, planes: np.ndarray, calls: int = 200) -> tuple[float, dict[str, float]]:
    """Microseconds a call, and microseconds a call per operator type, from ONNX Runtime's profiler."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        options.profile_file_prefix = os.path.join(tmp, "profile")
        session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        for _ in range(calls):
            session.run(None, {"planes": planes})
        with open(session.end_profiling()) as fh:
            events = json.load(fh)
    per_op: collections.Counter = collections.Counter()
    run_us, runs = 0.0, 0
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_op[e["args"]["op_name"]] += e["dur"]
        elif e.get("cat") == "Session" and e["name"] == "model_run":
            run_us, runs = run_us + e["dur"], runs + 1
    return run_us / runs, {op: us / runs for op, us in per_op.most_common()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--dataset", default="runs/expert-oca", help="a pretraining dataset (its test split)")
    parser.add_argument("--batches", nargs="+", type=int, default=[16, 128])
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per speed figure")
    parser.add_argument("--margins", nargs="+", type=float, default=[0.02, 0.04, 0.06, 0.08, 0.1],
                        help="near-tie margins for the agreement curve")
    parser.add_argument("--bfloat16", action="store_true", help="also judge and time torch under bfloat16 autocast")
    args = parser.parse_args()
    torch.set_num_threads(1)
    checkpoint = load_checkpoint(args.checkpoint)
    models = {name: Evaluator.from_checkpoint(args.checkpoint, "cpu", precision=name)
              for name in ("float32", "int8-raw", "int8")}
    if args.bfloat16:
        models["bfloat16"] = Evaluator.from_checkpoint(args.checkpoint, "cpu", precision="bfloat16")
    data, rows, batches = test_split(args.dataset)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, one thread; "
          f"load average {os.getloadavg()[0]:.1f} at start; checkpoint {args.checkpoint}")

    answers = {name: judgement(ev, batches) for name, ev in models.items()}
    chosen = ~data.arrays["forced"][rows]
    print(f"\ntest split: {len(rows):,} positions, {chosen.sum():,} with a choice")
    print("| model | same move as float32 | top-1 (expert move) | value CE |")
    print("|---|---:|---:|---:|")
    for name, a in answers.items():
        top1, ce = expert_scores(a, data, rows)
        agree = f"{(a['choice'] == answers['float32']['choice'])[chosen].mean():.2%}"
        print(f"| {name} | {agree} | {top1:.2%} | {ce:.4f} |")
    for name in list(models)[1:]:
        change = np.abs(answers[name]["wdl"] - answers["float32"]["wdl"])
        print(f"{name} WDL change: largest {change.max():.3f}, mean {change.mean():.4f}")
    int8 = models["int8"]
    print(f"int8 answered {int8.near_ties:,} of {int8.positions:,} positions ({int8.near_ties / int8.positions:.1%}) "
          f"in float32 as near ties (margin {NEAR_TIE_LOGITS:g} logits)")
    near_tie_curve(answers["int8-raw"], answers["float32"], chosen, args.margins)

    planes = batches[0].planes.numpy()
    print("\n| model | " + " | ".join(f"b={b} pos/s" for b in args.batches) + " |")
    print("|---|" + "---:|" * len(args.batches))
    rates = interleaved_rates(models, planes, args.batches, args.seconds)
    for name, r in rates.items():
        print(f"| {name} | " + " | ".join(f"{x:,.0f}" for x in r) + " |")
    for name in list(models)[1:]:
        print(f"| {name} / float32 | " + " | ".join(f"{i / f:.2f}x" for i, f in zip(rates[name], rates["float32"])) + " |")

    b = args.batches[0]
    graphs = {"float32": export_onnx(checkpoint.build_network()), "int8-raw": int8_graph(checkpoint)}
    print(f"\ntime per call at b={b} by operator (ONNX Runtime's profiler, microseconds):")
    for name, graph in graphs.items():
        call_us, ops = operator_profile(graph, planes[:b])
        inside = sum(ops.values())
        print(f"{name}: {call_us:,.0f} us a call, {1 - inside / call_us:.1%} outside the operators; "
              + ", ".join(f"{op} {us:,.0f} ({us / inside:.0%})" for op, us in ops.items() if us / inside >= 0.01))
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

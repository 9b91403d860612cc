"""Training quality per checkpoint, on fixed held-out positions: a regression shows at a glance, not only
in the Elo.

For each checkpoint, on each held-out set:
- the loss of each head (train.learner.learning.losses: policy cross-entropy, WDL cross-entropy, moves left);
- policy entropy (nats, over the legal moves) and the KL divergence of the network's policy from the
  target (the search's visit shares for self-play positions, the expert's move for OCA ones);
- value calibration: positions binned by the predicted probability of each result, against how often that
  result happened (a reliability diagram), and the expected calibration error over the bins.

Held-out sets. Self-play: positions drawn once from the run's replay store and kept in the run directory
(zero.run.rundir `report_positions`), so every later report scores every checkpoint on the same positions (the
newest checkpoints trained on them: watch their trend more than their level). OCA: the test split of the
run's expert dataset, games the networks never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from train.learner.learning import Samples, losses
from zero.net.checkpoint import load_checkpoint
from zero.run.config import atomic_write_bytes

CALIBRATION_BINS = 10
RESULTS = ("win", "draw", "loss")


@dataclass
class Quality:
    """One checkpoint on one held-out set."""

    positions: int
    losses: dict[str, float]
    policy_entropy: float
    policy_kl: float
    # per result: (mean predicted probability, observed frequency, positions) per non-empty bin
    calibration: dict[str, list[tuple[float, float, int]]]
    calibration_error: float  # expected calibration error over every result's bins


def save_samples(samples: Samples, path: Path) -> None:
    import io

    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{f.name: getattr(samples, f.name) for f in fields(Samples)})
    atomic_write_bytes(path, buffer.getvalue())


def load_samples(path: Path) -> Samples:
    with np.load(path) as data:
        return Samples(**{f.name: data[f.name] for f in fields(Samples)})


def selfplay_held_out(run_dir: Path, positions: int, seed: int = 0) -> Samples | None:
    """The run's fixed self-play positions: drawn from its replay store on the first call and kept; None
    while the store holds no positions."""
    from selfplay.replay.replay_buffer import ReplayReader
    from train.learner.learning import samples_from_replay
    from zero.run.rundir import RunDir

    path = RunDir(run_dir).report_positions
    if path.exists():
        return load_samples(path)
    reader = ReplayReader(run_dir)
    if reader.total_positions() == 0:
        return None
    rows = reader.sample(positions, reader.total_positions(), np.random.default_rng(seed))
    samples = samples_from_replay(rows)
    save_samples(samples, path)
    return samples


def expert_held_out(dataset_dir: Path, positions: int, seed: int = 0) -> Samples | None:
    """`positions` positions of the expert dataset's test split (fixed by the seed); None without one."""
    from train.learner.pretrain_dataset import DatasetError, open_dataset

    try:
        data = open_dataset(dataset_dir)
    except DatasetError:
        return None
    rows = data.rows("test")
    if len(rows) > positions:
        rows = np.sort(np.random.default_rng(seed).choice(rows, positions, replace=False))
    return data.samples(rows)


def quality(net: torch.nn.Module, samples: Samples, batch_size: int = 1024) -> Quality:
    """Score one network on a held-out set (CPU, float32, no gradients)."""
    net = net.eval()
    total = {name: 0.0 for name in ("policy", "value", "moves_left")}
    weights = {name: 0.0 for name in total}
    entropy = kl = policy_weight = 0.0
    predicted, actual = [], []
    with torch.inference_mode():
        for start in range(0, len(samples), batch_size):
            part = _rows(samples, slice(start, start + batch_size))
            batch = part.to_batch(torch.device("cpu"))
            out = net(batch.planes)
            per_head = losses(out, batch)
            head_weight = {"policy": batch.policy_weight.sum().item(), "value": batch.value_weight.sum().item(),
                           "moves_left": batch.moves_left_weight.sum().item()}
            for name, value in per_head.items():
                total[name] += value.item() * head_weight[name]
                weights[name] += head_weight[name]
            log_p = torch.log_softmax(out.policy_logits.float().masked_fill(~batch.legal, float("-inf")), dim=1)
            log_p = log_p.masked_fill(~batch.legal, 0.0)
            p = log_p.exp()
            target = batch.policy
            target_log = torch.log(target.clamp(min=1e-12))
            w = batch.policy_weight
            entropy += (-(p * log_p).sum(dim=1) * w).sum().item()
            kl += ((target * (target_log - log_p)).sum(dim=1) * w).sum().item()
            policy_weight += w.sum().item()
            predicted.append(torch.softmax(out.wdl_logits.float(), dim=1).numpy())
            actual.append(batch.wdl.numpy())
    predicted_all, actual_all = np.concatenate(predicted), np.concatenate(actual)
    calibration, error = calibration_bins(predicted_all, actual_all)
    return Quality(
        positions=len(samples),
        losses={name: total[name] / weights[name] for name in total if weights[name] > 0},
        policy_entropy=entropy / max(policy_weight, 1e-9), policy_kl=kl / max(policy_weight, 1e-9),
        calibration=calibration, calibration_error=error,
    )


def calibration_bins(predicted: np.ndarray, actual: np.ndarray,
                     bins: int = CALIBRATION_BINS) -> tuple[dict[str, list[tuple[float, float, int]]], float]:
    """Reliability bins of WDL predictions [N, 3] against the results that happened (0 win, 1 draw, 2 loss),
    and the expected calibration error (bin-size weighted |predicted - observed|, averaged over results)."""
    out: dict[str, list[tuple[float, float, int]]] = {}
    error = 0.0
    for k, name in enumerate(RESULTS):
        p = predicted[:, k]
        hit = actual == k
        index = np.minimum((p * bins).astype(int), bins - 1)
        rows = []
        for b in range(bins):
            chosen = index == b
            count = int(chosen.sum())
            if count:
                rows.append((float(p[chosen].mean()), float(hit[chosen].mean()), count))
                error += count * abs(rows[-1][0] - rows[-1][1])
        out[name] = rows
    return out, error / (len(RESULTS) * max(len(actual), 1))


def _rows(samples: Samples, index) -> Samples:
    return Samples(**{f.name: getattr(samples, f.name)[index] for f in fields(Samples)})


def checkpoint_quality(path: Path, held_out: dict[str, Samples]) -> dict[str, Quality]:
    net = load_checkpoint(path).build_network()
    return {name: quality(net, samples) for name, samples in held_out.items()}


def format_report(rows: list[tuple[str, int, dict[str, Quality]]]) -> str:
    """One line per checkpoint and held-out set."""
    lines = [f"{'checkpoint':<28} {'step':>7} {'set':<9} {'positions':>9} {'policy':>7} {'value':>7} "
             f"{'m-left':>7} {'entropy':>8} {'KL':>6} {'calib.err':>9}"]
    for name, step, per_set in rows:
        for set_name, q in per_set.items():
            loss = {k: f"{v:.3f}" for k, v in q.losses.items()}
            lines.append(f"{name:<28} {step:>7} {set_name:<9} {q.positions:>9} {loss.get('policy', '-'):>7} "
                         f"{loss.get('value', '-'):>7} {loss.get('moves_left', '-'):>7} {q.policy_entropy:>8.3f} "
                         f"{q.policy_kl:>6.3f} {q.calibration_error:>9.4f}")
    return "\n".join(lines)


def plot_calibration(rows: list[tuple[str, int, dict[str, Quality]]], out_png: Path) -> Path:
    """Reliability diagrams: predicted against observed frequency of each result, a line per checkpoint,
    one panel per held-out set and result."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = sorted({s for _, _, per_set in rows for s in per_set})
    fig, axes = plt.subplots(len(sets), len(RESULTS), figsize=(4 * len(RESULTS), 3.6 * len(sets)), squeeze=False)
    for i, set_name in enumerate(sets):
        for j, result in enumerate(RESULTS):
            ax = axes[i][j]
            ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.8)
            for name, _, per_set in rows:
                if set_name in per_set:
                    bins = per_set[set_name].calibration[result]
                    ax.plot([b[0] for b in bins], [b[1] for b in bins], marker="o", markersize=3, label=name)
            ax.set_title(f"{set_name}: P({result})", fontsize=9)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_xlabel("predicted", fontsize=8)
            ax.set_ylabel("observed", fontsize=8)
    axes[0][0].legend(fontsize=6, loc="upper left")
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png


def report_checkpoints(run_dir: Path, every_candidate: bool) -> list[tuple[str, int, Path]]:
    """(name, step, path) of the checkpoints to report: the run's start and every promoted network (the
    chain the best came through), or every candidate too."""
    from train.arena.gating import read_gating_log
    from zero.run.rundir import RunDir

    run = RunDir(run_dir)
    chosen: dict[Path, int] = {p: load_checkpoint(p).step for p in run.initial_checkpoints()}
    for entry in read_gating_log(run_dir):
        if entry["decision"] == "promote" or (every_candidate and entry["decision"] != "skipped"):
            chosen[Path(entry["candidate"])] = int(entry["candidate_step"])
    if every_candidate:
        chosen.update({path: step for step, path in run.candidates()})
    return sorted(((p.stem, step, p) for p, step in chosen.items() if p.exists()), key=lambda r: (r[1], r[0]))

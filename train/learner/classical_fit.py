"""The classical engine's evaluation fitted to expert game results (`checkers-zero classical fit`).

Data: every quiet position (the side to move has no capture: the only positions the search evaluates) of
the OCA games, split by game as the pretraining dataset splits them (train.learner.pretrain_dataset.split_of_game),
each labelled with the game's result for the side to move: win 1, draw 0.5, loss 0.

Model: P(result) = sigmoid(theta . features) (zero.alphabeta.classical_kernels' features, no intercept: the features
are already the side to move's minus the opponent's), fitted on the train split by Newton's method on the
cross-entropy with a small L2 penalty. The engine's weights are theta in points, round(theta * SCALE), so
the file's scale is SCALE points per unit of logit. The held-out figures are the validation and test
splits' cross-entropy (log-loss, natural log; a constant 1/2 scores ln 2 = 0.693) and accuracy (over the
positions of decisive games: the share whose evaluation has the winner's sign, a zero counting half), for
the fitted evaluation as the engine uses it (integer weights) and for material alone (men and kings, fitted
the same way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit
from tqdm import tqdm

from train.learner.pretrain_dataset import RESULT_OF_PDN, SPLITS, DatasetConfig, split_of_game
from zero.alphabeta import classical_kernels as ck
from zero.corpus.pdn import PdnGame, read_pdn
from zero.rules.movegen import can_capture, make
from zero.run.config import atomic_write_bytes, file_sha256
from zero.yardsticks.classical import DEFAULT_EVAL, eval_document, load_eval

SCALE = 1000  # points per unit of logit: the weights read as thousandths of a logit
DEFAULT_L2 = 1e-6
MATERIAL = ("men", "kings")


class FitError(RuntimeError):
    """A fit that cannot be made (no data, no usable game); the message says why."""


@dataclass
class Positions:
    """Quiet positions with their labels: arrays of one length."""

    black: np.ndarray
    white: np.ndarray
    kings: np.ndarray
    black_to_move: np.ndarray
    target: np.ndarray  # result for the side to move: 1, 0.5 or 0
    split: np.ndarray  # index into SPLITS

    def __len__(self) -> int:
        return len(self.target)


@njit(cache=True)
def _replay(black, white, kings, black_to_move, frm, to, captured, out, row):
    """Write the quiet positions before each move of one game into out's columns from row; returns the next
    row. out columns: black, white, kings, black_to_move."""
    for i in range(len(frm)):
        if not can_capture(black, white, kings, black_to_move):
            out[row, 0] = black
            out[row, 1] = white
            out[row, 2] = kings
            out[row, 3] = black_to_move
            row += 1
        black, white, kings = make(black, white, kings, black_to_move, frm[i], to[i], captured[i])
        black_to_move = not black_to_move
    return row


def collect_positions(pdn: Path, cfg: DatasetConfig | None = None, progress: bool = True) -> tuple[Positions, dict]:
    """Every quiet position of the file's games that have a result, with its label and split."""
    cfg = cfg or DatasetConfig()
    chunks, targets, splits = [], [], []
    counts = {"games": 0, "skipped": 0}
    for game in tqdm(read_pdn(pdn), desc="reading games", unit=" games", disable=not progress):
        if not isinstance(game, PdnGame) or game.result not in RESULT_OF_PDN or not game.moves:
            counts["skipped"] += 1
            continue
        counts["games"] += 1
        frm = np.array([m.from_square - 1 for m in game.moves], dtype=np.int64)
        to = np.array([m.to_square - 1 for m in game.moves], dtype=np.int64)
        cap = np.array([m.captured for m in game.moves], dtype=np.int64)
        out = np.zeros((len(frm), 4), dtype=np.int64)
        s = game.start
        n = _replay(s.black, s.white, s.kings, s.black_to_move, frm, to, cap, out, 0)
        winner = RESULT_OF_PDN[game.result]  # +1 Black, -1 White, 0 draw
        mover_is_black = out[:n, 3] == 1
        score = np.where(mover_is_black, winner, -winner)
        chunks.append(out[:n])
        targets.append((score + 1) / 2)
        splits.append(np.full(n, split_of_game(game, cfg), dtype=np.int8))
    if not chunks:
        raise FitError(f"{pdn}: no game with a result and moves")
    rows = np.concatenate(chunks)
    positions = Positions(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3].astype(np.bool_),
                          np.concatenate(targets), np.concatenate(splits))
    return positions, counts


def feature_matrix(positions: Positions) -> np.ndarray:
    """The kernel's features of every position (int32 rows)."""
    out = np.zeros((len(positions), ck.N_FEATURES), dtype=np.int32)
    ck.features_batch(positions.black, positions.white, positions.kings, positions.black_to_move, out)
    return out


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = DEFAULT_L2, iterations: int = 50) -> np.ndarray:
    """theta minimising the mean cross-entropy of sigmoid(x . theta) against y (in [0, 1]) plus
    l2/2 |theta|^2 on standardised columns (so the penalty treats every feature alike), by Newton's method."""
    x = np.asarray(x, dtype=np.float64)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    z = x / sd
    theta = np.zeros(z.shape[1])
    for _ in range(iterations):
        p = _sigmoid(z @ theta)
        grad = z.T @ (p - y) / len(y) + l2 * theta
        hess = (z * (p * (1 - p))[:, None]).T @ z / len(y) + l2 * np.eye(len(theta))
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return theta / sd


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def log_loss(logit: np.ndarray, y: np.ndarray) -> float:
    """Mean cross-entropy (natural log) of sigmoid(logit) against targets in [0, 1]."""
    # log sigmoid(z) = -log(1 + e^-z), computed stably
    return float(np.mean(y * np.logaddexp(0, -logit) + (1 - y) * np.logaddexp(0, logit)))


def accuracy(logit: np.ndarray, y: np.ndarray) -> float:
    """Over positions of decisive games: the share whose logit has the winner's sign (a zero counts half)."""
    decisive = y != 0.5
    if not decisive.any():
        return float("nan")
    sign = np.sign(logit[decisive])
    want = np.where(y[decisive] > 0.5, 1.0, -1.0)
    return float(np.mean(np.where(sign == 0, 0.5, (sign == want).astype(np.float64))))


def fit(pdn: Path, every: int = 1, l2: float = DEFAULT_L2, progress: bool = True) -> tuple[dict[str, int], dict]:
    """Fit the evaluation on a PDN file's train split. Returns (weights in points by feature name, the
    fit's figures for the file)."""
    positions, counts = collect_positions(pdn, progress=progress)
    x = feature_matrix(positions)
    y = positions.target
    train = np.flatnonzero(positions.split == SPLITS.index("train"))[::every]
    if len(train) == 0:
        raise FitError(f"{pdn}: no position in the train split")
    theta = fit_logistic(x[train], y[train], l2)
    weights = {name: int(round(t * SCALE)) for name, t in zip(ck.FEATURES, theta)}
    points = np.array([weights[name] for name in ck.FEATURES], dtype=np.float64)
    material = [ck.FEATURES.index(name) for name in MATERIAL]
    theta_material = fit_logistic(x[train][:, material], y[train], l2)
    figures: dict = {"games": counts["games"], "games_skipped": counts["skipped"], "positions": {},
                     "log_loss": {}, "accuracy": {}, "material_log_loss": {}, "material_accuracy": {},
                     "material_weights": {name: int(round(t * SCALE)) for name, t in zip(MATERIAL, theta_material)}}
    for k, split in enumerate(SPLITS):
        rows = np.flatnonzero(positions.split == k)
        if split == "train":
            rows = train
        figures["positions"][split] = int(len(rows))
        if len(rows) == 0:
            continue
        logit = x[rows] @ points / SCALE
        logit_material = x[rows][:, material] @ theta_material
        figures["log_loss"][split] = round(log_loss(logit, y[rows]), 5)
        figures["accuracy"][split] = round(accuracy(logit, y[rows]), 5)
        figures["material_log_loss"][split] = round(log_loss(logit_material, y[rows]), 5)
        figures["material_accuracy"][split] = round(accuracy(logit_material, y[rows]), 5)
    figures["logit_weights"] = {name: round(float(t), 6) for name, t in zip(ck.FEATURES, theta)}
    return weights, figures


def fit_and_write(pdn: Path, out: Path = DEFAULT_EVAL, every: int = 1, l2: float = DEFAULT_L2,
                  command: str = "", progress: bool = True) -> dict:
    """Fit, write the weights file atomically, check that it loads; returns the file's document."""
    weights, figures = fit(pdn, every, l2, progress)
    meta = {
        "data": {"file": pdn.name, "sha256": file_sha256(pdn), "split": "train (train.learner.pretrain_dataset split)",
                 "every": every, "positions": "quiet positions (no capture for the side to move)"},
        "command": command,
        "fit": {"l2": l2, "link": "sigmoid(points / scale)", "target": "result for the side to move: 1, 0.5, 0",
                **figures},
    }
    doc = eval_document(weights, SCALE, meta)
    import json

    atomic_write_bytes(out, (json.dumps(doc, indent=1) + "\n").encode())
    load_eval(out)
    return doc


def format_fit(doc: dict) -> str:
    """The command's report: weights and held-out figures against material alone."""
    fit = doc["fit"]
    lines = [f"{fit['games']} games, quiet positions: " + ", ".join(f"{k} {v}" for k, v in fit["positions"].items())]
    lines.append(f"{'feature':<22} {'points':>8}")
    for name, w in doc["weights"].items():
        lines.append(f"{name:<22} {w:>8}")
    lines.append(f"scale {doc['scale']:g} points a logit; {'split':<6} {'log-loss':>9} {'accuracy':>9}   "
                 f"{'material':>9} {'accuracy':>9}")
    for split in fit["log_loss"]:
        lines.append(f"{'':<31}{split:<6} {fit['log_loss'][split]:>9.4f} {fit['accuracy'][split]:>9.4f}   "
                     f"{fit['material_log_loss'][split]:>9.4f} {fit['material_accuracy'][split]:>9.4f}")
    lines.append(f"(a constant 1/2 has log-loss {math.log(2):.4f}; accuracy over positions of decisive games)")
    return "\n".join(lines)

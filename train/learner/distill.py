"""Distillation: a network learns another network's judgement rather than the games' moves and results.

The teacher (usually the shipped network) labels each position with its policy over the legal moves, its
win/draw/loss probabilities and its plies-left estimate; the student (usually a smaller tower, which
evaluates faster) trains on those soft targets through pretraining's pipeline (train.learner.pretrain with
`teacher` set). A soft target says more per position than an expert's one move or a game's one result,
so a small network learns in a few epochs what took its teacher a long run.

The positions: the OCA train split (expert games) and positions of the teacher's own games with moves drawn
from its raw policy (zero.net.sampled_games: the kind self-play meets). Where the endgame database holds a
position, its exact value replaces the teacher's.
"""

from __future__ import annotations

import io
import logging
import zipfile
from dataclasses import fields
from pathlib import Path

import numpy as np
from tqdm import tqdm

from train.learner.learning import SOURCES, Samples, encode_positions
from train.learner.pretrain_dataset import PretrainDataset
from zero.net.inference import Evaluator
from zero.net.sampled_games import sampled_positions
from zero.run.config import atomic_write_bytes

log = logging.getLogger(__name__)

# The teacher's policy is kept as its likeliest moves, renormalised: 16 hold all but a trace of it (positions
# with more legal moves are rare, and their tail is what a search prunes anyway).
TOP_ACTIONS = 16
LABEL_BATCH = 1024
LABELS_VERSION = 2  # of how labels are made: kept labels of another version are made again
POSITION_COLUMNS = ("black", "white", "kings", "black_to_move", "no_progress", "repetitions")


class DistilledData:
    """Teacher-labelled positions, read the way pretraining reads its dataset (`train_rows`, `samples`);
    `dataset_rows` names the dataset's row of each (-1 for a position of the teacher's own games)."""

    def __init__(self, labelled: Samples, dataset_rows: np.ndarray) -> None:
        self.labelled = labelled
        self.dataset_rows = dataset_rows

    @property
    def train_rows(self) -> np.ndarray:
        return np.arange(len(self.labelled))

    def samples(self, rows: np.ndarray) -> Samples:
        return self.labelled.take(rows)


def dataset_positions(data: PretrainDataset, rows: np.ndarray) -> dict[str, np.ndarray]:
    return {name: data.arrays[name][rows] for name in POSITION_COLUMNS}


def teacher_game_positions(teacher: Evaluator, count: int, seed: int) -> dict[str, np.ndarray]:
    """`count` positions of the teacher's own games (moves drawn from its raw policy)."""
    found, _ = sampled_positions(lambda planes: teacher.evaluate(planes)[0], count, seed)
    return {
        "black": np.array([s.position.black for s in found], np.uint32),
        "white": np.array([s.position.white for s in found], np.uint32),
        "kings": np.array([s.position.kings for s in found], np.uint32),
        "black_to_move": np.array([s.position.black_to_move for s in found], np.bool_),
        "no_progress": np.array([s.no_progress for s in found], np.uint8),
        "repetitions": np.array([s.repetitions for s in found], np.uint8),
    }


def label(teacher: Evaluator, positions: dict[str, np.ndarray], source: str, progress: bool = False) -> Samples:
    """The teacher's targets for these positions (from `source`, one of SOURCES): its TOP_ACTIONS likeliest
    legal moves (renormalised), its win/draw/loss probabilities and, when it has that head, its plies left."""
    n = len(positions["black"])
    actions = np.full((n, TOP_ACTIONS), -1, np.int16)
    probs = np.zeros((n, TOP_ACTIONS), np.float32)
    wdl = np.zeros((n, 3), np.float32)
    moves_left = np.zeros(n, np.float32)
    has_moves_left = teacher.config.moves_left_head
    for start in tqdm(range(0, n, LABEL_BATCH), desc="teacher labels", unit=" batches", disable=not progress,
                      leave=False):
        sl = slice(start, min(n, start + LABEL_BATCH))
        planes, legal = encode_positions(*(positions[name][sl] for name in POSITION_COLUMNS))
        logits, batch_wdl, batch_moves_left = teacher.predict(planes)
        logits = np.where(legal, logits, -np.inf)
        top = np.argsort(-logits, axis=1)[:, :TOP_ACTIONS]
        top_logits = np.take_along_axis(logits, top, axis=1)
        # Slots past the legal moves get 0; a position without a legal move (never searched) none at all.
        p = np.exp(top_logits - top_logits[:, :1], where=np.isfinite(top_logits), out=np.zeros_like(top_logits))
        probs[sl] = p / np.maximum(p.sum(axis=1, keepdims=True), 1e-30)
        actions[sl] = np.where(np.isfinite(top_logits), top, -1)
        wdl[sl] = batch_wdl
        if has_moves_left:
            moves_left[sl] = batch_moves_left
    ones = np.ones(n, np.float32)
    # A forced move teaches nothing (and a position without a move is never searched): as pretraining and
    # self-play do, only a choice carries a policy target.
    policy_weight = (actions[:, 1] >= 0).astype(np.float32)
    return Samples(
        **positions, policy_actions=actions, policy_probs=probs, wdl=wdl, moves_left=moves_left,
        policy_weight=policy_weight, value_weight=ones,
        moves_left_weight=ones if has_moves_left else np.zeros(n, np.float32),
        source=np.full(n, SOURCES.index(source), np.int8),
    )


def _cache_file(teacher: Evaluator, data: PretrainDataset, game_positions: int, seed: int, egdb_pieces: int) -> Path:
    """Where these labels are kept: beside the dataset, named by everything that decides them."""
    from zero.net.checkpoint import weights_sha256

    key = "-".join([weights_sha256(teacher.net.state_dict())[:16], str(data.attrs.get("source_sha256", ""))[:8],
                    str(len(data)), str(game_positions), str(seed), f"egdb{egdb_pieces}", f"top{TOP_ACTIONS}",
                    f"v{LABELS_VERSION}"])
    return data.path / "teacher-labels" / f"{key}.npz"


def _read_labels(path: Path) -> Samples | None:
    try:
        with np.load(path) as stored:
            return Samples(**{f.name: stored[f.name] for f in fields(Samples)})
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None  # absent, or cut short: label again


def _write_labels(path: Path, labelled: Samples) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **{f.name: getattr(labelled, f.name) for f in fields(Samples)})
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as exc:  # a read-only dataset: label again next time
        log.warning("cannot keep the teacher's labels in %s (%s)", path, exc)


def distilled(teacher_path: str | Path, data: PretrainDataset, game_positions: int, seed: int,
              progress: bool = False) -> DistilledData:
    """The train split's positions and `game_positions` positions of the teacher's own games, labelled by
    the teacher (float32), with the endgame database's exact values where it has them. Labelling a million
    positions takes minutes, so the labels are kept beside the dataset for the next student."""
    from zero.endgames.egdb_build import largest_available

    teacher = Evaluator.from_checkpoint(teacher_path, device="cpu", precision="float32")
    egdb = largest_available()
    cache = _cache_file(teacher, data, game_positions, seed, egdb.max_pieces)
    train_rows = data.rows("train")
    dataset_rows = np.concatenate([train_rows, np.full(game_positions, -1, np.int64)])  # the parts' order below
    labelled = _read_labels(cache)
    if labelled is not None:
        if progress:
            print(f"teacher labels from {cache}")
        return DistilledData(labelled, dataset_rows)
    parts = {"expert": dataset_positions(data, train_rows)}
    if game_positions:
        if progress:
            print(f"playing the teacher's own games for {game_positions:,} positions ...")
        parts["selfplay"] = teacher_game_positions(teacher, game_positions, seed)
    if progress:
        print(f"labelling {sum(len(p['black']) for p in parts.values()):,} positions with {teacher_path} ...")
    labelled = Samples.concat([label(teacher, positions, source, progress) for source, positions in parts.items()])
    labelled, exact = labelled.with_database_values(egdb)
    log.info("teacher labels: %d positions, %d with the endgame database's exact value", len(labelled), exact)
    if progress:
        print(f"{exact:,} of them take the endgame database's exact value")
    _write_labels(cache, labelled)
    return DistilledData(labelled, dataset_rows)

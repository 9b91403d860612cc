"""Labels from the distilled evaluation's own searches: the second turn of the loop that made NNUE evaluations
strong. A label store's positions (train.learner.distilled.labels) are searched a fixed depth deep by the
alpha-beta player over an evaluation (zero.alphabeta.player.DistilledPlayer, with its endgame
database), and the search's score becomes a target the next evaluation learns beside the teacher's value
(train.learner.distilled.training: `searched_weight`): a static evaluation trained on what a search below it
finds learns some of what that search sees.

The scores are a store of chunk files inside the label store (STORE/searched-<key>/chunk-NNNNN.npz), chunk c
scoring every `every`-th position of label chunk c (rows 0, every, 2 * every, ...): each a pure function of
the label chunk, the evaluation, the depth and the database, written to a temporary name and renamed, so that
a labeller killed at any moment loses only the chunks it was making and the next one makes the missing ones
and no other. Every chunk repeats what made it and is refused, with its file named, where that does not
match its folder or it does not read.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from train.learner.distilled.labels import (
    DistilledLabelError, chunk_lengths, chunk_path, read_archive, read_chunk, read_labels, recorded_chunks,
    take_store_lock, write_chunk)
from zero.alphabeta.search import WIN_THRESHOLD
from zero.run.config import file_sha256

SEARCHED_FORMAT = 1
# A won or lost score (a win at a known distance, thousandths of a logit beyond any evaluation) is learnt
# as this: sigmoid(8) = 0.9997, near certain without pulling the logits to the float limits.
DECIDED_SCORE = 8000
NO_SEARCH = np.iinfo(np.int32).min
COLUMNS = ("row", "score")


def identity(label_store: Path, evaluation: Path, depth: int, every: int, egdb_pieces: int) -> dict:
    """What decides a store's scores (every chunk repeats it)."""
    return {"format": SEARCHED_FORMAT, "labels": label_store.name, "evaluation_sha256": file_sha256(evaluation),
            "depth": depth, "every": every, "egdb_pieces": egdb_pieces}


def store_path(label_store: Path, made_by: dict) -> Path:
    key = hashlib.sha256(json.dumps(made_by, sort_keys=True).encode()).hexdigest()[:12]
    return label_store / f"searched-{made_by['evaluation_sha256'][:12]}-d{made_by['depth']}-e{made_by['every']}-{key}"


def decided(score: int) -> int:
    """A search score as learnt: wins and losses (beyond any evaluation) set to +-DECIDED_SCORE."""
    if abs(score) > WIN_THRESHOLD:
        return DECIDED_SCORE if score > 0 else -DECIDED_SCORE
    return int(np.clip(score, -DECIDED_SCORE, DECIDED_SCORE))


_worker: dict = {}


def _start_worker(evaluation: str, depth: int, egdb_pieces: int) -> None:
    from zero.alphabeta.player import DistilledPlayer
    from zero.distilled.model import load_eval
    from zero.endgames.egdb_build import largest_available

    _worker["player"] = DistilledPlayer(depth, evaluation=load_eval(evaluation),
                                        egdb=largest_available(most=egdb_pieces))


def _score_chunk(task: tuple[str, int, str, dict, str]) -> int:
    """Score label chunk c's chosen rows and write them; returns c."""
    from zero.rules.game import Position

    label_path, c, out, made_by, sha256 = task
    labels = read_chunk(Path(label_path), None, c, sha256)
    rows = np.arange(0, len(labels["black"]), made_by["every"], dtype=np.int32)
    scores = np.empty(len(rows), np.int32)
    player = _worker["player"]
    for i, r in enumerate(rows):
        position = Position(int(labels["black"][r]), int(labels["white"][r]), int(labels["kings"][r]),
                            bool(labels["black_to_move"][r]))
        scores[i] = decided(player.search(position)[1])
    write_chunk(Path(out), made_by, c, {"row": rows, "score": scores})
    return c


def search_label(label_store: Path, evaluation: Path, depth: int, every: int, workers: int = 2,
                 progress: bool = True) -> Path:
    """Make every chunk of scores the store of (label_store, evaluation, depth, every, the largest database)
    lacks, over `workers` processes; returns the store."""
    from zero.endgames.egdb_build import largest_available

    if not 1 <= depth <= 20 or not 1 <= every <= 1 << 16 or not 1 <= workers <= 64:
        raise DistilledLabelError(f"depth 1-20, every 1-65,536 and workers 1-64, got {depth}, {every}, {workers}")
    from zero.distilled.model import load_eval

    load_eval(evaluation)  # a file that is no evaluation is refused here in one line, not in every worker
    pieces = int(largest_available().tables.max_pieces)
    made_by = identity(label_store, evaluation, depth, every, pieces)
    read_labels(label_store)  # a damaged store is refused in one line here, not in every worker
    chunks = [(c, entry["sha256"]) for c, entry in enumerate(recorded_chunks(label_store))]
    store = store_path(label_store, made_by)
    store.mkdir(exist_ok=True)
    lock = take_store_lock(store)
    try:
        tasks = [(str(chunk_path(label_store, c)), c, str(chunk_path(store, c)), made_by, sha256)
                 for c, sha256 in chunks if not chunk_path(store, c).exists()]
        if tasks:
            with ProcessPoolExecutor(workers, initializer=_start_worker,
                                     initargs=(str(evaluation), depth, pieces)) as pool:
                for _ in tqdm(pool.map(_score_chunk, tasks), total=len(tasks), desc=f"searching {store.name}",
                              unit="chunk", disable=not progress):
                    pass
    finally:
        lock.close()
    return store


def read_searched(store: Path, label_store: Path) -> np.ndarray:
    """The search score of every label of `label_store` (in read_labels' order), NO_SEARCH where the store
    scored none; scores of another label store are refused, and each chunk is checked against the store's
    first."""
    labels_per_chunk = chunk_lengths(label_store)
    out = np.full(sum(n for _, n in labels_per_chunk), NO_SEARCH, np.int32)
    made_by = None
    offset = 0
    for c, n in labels_per_chunk:
        path = chunk_path(store, c)
        if path.exists() or path.is_symlink():
            _, doc, cols = read_archive(path, "chunk of search scores", "search it again")
            rows, scores = cols.get("row", np.zeros(0)), cols.get("score", np.zeros(1))
            this = {k: v for k, v in doc.items() if k != "chunk"}
            if this.get("labels") != label_store.name:
                raise DistilledLabelError(f"{store}: search scores of the label store {this.get('labels')!r}, not of "
                                          f"{label_store}")
            made_by = made_by or this
            if (doc.get("chunk") != c or this != made_by or rows.shape != scores.shape
                    or (len(rows) and (rows.min() < 0 or rows.max() >= n))):
                raise DistilledLabelError(f"{path}: a chunk of search scores of other labels or settings; delete "
                                          f"it to search it again")
            out[offset + rows] = scores
        offset += n
    if made_by is None:
        raise DistilledLabelError(f"{store}: no chunks of search scores (make them: checkers-zero distilled search)")
    return out

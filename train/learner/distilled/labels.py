"""Labels for the distilled evaluation: quiet positions valued by the policy-value network (the teacher),
beside their game's result and the endgame database's exact value where it holds them.

The distilled evaluation (zero.distilled) is asked only for quiet positions (the side to move has no
capture: the search plays captures out first), so only those are labelled. They come from the expert games
of a pretraining dataset and from short random walks off them (1 to `walk_plies` random legal moves), since
a search looks mostly at positions no expert would play into. Each gets the teacher's win/draw/loss for the
side to move (its int8 model, on the position alone: no no-progress count, no repetition), the game's result
for the side to move where it is an expert game's position, and the database's value where the database
holds the position.

The labels are a dataset of numbered chunk files beside the dataset (DATASET/distilled-labels/<key>/), chunk
c labelling rows c * CHUNK_ROWS onwards of the pretraining dataset with a random stream seeded by (seed, c):
each chunk is a pure function of the dataset, the teacher and the settings, written to a temporary name and
renamed, so a labeller killed at any moment loses only the chunk it was making, and the next one checks the
chunks there, makes the missing ones and no other: none is ever counted twice. Once all are there the store's
record (MANIFEST) lists them, each with its labels' count and its sha256, and readers take nothing else: a
chunk missing, changed or added is refused in one line. One labeller writes a store at a time (WRITER_LOCK),
and every chunk file is read as anyone's file (a regular file, within a bound). The key names what decides a label (the teacher's
weights, the database's size, the walks, the format); every chunk repeats it, and one that does not match
its folder, or does not read, is refused with its file named.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit
from tqdm import tqdm

from train.learner.pretrain_dataset import PretrainDataset
from zero.endgames.egdb import UNKNOWN, Egdb
from zero.rules.movegen import BUFFER_ROWS, F_CAPTURED, F_FROM, F_TO, MOVE_FIELDS, can_capture, generate, make
from zero.run.config import (
    MOST_SEED, MOST_THREADS, BoundedArchive, UnusableFile, atomic_write_bytes, check_settings, read_bounded, setting)
from zero.run.rundir import RunDirError, take_file_lock

STORE_DIR = "distilled-labels"
LABELS_FORMAT = 1
CHUNK_ROWS = 1 << 16
NO_RESULT = -2  # a walked position's result, and a position the database does not hold
MANIFEST = "store.json"  # the store's record of its chunks: written last, by label()
WRITER_LOCK = "writer.lock"
# The most bytes a chunk file (or one of its arrays) may hold: a chunk labels at most 2 * CHUNK_ROWS positions
# (each row and a walk off it) at under 32 bytes each, beside its document.
MOST_CHUNK_BYTES = 2 * CHUNK_ROWS * 32 + (1 << 20)
COLUMNS = ("black", "white", "kings", "black_to_move", "wdl", "result", "exact", "split", "walked")


class DistilledLabelError(Exception):
    """Labels that cannot be made or read; the message is one line naming the file."""


@dataclass
class DistilledLabelConfig:
    """How positions are chosen and labelled."""

    walk_plies: int = setting(6, low=0, high=64)  # random plies off an expert position, 1 to this (0: no walks)
    seed: int = setting(75, low=0, high=MOST_SEED)
    batch: int = setting(1024, low=1, high=1 << 16)  # positions a teacher call
    threads: int = setting(2, low=1, high=MOST_THREADS)  # the teacher's threads

    def validate(self) -> None:
        check_settings(self)


@njit(cache=True)
def choose_positions(black, white, kings, black_to_move, walk_plies, seed, out):
    """For each row: the position itself when quiet (out[:, 0] = 1), and one random walk of 1 to walk_plies
    legal moves off it when that ends quiet with a move to play (out[:, 1] = 1, its masks in out[:, 2:6]).
    A pure function of the rows and the seed."""
    np.random.seed(seed)
    buf = np.zeros((BUFFER_ROWS, MOVE_FIELDS), dtype=np.int64)
    for i in range(len(black)):
        b, w, k, btm = np.int64(black[i]), np.int64(white[i]), np.int64(kings[i]), bool(black_to_move[i])
        out[i, 0] = 0 if can_capture(b, w, k, btm) else 1
        out[i, 1] = 0
        if walk_plies == 0:
            continue
        plies = np.random.randint(1, walk_plies + 1)
        ended = False
        for _ in range(plies):
            n = generate(b, w, k, btm, True, buf)
            if n == 0:
                ended = True
                break
            r = np.random.randint(0, n)
            b, w, k = make(b, w, k, btm, buf[r, F_FROM], buf[r, F_TO], buf[r, F_CAPTURED])
            btm = not btm
        if ended or can_capture(b, w, k, btm) or generate(b, w, k, btm, True, buf) == 0:
            continue
        out[i, 1] = 1
        out[i, 2], out[i, 3], out[i, 4], out[i, 5] = b, w, k, 1 if btm else 0


def identity(data: PretrainDataset, teacher: str | Path, config: DistilledLabelConfig, egdb: Egdb | None) -> dict:
    """What decides a store's labels (every chunk repeats it)."""
    from zero.net.checkpoint import load_checkpoint, weights_sha256

    return {"format": LABELS_FORMAT, "teacher_sha256": weights_sha256(load_checkpoint(teacher).state_dict),
            "walk_plies": config.walk_plies, "seed": config.seed,
            "egdb_pieces": 0 if egdb is None else int(egdb.tables.max_pieces),
            "dataset": {"source_sha256": data.attrs.get("source_sha256"), "positions": len(data)}}


def store_path(data: PretrainDataset, made_by: dict) -> Path:
    key = hashlib.sha256(json.dumps(made_by, sort_keys=True).encode()).hexdigest()[:16]
    return data.path / STORE_DIR / f"{made_by['teacher_sha256'][:12]}-walk{made_by['walk_plies']}-" \
                                   f"egdb{made_by['egdb_pieces']}-{key}"


def chunk_path(store: Path, c: int) -> Path:
    return store / f"chunk-{c:05d}.npz"


def teacher_wdl(evaluator, black: np.ndarray, white: np.ndarray, kings: np.ndarray, black_to_move: np.ndarray,
                batch: int) -> np.ndarray:
    """The teacher's win/draw/loss (float32 [n, 3]) for the side to move of each position, on the position alone
    (no no-progress count, no repetition), `batch` positions a call."""
    from zero.net.encoding import NUM_PLANES, encode_batch

    n = len(black)
    wdl = np.zeros((n, 3), dtype=np.float32)
    planes = np.zeros((batch, NUM_PLANES, 8, 8), dtype=np.float32)
    zeros, ones = np.zeros(batch, np.uint8), np.ones(batch, np.uint8)
    for start in range(0, n, batch):
        end = min(start + batch, n)
        m = end - start
        encode_batch(black[start:end].astype(np.int64), white[start:end].astype(np.int64),
                     kings[start:end].astype(np.int64), black_to_move[start:end], zeros[:m], ones[:m], planes[:m])
        wdl[start:end] = evaluator.evaluate(planes[:m])[1]
    return wdl


def _label_chunk(data: PretrainDataset, c: int, config: DistilledLabelConfig, evaluator, egdb: Egdb | None) \
        -> dict[str, np.ndarray]:
    a = data.arrays
    rows = np.arange(c * CHUNK_ROWS, min((c + 1) * CHUNK_ROWS, len(data)))
    chosen = np.zeros((len(rows), 6), dtype=np.int64)
    choose_positions(a["black"][rows], a["white"][rows], a["kings"][rows], a["black_to_move"][rows],
                     config.walk_plies, (config.seed * 100_003 + c) % (1 << 32), chosen)
    kept, walked = np.flatnonzero(chosen[:, 0]), np.flatnonzero(chosen[:, 1])
    cols = {
        "black": np.concatenate([a["black"][rows[kept]], chosen[walked, 2]]).astype(np.uint32),
        "white": np.concatenate([a["white"][rows[kept]], chosen[walked, 3]]).astype(np.uint32),
        "kings": np.concatenate([a["kings"][rows[kept]], chosen[walked, 4]]).astype(np.uint32),
        "black_to_move": np.concatenate([a["black_to_move"][rows[kept]], chosen[walked, 5] == 1]),
        "result": np.concatenate([a["result"][rows[kept]], np.full(len(walked), NO_RESULT)]).astype(np.int8),
        "split": np.concatenate([data.split[rows[kept]], data.split[rows[walked]]]).astype(np.uint8),
        "walked": np.concatenate([np.zeros(len(kept), bool), np.ones(len(walked), bool)]),
    }
    n = len(cols["black"])
    cols["wdl"] = teacher_wdl(evaluator, cols["black"], cols["white"], cols["kings"], cols["black_to_move"],
                              config.batch).astype(np.float16)
    exact = np.full(n, NO_RESULT, np.int8)
    if egdb is not None:
        values = egdb.values(cols["black"], cols["white"], cols["kings"], cols["black_to_move"])
        exact = np.where(values == UNKNOWN, NO_RESULT, values).astype(np.int8)
    cols["exact"] = exact
    return cols


def write_chunk(path: Path, made_by: dict, c: int, cols: dict[str, np.ndarray]) -> bytes:
    """A chunk file: its columns and the record of what made it (with its number), written atomically;
    returns its bytes."""
    buffer = io.BytesIO()
    doc = {**made_by, "chunk": c}
    np.savez(buffer, document=np.frombuffer(json.dumps(doc, sort_keys=True).encode(), np.uint8), **cols)
    atomic_write_bytes(path, buffer.getvalue())
    return buffer.getvalue()


def read_archive(path: Path, what: str, again: str) -> tuple[bytes, dict, dict[str, np.ndarray]]:
    """(its bytes, its document, its other arrays) of a chunk file written by write_chunk, read as anyone's
    file (zero.run.config.open_regular: no FIFO or link is read, nothing beyond MOST_CHUNK_BYTES); `what` names
    the kind of chunk and `again` the command that makes it anew, for the one-line refusal."""
    try:
        data = read_bounded(path, MOST_CHUNK_BYTES, what)
        archive = BoundedArchive(io.BytesIO(data))
        doc = json.loads(archive.array("document", MOST_CHUNK_BYTES).tobytes()) if "document" in archive.names else None
        if not isinstance(doc, dict):
            raise UnusableFile("no record of what made it")
        cols = {name: archive.array(name, MOST_CHUNK_BYTES) for name in archive.names if name != "document"}
    except FileNotFoundError:
        raise DistilledLabelError(f"{path}: missing; {again}") from None
    except (UnusableFile, OSError, ValueError) as exc:
        raise DistilledLabelError(f"{path}: unreadable {what} ({exc}); delete it to {again}") from None
    return data, doc, cols


def read_chunk(path: Path, made_by: dict | None, c: int, sha256: str | None = None) -> dict[str, np.ndarray]:
    """A chunk's columns, checked against what made its store (None: whatever made it) and, given, the
    checksum its store records for it."""
    return _checked_chunk(path, made_by, c, sha256)[0]


def _checked_chunk(path: Path, made_by: dict | None, c: int, sha256: str | None) -> tuple[dict[str, np.ndarray], str]:
    """read_chunk's columns, and the chunk's sha256."""
    data, doc, cols = read_archive(path, "label chunk", "label it again")
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256:
        raise DistilledLabelError(f"{path}: changed since its store was made (its checksum differs from the "
                                  f"store's {MANIFEST}); delete it to label it again")
    if doc.get("chunk") != c or (made_by is not None and {k: v for k, v in doc.items() if k != "chunk"} != made_by):
        raise DistilledLabelError(f"{path}: a label chunk of other settings or another place; delete it to label "
                                  f"it again")
    lengths = {len(cols.get(name, ())) for name in COLUMNS}
    if set(cols) != set(COLUMNS) or len(lengths) != 1:
        raise DistilledLabelError(f"{path}: its columns are not the labels' {', '.join(COLUMNS)} of one length; "
                                  f"delete it to label it again")
    return cols, digest


def take_store_lock(store: Path):
    """This process as the one writer of a store (label or search scores): a second run on it at once is
    refused in one line (an flock, as a replay store's writers hold; `close()` it to let go)."""
    try:
        return take_file_lock(store / WRITER_LOCK, f"{store}: another process is writing it")
    except RunDirError as exc:
        raise DistilledLabelError(str(exc)) from None


def label(data: PretrainDataset, teacher: str | Path, config: DistilledLabelConfig, egdb: Egdb | None,
          progress: bool = True) -> Path:
    """Make every chunk the store of (data, teacher, config, egdb) lacks, check the others, and record them all
    (count, labels, checksum) in the store's MANIFEST; returns the store."""
    from zero.net.inference import Evaluator

    config.validate()
    made_by = identity(data, teacher, config, egdb)
    store = store_path(data, made_by)
    store.mkdir(parents=True, exist_ok=True)
    lock = take_store_lock(store)
    try:
        chunks = math.ceil(len(data) / CHUNK_ROWS)
        try:
            recorded = recorded_chunks(store)
        except DistilledLabelError:
            recorded = []  # none yet, or unreadable: made again from the chunks, each checked as it is read
        made: dict[int, tuple[int, str]] = {}
        for c in range(chunks):
            path = chunk_path(store, c)
            if path.exists() or path.is_symlink():
                cols, digest = _checked_chunk(path, made_by, c, recorded[c]["sha256"] if c < len(recorded) else None)
                made[c] = (len(cols["black"]), digest)
        missing = [c for c in range(chunks) if c not in made]
        if missing:
            evaluator = Evaluator.from_checkpoint(teacher, device="cpu", threads=config.threads)
            for c in tqdm(missing, desc=f"labelling {store.name}", unit="chunk", disable=not progress):
                cols = _label_chunk(data, c, config, evaluator, egdb)
                made[c] = (len(cols["black"]), hashlib.sha256(write_chunk(chunk_path(store, c), made_by, c, cols))
                           .hexdigest())
        manifest = {"made_by": made_by, "chunks": [{"rows": made[c][0], "sha256": made[c][1]} for c in range(chunks)]}
        atomic_write_bytes(store / MANIFEST, json.dumps(manifest, sort_keys=True, indent=1).encode())
    finally:
        lock.close()
    return store


def _manifest(store: Path) -> dict:
    """The store's record of its chunks, as label() writes it last."""
    path = store / MANIFEST
    try:
        doc = json.loads(read_bounded(path, MOST_CHUNK_BYTES, "a label store's record"))
        chunks = doc["chunks"]
        if not (isinstance(doc["made_by"], dict) and isinstance(chunks, list) and chunks
                and all(type(e.get("rows")) is int and isinstance(e.get("sha256"), str) for e in chunks)):
            raise ValueError("not a record of chunks")
    except FileNotFoundError:
        if not store.is_dir():
            raise DistilledLabelError(f"{store}: no label store there (make one: checkers-zero distilled label)") \
                from None
        raise DistilledLabelError(f"{store}: no {MANIFEST}, the record of its chunks: the labelling did not finish "
                                  f"(run checkers-zero distilled label again)") from None
    except (UnusableFile, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DistilledLabelError(f"{path}: unreadable record of the store's chunks ({exc}); run checkers-zero "
                                  f"distilled label again") from None
    return doc


def recorded_chunks(store: Path) -> list[dict]:
    """Each chunk's entry in the store's record: {"rows": labels in it, "sha256": its file's checksum}."""
    return _manifest(store)["chunks"]


def chunk_lengths(store: Path) -> list[tuple[int, int]]:
    """(chunk, labels in it) of each chunk of a store, in read_labels' order, as its record gives them."""
    return [(c, entry["rows"]) for c, entry in enumerate(recorded_chunks(store))]


def read_labels(store: Path) -> tuple[dict[str, np.ndarray], dict]:
    """Every chunk of a store, concatenated, and what made the labels (the teacher's sha256 among it). The
    store's record (MANIFEST) names its chunks: one missing, changed (checksum), of another length or not in
    the record is refused in one line."""
    manifest = _manifest(store)
    made_by, chunks = manifest["made_by"], manifest["chunks"]
    unknown = sorted(p.name for p in store.glob("chunk-*.npz") if p.name not in
                     {chunk_path(store, c).name for c in range(len(chunks))})
    if unknown:
        raise DistilledLabelError(f"{store / unknown[0]}: a chunk its store's {MANIFEST} does not record; delete it "
                                  f"or run checkers-zero distilled label again")
    parts = []
    for c, entry in enumerate(chunks):
        cols = read_chunk(chunk_path(store, c), made_by, c, entry["sha256"])
        if len(cols["black"]) != entry["rows"]:
            raise DistilledLabelError(f"{chunk_path(store, c)}: {len(cols['black'])} labels where its store's "
                                      f"{MANIFEST} records {entry['rows']}; delete it to label it again")
        parts.append(cols)
    return {name: np.concatenate([p[name] for p in parts]) for name in COLUMNS}, made_by


def read_label_stores(stores: list[Path]) -> tuple[dict[str, np.ndarray], list[dict]]:
    """Several stores' labels learnt together (read_labels of each, concatenated) and what made each. They
    must share one teacher: the held-out figures measure the evaluation against it."""
    seen: dict[Path, Path] = {}
    for store in stores:
        # A copy holds the same record: its labels would be learnt, and tested, twice all the same.
        key = hashlib.sha256(read_bounded(store / MANIFEST, MOST_CHUNK_BYTES, "a label store's record")).hexdigest() \
            if (store / MANIFEST).is_file() else store.resolve()
        if key in seen:
            raise DistilledLabelError(f"{store}: the same label store as {seen[key]}, given twice (its labels would "
                                      f"count twice)")
        seen[key] = store
    parts = [read_labels(store) for store in stores]
    teachers = {made_by["teacher_sha256"] for _, made_by in parts}
    if len(teachers) > 1:
        raise DistilledLabelError(f"{', '.join(map(str, stores))}: labels of {len(teachers)} teachers; learn the "
                                  f"stores of one teacher together")
    return ({name: np.concatenate([labels[name] for labels, _ in parts]) for name in COLUMNS},
            [made_by for _, made_by in parts])

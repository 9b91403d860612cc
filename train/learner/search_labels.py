"""Search labels: positions of a pretraining dataset labelled by deeper searches of a player, for distillation.

Distillation (train.learner.distill) teaches a student its teacher's raw judgement. A search of some hundred
simulations driven by that same network sees a few plies further, and its visit shares and root value are
better targets (offline expert iteration: AlphaZero's policy improvement, done once on stored positions).
A search costs some thousand network calls, so the labels are a dataset of their own that grows across
sessions: `checkers-zero pretrain label` adds to it for as long as it is given, and `pretrain train
--teacher T --set search_labels=auto` lays what there is over the teacher's labels (`lay_over`).

What is labelled: the dataset's train split, positions with a choice only (not forced, and not already over
by the draw rules), in one fixed seeded order (`label_order`), so that every session extends the same
sequence and the labels made so far are a uniform sample of the split. Each position is searched as the
player searches in a game: its game replayed from the dataset up to it (the history the draw rules judge),
no noise, `simulations` root visits, the endgame database's positions as exact leaves; a root the database
holds takes its exact value.

An entry: its dataset row; the visit shares over the legal moves (the TOP_ACTIONS most visited perspective
actions, renormalised: distill's format); the root value q = W - L for the side to move; the root's
win/draw/loss, the search's own (W - L = q, D its mean draw probability; certain where proven or held by the
database); the plies left where the search knows them (BatchedSearch.root_plies_left, or the database's
distance), else NaN.

Layout, beside the dataset's arrays::

    DATASET/search-labels/<key>/        a zarr v3 group, one row per entry (LABEL_SCHEMA)
        attributes                      what made the labels (`identity`) and the commit record
                                        {"labels": N, "time": t}
    DATASET/search-labels/<key>.lock    flock held by the one labeller writing that store

The key names everything that decides a label: the teacher's weights (sha256), the simulations, a hash of
the search and rules settings, the endgame database's size, and LABELS_FORMAT.

Commit protocol, the replay store's (selfplay.replay.replay_buffer): chunks are written whole, the commit
record is replaced last, and entries past it are scratch. Entry i always labels position i of the order, so
a labeller killed at any moment (kill -9 included) loses at most the entries it had not committed, and the
next one searches them again: no position is ever counted twice. A committed chunk that is missing or does
not decode is refused with its file named, and an entry that names a move not legal in its position (a chunk
copied over another, or two swapped) when training reads it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zarr
from tqdm import tqdm

from selfplay.replay.replay_buffer import ChunkedColumns, StoreWriter, require_atomic_local_writes, table_problems
from selfplay.tree_search.evaluators import PositionEvaluator
from selfplay.tree_search.search import MOST_SIMULATIONS, BatchedSearch, SearchConfig, per_action, visit_policy
from train.learner.distill import TOP_ACTIONS
from train.learner.learning import Samples, interrupt_between_steps
from train.learner.pretrain_dataset import PretrainDataset
from zero.endgames.egdb import DRAW, UNKNOWN, Egdb
from zero.net.encoding import NUM_ACTIONS, legal_mask_batch
from zero.rules.game import Game, Position, RulesConfig
from zero.run.config import MOST_POSITIONS, MOST_THREADS, check_settings, setting, to_dict
from zero.run.rundir import RunDirError, take_file_lock

STORE_DIR = "search-labels"
LABELS_FORMAT = 1  # of an entry's columns and what they mean: another format is another store
# The order's seed. Changing it would make every store a sample of another order: it is part of the format.
LABEL_ORDER_SEED = 67
DEFAULT_CHUNK_ROWS = 4096
# Trees of 800 simulations take some 2 MB each: 4,096 of them are 8 GB, past what batching gains.
MOST_IN_FLIGHT = 4096
MOST_COMMIT_LABELS = 1 << 20
CHECK_BATCH = 4096  # labelled positions whose legal moves are checked at once (4 MB of flags)

LABEL_SCHEMA: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
    "row": (np.dtype(np.int64), ()),  # the dataset's row
    "policy_actions": (np.dtype(np.int16), (TOP_ACTIONS,)),  # perspective actions, -1 = empty slot
    "policy_probs": (np.dtype(np.float32), (TOP_ACTIONS,)),  # their visit shares, renormalised
    "root_value": (np.dtype(np.float32), ()),  # W - L for the side to move
    "wdl": (np.dtype(np.float32), (3,)),
    "plies_left": (np.dtype(np.float32), ()),  # NaN where the search does not know them
}


class LabelError(Exception):
    """A store that cannot be written or read (busy, damaged, of another dataset); one line saying why."""


@dataclass
class LabelConfig:
    """`checkers-zero pretrain label`: how the positions are searched. Only `search` and `simulations` decide
    a label (they name the store); the rest is how fast the labels come."""

    # No root noise, and the self-play search's settings: its visit counts are what the trainer learns from.
    search: SearchConfig = field(default_factory=SearchConfig)
    simulations: int = setting(800, low=1, high=MOST_SIMULATIONS)  # root visits per position
    games_in_flight: int = setting(64, low=1, high=MOST_IN_FLIGHT)  # positions searched at once, one batch
    commit_labels: int = setting(256, low=1, high=MOST_COMMIT_LABELS)  # entries finished before a commit
    threads: int = setting(1, low=1, high=MOST_THREADS)  # the network's threads (one core per labeller)
    minutes: float = setting(0.0, low=0)  # stop after this long (0: no limit)
    positions: int = setting(0, low=0, high=MOST_POSITIONS)  # stop after this many more labels (0: no limit)

    def validate(self) -> None:
        check_settings(self)


@dataclass
class LabelSummary:
    path: Path
    added: int  # entries this run committed
    total: int  # entries the store holds
    order: int  # positions there are to label
    seconds: float  # searching, after the network and the store were opened


def label_order(data: PretrainDataset, rules: RulesConfig) -> np.ndarray:
    """The dataset rows to label, in the one order every labeller follows: the train split's positions with
    a choice, whose game is not over by the rules at or before them, in a seeded permutation."""
    a = data.arrays
    over = ((a["repetitions"] >= rules.repetitions_for_draw) | (a["no_progress"] >= rules.no_progress_plies)
            | ((a["ply"] >= rules.max_plies) if rules.max_plies else False))
    # An expert game may play on past what these rules call its end; the replay of its history stops there.
    over_so_far = np.cumsum(over)
    starts = data.games["start"][a["game"]]
    over_before_game = np.where(starts > 0, over_so_far[np.maximum(starts - 1, 0)], 0)
    ended = over_so_far - over_before_game > 0
    rows = np.flatnonzero((data.split == 0) & ~a["forced"] & ~ended)
    return np.random.default_rng(LABEL_ORDER_SEED).permutation(rows)


def dataset_position(data: PretrainDataset, row: int) -> Position:
    a = data.arrays
    return Position(int(a["black"][row]), int(a["white"][row]), int(a["kings"][row]), bool(a["black_to_move"][row]))


def dataset_game(data: PretrainDataset, row: int, rules: RulesConfig) -> Game:
    """The game of a dataset row replayed from its first row up to this one: the position with the history
    that repetitions and the no-progress count are judged by."""
    first = int(data.games["start"][data.arrays["game"][row]])
    game = Game(dataset_position(data, first), rules=rules)
    for r in range(first + 1, row + 1):
        after = dataset_position(data, r)
        move = next((m for m in game.legal_moves() if game.position.play(m) == after), None)
        if move is None:
            raise LabelError(f"{data.path}: row {r} does not follow from row {r - 1} by a legal move; the dataset "
                             f"is damaged (build it again with `checkers-zero pretrain dataset`)")
        game.play(move)
    return game


def top_policy(actions: np.ndarray, shares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A policy in TOP_ACTIONS slots: its likeliest actions, renormalised (-1 and 0 in empty slots)."""
    keep = np.argsort(-shares, kind="stable")[:TOP_ACTIONS]
    padded_actions = np.full(TOP_ACTIONS, -1, np.int16)
    padded_probs = np.zeros(TOP_ACTIONS, np.float32)
    padded_actions[:len(keep)] = actions[keep]
    padded_probs[:len(keep)] = shares[keep] / shares[keep].sum()
    return padded_actions, padded_probs


def search_entry(search: BatchedSearch, g: int, game: Game, row: int, egdb: Egdb,
                 evaluator: PositionEvaluator) -> dict[str, np.ndarray]:
    """The label of tree g's finished search of `game`'s position (dataset row `row`)."""
    position = game.position
    children = search.root_children(g)
    if children.visits.sum():
        actions, shares = visit_policy(children, position.black_to_move)
    else:  # proven at its expansion, before any child was visited: the move the search would play
        actions, shares = per_action(children, position.black_to_move,
                                     np.eye(len(children.visits))[children.best()])
    policy_actions, policy_probs = top_policy(actions, shares)
    wdl = np.asarray(search.root_wdl(g), np.float32)
    value = search.root_value(g)
    plies = search.root_plies_left(g, evaluator)
    exact = egdb.probe(position)
    if exact.value != UNKNOWN:
        wdl, value = np.eye(3, dtype=np.float32)[1 - exact.value], float(exact.value)
        plies = float(exact.distance) if exact.value != DRAW else None
    return {"row": row, "policy_actions": policy_actions, "policy_probs": policy_probs, "root_value": value,
            "wdl": wdl / wdl.sum(), "plies_left": math.nan if plies is None else plies}


def identity(data: PretrainDataset, teacher: str | Path, config: LabelConfig, rules: RulesConfig,
             egdb_pieces: int) -> dict:
    """What made a store's labels, kept in its attributes; all of it but the teacher's path is checked when
    a labeller opens the store again."""
    from zero.net.checkpoint import load_checkpoint, weights_sha256

    return {
        "format": LABELS_FORMAT, "teacher": str(teacher),
        "teacher_sha256": weights_sha256(load_checkpoint(teacher).state_dict),
        "simulations": config.simulations, "search": to_dict(config.search), "rules": to_dict(rules),
        "egdb_pieces": egdb_pieces, "order_seed": LABEL_ORDER_SEED,
        "dataset": {"source_sha256": data.attrs.get("source_sha256"), "positions": len(data)},
    }


def store_path(data: PretrainDataset, made_by: dict) -> Path:
    """Where the labels made so (`identity`) live: the key names everything that decides a label."""
    settings = json.dumps({"search": made_by["search"], "rules": made_by["rules"]}, sort_keys=True)
    key = "-".join([made_by["teacher_sha256"][:16], f"{made_by['simulations']}sims",
                    hashlib.sha256(settings.encode()).hexdigest()[:8], f"egdb{made_by['egdb_pieces']}",
                    f"v{made_by['format']}"])
    return data.path / STORE_DIR / key


def _checked(path: Path, group: zarr.Group, order: np.ndarray | None) -> int:
    """The committed entries of the store at `path`, after holding it to the definition of intact: a commit
    record of this code's form, every column of LABEL_SCHEMA's dtype and shape, holding the committed rows in
    whole chunks, every committed chunk there and decoding; and, given the `order`, committed rows in it."""
    commit = group.attrs.get("commit")
    count = commit.get("labels") if isinstance(commit, dict) else None
    if type(count) is not int or count < 0:
        raise LabelError(f"{path / 'zarr.json'}: the commit record {commit!r} is damaged, so the committed labels "
                         f"cannot be told from scratch rows; move {path} aside to label again")
    arrays = {name: group[name] for name in LABEL_SCHEMA if name in group}
    problems, _ = table_problems(path, LABEL_SCHEMA, arrays, count, 0, decode=True)
    if problems:
        file, what = problems[0]
        what = " ".join(what.split())  # a codec's message may run over lines: the error stays one
        raise LabelError(f"{file}: {what}; the search labels in {path} are damaged: move that folder aside to "
                         f"label again")
    if order is not None and count:
        rows = arrays["row"][:count]
        if len(order) < count or (rows != order[:count]).any():
            raise LabelError(f"{path}: its labels are of other positions than this dataset's order (a dataset "
                             f"built again?); move that folder aside to label again")
    return count


def _has_record(path: Path) -> bool:
    """Whether the store at `path` has its zarr.json, which holds the commit record; False for no store at
    all. A folder holding anything without it is damage (the replay store's rule: arrays without their record
    are never a fresh start), refused, as a new store there would be written over the labels."""
    record = path / "zarr.json"
    if record.exists():
        return True
    if path.is_dir() and any(path.iterdir()):
        raise LabelError(f"{record}: missing, though {path} holds label arrays, so the committed labels cannot be "
                         f"told from scratch rows; move {path} aside to label again")
    return False


class LabelWriter(StoreWriter):
    """Appends entries to one store (its only writer, by an flock): `append` queues an entry, and the queue
    is committed once it holds `commit_labels` entries, and on `flush()` / `close()` (the replay store's
    writers' StoreWriter, whose lock and commit steps it shares)."""

    def __init__(self, path: Path, made_by: dict, order: np.ndarray, commit_labels: int = 256,
                 chunk_rows: int = DEFAULT_CHUNK_ROWS):
        require_atomic_local_writes()
        self.path = self.group_dir = Path(path)
        self.commit_labels = commit_labels
        try:
            self._lock = take_file_lock(self.path.with_name(self.path.name + ".lock"),
                                        f"another labeller is writing {self.path}; stop it first")
        except RunDirError as exc:
            raise LabelError(str(exc)) from None
        try:
            self._open(made_by, order, chunk_rows)
        except BaseException:
            self._release_lock()
            raise
        self._pending: list[dict] = []

    def _open(self, made_by: dict, order: np.ndarray, chunk_rows: int) -> None:
        fresh = not _has_record(self.path)
        if fresh:
            # The attributes go into the group's first zarr.json: the store is never seen without them.
            self._group = zarr.open_group(self.path, mode="w", zarr_format=3,
                                          attributes={**made_by, "commit": {"labels": 0, "time": 0.0}})
        else:
            try:
                self._group = zarr.open_group(self.path, mode="r+", zarr_format=3)
            except (ValueError, KeyError, TypeError) as exc:
                raise LabelError(f"{self.path / 'zarr.json'}: unreadable zarr metadata ({exc}); move {self.path} "
                                 f"aside to label again") from None
            stored = {k: v for k, v in self._group.attrs.items() if k not in ("commit", "teacher")}
            wanted = {k: v for k, v in made_by.items() if k != "teacher"}
            if stored != wanted:
                changed = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
                raise LabelError(f"{self.path}: made with other settings ({', '.join(changed)}) than these")
        self.committed = _checked(self.path, self._group, order)
        for leftover in self.path.rglob("*.partial"):  # a killed writer's half-written files
            leftover.unlink(missing_ok=True)
        self._columns = ChunkedColumns(self._group, LABEL_SCHEMA, chunk_rows, self.committed)

    @property
    def count(self) -> int:
        """Entries committed or queued: the index in the order of the next entry."""
        return self.committed + len(self._pending)

    def append(self, entry: dict) -> None:
        self._pending.append(entry)
        if len(self._pending) >= self.commit_labels:
            self.flush()

    def _commit_pending(self) -> None:
        if not self._pending:
            return
        new = {name: np.array([entry[name] for entry in self._pending], dtype)
               for name, (dtype, _) in LABEL_SCHEMA.items()}
        self._columns.put(self.committed, new)
        end = self.committed + len(self._pending)
        self._group.attrs.update({"commit": {"labels": end, "time": time.time()}})  # the commit
        self._columns.advance(self.committed, new)
        self.committed = end
        self._pending = []


def label(data: PretrainDataset, teacher: str | Path, config: LabelConfig, progress: bool = True,
          evaluator: PositionEvaluator | None = None, egdb: Egdb | None = None) -> LabelSummary:
    """Add labels to the store of (data, teacher, config): the next positions of the order, searched
    `config.games_in_flight` at once, until `config.minutes` have passed, `config.positions` more are
    labelled, the order is done, or SIGINT / SIGTERM comes; what is finished in order is committed, the
    searches in flight are dropped (the next run searches them again). `evaluator` replaces the teacher's
    int8 model (tests), `egdb` the largest endgame database built."""
    from zero.endgames.egdb_build import largest_available

    config.validate()
    deadline = time.monotonic() + config.minutes * 60 if config.minutes > 0 else math.inf
    rules = RulesConfig()
    egdb = egdb or largest_available()
    made_by = identity(data, teacher, config, rules, egdb.max_pieces)
    path = store_path(data, made_by)
    order = label_order(data, rules)
    if evaluator is None:
        import torch

        from zero.net.inference import Evaluator

        torch.set_num_threads(config.threads)
        evaluator = Evaluator.from_checkpoint(teacher, device="cpu", threads=config.threads)
    with LabelWriter(path, made_by, order, config.commit_labels) as writer, \
            interrupt_between_steps((signal.SIGINT, signal.SIGTERM)) as stopped:
        first, t0 = writer.committed, time.perf_counter()
        end = min(len(order), first + config.positions) if config.positions else len(order)
        if progress:
            print(f"search labels in {path}: {first:,} of the {len(order):,} positions labelled so far")
        search = BatchedSearch(max(1, min(config.games_in_flight, end - first)), config.search, rules,
                               simulations=config.simulations, egdb=egdb)
        slots: list[tuple[int, Game] | None] = [None] * search.games
        finished: dict[int, dict] = {}  # entries searched ahead of one still in flight
        started = first
        bar = tqdm(total=end - first, desc="search labels", unit=" positions", disable=not progress,
                   dynamic_ncols=True)
        while not stopped.is_set() and time.monotonic() < deadline:
            for g in range(search.games):
                if slots[g] is None and started < end:
                    game = dataset_game(data, int(order[started]), rules)
                    search.set_root(g, game)
                    search.start(g, config.simulations)
                    slots[g] = (started, game)
                    started += 1
            if all(slot is None for slot in slots):
                break
            search.step(evaluator)
            for g in map(int, np.flatnonzero(search.complete())):
                index, game = slots[g]
                slots[g] = None
                search.stop(g)
                finished[index] = search_entry(search, g, game, int(order[index]), egdb, evaluator)
                bar.update(1)
            while writer.count in finished:  # entry i labels order[i]: appended in order
                writer.append(finished.pop(writer.count))
        bar.close()
    return LabelSummary(path, writer.committed - first, writer.committed, len(order), time.perf_counter() - t0)


@dataclass
class SearchLabels:
    """A store's committed entries, read whole (LABEL_SCHEMA's columns)."""

    path: Path
    made_by: dict
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["row"])

    def lay_over(self, samples: Samples, rows: np.ndarray, weight: float = 1.0) -> tuple[Samples, int]:
        """`samples` (sample i is the dataset's row rows[i]; -1 for a position not of the dataset) with the
        search's targets on every labelled row: its visit shares as the policy target, its win/draw/loss as
        the value target, its plies left where it knows them; those rows weigh `weight` in each head's loss
        (a teacher's label weighs 1). Returns the samples and how many took a label."""
        labelled = np.argsort(self.columns["row"])
        by_row = self.columns["row"][labelled]
        at = np.minimum(np.searchsorted(by_row, rows), max(len(by_row) - 1, 0))
        hit = (by_row[at] == rows) & (rows >= 0) if len(by_row) else np.zeros(len(rows), bool)
        take = labelled[at[hit]]
        self._check_moves(take, samples, np.flatnonzero(hit))
        width = max(samples.policy_actions.shape[1], TOP_ACTIONS)
        actions = np.pad(samples.policy_actions, ((0, 0), (0, width - samples.policy_actions.shape[1])),
                         constant_values=-1)
        probs = np.pad(samples.policy_probs, ((0, 0), (0, width - samples.policy_probs.shape[1])))
        actions[hit], probs[hit] = -1, 0.0
        actions[hit, :TOP_ACTIONS] = self.columns["policy_actions"][take]
        probs[hit, :TOP_ACTIONS] = self.columns["policy_probs"][take]
        wdl = np.array(samples.wdl if np.ndim(samples.wdl) == 2 else np.eye(3, dtype=np.float32)[samples.wdl],
                       np.float32)
        wdl[hit] = self.columns["wdl"][take]
        plies = np.full(len(rows), np.nan, np.float32)
        plies[hit] = self.columns["plies_left"][take]
        known = ~np.isnan(plies)
        moves_left = np.array(samples.moves_left, np.float32)
        moves_left[known] = plies[known]
        policy_weight, value_weight, moves_left_weight = (np.array(w, np.float32) for w in (
            samples.policy_weight, samples.value_weight, samples.moves_left_weight))
        policy_weight[hit], value_weight[hit], moves_left_weight[known] = weight, weight, weight
        return dataclasses.replace(
            samples, policy_actions=actions, policy_probs=probs, wdl=wdl, moves_left=moves_left,
            policy_weight=policy_weight, value_weight=value_weight, moves_left_weight=moves_left_weight,
        ), int(hit.sum())


    def _check_moves(self, entries: np.ndarray, samples: Samples, at: np.ndarray) -> None:
        """Raises LabelError unless every move the entries name is legal in its position (samples[at]). The
        chunks of a store decode whatever row they came from: one copied over another, or two swapped, pass
        every check of the files, and only the moves tell that a label is of another position."""
        for lo in range(0, len(entries), CHECK_BATCH):
            part, where = entries[lo:lo + CHECK_BATCH], at[lo:lo + CHECK_BATCH]
            legal = np.zeros((len(part), NUM_ACTIONS), np.bool_)
            legal_mask_batch(samples.black[where], samples.white[where], samples.kings[where],
                             samples.black_to_move[where], legal)
            actions = self.columns["policy_actions"][part].astype(np.int64)
            named = actions >= 0
            wrong = named & ~np.take_along_axis(legal, np.where(named, actions, 0), axis=1)
            if wrong.any():
                i, k = np.argwhere(wrong)[0]
                raise LabelError(f"{self.path}: entry {part[i]} (the dataset's row {self.columns['row'][part[i]]}) "
                                 f"names action {actions[i, k]}, no legal move of its position: the store's chunks "
                                 f"are damaged (copied or swapped); move that folder aside to label again")


def read_labels(path: str | Path) -> SearchLabels:
    """The committed entries of the store at `path` (LabelError naming the file when it is damaged)."""
    path = Path(path)
    if not _has_record(path):
        raise LabelError(f"no search labels at {path} (make some with `checkers-zero pretrain label`)")
    try:
        group = zarr.open_group(path, mode="r", zarr_format=3)
    except (ValueError, KeyError, TypeError) as exc:
        raise LabelError(f"{path / 'zarr.json'}: unreadable zarr metadata ({exc})") from None
    count = _checked(path, group, None)
    made_by = {k: v for k, v in group.attrs.items() if k != "commit"}
    if made_by.get("format") != LABELS_FORMAT:
        raise LabelError(f"{path}: search labels of format {made_by.get('format')!r}; this code reads "
                         f"{LABELS_FORMAT}")
    return SearchLabels(path, made_by, {name: group[name][:count] for name in LABEL_SCHEMA})


def find_labels(data: PretrainDataset, teacher: str | Path, where: str) -> SearchLabels:
    """The labels `where` names: a store's folder, or "auto" for the store beside the dataset, made by the
    teacher's weights, that holds the most labels."""
    if where != "auto":
        return read_labels(where)
    from zero.net.checkpoint import load_checkpoint, weights_sha256

    sha = weights_sha256(load_checkpoint(teacher).state_dict)
    stores = sorted(p for p in (data.path / STORE_DIR).glob("*") if p.is_dir() and p.name.startswith(sha[:16]))
    found = [read_labels(p) for p in stores]
    if not found:
        raise LabelError(f"no search labels of {teacher} in {data.path / STORE_DIR} (make some with `checkers-zero "
                         f"pretrain label --data {data.path} --teacher {teacher}`)")
    return max(found, key=len)

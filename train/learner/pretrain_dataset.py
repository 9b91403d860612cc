"""Expert-game datasets for pretraining: PDN games -> one zarr group of positions, split by game.

Layout (zarr v3 group; every array 1-D, one row per position where a move was played, games contiguous):

    black, white, kings   uint32  board masks (bit s-1 = square s), real board (not from the mover's view)
    black_to_move         bool
    no_progress           uint8   plies since the last capture or man move (capped at 255)
    repetitions           uint8   occurrences of this position so far, this one included (1 = first)
    action                int16   the expert move's action index (zero.net.encoding), from the mover's view
    num_legal             uint8   legal moves (duplicate capture paths merged)
    forced                bool    a single legal move: kept for the value, no policy target
    shared                bool    two legal moves share a from-to action here
    result                int8    game result for the side to move: +1 win, 0 draw, -1 loss
    moves_left            int16   plies from this position to the end of the recorded game
    pieces                uint8   pieces on the board (the phase of the game)
    game                  int32   row in the per-game arrays below
    ply                   int16   plies played before this position

    games/index           int32   game number in the PDN file (1-based)
    games/start, games/length  int64, int32  its rows
    games/result          int8    +1 Black won, 0 draw, -1 White won
    games/split           uint8   0 train, 1 validation, 2 test
    games/group           int32   games with the same move sequence share a group id

The input planes and legal-move masks are not stored: they are rebuilt per batch from the masks with the
numba kernels (zero.net.encoding.encode_batch, legal_mask_batch), which is ~20 bytes a position instead of
~1.9 kB of planes and 128 bytes of mask, and costs a small fraction of a training step.

The split is by game and deterministic: a game's side is decided by the sha256 of a salt and its move
sequence, so identical games (OCA has hundreds of duplicated sequences) always land on the same side, and
adding or removing other games never moves a game to another side.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit
from tqdm import tqdm

from train.learner.learning import SOURCES, Samples
from zero.corpus.pdn import PdnError, PdnGame, read_pdn
from zero.net.encoding import action_index, count_shared_moves, legal_action_array
from zero.rules import movegen
from zero.rules.bitboard import popcount
from zero.rules.game import Position
from zero.run.config import file_sha256, setting

SPLITS = ("train", "val", "test")
TRAIN, VAL, TEST = 0, 1, 2
DATASET_FORMAT = "checkers-zero-pretrain-dataset"
DATASET_VERSION = 1
POSITION_ARRAYS = (
    "black", "white", "kings", "black_to_move", "no_progress", "repetitions", "action", "num_legal", "forced",
    "shared", "result", "moves_left", "pieces", "game", "ply",
)
GAME_ARRAYS = ("index", "start", "length", "result", "split", "group")
RESULT_OF_PDN = {"1-0": 1, "0-1": -1, "1/2-1/2": 0}


class DatasetError(Exception):
    """A dataset that cannot be built or opened; the message says why."""


@dataclass
class DatasetConfig:
    """How a PDN file becomes a dataset."""

    val_fraction: float = 0.05  # share of games (by sequence hash) in the validation split
    test_fraction: float = 0.05  # share of games in the test split
    split_salt: str = "checkers-zero-split-v1"  # changing it draws a different (still deterministic) split
    chunk_rows: int = setting(1 << 16, low=1, high=1 << 24)  # zarr chunk length of the position arrays


def split_of(moves_text: str, cfg: DatasetConfig) -> int:
    """TRAIN, VAL or TEST for a game, from the hash of its move sequence (the same moves, the same side)."""
    digest = hashlib.sha256(f"{cfg.split_salt}\n{moves_text}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < cfg.test_fraction:
        return TEST
    if u < cfg.test_fraction + cfg.val_fraction:
        return VAL
    return TRAIN


def game_key(game: PdnGame) -> str:
    """The text a game's split and duplicate group are decided by: its start and its moves."""
    return f"{game.start}\n{' '.join(str(m) for m in game.moves)}"


def split_of_game(game: PdnGame, cfg: DatasetConfig) -> int:
    """TRAIN, VAL or TEST for a game read from PDN: the side the dataset puts it on."""
    return split_of(game_key(game), cfg)


@njit(cache=True)
def game_rows(black, white, kings, black_to_move, frm, to, captured, winner, out, row0):
    """Replay one game's moves (bits frm[i] -> to[i] capturing captured[i]) from the start position and
    write one row per position before each move into the columns of out (int64 [len(POSITION_ARRAYS)-2,
    rows]) from row0: everything but game and ply. winner: +1 Black, 0 draw, -1 White."""
    n = frm.shape[0]
    moves = np.zeros((movegen.BUFFER_ROWS, movegen.MOVE_FIELDS), dtype=np.int64)
    actions = np.zeros(movegen.MAX_MOVES, dtype=np.int64)
    hist_b = np.zeros(n + 1, dtype=np.int64)
    hist_w = np.zeros(n + 1, dtype=np.int64)
    hist_k = np.zeros(n + 1, dtype=np.int64)
    no_progress = 0
    for i in range(n):
        hist_b[i], hist_w[i], hist_k[i] = black, white, kings
        reps = 1
        for back in range(2, no_progress + 1, 2):
            j = i - back
            if hist_b[j] == black and hist_w[j] == white and hist_k[j] == kings:
                reps += 1
        num = legal_action_array(black, white, kings, black_to_move, moves, actions)
        r = row0 + i
        out[0, r] = black
        out[1, r] = white
        out[2, r] = kings
        out[3, r] = black_to_move
        out[4, r] = min(no_progress, 255)
        out[5, r] = min(reps, 255)
        out[6, r] = action_index(frm[i], to[i], black_to_move)
        out[7, r] = num
        out[8, r] = num == 1
        out[9, r] = count_shared_moves(actions, num) > 0
        out[10, r] = winner if black_to_move else -winner
        out[11, r] = n - i
        out[12, r] = popcount(black | white)
        no_progress = 0 if movegen.is_irreversible(kings, frm[i], captured[i]) else no_progress + 1
        black, white, kings = movegen.make(black, white, kings, black_to_move, frm[i], to[i], captured[i])
        black_to_move = not black_to_move



# Columns of game_rows' output, in POSITION_ARRAYS order (game and ply are filled in Python).
_KERNEL_COLUMNS = POSITION_ARRAYS[:13]
_DTYPES = {
    "black": np.uint32, "white": np.uint32, "kings": np.uint32, "black_to_move": np.bool_, "no_progress": np.uint8,
    "repetitions": np.uint8, "action": np.int16, "num_legal": np.uint8, "forced": np.bool_, "shared": np.bool_,
    "result": np.int8, "moves_left": np.int16, "pieces": np.uint8, "game": np.int32, "ply": np.int16,
}
_GAME_DTYPES = {"index": np.int32, "start": np.int64, "length": np.int32, "result": np.int8, "split": np.uint8,
                "group": np.int32}


@dataclass
class _GameMoves:
    index: int
    start: Position
    frm: np.ndarray
    to: np.ndarray
    captured: np.ndarray
    winner: int
    split: int
    group: int


def _collect_games(pdn: Path, cfg: DatasetConfig, progress: bool) -> tuple[list[_GameMoves], dict]:
    games: list[_GameMoves] = []
    groups: dict[bytes, int] = {}
    skipped = {"unreadable": 0, "no_result": 0, "no_moves": 0}
    first_errors: list[str] = []
    for item in tqdm(read_pdn(pdn), desc="reading games", unit=" games", disable=not progress):
        if isinstance(item, PdnError):
            skipped["unreadable"] += 1
            if len(first_errors) < 5:
                first_errors.append(str(item))
            continue
        assert isinstance(item, PdnGame)
        if item.result not in RESULT_OF_PDN:
            skipped["no_result"] += 1
            continue
        if not item.moves:
            skipped["no_moves"] += 1
            continue
        key = hashlib.sha256(game_key(item).encode()).digest()
        group = groups.setdefault(key, len(groups))
        games.append(_GameMoves(
            index=item.index, start=item.start,
            frm=np.array([m.from_square - 1 for m in item.moves], dtype=np.int64),
            to=np.array([m.to_square - 1 for m in item.moves], dtype=np.int64),
            captured=np.array([m.captured for m in item.moves], dtype=np.int64),
            winner=RESULT_OF_PDN[item.result], split=split_of_game(item, cfg), group=group,
        ))
    return games, {"skipped": skipped, "first_errors": first_errors}


def build_dataset(pdn: str | Path, out_dir: str | Path, cfg: DatasetConfig | None = None,
                  progress: bool = True) -> dict:
    """Read a PDN file, replay every game, write the zarr dataset to out_dir (replacing it), and return its
    summary (also stored in the group's attributes)."""
    import zarr

    cfg = cfg or DatasetConfig()
    pdn, out_dir = Path(pdn), Path(out_dir)
    if not pdn.is_file():
        raise DatasetError(f"PDN file {pdn} not found")
    games, read_info = _collect_games(pdn, cfg, progress)
    if not games:
        raise DatasetError(f"{pdn}: no usable game (skipped: {read_info['skipped']}; {read_info['first_errors']})")
    total = sum(len(g.frm) for g in games)
    cols = np.zeros((len(_KERNEL_COLUMNS), total), dtype=np.int64)
    game_col = np.zeros(total, dtype=np.int64)
    ply_col = np.zeros(total, dtype=np.int64)
    per_game = {name: np.zeros(len(games), dtype=np.int64) for name in GAME_ARRAYS}
    row = 0
    for gi, g in enumerate(tqdm(games, desc="encoding positions", unit=" games", disable=not progress)):
        n = len(g.frm)
        s = g.start
        game_rows(s.black, s.white, s.kings, s.black_to_move, g.frm, g.to, g.captured, g.winner, cols, row)
        game_col[row:row + n] = gi
        ply_col[row:row + n] = np.arange(n)
        for name, value in (("index", g.index), ("start", row), ("length", n), ("result", g.winner),
                            ("split", g.split), ("group", g.group)):
            per_game[name][gi] = value
        row += n

    arrays = {name: cols[k] for k, name in enumerate(_KERNEL_COLUMNS)}
    arrays["game"], arrays["ply"] = game_col, ply_col
    summary = _summarise(arrays, per_game)
    summary.update(read_info)
    attrs = {
        "format": DATASET_FORMAT, "version": DATASET_VERSION, "source": pdn.name,
        "source_sha256": file_sha256(pdn), "config": cfg.__dict__, "summary": summary,
    }
    # Write beside the target and rename, so a reader never opens a half-written dataset.
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    group = zarr.open_group(str(tmp), mode="w", zarr_format=3)
    for name in POSITION_ARRAYS:
        group.create_array(name, data=arrays[name].astype(_DTYPES[name]), chunks=(cfg.chunk_rows,))
    for name in GAME_ARRAYS:
        group.create_array(f"games/{name}", data=per_game[name].astype(_GAME_DTYPES[name]))
    group.attrs.update(json.loads(json.dumps(attrs)))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return summary


def _summarise(arrays: dict[str, np.ndarray], games: dict[str, np.ndarray]) -> dict:
    """Counts per split, result balance, forced and shared-action positions, duplicate groups."""
    split_of_row = games["split"][arrays["game"]]
    out: dict = {"splits": {}}
    for k, name in enumerate(SPLITS):
        rows = split_of_row == k
        in_split = games["split"] == k
        res = arrays["result"][rows]
        gres = games["result"][in_split]
        out["splits"][name] = {
            "games": int(in_split.sum()),
            "positions": int(rows.sum()),
            "policy_positions": int((rows & (arrays["forced"] == 0)).sum()),
            "game_results": {"black_won": int((gres == 1).sum()), "draw": int((gres == 0).sum()),
                             "white_won": int((gres == -1).sum())},
            "position_results": {"win": int((res == 1).sum()), "draw": int((res == 0).sum()),
                                 "loss": int((res == -1).sum())},
        }
    group_sizes = np.bincount(games["group"])
    sides_per_group = {}
    for g, s in zip(games["group"].tolist(), games["split"].tolist()):
        sides_per_group.setdefault(g, set()).add(s)
    out["positions"] = int(len(arrays["game"]))
    out["games"] = int(len(games["split"]))
    out["forced_positions"] = int(arrays["forced"].sum())
    out["shared_action_positions"] = int(arrays["shared"].sum())
    out["duplicate_groups"] = int((group_sizes > 1).sum())
    out["games_in_duplicate_groups"] = int(group_sizes[group_sizes > 1].sum())
    out["groups_split_across_sides"] = sum(len(s) > 1 for s in sides_per_group.values())
    return out


def format_summary(summary: dict) -> str:
    """The dataset command's report: counts per split, result balance, forced and shared positions."""
    lines = [f"{summary['games']} games, {summary['positions']} positions "
             f"({summary['forced_positions']} forced: value target only)"]
    sk = summary.get("skipped", {})
    if any(sk.values()):
        lines.append(f"skipped games: {sk}")
    lines.append(f"{'split':6} {'games':>7} {'positions':>10} {'policy':>9}   games B-won/draw/W-won      "
                 f"positions win/draw/loss (mover)")
    for name, s in summary["splits"].items():
        g, p = s["game_results"], s["position_results"]
        gt, pt = max(s["games"], 1), max(s["positions"], 1)
        lines.append(
            f"{name:6} {s['games']:7d} {s['positions']:10d} {s['policy_positions']:9d}   "
            f"{g['black_won'] / gt:5.1%} {g['draw'] / gt:5.1%} {g['white_won'] / gt:5.1%}        "
            f"{p['win'] / pt:5.1%} {p['draw'] / pt:5.1%} {p['loss'] / pt:5.1%}"
        )
    lines.append(f"duplicate move sequences: {summary['duplicate_groups']} groups "
                 f"({summary['games_in_duplicate_groups']} games), split across sides: "
                 f"{summary['groups_split_across_sides']}")
    lines.append(f"positions where two legal moves share a from-to action: {summary['shared_action_positions']} "
                 f"({summary['shared_action_positions'] / max(summary['positions'], 1):.4%})")
    return "\n".join(lines)


class PretrainDataset:
    """A dataset held in memory (about 25 bytes a position), with per-split row indices and batch building."""

    def __init__(self, arrays: dict[str, np.ndarray], games: dict[str, np.ndarray], attrs: dict, path: Path):
        self.arrays = arrays
        self.games = games
        self.attrs = attrs
        self.path = path
        self.split = games["split"][arrays["game"]]

    @classmethod
    def open(cls, path: str | Path) -> "PretrainDataset":
        import zarr

        path = Path(path)
        if not path.is_dir():
            raise DatasetError(f"no dataset at {path} (build one with: checkers-zero pretrain dataset --pdn FILE --out {path})")
        try:
            group = zarr.open_group(str(path), mode="r")
            attrs = dict(group.attrs)
            if attrs.get("format") != DATASET_FORMAT:
                raise DatasetError(f"{path} is not a pretraining dataset (format {attrs.get('format')!r})")
            if attrs.get("version") != DATASET_VERSION:
                raise DatasetError(f"{path}: dataset version {attrs.get('version')}, this code reads {DATASET_VERSION}")
            arrays = {name: group[name][:] for name in POSITION_ARRAYS}
            games = {name: group[f"games/{name}"][:] for name in GAME_ARRAYS}
        except DatasetError:
            raise
        except Exception as exc:  # zarr raises several kinds for missing or damaged arrays
            raise DatasetError(f"{path}: cannot read dataset: {exc}") from exc
        return cls(arrays, games, attrs, path)

    def __len__(self) -> int:
        return len(self.split)

    def rows(self, split: str) -> np.ndarray:
        """Row indices of a split ('train', 'val' or 'test'), ascending."""
        return np.flatnonzero(self.split == SPLITS.index(split))

    def samples(self, rows: np.ndarray) -> Samples:
        """Training samples of the given rows: the expert's move as a one-hot policy target (no policy
        target where the move was forced), the game's result and its plies to go."""
        a = self.arrays
        n = len(rows)
        ones = np.ones(n, np.float32)
        return Samples(
            black=a["black"][rows], white=a["white"][rows], kings=a["kings"][rows],
            black_to_move=a["black_to_move"][rows], no_progress=a["no_progress"][rows],
            repetitions=a["repetitions"][rows], policy_actions=a["action"][rows, None], policy_probs=ones[:, None],
            wdl=(1 - a["result"][rows]).astype(np.int64), moves_left=a["moves_left"][rows].astype(np.float32),
            policy_weight=(~a["forced"][rows]).astype(np.float32), value_weight=ones, moves_left_weight=ones,
            source=np.full(n, SOURCES.index("expert"), np.int8),
        )


def open_dataset(path: str | Path) -> PretrainDataset:
    """Open a dataset written by build_dataset (raises DatasetError with the reason when it cannot)."""
    return PretrainDataset.open(path)

"""Where a network comes from: a run's summary for the model card, and runs that continue other runs.

Training accumulates across sessions and machines as a chain of runs: `checkers-zero loop --from SOURCE`
starts a new run from another run's best network (the loop's `initial_checkpoint`), and with
`--take-replay` it also takes the source's newest replay window and its trainer state, so the new run
trains on as the source would have (`continue_run`). What it took, with the source's own summary, is
written to the new run's `continued-from.json`, so the chain stays readable where the source run is not
(another machine): `checkers-zero ship` writes the model card from it (train.shipping.ship).
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

from selfplay.replay.replay_buffer import COPIED_GAMES_ACTOR_ID, ReplayReader, ReplayWriter
from selfplay.replay.stats import replay_stats
from train.arena.gating import read_gating_log
from train.learner.trainer import TrainerConfig, window_size
from zero.net.checkpoint import load_checkpoint, save_checkpoint
from zero.run.config import atomic_write_bytes, file_sha256
from zero.run.rundir import RunDir

log = logging.getLogger(__name__)

# Copied games are committed in batches of this many positions: a crash during the copy loses at most one
# batch, and the next start copies on from the last commit.
COPY_COMMIT_POSITIONS = 65_536


class LineageError(ValueError):
    """A source that a run cannot continue from; the message says why."""


def run_summary(run_dir: Path) -> dict:
    """What the model card says of a run, read from its directory alone: the settings, every start's code
    version, the network it started from, its replay store, its promotions, and what it continued."""
    run = RunDir(run_dir)
    records = []
    for path in sorted(run.logs.glob("*-record.json")):
        record = json.loads(path.read_text())
        records.append({"name": path.name.removesuffix("-record.json"), "code_version": record.get("code_version"),
                        "started": record.get("started"), "argv": record.get("argv")})
    initial = None
    if run.initial_checkpoints():
        path = run.initial_checkpoints()[0]
        initial = {"name": path.name, "step": load_checkpoint(path).step, "sha256": file_sha256(path)}
    replay = None
    if (run.replay_store / "zarr.json").exists():
        figures = replay_stats(ReplayReader(run.root))
        replay = {key: figures[key] for key in ("games", "positions", "results")}
    promotions = [{key: entry[key] for key in ("candidate", "candidate_step", "games", "wins", "draws", "losses",
                                               "elo", "elo_ci95")}
                  for entry in read_gating_log(run.root) if entry["decision"] == "promote"]
    return {
        "path": str(run.root.resolve()),
        "config": run.config_file.read_text() if run.config_file.exists() else None,
        "records": records,
        "initial": initial,
        "replay": replay,
        "promotions": promotions,
        "continued_from": (json.loads(run.continuation_file.read_text()) if run.continuation_file.exists()
                           else None),
    }


def continue_run(run_dir: Path, source: Path, trainer: TrainerConfig) -> dict:
    """Give a new run the source run's newest replay window and its trainer state; returns the record
    written to the run's continued-from.json (or the one found there: the copies are made once).

    The games go through the normal replay writer (as actor COPIED_GAMES_ACTOR_ID), oldest first, so their
    commit records are the store's own and they stay older than every game the new run plays. The window
    is the one the new run's trainer would sample from the source's positions. The trainer continues from
    the source's trainer state (weights, optimizer, step); of the samples it had drawn, it keeps those
    still owed to the copied positions, so each position is trained on no more often than in one run."""
    run, origin = RunDir(run_dir), RunDir(source)
    if run.continuation_file.exists():
        return json.loads(run.continuation_file.read_text())
    if not origin.is_run():
        raise LineageError(f"{source} is not a run directory: only a run has a replay store and a trainer "
                           f"state to take (a checkpoint file can still be a run's start, without --take-replay)")
    if origin.root.resolve() == run.root.resolve():
        raise LineageError(f"{source} cannot continue itself")
    if not origin.trainer_state.exists():
        raise LineageError(f"{source} has no trainer state ({origin.trainer_state}) to continue from")
    reader = ReplayReader(origin.root)
    committed = reader.positions_committed()
    window = window_size(trainer, committed)
    games = reader.newest_games(window)
    with ReplayWriter(run.root, COPIED_GAMES_ACTOR_ID, commit_positions=COPY_COMMIT_POSITIONS,
                      commit_seconds=math.inf) as writer:
        for game in games[writer.committed_games:]:  # a copy cut short by a crash goes on where it stopped
            writer.append_game(game)
    copied = sum(game.length for game in games)

    state = load_checkpoint(origin.trainer_state)
    drawn = int(state.extra.get("samples_drawn", 0))
    owed = max(0, int(drawn - trainer.samples_per_position * (committed - copied)))
    save_checkpoint(run.trainer_state, net=state.build_network(), net_config=state.net_config, step=state.step,
                    optimizer_state=state.optimizer_state, parent=str(origin.trainer_state.resolve()),
                    provenance=run.network_provenance(continued_from=str(origin.root)),
                    extra={**state.extra, "samples_drawn": owed, "positions_committed": copied})
    best = origin.read_best()
    record = {
        "source": str(origin.root.resolve()),
        "source_best": None if best is None else {"name": best.name, "step": best.step},
        "trainer_state": {"step": state.step, "samples_drawn": drawn, "samples_drawn_here": owed,
                          "code_version": state.code_version},
        "copied": {"games": len(games), "positions": copied, "window": window,
                   "source_positions": committed},
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source_summary": run_summary(origin.root),
    }
    atomic_write_bytes(run.continuation_file, json.dumps(record, indent=1).encode())
    log.info("continuing %s: %d games (%d positions) of its newest %d, trainer at step %d", source, len(games),
             copied, window, state.step)
    return record

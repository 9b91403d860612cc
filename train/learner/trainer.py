"""The self-play trainer: learns from the replay buffer while actors write it, writes candidate checkpoints.

Pacing: the trainer draws at most `samples_per_position` training samples per committed self-play
position (and per reanalysed target: a fresh search is new data too), then waits for more. That keeps the
reuse of each position bounded (no over-training on old data when actors are slow) and makes the
trainer's progress a function of the data, which is also what makes resuming exact: the count of samples
drawn is stored in every checkpoint.

Sampling: uniform over the newest `window` positions, the window growing with the data
(`window_fraction` of everything committed, clamped to [window_min, window_max]). Optionally a share of
each batch comes from OCA expert positions (a pretraining dataset), decaying linearly to a floor.
A sampled position that a reanalyser searched again (selfplay.actors.reanalyser) trains on the newest of those
searches' targets instead of its own.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from selfplay.replay.reanalysis_store import FreshTargets
from selfplay.replay.replay_buffer import ReplayReader
from train.learner.learning import MOST_BATCH, HeadWeights, Learner, OptimConfig, Samples, samples_from_replay
from train.learner.pretrain_dataset import DatasetError, build_dataset, open_dataset
from zero.net.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from zero.run.config import MOST_POSITIONS, MOST_SEED, MOST_STEPS, MOST_THREADS, check_settings, setting
from zero.run.data import OCA_FILE, data_file
from zero.run.rundir import RunDir

log = logging.getLogger(__name__)


@dataclass
class TrainerConfig:
    """Self-play training. Defaults suit a small network on a CPU; on a GPU gpu_batch_size replaces
    batch_size (sized_for)."""

    batch_size: int = setting(256, low=1, high=MOST_BATCH)
    # The batch on CUDA, where 256 leaves the GPU mostly idle.
    gpu_batch_size: int = setting(1024, low=1, high=MOST_BATCH)
    # Constant (the data keeps changing, so a decaying schedule has no natural end) and low: a fresh AdamW at
    # 1e-3 on the pretrained network lost 6 points of expert top-1 in 300 steps, and the loop's candidates
    # lost their gating matches by 100-400 Elo (benchmarks/RESULTS.md, self-play loop).
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-4, schedule="constant"))
    heads: HeadWeights = field(default_factory=HeadWeights)
    samples_per_position: float = 4.0  # training samples per committed self-play position, at most
    min_positions: int = setting(2_000, low=0, high=MOST_POSITIONS)  # no training before this many self-play positions
    window_min: int = setting(20_000, low=1, high=MOST_POSITIONS)
    window_max: int = setting(1_000_000, low=1, high=MOST_POSITIONS)
    window_fraction: float = 0.5  # window = this share of all committed positions, clamped to [min, max]
    checkpoint_every: int = setting(200, low=1, high=MOST_STEPS)  # steps between candidate checkpoints
    # Expert positions keep the network from forgetting what pretraining taught it while self-play data is
    # scarce: "auto" builds the OCA dataset into the run (once, ~40 s) when the data file is found; a path
    # names a dataset built by `checkers-zero pretrain dataset`; "" trains on self-play only.
    expert_data: str = "auto"
    expert_share: float = 0.25  # share of each batch from expert positions at step 0 ...
    expert_decay_steps: int = setting(20_000, low=0, high=MOST_STEPS)  # ... decaying linearly over this many steps ...
    # ... to this share, kept from then on: without it a run continued past the decay (links 7 -> 8) trained
    # on self-play alone and its expert top-1 fell (57.3 -> 56.5 %); 3.5 GPU-minutes from link 8 with 0.1
    # against 0: +2.1 points of top-1, -0.04 nats of value loss, equal strength (benchmarks/RESULTS.md).
    expert_share_floor: float = setting(0.1, low=0, high=1)
    poll_seconds: float = setting(2.0, low=0)  # wait between checks for new data
    # While the data at hand still allows steps, the replay store is re-read at most this often: with 14
    # actors committing, re-reading it before every step took 16-50 ms, much of a GPU trainer's step.
    refresh_seconds: float = setting(1.0, low=0)
    device: str = "auto"
    # "auto": bf16 autocast on a GPU and on a CPU with AMX (1.8x the training samples a second there), float32
    # on other CPUs (where "bfloat16" rehearses a GPU's rounding).
    precision: str = setting("auto", choices=("auto", "float32", "bfloat16"))
    # CPU threads for training: actors and the gatekeeper need the other cores.
    torch_threads: int = setting(1, low=1, high=MOST_THREADS)
    compile: bool = False  # torch.compile the network (CUDA)
    # Value targets of positions the endgame database holds (the largest built; the 4-piece one is built on
    # first use) are its exact values instead of the game's result. Off: the database's wins and losses are
    # for perfect play without the no-progress draw, and about two in five of the positions it calls
    # decided are drawn in self-play; from link 9, 60 CPU-minutes of the loop with 6-piece targets fell 49
    # Elo, with 4-piece ones held, and with none gained most (benchmarks/RESULTS.md, 2026-11-27).
    database_targets: bool = False
    # Share of a self-play position's value target taken from its search's root value, the rest from the
    # game's result (learning.samples_from_replay); database values still win where they exist.
    search_value_share: float = setting(0.0, low=0, high=1)
    seed: int = setting(1, low=0, high=MOST_SEED)

    def validate(self) -> None:
        check_settings(self, "trainer")
        self.optim.validate()
        self.heads.validate()
        if not self.samples_per_position > 0:
            raise ValueError("trainer.samples_per_position must be positive")
        if not self.window_min <= self.window_max or not 0 < self.window_fraction <= 1:
            raise ValueError("trainer windows: need window_min <= window_max and 0 < window_fraction <= 1")
        for name in ("batch_size", "gpu_batch_size"):
            if getattr(self, name) > self.window_max:
                raise ValueError(f"trainer.{name} = {getattr(self, name)}: must be at most trainer.window_max "
                                 f"({self.window_max:,}), the most positions the replay window ever holds")
        if not 0 <= self.expert_share <= 1:
            raise ValueError("trainer.expert_share must lie in [0, 1]")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"trainer.device must be auto, cpu or cuda, not {self.device!r}")

    def sized_for(self, cuda: bool) -> "TrainerConfig":
        """These settings as the trainer runs them on a GPU (`cuda`: gpu_batch_size is the batch) or a CPU."""
        return dataclasses.replace(self, batch_size=self.gpu_batch_size) if cuda else self

    @property
    def bf16(self) -> bool | None:
        """bf16 autocast as `precision` asks (None: on a GPU only)."""
        return {"auto": None, "float32": False, "bfloat16": True}[self.precision]


def window_size(cfg: TrainerConfig, committed: int) -> int:
    return int(min(cfg.window_max, max(cfg.window_min, cfg.window_fraction * committed)))


def resolve_expert_data(run_dir: Path, setting: str) -> Path | None:
    """The expert dataset a setting names; "auto" builds the run's expert dataset from OCA_2.0.pdn on first use."""
    if not setting:
        return None
    if setting != "auto":
        return Path(setting)
    pdn = data_file(OCA_FILE)
    if pdn is None:
        log.warning("no %s found: training on self-play positions only", OCA_FILE)
        return None
    out = RunDir(run_dir).expert_data
    try:
        open_dataset(out)
    except DatasetError:  # absent, or cut short by a crash: (re)build it
        log.info("building the expert dataset %s from %s", out, pdn)
        build_dataset(pdn, out, progress=False)
    return out


def expert_share_at(cfg: TrainerConfig, step: int) -> float:
    if not cfg.expert_data:
        return 0.0
    left = max(0.0, 1.0 - step / cfg.expert_decay_steps) if cfg.expert_decay_steps > 0 else 0.0
    return max(cfg.expert_share_floor, cfg.expert_share * left)


class Trainer:
    """One trainer per run; all of its state is in the run directory (see resume())."""

    def __init__(self, run_dir: Path, cfg: TrainerConfig, initial_checkpoint: Path):
        cfg.validate()
        self.run_dir = Path(run_dir)
        self.rundir = RunDir(run_dir)
        self.device = torch.device(
            ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
        )
        self.cfg = cfg = cfg.sized_for(self.device.type == "cuda")
        torch.set_num_threads(cfg.torch_threads)
        start = self.rundir.trainer_state if self.rundir.trainer_state.exists() else Path(initial_checkpoint)
        self.checkpoint: Checkpoint = load_checkpoint(start)
        self.learner = Learner(self.checkpoint.build_network(), cfg.optim, cfg.heads, self.device,
                               compile=cfg.compile, bf16=cfg.bf16)
        log.info("training on %s in %s, batches of %d", self.device,
                 "bf16 autocast" if self.learner.bf16 else "float32", cfg.batch_size)
        self.net = self.learner.net
        resumed = start != Path(initial_checkpoint) and self.checkpoint.optimizer_state is not None
        extra = self.checkpoint.extra or {}
        if resumed:
            self.learner.optimizer.load_state_dict(self.checkpoint.optimizer_state)
        # Steps count on from the starting checkpoint's (pretraining) steps, so that a ratings plot against
        # the training step puts the initial network and its descendants on one axis.
        self.step = self.checkpoint.step
        self.samples_drawn = int(extra.get("samples_drawn", 0)) if resumed else 0
        self.parent = str(start)
        self.rng = np.random.default_rng([cfg.seed, self.step])
        self.reader = ReplayReader(self.run_dir)
        self.fresh = FreshTargets(self.run_dir)  # reanalysers' targets (selfplay.replay.reanalysis_store)
        self._refreshed = -float("inf")
        # Seconds spent since the last candidate reading data (replay, expert rows, database) and learning.
        self.spent = {"data": 0.0, "learn": 0.0}
        expert = resolve_expert_data(self.run_dir, cfg.expert_data)
        self.expert = open_dataset(expert) if expert else None
        self.expert_rows = self.expert.rows("train") if self.expert else None
        self.expert_rng = np.random.default_rng([cfg.seed, 99])
        self.egdb = None
        if cfg.database_targets:
            from zero.endgames.egdb_build import largest_available

            self.egdb = largest_available()
        self.stopping = False
        log.info("trainer %s from %s at step %d (%d samples drawn) on %s",
                 "resumed" if resumed else "started", start, self.step, self.samples_drawn, self.device)

    def ready(self) -> bool:
        """Whether the committed data allows another step. The replay store is re-read when the data at
        hand allows none, and refresh_seconds after the last read."""
        if not self._data_allows_step() or time.monotonic() - self._refreshed >= self.cfg.refresh_seconds:
            self.reader.refresh()
            self.fresh.refresh()
            if len(self.fresh):  # most runs have no reanalyser: nothing to keep within the window
                self.fresh.forget_outside(
                    *self.reader.window_games(window_size(self.cfg, self.reader.positions_committed())))
            self._refreshed = time.monotonic()
        return self._data_allows_step()

    def _data_allows_step(self) -> bool:
        committed = self.reader.positions_committed()
        if committed < self.cfg.min_positions:
            return False
        data = committed + self.fresh.entries_committed
        return self.samples_drawn + self.cfg.batch_size <= self.cfg.samples_per_position * data

    def train_step(self) -> dict[str, float]:
        """One step on a batch of self-play positions from the window and, while the share lasts, expert
        positions (one batch, one forward pass)."""
        cfg = self.cfg
        started = time.perf_counter()
        committed = self.reader.positions_committed()
        n_expert = int(round(cfg.batch_size * expert_share_at(cfg, self.step))) if self.expert else 0
        n_self = cfg.batch_size - n_expert
        parts: list[Samples] = []
        fresh = 0
        if n_self:
            rows = self.reader.sample(n_self, window_size(cfg, committed), self.rng)
            fresh = self.fresh.apply(rows)
            parts.append(samples_from_replay(rows, cfg.search_value_share))
        if n_expert:
            rows = np.sort(self.expert_rng.choice(self.expert_rows, size=n_expert))
            parts.append(self.expert.samples(rows))
        samples, exact = Samples.concat(parts), 0
        if self.egdb is not None:
            samples, exact = samples.with_database_values(self.egdb)
        sampled = time.perf_counter()
        metrics = self.learner.step(samples, cfg.optim.lr)
        self.spent["data"] += sampled - started
        self.spent["learn"] += time.perf_counter() - sampled
        self.step += 1
        self.samples_drawn += n_self
        metrics["window"] = float(window_size(cfg, committed))
        metrics["expert_share"] = n_expert / cfg.batch_size
        metrics["database_share"] = exact / cfg.batch_size  # value targets the database made exact
        metrics["reanalysed_share"] = fresh / cfg.batch_size  # positions with a reanalyser's target
        return metrics

    def save(self, candidate: bool) -> Path:
        """Write the trainer state (and, when asked, a candidate for gating) atomically."""
        kwargs = dict(
            net=self.net, net_config=self.net.config, step=self.step,
            optimizer_state=self.learner.optimizer.state_dict(),
            parent=self.parent, provenance=self.rundir.network_provenance(),
            extra={"samples_drawn": self.samples_drawn, "positions_committed": self.reader.positions_committed()},
        )
        path = save_checkpoint(self.rundir.trainer_state, **kwargs)
        if candidate:
            path = save_checkpoint(self.rundir.candidate(self.step), **kwargs)
            self.parent = str(path)
        return path

    def run(self, max_steps: int | None = None, on_step=None) -> None:
        """Train until stopped (SIGINT/SIGTERM) or max_steps; saves its state on the way out."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._request_stop)
        steps_at_start = self.step
        while not self.stopping and (max_steps is None or self.step - steps_at_start < max_steps):
            asked = time.perf_counter()
            if not self.ready():
                time.sleep(self.cfg.poll_seconds)
                continue
            self.spent["data"] += time.perf_counter() - asked
            metrics = self.train_step()
            if on_step is not None:
                on_step(self.step, metrics)
            if self.step % self.cfg.checkpoint_every == 0:
                path = self.save(candidate=True)
                log.info("step %d: candidate %s (loss %.3f; %s)", self.step, path.name, metrics["loss"],
                         self._pace(self.cfg.checkpoint_every))
        self.save(candidate=False)

    def _pace(self, steps: int) -> str:
        """Steps a second while training over the last `steps` steps, and the share spent reading data (what
        a GPU trainer waits on): then starts a new count."""
        busy = self.spent["data"] + self.spent["learn"]
        pace = f"{steps / busy:.1f} steps/s while training, {100 * self.spent['data'] / busy:.0f}% reading data"
        self.spent = {"data": 0.0, "learn": 0.0}
        return pace

    def _request_stop(self, *_):
        self.stopping = True

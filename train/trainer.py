"""The self-play trainer: learns from the replay buffer while actors write it, writes candidate checkpoints.

Pacing: the trainer draws at most `samples_per_position` training samples per committed self-play
position, then waits for actors to commit more. That keeps the reuse of each position bounded (no
over-training on old data when actors are slow) and makes the trainer's progress a function of the data,
which is also what makes resuming exact: the count of samples drawn is stored in every checkpoint.

Sampling: uniform over the newest `window` positions, the window growing with the data
(`window_fraction` of everything committed, clamped to [window_min, window_max]). Optionally a share of
each batch comes from OCA expert positions (a pretraining dataset), decaying linearly to zero.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from selfplay.replay_buffer import ReplayReader
from zero.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from zero.encoding import NUM_ACTIONS, NUM_PLANES, encode_batch, legal_mask_batch
from zero.network import PolicyValueNet

log = logging.getLogger(__name__)

CANDIDATE_DIR = "checkpoints"
TRAINER_STATE = "checkpoints/trainer-state.pt"


@dataclass
class TrainerConfig:
    """Self-play training. Defaults suit a small network on a CPU; raise batch_size on a GPU."""

    batch_size: int = 256
    optimizer: str = "adamw"  # "adamw" or "sgd" (with Nesterov momentum)
    # Constant (the data keeps changing, so a decaying schedule has no natural end) and low: a fresh AdamW at
    # 1e-3 on the pretrained network lost 6 points of expert top-1 in 300 steps, and the loop's candidates
    # lost their gating matches by 100-400 Elo (benchmarks/RESULTS.md, self-play loop).
    lr: float = 1e-4
    momentum: float = 0.9  # sgd only
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    value_weight: float = 1.0  # weight of the win/draw/loss loss next to the policy loss
    samples_per_position: float = 4.0  # training samples per committed self-play position, at most
    min_positions: int = 2_000  # no training before this many self-play positions exist
    window_min: int = 20_000
    window_max: int = 1_000_000
    window_fraction: float = 0.5  # window = this share of all committed positions, clamped to [min, max]
    checkpoint_every: int = 200  # steps between candidate checkpoints
    # Expert positions keep the network from forgetting what pretraining taught it while self-play data is
    # scarce: "auto" builds the OCA dataset into the run (once, ~40 s) when the data file is found; a path
    # names a dataset built by `checkers-zero pretrain dataset`; "" trains on self-play only.
    expert_data: str = "auto"
    expert_share: float = 0.25  # share of each batch from expert positions at step 0 ...
    expert_decay_steps: int = 20_000  # ... decaying linearly to zero over this many steps
    poll_seconds: float = 2.0  # wait between checks for new data
    device: str = "auto"
    torch_threads: int = 1  # CPU threads for training: actors and the gatekeeper need the other cores
    compile: bool = False  # torch.compile the network (CUDA)
    seed: int = 1


@dataclass
class Batch:
    """Tensors of one training batch (all on the training device)."""

    planes: torch.Tensor  # float32 [B, NUM_PLANES, 8, 8]
    legal: torch.Tensor  # bool [B, NUM_ACTIONS]
    policy: torch.Tensor  # float32 [B, NUM_ACTIONS] target distribution over the legal actions
    policy_weight: torch.Tensor  # float32 [B]: 0 for positions that carry no policy target
    wdl: torch.Tensor  # int64 [B]: 0 win, 1 draw, 2 loss for the side to move


def batch_from_rows(rows: dict[str, np.ndarray], device: torch.device) -> Batch:
    """A Batch from replay-store position rows (selfplay.replay_buffer POSITION_SCHEMA columns)."""
    n = len(rows["black"])
    black = rows["black"].astype(np.int64)
    white = rows["white"].astype(np.int64)
    kings = rows["kings"].astype(np.int64)
    btm = rows["black_to_move"].astype(np.bool_)
    planes = np.zeros((n, NUM_PLANES, 8, 8), dtype=np.float32)
    encode_batch(black, white, kings, btm, rows["no_progress"].astype(np.int64),
                 rows["repetitions"].astype(np.int64), planes)
    legal = np.zeros((n, NUM_ACTIONS), dtype=np.bool_)
    legal_mask_batch(black, white, kings, btm, legal)
    actions = rows["policy_actions"].astype(np.int64)
    used = actions >= 0
    policy = np.zeros((n, NUM_ACTIONS), dtype=np.float32)
    np.add.at(policy, (np.nonzero(used)[0], actions[used]), rows["policy_visits"][used].astype(np.float32))
    weight = (rows["full_search"] & ~rows["forced"]).astype(np.float32)
    wdl = (1 - rows["result"].astype(np.int64))  # +1 win -> 0, 0 draw -> 1, -1 loss -> 2
    return Batch(
        torch.from_numpy(planes).to(device), torch.from_numpy(legal).to(device), torch.from_numpy(policy).to(device),
        torch.from_numpy(weight).to(device), torch.from_numpy(wdl).to(device),
    )


def losses(net: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(policy loss, value loss): cross-entropy over the legal actions, weighted; WDL cross-entropy."""
    out = net(batch.planes)
    logits = out.policy_logits.float().masked_fill(~batch.legal, -1e9)
    log_p = F.log_softmax(logits, dim=1)
    per_position = -(batch.policy * log_p.masked_fill(~batch.legal, 0.0)).sum(dim=1)
    weight_sum = batch.policy_weight.sum().clamp(min=1.0)
    policy_loss = (per_position * batch.policy_weight).sum() / weight_sum
    value_loss = F.cross_entropy(out.wdl_logits.float(), batch.wdl)
    return policy_loss, value_loss


def window_size(cfg: TrainerConfig, committed: int) -> int:
    return int(min(cfg.window_max, max(cfg.window_min, cfg.window_fraction * committed)))


EXPERT_DIR = "expert-oca"


def resolve_expert_data(run_dir: Path, setting: str) -> Path | None:
    """The expert dataset a setting names; "auto" builds RUN/expert-oca from OCA_2.0.pdn on first use."""
    if not setting:
        return None
    if setting != "auto":
        return Path(setting)
    from train.pretrain_dataset import DatasetError, build_dataset, open_dataset
    from zero.data import data_file

    pdn = data_file("OCA_2.0.pdn")
    if pdn is None:
        log.warning("no OCA_2.0.pdn found: training on self-play positions only")
        return None
    out = run_dir / EXPERT_DIR
    try:
        open_dataset(out)
    except DatasetError:  # absent, or cut short by a crash: (re)build it
        log.info("building the expert dataset %s from %s", out, pdn)
        build_dataset(pdn, out, progress=False)
    return out


def expert_share_at(cfg: TrainerConfig, step: int) -> float:
    if not cfg.expert_data or cfg.expert_decay_steps <= 0:
        return 0.0
    return cfg.expert_share * max(0.0, 1.0 - step / cfg.expert_decay_steps)


def candidate_path(run_dir: Path, step: int) -> Path:
    return run_dir / CANDIDATE_DIR / f"candidate-{step:07d}.pt"


class Trainer:
    """One trainer per run; all of its state is in the run directory (see resume())."""

    def __init__(self, run_dir: Path, cfg: TrainerConfig, initial_checkpoint: Path):
        self.run_dir = Path(run_dir)
        self.cfg = cfg
        self.device = torch.device(
            ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
        )
        self.autocast = self.device.type == "cuda"
        torch.set_num_threads(cfg.torch_threads)
        start = self._resume_point(initial_checkpoint)
        self.checkpoint: Checkpoint = load_checkpoint(start)
        self.net: PolicyValueNet = self.checkpoint.build_network().to(self.device).train()
        self.model = torch.compile(self.net) if cfg.compile else self.net
        self.optimizer = self._make_optimizer()
        resumed = start != Path(initial_checkpoint) and self.checkpoint.optimizer_state is not None
        extra = self.checkpoint.extra or {}
        if resumed:
            self.optimizer.load_state_dict(self.checkpoint.optimizer_state)
        # Steps count on from the starting checkpoint's (pretraining) steps, so that a ratings plot against
        # the training step puts the initial network and its descendants on one axis.
        self.step = self.checkpoint.step
        self.samples_drawn = int(extra.get("samples_drawn", 0)) if resumed else 0
        self.parent = str(start)
        self.rng = np.random.default_rng([cfg.seed, self.step])
        self.reader = ReplayReader(self.run_dir)
        expert = resolve_expert_data(self.run_dir, cfg.expert_data)
        self.expert = _ExpertSource(expert, cfg.seed) if expert else None
        self.stopping = False
        log.info("trainer %s from %s at step %d (%d samples drawn) on %s",
                 "resumed" if resumed else "started", start, self.step, self.samples_drawn, self.device)

    def _resume_point(self, initial: Path) -> Path:
        state = self.run_dir / TRAINER_STATE
        return state if state.exists() else Path(initial)

    def _make_optimizer(self) -> torch.optim.Optimizer:
        params = self.net.parameters()
        if self.cfg.optimizer == "sgd":
            return torch.optim.SGD(params, lr=self.cfg.lr, momentum=self.cfg.momentum, nesterov=True,
                                   weight_decay=self.cfg.weight_decay)
        if self.cfg.optimizer == "adamw":
            return torch.optim.AdamW(params, lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)
        raise ValueError(f"unknown optimizer {self.cfg.optimizer!r} (adamw or sgd)")

    def ready(self) -> bool:
        """Whether new data allows another step (refreshes the replay reader)."""
        self.reader.refresh()
        committed = self.reader.positions_committed()
        if committed < self.cfg.min_positions:
            return False
        return self.samples_drawn + self.cfg.batch_size <= self.cfg.samples_per_position * committed

    def train_step(self) -> dict[str, float]:
        cfg = self.cfg
        committed = self.reader.positions_committed()
        n_expert = int(round(cfg.batch_size * expert_share_at(cfg, self.step))) if self.expert else 0
        n_self = cfg.batch_size - n_expert
        metrics: dict[str, float] = {}
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            for source, count in (("selfplay", n_self), ("expert", n_expert)):
                if count == 0:
                    continue
                if source == "selfplay":
                    rows = self.reader.sample(count, window_size(cfg, committed), self.rng)
                    batch = batch_from_rows(rows, self.device)
                else:
                    batch = self.expert.sample(count, self.device)
                policy_loss, value_loss = losses(self.model, batch)
                share = count / cfg.batch_size
                total = total + share * (policy_loss + cfg.value_weight * value_loss)
                metrics[f"{source}/policy_loss"] = policy_loss.item()
                metrics[f"{source}/value_loss"] = value_loss.item()
        total.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.step += 1
        self.samples_drawn += n_self
        metrics["loss"] = total.item()
        metrics["window"] = float(window_size(cfg, committed))
        metrics["expert_share"] = n_expert / cfg.batch_size
        return metrics

    def save(self, candidate: bool) -> Path:
        """Write the trainer state (and, when asked, a candidate for gating) atomically."""
        kwargs = dict(
            net=self.net, net_config=self.net.config, step=self.step, optimizer_state=self.optimizer.state_dict(),
            parent=self.parent, provenance={"run": str(self.run_dir), "source": "self-play"},
            extra={"samples_drawn": self.samples_drawn, "positions_committed": self.reader.positions_committed()},
        )
        path = save_checkpoint(self.run_dir / TRAINER_STATE, **kwargs)
        if candidate:
            path = save_checkpoint(candidate_path(self.run_dir, self.step), **kwargs)
            self.parent = str(path)
        return path

    def run(self, max_steps: int | None = None, on_step=None) -> None:
        """Train until stopped (SIGINT/SIGTERM) or max_steps; saves its state on the way out."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._request_stop)
        steps_at_start = self.step
        while not self.stopping and (max_steps is None or self.step - steps_at_start < max_steps):
            if not self.ready():
                time.sleep(self.cfg.poll_seconds)
                continue
            metrics = self.train_step()
            if on_step is not None:
                on_step(self.step, metrics)
            if self.step % self.cfg.checkpoint_every == 0:
                path = self.save(candidate=True)
                log.info("step %d: candidate %s (loss %.3f)", self.step, path.name, metrics["loss"])
        self.save(candidate=False)

    def _request_stop(self, *_):
        self.stopping = True


class _ExpertSource:
    """Expert positions from a pretraining dataset, as training batches with one-hot policy targets."""

    def __init__(self, path: Path, seed: int):
        from train.pretrain_dataset import open_dataset

        self.data = open_dataset(path)
        self.rng = np.random.default_rng([seed, 99])

    def sample(self, count: int, device: torch.device) -> Batch:
        return self.data.training_batch(self.rng, count, device)


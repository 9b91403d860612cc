"""The one training pipeline: samples from any source -> one batch -> one loss with a weight per head -> one step.

Pretraining on expert games (train.learner.pretrain) and the self-play trainer (train.learner.trainer) are two
configurations of it; they differ in where samples come from and in the learning-rate schedule.

A sample is a position (compact board masks and draw-rule counters) with a target per head:
- policy: a distribution over the legal actions, stored sparsely (action indices and probabilities): a
  search's visit shares, or one action with probability 1 for an expert's move;
- value: the game's result for the side to move (win, draw, loss), or a distribution over the three (a
  teacher network's, in distillation);
- moves left: the plies from the position to the end of its game;
and a weight per head and sample. A forced move or a fast playout-cap search carries no policy target
(weight 0), and a source that knows nothing of a head gives it weight 0. Positions an endgame database
holds can have their value target replaced by the exact value (Samples.with_database_values).

Each head's loss is the weighted mean over the batch, and the step minimises the sum of the heads' losses
times HeadWeights. The whole batch, whatever its sources, goes through the network in one forward pass,
so batch normalisation sees the mixed batch the network is later asked about.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import threading
from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.nn.functional as F

from train.learner.quantization_aware import RoundedPass
from zero.endgames.egdb import UNKNOWN, Egdb
from zero.net.encoding import NUM_ACTIONS, NUM_PLANES, encode_batch, legal_mask_batch
from zero.run.config import check_settings, setting

# The moves-left loss compares prediction / scale with target / scale (a smooth L1 in units of 50 plies),
# so that its size is comparable with the cross-entropies of the other heads.
MOVES_LEFT_SCALE = 50.0
SOURCES = ("expert", "selfplay")  # what Samples.source indexes
# The most positions a batch (of training or of evaluation) may have: some 30 GB of inputs and targets, more
# than any GPU's batch is worth.
MOST_BATCH = 1 << 22


@dataclass
class HeadWeights:
    """Weight of each head's loss in the total."""

    policy: float = setting(1.0, low=0)
    value: float = setting(1.0, low=0)
    moves_left: float = setting(0.1, low=0)

    def validate(self) -> None:
        check_settings(self, "heads")


@dataclass
class OptimConfig:
    """The optimizer and its learning-rate schedule."""

    name: str = "adamw"  # "adamw" or "sgd" (with Nesterov momentum)
    lr: float = setting(2e-3, above=0)  # peak learning rate
    weight_decay: float = setting(1e-4, low=0)
    momentum: float = setting(0.9, low=0, below=1)  # SGD only
    schedule: str = "onecycle"  # "onecycle" (linear warm-up, cosine down), "cosine" (no warm-up), "constant"
    warmup_fraction: float = setting(0.05, low=0, high=1)  # of all steps, for onecycle
    final_lr_fraction: float = setting(0.02, low=0, high=1)  # the learning rate at the last step, as a share of lr
    grad_clip: float = setting(1.0, low=0)  # max gradient norm (0 = off)

    def validate(self) -> None:
        check_settings(self, "optim")
        if self.name not in ("adamw", "sgd"):
            raise ValueError(f"unknown optimizer {self.name!r}; use 'adamw' or 'sgd'")
        if self.schedule not in ("onecycle", "cosine", "constant"):
            raise ValueError(f"unknown schedule {self.schedule!r}; use 'onecycle', 'cosine' or 'constant'")


def lr_at(cfg: OptimConfig, step: int, total: int) -> float:
    """Learning rate for a step (0-based) of a run of `total` steps."""
    if cfg.schedule == "constant":
        return cfg.lr
    final = cfg.lr * cfg.final_lr_fraction
    warmup = int(total * cfg.warmup_fraction) if cfg.schedule == "onecycle" else 0
    if step < warmup:
        return cfg.lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup - 1))
    return final + (cfg.lr - final) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(net: torch.nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    cfg.validate()
    # No weight decay on biases and batch-norm parameters (1-D tensors): it only fights the normalisation.
    decay = [p for p in net.parameters() if p.ndim > 1]
    no_decay = [p for p in net.parameters() if p.ndim <= 1]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if cfg.name == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr)
    return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=True)


@dataclass
class Samples:
    """N training samples as columns (see the module doc)."""

    black: np.ndarray  # uint32 [N] board masks, bit s-1 = square s (the real board, not the mover's view)
    white: np.ndarray
    kings: np.ndarray
    black_to_move: np.ndarray  # bool [N]
    no_progress: np.ndarray  # int [N] plies since the last capture or man move
    repetitions: np.ndarray  # int [N] occurrences of the position so far (1 = first)
    policy_actions: np.ndarray  # int [N, K] perspective action indices (zero.net.encoding), -1 = empty slot
    policy_probs: np.ndarray  # float32 [N, K] target probability of each action
    wdl: np.ndarray  # int64 [N] 0 win, 1 draw, 2 loss for the side to move, or float32 [N, 3] probabilities
    moves_left: np.ndarray  # float32 [N] plies to the end of the game
    policy_weight: np.ndarray  # float32 [N]
    value_weight: np.ndarray  # float32 [N]
    moves_left_weight: np.ndarray  # float32 [N]
    source: np.ndarray  # int8 [N] index into SOURCES

    def __len__(self) -> int:
        return len(self.black)

    @classmethod
    def concat(cls, parts: list["Samples"]) -> "Samples":
        width = max(p.policy_actions.shape[1] for p in parts)
        columns = {}
        for f in fields(cls):
            values = [getattr(p, f.name) for p in parts]
            if f.name in ("policy_actions", "policy_probs"):
                fill = -1 if f.name == "policy_actions" else 0
                values = [np.pad(v, ((0, 0), (0, width - v.shape[1])), constant_values=fill) for v in values]
            if f.name == "wdl" and any(np.ndim(v) == 2 for v in values):
                values = [v if np.ndim(v) == 2 else np.eye(3, dtype=np.float32)[v] for v in values]
            columns[f.name] = np.concatenate(values)
        return cls(**columns)

    def take(self, rows: np.ndarray) -> "Samples":
        """The samples at these row indices."""
        return Samples(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})

    def with_database_values(self, egdb: Egdb) -> tuple["Samples", int]:
        """These samples with the value target of every position the endgame database holds replaced by its
        exact value (a game's result says only how that one game went on from there), and how many there were."""
        values = egdb.values(self.black, self.white, self.kings, self.black_to_move)
        held = values != UNKNOWN
        exact = 1 - values[held].astype(np.int64)  # WIN +1 -> 0, DRAW 0 -> 1, LOSS -1 -> 2
        wdl = np.array(self.wdl)
        if wdl.ndim == 2:
            wdl[held] = np.eye(3, dtype=wdl.dtype)[exact]
        else:
            wdl[held] = exact
        value_weight = np.array(self.value_weight, np.float32)
        value_weight[held] = 1.0
        return dataclasses.replace(self, wdl=wdl, value_weight=value_weight), int(held.sum())

    def to_batch(self, device: torch.device) -> "Batch":
        """The network inputs and dense targets of these samples, on `device` (the one batch builder)."""
        n = len(self)
        planes, legal = encode_positions(self.black, self.white, self.kings, self.black_to_move, self.no_progress,
                                         self.repetitions)
        actions = np.asarray(self.policy_actions, np.int64)
        used = actions >= 0
        policy = np.zeros((n, NUM_ACTIONS), dtype=np.float32)
        np.add.at(policy, (np.nonzero(used)[0], actions[used]), np.asarray(self.policy_probs, np.float32)[used])

        def tensor(x: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(x)).to(device, non_blocking=True)

        return Batch(
            planes=tensor(planes), legal=tensor(legal), policy=tensor(policy),
            wdl=tensor(np.asarray(self.wdl, np.int64 if np.ndim(self.wdl) == 1 else np.float32)),
            moves_left=tensor(np.asarray(self.moves_left, np.float32)),
            policy_weight=tensor(np.asarray(self.policy_weight, np.float32)),
            value_weight=tensor(np.asarray(self.value_weight, np.float32)),
            moves_left_weight=tensor(np.asarray(self.moves_left_weight, np.float32)),
            source=tensor(np.asarray(self.source, np.int64)),
        )


def encode_positions(black, white, kings, black_to_move, no_progress, repetitions) -> tuple[np.ndarray, np.ndarray]:
    """The network input planes (float32 [N, NUM_PLANES, 8, 8]) and legal-action masks (bool [N, NUM_ACTIONS])
    of positions given as Samples' columns."""
    black, white, kings = (np.asarray(x, np.int64) for x in (black, white, kings))
    btm = np.asarray(black_to_move, np.bool_)
    planes = np.empty((len(black), NUM_PLANES, 8, 8), dtype=np.float32)
    encode_batch(black, white, kings, btm, np.asarray(no_progress, np.int64), np.asarray(repetitions, np.int64),
                 planes)
    legal = np.empty((len(black), NUM_ACTIONS), dtype=np.bool_)
    legal_mask_batch(black, white, kings, btm, legal)
    return planes, legal


@dataclass
class Batch:
    """Tensors of one training batch, on the training device."""

    planes: torch.Tensor  # float32 [B, NUM_PLANES, 8, 8]
    legal: torch.Tensor  # bool [B, NUM_ACTIONS]
    policy: torch.Tensor  # float32 [B, NUM_ACTIONS] target distribution over the legal actions
    wdl: torch.Tensor  # int64 [B] classes, or float32 [B, 3] probabilities
    moves_left: torch.Tensor  # float32 [B]
    policy_weight: torch.Tensor  # float32 [B]
    value_weight: torch.Tensor
    moves_left_weight: torch.Tensor
    source: torch.Tensor  # int64 [B]


def search_value_wdl(value: np.ndarray) -> np.ndarray:
    """A search's root value q in [-1, 1] as a win/draw/loss distribution with the same expectation
    (W - L = q): the rest of the mass is a draw, (max(q, 0), 1 - |q|, max(-q, 0))."""
    q = np.clip(np.nan_to_num(np.asarray(value, np.float32)), -1.0, 1.0)
    return np.stack([np.maximum(q, 0), 1 - np.abs(q), np.maximum(-q, 0)], axis=1).astype(np.float32)


def samples_from_replay(rows: dict[str, np.ndarray], search_value_share: float = 0.0) -> Samples:
    """Samples from replay-store rows (selfplay.replay.replay_buffer.ReplayReader.sample): the search's visit shares
    as the policy target (full searches only), and its length to go; the value target is the game's result,
    or with `search_value_share` above 0 that share of it the search's root value (search_value_wdl) and
    the rest the result: a game's result is one noisy outcome of the position, the search's value a
    less noisy estimate with the network's bias."""
    n = len(rows["black"])
    ones = np.ones(n, np.float32)
    result = 1 - rows["result"].astype(np.int64)  # +1 win -> 0, 0 draw -> 1, -1 loss -> 2
    if search_value_share > 0:
        wdl = ((1 - search_value_share) * np.eye(3, dtype=np.float32)[result]
               + search_value_share * search_value_wdl(rows["root_value"]))
    else:
        wdl = result
    return Samples(
        black=rows["black"], white=rows["white"], kings=rows["kings"], black_to_move=rows["black_to_move"],
        no_progress=rows["no_progress"], repetitions=rows["repetitions"],
        policy_actions=rows["policy_actions"], policy_probs=rows["policy_visits"],
        wdl=wdl,
        moves_left=rows["moves_left"].astype(np.float32),
        policy_weight=(rows["full_search"] & ~rows["forced"]).astype(np.float32), value_weight=ones,
        moves_left_weight=ones, source=np.full(n, SOURCES.index("selfplay"), np.int8),
    )


def losses(out, batch: Batch, label_smoothing: float = 0.0) -> dict[str, torch.Tensor]:
    """Each head's loss, a weighted mean over the batch (a head with no weight anywhere gives 0).

    policy: cross-entropy of the target over the legal actions (illegal logits masked out), optionally
    smoothed towards the uniform distribution over the legal actions; value: win/draw/loss cross-entropy
    (against a class or a distribution);
    moves_left: smooth L1 in units of MOVES_LEFT_SCALE plies (only for a network with that head)."""

    def weighted(per_sample: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return (per_sample * weight).sum() / weight.sum().clamp(min=1e-6)

    log_p = torch.log_softmax(out.policy_logits.float().masked_fill(~batch.legal, float("-inf")), dim=1)
    log_p = log_p.masked_fill(~batch.legal, 0.0)  # -inf * 0 would be nan
    policy = -(batch.policy * log_p).sum(dim=1)
    if label_smoothing > 0:
        uniform = -log_p.sum(dim=1) / batch.legal.sum(dim=1).clamp(min=1)
        policy = (1 - label_smoothing) * policy + label_smoothing * uniform
    result = {
        "policy": weighted(policy, batch.policy_weight),
        "value": weighted(F.cross_entropy(out.wdl_logits.float(), batch.wdl, reduction="none"), batch.value_weight),
    }
    if out.moves_left is not None:
        per_sample = F.smooth_l1_loss(out.moves_left.float() / MOVES_LEFT_SCALE, batch.moves_left / MOVES_LEFT_SCALE,
                                      reduction="none")
        result["moves_left"] = weighted(per_sample, batch.moves_left_weight)
    return result


def total_loss(parts: dict[str, torch.Tensor], heads: HeadWeights) -> torch.Tensor:
    return sum(getattr(heads, name) * value for name, value in parts.items())


def cpu_multiplies_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices in hardware (Intel AMX). There bf16 autocast trains the loop's
    3x32 network 1.8x faster than float32 (benchmarks/RESULTS.md); other CPUs keep float32, since without AMX
    bf16 is the slow way (on Zen 4, with AVX-512 BF16, it trained 9x slower and its inference ran at a fifth of
    int8's speed)."""
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)  # private, and absent from older torch releases
    return bool(amx and amx())


def uses_bf16(device: torch.device, bf16: bool | None = None) -> bool:
    """Whether to compute in bf16 autocast: as `bf16` says; by default where bf16 is the fast way, on a GPU and
    on a CPU with AMX (any CPU can run it when asked, with a GPU's rounding)."""
    if bf16 is not None:
        return bf16
    return device.type == "cuda" or (device.type == "cpu" and cpu_multiplies_bf16())


def autocast(device: torch.device, bf16: bool | None = None):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=uses_bf16(device, bf16))


class TrainingDiverged(ValueError):
    """The loss is no longer a finite number: training cannot go on from these weights."""


class Learner:
    """A network, its optimizer and the one training step."""

    def __init__(self, net: torch.nn.Module, optim: OptimConfig, heads: HeadWeights, device: torch.device,
                 label_smoothing: float = 0.0, compile: bool = False, bf16: bool | None = None,
                 quantization_aware: bool = False) -> None:
        heads.validate()
        # On a CPU oneDNN's convolutions train 1.2-1.6x faster on channels-last (NHWC) weights and activations
        # (benchmarks/RESULTS.md, "The trainer's convolutions channels-last"). Only the strides change: the
        # values, the state dict's shapes and the weights' sha256 stay as they were.
        self.net = net.to(device).train()
        if device.type == "cpu":
            self.net = self.net.to(memory_format=torch.channels_last)
        self.model = torch.compile(self.net) if compile else self.net
        self.optim = optim
        self.optimizer = make_optimizer(self.net, optim)
        self.heads = heads
        self.device = device
        self.label_smoothing = label_smoothing
        self.bf16 = uses_bf16(device, bf16)
        # Quantization-aware training (train.learner.quantization_aware): the loss also sees the int8 model's rounding.
        self.rounded_pass = RoundedPass(self.net) if quantization_aware else None

    def step(self, samples: Samples, lr: float) -> dict[str, float]:
        """One update on the samples; returns each head's loss, the total, and per source the heads' losses
        on that source's part of the batch (from the same forward pass)."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.net.train()
        batch = samples.to_batch(self.device)
        with autocast(self.device, self.bf16):
            out = self.model(batch.planes)
        parts = losses(out, batch, self.label_smoothing)
        loss = total_loss(parts, self.heads)
        if self.rounded_pass is not None:
            with autocast(self.device, self.bf16):
                rounded_out = self.rounded_pass(batch.planes)
            rounded_loss = total_loss(losses(rounded_out, batch, self.label_smoothing), self.heads)
            loss = (loss + rounded_loss) / 2
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.optim.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.optim.grad_clip)
        named = {"loss": loss, **parts}
        if self.rounded_pass is not None:
            named["rounded_loss"] = rounded_loss
        sources = np.unique(samples.source)
        if len(sources) > 1:
            with torch.no_grad():
                for index in sources:
                    part = losses(out, _weighted_by(batch, batch.source == int(index)), self.label_smoothing)
                    named.update({f"{SOURCES[index]}/{name}_loss": value for name, value in part.items()})
        # One transfer from the device for every figure: each .item() waits for the GPU, and on a GPU shared
        # with a dozen self-play processes every wait costs a time slice.
        metrics = dict(zip(named, torch.stack([v.detach().float() for v in named.values()]).tolist()))
        if not math.isfinite(metrics["loss"]):
            # Stepping on would make every weight NaN, and the next checkpoint a network that cannot play.
            raise TrainingDiverged(f"the training loss is {metrics['loss']} (the network or a setting such as "
                                   f"the learning rate, weight decay or head weights made it diverge); "
                                   f"stopped before writing another checkpoint")
        self.optimizer.step()
        if len(sources) == 1:
            metrics.update({f"{SOURCES[int(sources[0])]}/{name}_loss": metrics[name] for name in parts})
        return metrics


def _weighted_by(batch: Batch, mask: torch.Tensor) -> Batch:
    """The batch with every row outside `mask` weighted 0: the losses of the masked rows alone, computed on
    the device without selecting rows (a selection waits for the GPU to count them)."""
    w = mask.float()
    return dataclasses.replace(batch, policy_weight=batch.policy_weight * w, value_weight=batch.value_weight * w,
                               moves_left_weight=batch.moves_left_weight * w)


@contextlib.contextmanager
def interrupt_between_steps(signals: tuple[int, ...] = (signal.SIGINT,)):
    """Ctrl-C (and the other `signals`) sets the event instead of raising inside a step, so the work is
    saved whole at a step boundary (a step cut in the middle may have updated some weights and not others)."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    previous = {sig: signal.signal(sig, lambda signum, frame: interrupted.set()) for sig in signals}
    try:
        yield interrupted
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

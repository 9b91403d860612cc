"""Supervised pretraining of the policy-value network on expert games, and its evaluation on the test split.

Losses: policy cross-entropy over the legal actions only (illegal logits masked out), on non-forced positions;
win/draw/loss cross-entropy against the game result; optionally a moves-left regression. Optional label
smoothing spreads its mass uniformly over the legal actions, never onto illegal ones.

Determinism and resuming: the batch at step s is a pure function of (seed, s): epoch e = s // batches per
epoch is a permutation of the train rows drawn from a generator seeded with (seed, e). A checkpoint holds the
weights, optimizer state and step, so a resumed run continues with exactly the batches it would have seen;
the learning rate is a function of the step, so no scheduler state is needed.

Distillation (`teacher` set, train.learner.distill): the targets are a teacher network's policy, win/draw/loss
probabilities and plies left, on the train split's positions and `teacher_positions` positions of the
teacher's own games, instead of the expert's move and the game's result. Validation and the test metrics
still judge the student against the experts' moves and the games' results, as for any pretrained network.
With `search_labels`, the train split's positions that deeper searches of a player have labelled
(train.learner.search_labels) take those searches' visit shares and values instead of the teacher's.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from train.learner.learning import (MOST_BATCH, HeadWeights, Learner, OptimConfig, TrainingDiverged, autocast,
                                    interrupt_between_steps, lr_at)
from train.learner.pretrain_dataset import PretrainDataset
from zero.net.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet, parameter_count
from zero.run.config import (MOST_POSITIONS, MOST_SEED, MOST_STEPS, MOST_THREADS, code_version, file_sha256, setting,
                             to_dict, write_run_record)
from zero.run.wandb_logging import INSTALL_HINT, WandbMissing, import_wandb

# Game phases by pieces on the board (24 at the start).
OPENING_MIN_PIECES = 20
ENDGAME_MAX_PIECES = 10
PHASES = ("opening", "middlegame", "endgame")


# Settings that do not change which updates a run makes, so a resume may differ in them. `steps` is one too:
# a run can be extended or shortened (the schedule then follows the new total from the resumed step on).
RESUME_MAY_CHANGE = frozenset({
    "steps", "max_minutes", "threads", "log_every", "eval_every", "val_positions", "checkpoint_every", "eval_batch",
    "baseline_positions", "baseline_depth", "wandb_mode", "wandb_project", "compile",
})


class PretrainError(Exception):
    """A training run that cannot start or resume; the message says why."""


@dataclass
class PretrainConfig:
    """Everything that decides a pretraining run (stored in its checkpoints; a resume must match it)."""

    network: NetworkConfig = field(default_factory=NetworkConfig.small)
    optim: OptimConfig = field(default_factory=OptimConfig)
    batch_size: int = setting(256, low=1, high=MOST_BATCH)
    steps: int = setting(20_000, low=1, high=MOST_STEPS)
    label_smoothing: float = 0.0
    heads: HeadWeights = field(default_factory=HeadWeights)
    seed: int = setting(0, low=0, high=MOST_SEED)
    eval_every: int = setting(1000, low=1, high=MOST_STEPS)  # steps between validations
    # Validation subset (fixed, seeded); 0 = the whole split.
    val_positions: int = setting(16_384, low=0, high=MOST_POSITIONS)
    # Steps between resumable checkpoints in the run directory.
    checkpoint_every: int = setting(1000, low=1, high=MOST_STEPS)
    log_every: int = setting(50, low=1, high=MOST_STEPS)
    eval_batch: int = setting(1024, low=1, high=MOST_BATCH)
    # Test positions for the alpha-beta baseline; 0 = all non-forced ones.
    baseline_positions: int = setting(0, low=0, high=MOST_POSITIONS)
    # Past a dozen plies a fixed-depth search takes hours a position.
    baseline_depth: int = setting(4, low=1, high=64)
    threads: int = setting(0, low=0, high=MOST_THREADS)  # torch CPU threads; 0 = torch's default
    max_minutes: float = 0.0  # stop training after this long (then evaluate and save as usual); 0 = no limit
    compile: bool = False  # torch.compile the network (helps on GPUs; slow to start)
    # Distillation (see the module doc): the checkpoint whose judgement is the target ("" = the games'), and
    # how many positions of its own games join the train split's.
    teacher: str = ""
    teacher_positions: int = setting(0, low=0, high=MOST_POSITIONS)
    # Search labels (train.learner.search_labels), laid over the teacher's labels where they are: a store's
    # folder, or "auto" for the store of the teacher's weights beside the dataset that holds the most; and
    # the weight of a searched position in each head's loss (a teacher's label weighs 1).
    search_labels: str = ""
    search_label_weight: float = setting(1.0, above=0)
    # Fine-tuning: the checkpoint whose weights the run starts from ("" = random weights); its network must be
    # this run's. With `quantization_aware` the loss also sees the int8 model's rounding
    # (train.learner.quantization_aware), so that the int8 model derived from the result keeps its judgement.
    init: str = ""
    quantization_aware: bool = False
    wandb_mode: str = "offline"  # "offline" (no account needed), "online" or "disabled"
    wandb_project: str = "checkers-zero"


class BatchOrder:
    """The rows of each training step: seeded per-epoch permutations, so step s always gets the same rows."""

    def __init__(self, rows: np.ndarray, batch_size: int, seed: int) -> None:
        if len(rows) < batch_size:
            raise PretrainError(f"the train split has {len(rows)} positions, fewer than one batch of {batch_size}")
        self.rows, self.batch_size, self.seed = rows, batch_size, seed
        self.per_epoch = len(rows) // batch_size
        self._epoch, self._perm = -1, rows

    def at(self, step: int) -> np.ndarray:
        epoch, i = divmod(step, self.per_epoch)
        if epoch != self._epoch:
            self._epoch = epoch
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.rows)
        # Sorted rows read the in-memory arrays more cache-friendly; the order inside a batch is irrelevant.
        return np.sort(self._perm[i * self.batch_size:(i + 1) * self.batch_size])


@torch.inference_mode()
def predict(net: torch.nn.Module, data: PretrainDataset, rows: np.ndarray, device: torch.device, batch: int,
            progress: bool = False) -> dict[str, np.ndarray]:
    """Per-row predictions: expert-move rank among the legal actions, probability of the expert move, WDL
    probabilities, predicted moves left, and number of distinct legal actions."""
    net.eval()
    rank = np.zeros(len(rows), dtype=np.int64)
    p_expert = np.zeros(len(rows), dtype=np.float64)
    wdl = np.zeros((len(rows), 3), dtype=np.float64)
    moves_left = np.full(len(rows), np.nan)
    n_actions = np.zeros(len(rows), dtype=np.int64)
    for start in tqdm(range(0, len(rows), batch), desc="evaluating", unit=" batches", disable=not progress,
                      leave=False):
        sl = slice(start, start + batch)
        b = data.samples(rows[sl]).to_batch(device)
        action = torch.from_numpy(data.arrays["action"][rows[sl]].astype(np.int64)).to(device)[:, None]
        # bf16 on a GPU only, not on a CPU with AMX as in training: the top-1 and value loss reported here (the
        # model card's among them) must not depend on which CPU measured them.
        with autocast(device, bf16=device.type == "cuda"):
            out = net(b.planes)
        logits = out.policy_logits.float().masked_fill(~b.legal, float("-inf"))
        expert_logit = logits.gather(1, action)
        rank[sl] = (logits > expert_logit).sum(dim=1).cpu().numpy()
        p_expert[sl] = torch.softmax(logits, dim=1).gather(1, action).squeeze(1).cpu().numpy()
        wdl[sl] = torch.softmax(out.wdl_logits.float(), dim=1).cpu().numpy()
        if out.moves_left is not None:
            moves_left[sl] = out.moves_left.float().cpu().numpy()
        n_actions[sl] = b.legal.sum(dim=1).cpu().numpy()
    return {"rank": rank, "p_expert": p_expert, "wdl": wdl, "moves_left": moves_left, "n_actions": n_actions}


def phase_of(pieces: np.ndarray) -> np.ndarray:
    """0 opening (>= OPENING_MIN_PIECES pieces), 1 middlegame, 2 endgame (<= ENDGAME_MAX_PIECES)."""
    return np.where(pieces >= OPENING_MIN_PIECES, 0, np.where(pieces <= ENDGAME_MAX_PIECES, 2, 1))


def base_rates(data: PretrainDataset) -> np.ndarray:
    """Win/draw/loss frequencies (side to move) over the train split: the value baseline. A dataset whose
    games all fell in the other splits (a small PDN file: `ship`'s test set of a few games) has no
    frequencies to learn, and its baseline is the one that knows nothing, a third each (the mean of no
    results was NaN, with numpy's "Mean of empty slice" warning)."""
    res = data.arrays["result"][data.rows("train")]
    if not len(res):
        return np.full(3, 1 / 3)
    return np.array([(res == 1).mean(), (res == 0).mean(), (res == -1).mean()])


def split_metrics(pred: dict[str, np.ndarray], data: PretrainDataset, rows: np.ndarray) -> dict:
    """Accuracy and value metrics of predictions on rows (see predict), with the uniform and base-rate
    baselines measured on the same rows."""
    a = data.arrays
    policy_rows = ~a["forced"][rows]
    wdl_target = (1 - a["result"][rows]).astype(np.int64)
    phases = phase_of(a["pieces"][rows])
    n_act = pred["n_actions"]
    m: dict = {"positions": int(len(rows)), "policy_positions": int(policy_rows.sum())}

    def policy_block(sel: np.ndarray) -> dict:
        sel = sel & policy_rows
        if not sel.any():
            return {"positions": 0}
        return {
            "positions": int(sel.sum()),
            "top1": float((pred["rank"][sel] == 0).mean()),
            "top3": float((pred["rank"][sel] < 3).mean()),
            "policy_ce": float(-np.log(np.maximum(pred["p_expert"][sel], 1e-12)).mean()),
            # Uniform choice among the distinct legal actions (= legal moves but for shared from-to pairs).
            "uniform_top1": float((1.0 / n_act[sel]).mean()),
            "uniform_top3": float((np.minimum(3, n_act[sel]) / n_act[sel]).mean()),
        }

    m["policy"] = policy_block(np.ones(len(rows), dtype=bool))
    m["policy_by_phase"] = {name: policy_block(phases == k) for k, name in enumerate(PHASES)}
    base = base_rates(data)
    p_true = pred["wdl"][np.arange(len(rows)), wdl_target]
    m["value"] = {
        "ce": float(-np.log(np.maximum(p_true, 1e-12)).mean()),
        "accuracy": float((pred["wdl"].argmax(axis=1) == wdl_target).mean()),
        "base_rate_ce": float(-np.log(np.maximum(base[wdl_target], 1e-12)).mean()),
        "base_rate_accuracy": float((wdl_target == int(base.argmax())).mean()),
        "base_rates_wdl": [float(x) for x in base],
    }
    m["value_by_phase"] = {
        name: {"positions": int((phases == k).sum()),
               "ce": float(-np.log(np.maximum(p_true[phases == k], 1e-12)).mean()) if (phases == k).any() else None,
               "accuracy": float((pred["wdl"][phases == k].argmax(axis=1) == wdl_target[phases == k]).mean())
               if (phases == k).any() else None}
        for k, name in enumerate(PHASES)
    }
    if not np.isnan(pred["moves_left"]).all():
        m["moves_left_mae"] = float(np.abs(pred["moves_left"] - a["moves_left"][rows]).mean())
    return m


def alphabeta_baseline(data: PretrainDataset, rows: np.ndarray, depth: int, limit: int, seed: int,
                       progress: bool = True) -> dict:
    """How often the material alpha-beta player at `depth` plays the expert move (non-forced test rows;
    a seeded sample of `limit` of them when limit > 0). Ties between equal scores are broken at random,
    as the player does in matches."""
    from zero.net.encoding import move_action
    from zero.rules.game import Game, Position
    from zero.yardsticks.players import AlphaBetaPlayer

    a = data.arrays
    rows = rows[~a["forced"][rows]]
    if 0 < limit < len(rows):
        rows = np.sort(np.random.default_rng([seed, 4]).choice(rows, size=limit, replace=False))
    player = AlphaBetaPlayer(depth, seed=seed)
    hits = np.zeros(len(rows), dtype=bool)
    phases = phase_of(a["pieces"][rows])
    for k, r in enumerate(tqdm(rows, desc=f"alpha-beta depth {depth} baseline", unit=" positions",
                               disable=not progress)):
        pos = Position(int(a["black"][r]), int(a["white"][r]), int(a["kings"][r]), bool(a["black_to_move"][r]))
        player.reset(int(r))
        move, _, _ = player.search(Game(pos))
        hits[k] = move_action(move, pos.black_to_move) == int(a["action"][r])
    return {
        "depth": depth, "positions": int(len(rows)), "top1": float(hits.mean()),
        "by_phase": {name: float(hits[phases == i].mean()) if (phases == i).any() else None
                     for i, name in enumerate(PHASES)},
    }


def format_metrics(m: dict) -> str:
    """The test report: accuracy overall and by phase next to the baselines; value against base rates."""
    p = m["policy"]
    lines = [f"test split: {m['positions']} positions, {m['policy_positions']} with a policy target (not forced)",
             f"{'expert move':24} {'top-1':>7} {'top-3':>7} {'positions':>10}",
             f"{'network, all':24} {p['top1']:7.1%} {p['top3']:7.1%} {p['positions']:10d}"]
    for name, b in m["policy_by_phase"].items():
        if b["positions"]:
            lines.append(f"{'network, ' + name:24} {b['top1']:7.1%} {b['top3']:7.1%} {b['positions']:10d}")
    lines.append(f"{'uniform legal move':24} {p['uniform_top1']:7.1%} {p['uniform_top3']:7.1%} {p['positions']:10d}")
    ab = m.get("alphabeta")
    if ab:
        lines.append(f"{'alpha-beta depth ' + str(ab['depth']):24} {ab['top1']:7.1%} {'':>7} {ab['positions']:10d}"
                     + "   by phase: " + ", ".join(f"{k} {v:.1%}" for k, v in ab["by_phase"].items() if v is not None))
    v = m["value"]
    lines.append(f"value: cross-entropy {v['ce']:.4f} (base rates {v['base_rate_ce']:.4f}), "
                 f"accuracy {v['accuracy']:.1%} (always '{('win', 'draw', 'loss')[int(np.argmax(v['base_rates_wdl']))]}' "
                 f"{v['base_rate_accuracy']:.1%})")
    lines.append("value by phase: " + ", ".join(
        f"{k} ce {b['ce']:.3f} acc {b['accuracy']:.1%}" for k, b in m["value_by_phase"].items() if b["positions"]))
    if "moves_left_mae" in m:
        lines.append(f"moves left: mean absolute error {m['moves_left_mae']:.1f} plies")
    return "\n".join(lines)


class _Logger:
    """wandb (offline by default, no account needed) when enabled, else nothing."""

    def __init__(self, cfg: PretrainConfig, run_dir: Path, run_id: str | None) -> None:
        self.run = None
        if cfg.wandb_mode == "disabled":
            return
        try:
            wandb = import_wandb()
        except WandbMissing:
            # Offline logging is the default, not a request: without the extra the console log has it all.
            print(f"not logging to wandb ({INSTALL_HINT}, or set wandb_mode=disabled)")
            return
        self.run = wandb.init(project=cfg.wandb_project, mode=cfg.wandb_mode, dir=str(run_dir), config=to_dict(cfg),
                              id=run_id, resume="allow", name=run_dir.name)

    @property
    def id(self) -> str | None:
        return self.run.id if self.run else None

    def log(self, data: dict, step: int) -> None:
        if self.run:
            self.run.log(data, step=step)

    def finish(self, summary: dict | None = None) -> None:
        if self.run:
            if summary:
                self.run.summary.update(summary)
            self.run.finish()


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}/"))
        elif isinstance(v, (int, float)) and v is not None:
            out[f"{prefix}{k}"] = v
    return out


# Steps timed before the expected time is said: enough to pass the first steps' warm-up, few enough to say
# it within seconds.
EXPECTED_TIME_AFTER = 20


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"about {minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"about {max(minutes, 1)} min"


def _lay_search_labels_over(cfg: PretrainConfig, data: PretrainDataset, source) -> dict:
    """Lay the search labels `cfg` names over the teacher's (source: train.learner.distill.DistilledData);
    returns what the checkpoint's provenance says of them."""
    from train.learner.search_labels import LabelError, find_labels

    try:
        labels = find_labels(data, cfg.teacher, cfg.search_labels)
        source.labelled, searched = labels.lay_over(source.labelled, source.dataset_rows, cfg.search_label_weight)
    except LabelError as exc:
        raise PretrainError(f"search labels: {exc}") from None
    print(f"{searched:,} of {len(source.labelled):,} train positions take the search labels of {labels.path} "
          f"({labels.made_by['simulations']} simulations a position)")
    return {"search_labels": str(labels.path), "search_labelled": searched,
            "search_simulations": labels.made_by["simulations"]}


def train(cfg: PretrainConfig, data_dir: str | Path, out: str | Path, run_dir: str | Path,
          restart: bool = False, progress: bool = True) -> dict:
    """Train (or resume) a run, evaluate on the test split, write the final checkpoint to `out`.
    Returns the test metrics."""
    data_dir, out, run_dir = Path(data_dir), Path(out), Path(run_dir)
    if cfg.teacher_positions and not cfg.teacher:
        raise PretrainError("teacher_positions adds positions of a teacher's own games: name the teacher too")
    if cfg.search_labels and not cfg.teacher:
        raise PretrainError("search_labels are laid over a teacher's labels: name the teacher too")
    data = PretrainDataset.open(data_dir)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)

    net = PolicyValueNet(cfg.network).to(device)
    try:
        learner = Learner(net, cfg.optim, cfg.heads, device, cfg.label_smoothing, cfg.compile,
                          quantization_aware=cfg.quantization_aware)
    except ValueError as exc:
        raise PretrainError(str(exc)) from None
    opt = learner.optimizer
    step = 0
    wandb_id = None
    last = run_dir / "last.pt"
    if last.exists() and not restart:
        try:
            ck = load_checkpoint(last, map_location=device, expect_config=cfg.network)
        except CheckpointError as exc:
            raise PretrainError(f"cannot resume from {last}: {exc} (use --restart to start over)") from exc
        stored = ck.extra.get("config") or {}
        current = to_dict(cfg)
        changed = sorted(k for k in set(stored) | set(current)
                         if stored.get(k) != current.get(k) and k not in RESUME_MAY_CHANGE)
        if changed:
            raise PretrainError(f"{last} was written with other settings ({', '.join(changed)}); resume with the "
                                f"same settings or pass --restart")
        if stored.get("steps") != cfg.steps:
            print(f"the run had steps={stored.get('steps')}; the learning-rate schedule now follows steps={cfg.steps}")
        net.load_state_dict(ck.state_dict)
        opt.load_state_dict(ck.optimizer_state)
        step = ck.step
        wandb_id = ck.extra.get("wandb_id")
        print(f"resuming {run_dir} at step {step}/{cfg.steps}")
    elif cfg.init:
        try:
            net.load_state_dict(load_checkpoint(cfg.init, map_location=device, expect_config=cfg.network).state_dict)
        except CheckpointError as exc:
            raise PretrainError(f"init: {exc}") from None
        print(f"starting from the weights of {cfg.init}")
    write_run_record(run_dir, cfg, {"seed": cfg.seed}, name="pretrain")

    if cfg.teacher:
        from train.learner.distill import distilled

        try:
            source = distilled(cfg.teacher, data, cfg.teacher_positions, cfg.seed, progress)
        except CheckpointError as exc:
            raise PretrainError(f"teacher: {exc}") from None
        if cfg.search_labels:
            searched = _lay_search_labels_over(cfg, data, source)
        train_rows = source.train_rows
    else:
        source, train_rows = data, data.rows("train")
    val_rows = data.rows("val")
    if 0 < cfg.val_positions < len(val_rows):
        val_rows = np.sort(np.random.default_rng([cfg.seed, 1]).choice(val_rows, cfg.val_positions, replace=False))
    order = BatchOrder(train_rows, cfg.batch_size, cfg.seed)
    logger = _Logger(cfg, run_dir, wandb_id)
    provenance = {
        "dataset": str(data_dir), "source": data.attrs.get("source"), "source_sha256": data.attrs.get("source_sha256"),
        "split": data.attrs.get("config"), "dataset_summary": data.attrs.get("summary"),
        "command": " ".join(sys.argv), "code_version": code_version(), "device": str(device),
        **({"teacher": cfg.teacher, "teacher_sha256": file_sha256(cfg.teacher),
            "teacher_positions": cfg.teacher_positions} if cfg.teacher else {}),
        **(searched if cfg.search_labels else {}),
        **({"init": cfg.init, "init_sha256": file_sha256(cfg.init)} if cfg.init else {}),
    }
    print(f"network {cfg.network.blocks}x{cfg.network.channels}, {parameter_count(net):,} parameters, on {device}; "
          f"{len(train_rows):,} train positions, {order.per_epoch} steps per epoch of {cfg.batch_size}")

    def checkpoint(path: Path, metrics: dict | None = None) -> None:
        save_checkpoint(path, net=net, net_config=cfg.network, step=step, optimizer_state=opt.state_dict(),
                        metrics=metrics, provenance=provenance,
                        extra={"config": to_dict(cfg), "wandb_id": logger.id, "kind": "pretrain"})

    bar = tqdm(total=cfg.steps, initial=step, desc="pretraining", unit=" steps", disable=not progress,
               dynamic_ncols=True)
    window: dict[str, list[float]] = {}
    tick, tick_step = time.perf_counter(), step
    deadline = time.monotonic() + cfg.max_minutes * 60 if cfg.max_minutes > 0 else math.inf
    stopped_early = False
    first_step, first_tick = step, time.perf_counter()
    with interrupt_between_steps() as interrupted:
        while step < cfg.steps:
            if time.monotonic() > deadline:
                # A safety net for a shared machine: the schedule assumed `steps`, so say so in the metrics.
                stopped_early = True
                checkpoint(last)
                bar.write(f"time limit of {cfg.max_minutes} minutes reached at step {step}/{cfg.steps}")
                break
            lr = lr_at(cfg.optim, step, cfg.steps)
            try:
                parts = learner.step(source.samples(order.at(step)), lr)
            except TrainingDiverged as exc:
                raise PretrainError(f"step {step}: {exc}") from None
            step += 1
            bar.update(1)
            for k in ("policy", "value", "moves_left"):
                if k in parts:
                    window.setdefault(k, []).append(parts[k])
            if step % cfg.log_every == 0 or step == cfg.steps:
                now = time.perf_counter()
                rate = (step - tick_step) * cfg.batch_size / max(now - tick, 1e-9)
                tick, tick_step = now, step
                means = {k: float(np.mean(v)) for k, v in window.items()}
                window.clear()
                bar.set_postfix(policy=f"{means['policy']:.3f}", value=f"{means['value']:.3f}", lr=f"{lr:.2e}",
                                sps=f"{rate:.0f}")
                logger.log({**{f"train/{k}": v for k, v in means.items()}, "train/lr": lr,
                            "train/samples_per_s": rate}, step)
            if step % cfg.eval_every == 0 or step == cfg.steps:
                vm = split_metrics(predict(net, data, val_rows, device, cfg.eval_batch), data, val_rows)
                logger.log(_flat({"val": {"top1": vm["policy"]["top1"], "top3": vm["policy"]["top3"],
                                          "policy_ce": vm["policy"]["policy_ce"], "value_ce": vm["value"]["ce"],
                                          "value_accuracy": vm["value"]["accuracy"]}}), step)
                bar.write(f"step {step}: validation top-1 {vm['policy']['top1']:.1%} top-3 {vm['policy']['top3']:.1%} "
                          f"policy ce {vm['policy']['policy_ce']:.3f} value ce {vm['value']['ce']:.4f} "
                          f"(base {vm['value']['base_rate_ce']:.4f})")
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                checkpoint(last)
            if step - first_step == EXPECTED_TIME_AFTER and step < cfg.steps:
                seconds = (time.perf_counter() - first_tick) / EXPECTED_TIME_AFTER * (cfg.steps - step)
                bar.write(f"expected: {_duration(seconds)} more for steps {step:,} to {cfg.steps:,} at this pace; "
                          f"Ctrl-C saves the run at its step and the same command resumes it")
            if interrupted.is_set():
                checkpoint(last)
                bar.write(f"interrupted: saved at step {step:,}/{cfg.steps:,} in {last}; the same command resumes")
                raise KeyboardInterrupt
    bar.close()

    test_rows = data.rows("test")
    metrics = split_metrics(predict(net, data, test_rows, device, cfg.eval_batch, progress), data, test_rows)
    metrics["alphabeta"] = alphabeta_baseline(data, test_rows, cfg.baseline_depth, cfg.baseline_positions,
                                              cfg.seed, progress)
    metrics["steps"] = step
    metrics["stopped_early"] = stopped_early
    metrics["samples_seen"] = step * cfg.batch_size
    print(format_metrics(metrics))
    checkpoint(out, metrics)
    logger.log(_flat({"test": metrics}), step)
    logger.finish(_flat({"test": metrics}))
    print(f"checkpoint written to {out}")
    return metrics

"""Training the distilled evaluation (zero.distilled) on its labels (train.learner.distilled.labels).

The target is the side to move's expected score: the teacher's W + D/2, blended with the game's result where
the position is an expert game's (`result_weight` of it) and with sigmoid(score) of a search of the position
where one scored it (`searched_weight` of it: train.learner.distilled.searched, the evaluation learning what a
search below it sees), and the database's exact value instead wherever the database holds the position. The
loss is the cross-entropy of sigmoid(logit) against that target. Labels of the dataset's train split are learnt
(those with more pieces than `database_pieces`: the positions a player's database answers it never evaluates);
the test split's are held out, and the figures reported on them are the loss against the teacher's own
expected score (what the distillation can reach) and against the blended target, beside the loss of a constant
guess; and, given the endgame database, the solved-endgame mistake rate of the evaluation's own choice
(zero.endgames.endgame_judge): in test positions the database holds, with a choice, the move whose position it
scores best, with no search at all.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from train.learner.distilled.labels import NO_RESULT, DistilledLabelError
from train.learner.distilled.searched import NO_SEARCH
from train.learner.pretrain_dataset import SPLITS
from zero.distilled.model import DistilledEval, DistilledShape, random_eval, save_eval
from zero.distilled.network import DistilledNet, batch_inputs
from zero.endgames.egdb import MOST_PIECES
from zero.run.config import MOST_SEED, MOST_STEPS, MOST_THREADS, check_settings, code_version, setting


@dataclass
class DistilledTrainConfig:
    """How the distilled evaluation learns."""

    accumulator: int = setting(64, low=1, high=1024)  # accumulator units of each side's view
    hidden: int = setting(32, low=1, high=1024)  # units of each dense hidden layer
    buckets: int = setting(1, low=1, high=24)  # layer stacks above the accumulator, by pieces on the board
    result_weight: float = setting(0.2, low=0.0, high=1.0)  # share of the game's result in the target
    searched_weight: float = setting(0.5, low=0.0, high=1.0)  # share of a search's score, where one is given
    exact: bool = True  # the database's value as the target wherever it holds the position
    walked: bool = True  # learn the random walks' positions too
    # Positions of at most this many pieces are not learnt: a player with that database answers them in its
    # search and never evaluates them (6 with the 6-piece one; 0 learns every position).
    database_pieces: int = setting(0, low=0, high=MOST_PIECES)
    steps: int = setting(6000, low=1, high=MOST_STEPS)
    batch: int = setting(4096, low=1, high=1 << 20)
    lr: float = setting(2e-3, low=0.0, high=1.0)  # Adam, cosine-decayed to zero
    threads: int = setting(2, low=1, high=MOST_THREADS)
    seed: int = setting(0, low=0, high=MOST_SEED)

    def validate(self) -> None:
        check_settings(self)

    @property
    def shape(self) -> DistilledShape:
        """The size of the evaluation this training makes from scratch."""
        return DistilledShape(self.accumulator, self.hidden, self.buckets)


@dataclass
class HeldOut:
    """Figures on the test split's labels (cross-entropies in nats per position)."""

    positions: int
    loss_vs_teacher: float  # against the teacher's expected score alone
    loss_vs_target: float  # against the blended target the training learns
    constant_vs_teacher: float  # a constant guess (the train split's mean target) against the teacher
    teacher_entropy: float  # the floor: the teacher's expected score against itself
    extra: dict = field(default_factory=dict)


def targets(labels: dict[str, np.ndarray], config: DistilledTrainConfig, searched: np.ndarray | None = None) \
        -> tuple[np.ndarray, np.ndarray]:
    """(the teacher's expected score, the blended target) of every label, float32. searched: each label's
    search score (thousandths of a logit; NO_SEARCH where none), or None."""
    wdl = labels["wdl"].astype(np.float32)
    teacher = wdl[:, 0] + 0.5 * wdl[:, 1]
    target = teacher.copy()
    played = labels["result"] != NO_RESULT
    target[played] = ((1 - config.result_weight) * teacher[played]
                      + config.result_weight * (labels["result"][played].astype(np.float32) + 1) / 2)
    if searched is not None:
        scored = searched != NO_SEARCH
        target[scored] = ((1 - config.searched_weight) * target[scored]
                          + config.searched_weight / (1 + np.exp(-searched[scored].astype(np.float32) / 1000)))
    if config.exact:
        held = labels["exact"] != NO_RESULT
        target[held] = (labels["exact"][held].astype(np.float32) + 1) / 2
    return teacher, target


def _cross_entropy(p: np.ndarray, t: np.ndarray) -> float:
    if not len(p):
        return math.nan  # no test positions (a handful of games, none held out): no figure, and no warning
    p = np.clip(p.astype(np.float64), 1e-7, 1 - 1e-7)
    return float(np.mean(-(t * np.log(p) + (1 - t) * np.log(1 - p))))


def endgame_mistakes(evaluation, labels: dict[str, np.ndarray], rows: np.ndarray, egdb, most: int = 5000) \
        -> dict[str, float]:
    """The solved-endgame mistake rate of the evaluation's one-ply choice over (at most `most` of) `rows`
    the database holds."""
    from zero.endgames.endgame_judge import is_mistake
    from zero.rules.game import Position

    held = rows[labels["exact"][rows] != NO_RESULT][:most]
    judged = mistakes = 0
    for r in held:
        position = Position(int(labels["black"][r]), int(labels["white"][r]), int(labels["kings"][r]),
                            bool(labels["black_to_move"][r]))
        legal = position.legal_moves()
        if len(legal) < 2:
            continue
        children = [position.play(m) for m in legal]
        scores = -evaluation.logits([c.black for c in children], [c.white for c in children],
                                    [c.kings for c in children], [c.black_to_move for c in children])
        verdict = is_mistake(egdb, position, legal[int(np.argmax(scores))])
        if verdict is not None:
            judged += 1
            mistakes += verdict
    return {"endgame_moves_judged": judged, "endgame_mistake_rate": mistakes / judged if judged else float("nan")}


def train(labels: dict[str, np.ndarray], config: DistilledTrainConfig, out: str | Path, made_from: dict,
          progress: bool = True, egdb=None, searched: np.ndarray | None = None,
          initial: DistilledEval | None = None) -> HeldOut:
    """Learn the evaluation from the labels (and the search scores of them, if given: targets()); write it to
    `out` with how it was made; return the held-out figures (also in the file). initial: the weights learning
    starts from (their shape, not the config's), where a generation of its own games goes on from the last;
    random ones of the config's shape when None."""
    config.validate()
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    rng = np.random.default_rng(config.seed)
    teacher, target = targets(labels, config, searched)
    split = labels["split"]
    pieces = np.bitwise_count(labels["black"] | labels["white"])
    train_rows = np.flatnonzero((split == SPLITS.index("train")) & (config.walked | ~labels["walked"])
                                & (pieces > config.database_pieces))
    if len(train_rows) == 0:
        raise DistilledLabelError(f"no positions to learn in the labels' train split (more than "
                                  f"{config.database_pieces} pieces{'' if config.walked else ', no walks'})")
    test_rows = np.flatnonzero(split == SPLITS.index("test"))
    start_from = initial if initial is not None else \
        random_eval(config.shape, config.seed)
    shape = start_from.shape
    net = DistilledNet.from_eval(start_from)
    optimizer = torch.optim.Adam(net.parameters(), lr=config.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, config.steps) / config.steps)))
    columns = [labels[n] for n in ("black", "white", "kings", "black_to_move")]
    start = time.time()
    bar = tqdm(range(config.steps), desc="distilled evaluation", unit="step", disable=not progress)
    for step in bar:
        rows = train_rows[rng.integers(0, len(train_rows), config.batch)]
        inputs, bucket = batch_inputs(*(c[rows] for c in columns), shape.buckets)
        logits = net(inputs, bucket)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.from_numpy(target[rows]))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        net.clamp_()
        if step % 100 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    evaluation = net.to_eval()
    p = 1 / (1 + np.exp(-evaluation.logits(*(c[test_rows] for c in columns)).astype(np.float64)))
    mean = float(target[train_rows].mean())
    held = HeldOut(positions=len(test_rows), loss_vs_teacher=_cross_entropy(p, teacher[test_rows]),
                   loss_vs_target=_cross_entropy(p, target[test_rows]),
                   constant_vs_teacher=_cross_entropy(np.full(len(test_rows), mean), teacher[test_rows]),
                   teacher_entropy=_cross_entropy(teacher[test_rows], teacher[test_rows]),
                   extra={"mean_abs_error_vs_teacher": float(np.abs(p - teacher[test_rows]).mean())
                          if len(test_rows) else math.nan})
    if egdb is not None:
        held.extra.update(endgame_mistakes(evaluation, labels, test_rows, egdb))
    meta = {"made_from": made_from, "training": {**vars(config), "train_positions": int(len(train_rows)),
                                                  "seconds": round(time.time() - start, 1)},
            "held_out": vars(held), "code_version": code_version()}
    save_eval(type(evaluation)(shape, evaluation.weights, meta), out)
    return held

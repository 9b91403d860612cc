"""The self-play trainer on a real replay store: pacing, expert mixing, candidates, resume, learning."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from selfplay.replay.random_records import random_game_record
from selfplay.replay.replay_buffer import ReplayReader, ReplayWriter
from train.learner.learning import HeadWeights, OptimConfig, TrainingDiverged, losses, samples_from_replay
from train.learner.trainer import Trainer, TrainerConfig, expert_share_at
from zero.net.checkpoint import load_checkpoint, save_checkpoint
from zero.run.rundir import RunDir
from training_data import EXPERT_PDN, TINY
from zero.net.network import PolicyValueNet

def write_games(run, actor, seeds):
    with ReplayWriter(run, actor) as writer:
        for s in seeds:
            writer.append_game(random_game_record(s, max_plies=40))


@pytest.fixture
def initial(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "initial.pt"
    save_checkpoint(path, net=PolicyValueNet(TINY), net_config=TINY, step=0)
    return path


def config(**kw) -> TrainerConfig:
    base = TrainerConfig(batch_size=32, min_positions=50, window_min=100, samples_per_position=2.0,
                         checkpoint_every=5, device="cpu", poll_seconds=0.01,
                         optim=OptimConfig(lr=3e-3, schedule="constant"), expert_data="")
    return replace(base, **kw)


def test_training_is_paced_by_committed_positions(tmp_path, initial):
    run = tmp_path / "run"
    trainer = Trainer(run, config(), initial)
    assert not trainer.ready()  # no data yet
    write_games(run, 0, range(4))
    committed = ReplayReader(run).positions_committed()
    assert committed >= 50
    steps = 0
    while trainer.ready():
        trainer.train_step()
        steps += 1
    # samples drawn never exceed samples_per_position x committed positions, and the last batch filled it
    assert trainer.samples_drawn <= 2.0 * committed < trainer.samples_drawn + 32
    assert steps == trainer.step == int(2.0 * committed // 32)
    write_games(run, 1, range(10, 14))
    assert trainer.ready()  # new positions from another actor allow more steps


def test_reanalysed_targets_pace_and_feed_training(tmp_path, initial):
    from selfplay.replay.reanalysis_store import ReanalysisWriter

    run = tmp_path / "run"
    write_games(run, 0, range(4))
    trainer = Trainer(run, config(), initial)
    while trainer.ready():
        assert trainer.train_step()["reanalysed_share"] == 0
    reader = ReplayReader(run)
    committed = reader.positions_committed()
    with ReanalysisWriter(run, 0) as writer:  # every position searched again: as much new data
        for game in reader.iter_games(positions=True):
            for k, actions in enumerate(game.positions.policy_actions):  # its legal moves, shared evenly
                legal = actions[actions >= 0]
                writer.append(0, game.first_row + k, legal, np.full(len(legal), 1 / len(legal), np.float32), 0.0, 7)
    assert trainer.ready()
    steps = 0
    while trainer.ready():
        assert trainer.train_step()["reanalysed_share"] == 1
        steps += 1
    assert steps == int(2.0 * 2 * committed // 32) - int(2.0 * committed // 32)



def test_the_trainer_sees_one_target_per_position_the_newest(tmp_path, initial, monkeypatch):
    """A killed and restarted reanalyser searches positions again (3 kills left 116 positions with two
    entries in the store, issue 68): the trainer trains each position on one target, the newest (the
    highest network step; the later entry among equals), across its refreshes."""
    import train.learner.trainer as trainer_module
    from selfplay.replay.reanalysis_store import FreshTargets, ReanalysisWriter

    run = tmp_path / "run"
    write_games(run, 0, range(3))
    positions = ReplayReader(run).total_positions()

    def search(writer, rows, value: float, step: int) -> None:  # the action names the search that made it
        for row in rows:
            writer.append(0, row, np.array([int(10 * value)], np.int16), np.ones(1, np.float32), value, step)

    def killed(writer) -> None:
        writer._lock.close()  # the process dies with its queue (and its lock)

    trained = []

    def recording(rows, share):
        trained.append({name: rows[name].copy() for name in ("actor_id", "row", "policy_actions", "root_value",
                                                             "full_search")})
        return samples_from_replay(rows, share)

    monkeypatch.setattr(trainer_module, "samples_from_replay", recording)
    half = positions // 2
    first = ReanalysisWriter(run, 0, commit_targets=half)
    search(first, range(half + half // 2), 0.1, step=5)  # the first half is committed, the rest queued ...
    killed(first)  # ... and lost
    trainer = Trainer(run, config(), initial)
    while trainer.ready():
        trainer.train_step()
    batch = {name: np.concatenate([b[name] for b in trained]) for name in trained[0]}
    committed = batch["row"] < half  # only the committed entries were trained on
    assert committed.any() and (batch["root_value"][committed] == np.float32(0.1)).all()
    assert (~committed).any() and (batch["root_value"][~committed] != np.float32(0.1)).all()

    again = ReanalysisWriter(run, 0, commit_targets=7)  # restarted: the same network searches them again
    search(again, range(positions), 0.2, step=5)
    search(again, range(positions // 3), 0.9, step=9)  # a newer network takes over
    again.flush()
    killed(again)  # this time just after a commit
    with ReanalysisWriter(run, 1) as older:  # another reanalyser, later, with an older network
        search(older, range(positions), 0.3, step=3)
    trained.clear()
    while trainer.ready():
        trainer.train_step()
    fresh = trainer.fresh
    assert fresh.entries_committed > 2 * positions  # positions with several entries in the store ...
    assert len(fresh) == len(np.unique(fresh.keys)) == positions  # ... one target each for the trainer
    batch = {name: np.concatenate([b[name] for b in trained]) for name in trained[0]}
    assert len(batch["row"]) > positions and batch["full_search"].all()
    newest = np.where(batch["row"] < positions // 3, 0.9, 0.2).astype(np.float32)
    assert (batch["root_value"] == newest).all()
    assert (batch["policy_actions"][:, 0] == np.round(10 * newest)).all()
    assert (batch["policy_actions"][:, 1:] == -1).all()
    restarted = FreshTargets(run)  # a restarted trainer takes every entry in at once: the same targets
    np.testing.assert_array_equal(restarted.keys, fresh.keys)
    np.testing.assert_array_equal(restarted.columns["root_value"], fresh.columns["root_value"])


def test_the_store_is_reread_only_when_due_or_needed(tmp_path, initial, monkeypatch):
    """Re-reading a busy store before every step was much of a GPU trainer's step: while the data at hand
    allows steps it is re-read every refresh_seconds, and at once when the data runs out."""
    run = tmp_path / "run"
    write_games(run, 0, range(6))
    trainer = Trainer(run, config(refresh_seconds=3600.0), initial)
    reads = []
    refresh = trainer.reader.refresh
    monkeypatch.setattr(trainer.reader, "refresh", lambda: reads.append(1) or refresh())
    assert trainer.ready()
    write_games(run, 1, range(10, 14))  # not seen while the first games still allow steps
    committed = trainer.reader.positions_committed()
    while trainer.ready():
        trainer.train_step()
    assert trainer.samples_drawn > 2.0 * committed  # the newer games were taken in when needed ...
    # ... and the store read only then: at the start, when the first games ran out, when all had
    assert len(reads) == 3


def test_candidates_and_resume_continue_exactly(tmp_path, initial):
    run = tmp_path / "run"
    write_games(run, 0, range(6))
    trainer = Trainer(run, config(), initial)
    trainer.run(max_steps=7)
    assert RunDir(run).candidate(5).exists() and RunDir(run).trainer_state.exists()
    state = load_checkpoint(RunDir(run).trainer_state)
    assert state.step == 7 and state.extra["samples_drawn"] == 7 * 32 and state.optimizer_state is not None
    resumed = Trainer(run, config(), initial)
    assert resumed.step == 7 and resumed.samples_drawn == 7 * 32
    for a, b in zip(resumed.net.state_dict().values(), trainer.net.state_dict().values()):
        assert torch.equal(a, b)
    assert (resumed.learner.optimizer.state_dict()["state"].keys()
            == trainer.learner.optimizer.state_dict()["state"].keys())
    candidate = load_checkpoint(RunDir(run).candidate(5))
    assert candidate.step == 5 and candidate.parent == str(initial)


def test_expert_share_decays_and_is_logged_per_source(tmp_path, initial):
    from train.learner.pretrain_dataset import build_dataset

    pdn = tmp_path / "expert.pdn"
    pdn.write_text(EXPERT_PDN)
    dataset = tmp_path / "expert"
    build_dataset(pdn, dataset, progress=False)
    cfg = config(expert_data=str(dataset), expert_share=0.5, expert_decay_steps=4, expert_share_floor=0.0,
                 samples_per_position=50.0)
    assert expert_share_at(cfg, 0) == 0.5 and expert_share_at(cfg, 2) == 0.25 and expert_share_at(cfg, 4) == 0
    run = tmp_path / "run"
    write_games(run, 0, range(4))
    trainer = Trainer(run, cfg, initial)
    first = trainer.train_step()
    assert first["expert_share"] == 0.5
    assert {"selfplay/policy_loss", "expert/policy_loss", "expert/value_loss"} <= set(first)
    for _ in range(4):
        last = trainer.train_step()
    assert last["expert_share"] == 0 and "expert/policy_loss" not in last


def test_expert_share_floor_keeps_expert_positions_after_the_decay():
    cfg = config(expert_data="some-dataset", expert_share=0.5, expert_decay_steps=4, expert_share_floor=0.125)
    assert [expert_share_at(cfg, step) for step in (0, 2, 4, 100)] == [0.5, 0.25, 0.125, 0.125]
    assert expert_share_at(replace(cfg, expert_decay_steps=0), 0) == 0.125
    assert expert_share_at(replace(cfg, expert_data=""), 100) == 0


@pytest.mark.slow
def test_trainer_learns_the_visit_distributions(tmp_path, initial):
    """On a fixed small store the policy's excess over the targets' entropy (the KL divergence) and the
    value loss fall well below their starting values."""
    run = tmp_path / "run"
    write_games(run, 0, range(3))
    trainer = Trainer(run, config(samples_per_position=1e6, window_min=10_000), initial)
    rows = trainer.reader.sample(256, 10_000, np.random.default_rng(0))
    batch = samples_from_replay(rows).to_batch(trainer.device)

    def policy_and_value_loss() -> tuple[float, float]:
        with torch.no_grad():
            parts = losses(trainer.net(batch.planes), batch)
        return parts["policy"].item(), parts["value"].item()

    p0, v0 = policy_and_value_loss()
    for _ in range(150):
        trainer.train_step()
    p1, v1 = policy_and_value_loss()
    target = batch.policy
    weight = batch.policy_weight
    entropy = float((-(target * torch.log(target.clamp(min=1e-12))).sum(dim=1) * weight).sum() / weight.sum())
    assert p1 - entropy < 0.5 * (p0 - entropy) and v1 < 0.8 * v0


def test_batch_targets_match_the_stored_visits(tmp_path):
    run = tmp_path / "run"
    write_games(run, 0, [3])
    rows = ReplayReader(run).sample(64, 1000, np.random.default_rng(1))
    batch = samples_from_replay(rows).to_batch(torch.device("cpu"))
    policy = batch.policy.numpy()
    legal = batch.legal.numpy()
    # targets sum to one and live on legal actions only
    assert np.allclose(policy.sum(axis=1), 1.0, atol=1e-5)
    assert not (policy[~legal] > 0).any()
    assert set(np.unique(batch.wdl.numpy())) <= {0, 1, 2}


def test_auto_expert_data_is_built_once_from_the_data_folder(tmp_path, monkeypatch):
    from train.learner.trainer import resolve_expert_data

    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("CHECKERS_ZERO_DATA", str(data))
    run = tmp_path / "run"
    assert resolve_expert_data(run, "auto") is None  # no OCA file: self-play only
    (data / "OCA_2.0.pdn").write_text(EXPERT_PDN)
    path = resolve_expert_data(run, "auto")
    assert path == RunDir(run).expert_data and (path / "zarr.json").exists()
    stamp = (path / "zarr.json").stat().st_mtime_ns
    assert resolve_expert_data(run, "auto") == path and (path / "zarr.json").stat().st_mtime_ns == stamp
    (path / "zarr.json").write_text("{")  # a build cut short by a crash is rebuilt
    assert resolve_expert_data(run, "auto") == path
    assert resolve_expert_data(run, "") is None


def test_steps_count_on_from_the_starting_checkpoint(tmp_path):
    torch.manual_seed(0)
    start = tmp_path / "pretrained.pt"
    save_checkpoint(start, net=PolicyValueNet(TINY), net_config=TINY, step=50)
    run = tmp_path / "run"
    write_games(run, 0, range(4))
    trainer = Trainer(run, config(), start)
    assert trainer.step == 50 and trainer.samples_drawn == 0
    trainer.run(max_steps=5)
    assert RunDir(run).candidate(55).exists()


def test_a_diverging_trainer_stops_before_writing_a_checkpoint(tmp_path, initial):
    # A head weight that overflows float32 makes the loss infinite at the first step; the trainer used to
    # step on, turn every weight NaN and write candidates that hang every search.
    run = tmp_path / "run"
    write_games(run, 0, range(4))
    trainer = Trainer(run, config(checkpoint_every=1, heads=HeadWeights(policy=1e39)), initial)
    with pytest.raises(TrainingDiverged, match="the training loss is inf"):
        trainer.run(max_steps=3)
    assert RunDir(run).candidates() == [] and not RunDir(run).trainer_state.exists()

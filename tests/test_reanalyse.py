"""Reanalyse: fresh targets of stored positions, written by a reanalyser and laid over the rows sampled."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from selfplay.actors.actor import SelfPlayConfig
from selfplay.actors.reanalyser import ReanalyseConfig, Reanalyser
from selfplay.replay.random_records import random_game_record
from selfplay.replay.reanalysis_store import FreshTargets, ReanalysisWriter, position_key
from selfplay.replay.replay_buffer import REANALYSIS_GROUP, ReplayDamage, ReplayReader, ReplayWriter, check_store
from selfplay.tree_search.search import SearchConfig
from training_data import TINY
from zero.net.checkpoint import save_checkpoint
from zero.net.encoding import move_action
from zero.net.network import PolicyValueNet
from zero.rules.game import Position
from zero.run.rundir import RunDir


def write_games(run, actor, seeds):
    with ReplayWriter(run, actor) as writer:
        for s in seeds:
            writer.append_game(random_game_record(s, max_plies=40))


def whole_store(run) -> dict[str, np.ndarray]:
    reader = ReplayReader(run)
    rows = reader.sample(5000, 10**9, np.random.default_rng(0))
    keys, first = np.unique(position_key(rows["actor_id"], rows["row"]), return_index=True)
    return {name: column[first] for name, column in rows.items()} | {"key": keys}


def fresh_entry(writer, actor_id, row, action, value, step):
    writer.append(actor_id, row, np.array([action], np.int16), np.ones(1, np.float32), value, step)


def test_fresh_targets_replace_a_rows_targets_and_the_newest_network_wins(tmp_path):
    run = tmp_path / "run"
    write_games(run, 0, range(3))
    write_games(run, 5, range(3, 5))
    with ReanalysisWriter(run, 0, commit_targets=100) as writer:
        fresh_entry(writer, 0, 3, 7, 0.25, step=10)
        fresh_entry(writer, 5, 2, 9, -0.5, step=10)
        fresh_entry(writer, 0, 3, 11, 0.75, step=20)  # the same position searched by a newer network
    with ReanalysisWriter(run, 1) as writer:
        fresh_entry(writer, 0, 3, 13, 0.0, step=15)  # another worker, an older network: loses
    fresh = FreshTargets(run)
    assert len(fresh) == 2  # one target per position, however often reanalysed

    rows = ReplayReader(run).sample(400, 10**9, np.random.default_rng(1))
    before = {name: rows[name].copy() for name in rows}
    taken = fresh.apply(rows)
    hit_a = (rows["actor_id"] == 0) & (rows["row"] == 3)
    hit_b = (rows["actor_id"] == 5) & (rows["row"] == 2)
    assert taken == hit_a.sum() + hit_b.sum() > 0 and len(rows["row"]) == 400
    assert (rows["policy_actions"][hit_a, 0] == 11).all() and (rows["root_value"][hit_a] == 0.75).all()
    assert (rows["policy_actions"][hit_b, 0] == 9).all() and (rows["policy_visits"][hit_b, 1:] == 0).all()
    assert rows["full_search"][hit_a | hit_b].all()
    untouched = ~(hit_a | hit_b)
    for name in ("policy_actions", "policy_visits", "root_value", "full_search", "black", "result"):
        assert (rows[name][untouched] == before[name][untouched]).all()
    assert check_store(run).targets == 4 and not check_store(run).problems

    fresh.forget_outside(np.array([5, 0, 0]), np.array([0, 9, 3]))  # both positions still in the window
    assert len(fresh) == 2
    # The window holds actor 0's games from row 4 on (row 3 has left it), and none of actor 5's.
    fresh.forget_outside(np.array([0, 0]), np.array([30, 4]))
    assert len(fresh) == 0


def test_only_committed_entries_are_read_and_a_restart_goes_on_after_them(tmp_path):
    run = tmp_path / "run"
    write_games(run, 0, range(2))
    writer = ReanalysisWriter(run, 0, commit_targets=2)
    fresh_entry(writer, 0, 1, 5, 0.5, step=1)
    fresh_entry(writer, 0, 2, 5, 0.5, step=1)  # the second entry commits both
    fresh_entry(writer, 0, 3, 5, 0.5, step=1)  # queued only: a kill now loses it
    fresh = FreshTargets(run)
    assert len(fresh) == 2
    writer._lock.close()  # the process dies: its lock goes with it, the queue is lost
    with ReanalysisWriter(run, 0) as again:
        assert again.committed == 2
        fresh_entry(again, 0, 4, 5, 0.5, step=2)
    fresh.refresh()
    assert sorted(fresh.columns["row"].tolist()) == [1, 2, 4]


def test_a_lost_chunk_of_entries_is_refused_with_its_file_named(tmp_path):
    run = tmp_path / "run"
    write_games(run, 0, range(2))
    with ReanalysisWriter(run, 3, chunk_rows=2) as writer:
        for row in range(5):
            fresh_entry(writer, 0, row, 5, 0.5, step=1)
    chunk = RunDir(run).replay_store / REANALYSIS_GROUP / "3" / "row" / "c" / "1"
    assert chunk.is_file()
    chunk.unlink()
    with pytest.raises(ReplayDamage, match=r"reanalysis/3/row/c/1.*missing"):
        FreshTargets(run)
    assert any("reanalysis/3/row/c/1" in p for p in check_store(run).problems)
    with pytest.raises(ReplayDamage):
        ReanalysisWriter(run, 3)  # never written over


def test_a_reanalyser_searches_stored_positions_with_the_newest_candidate(tmp_path):
    run = tmp_path / "run"
    write_games(run, 0, range(6))
    torch.manual_seed(0)
    save_checkpoint(RunDir(run).candidate(40), net=PolicyValueNet(TINY), net_config=TINY, step=40)
    selfplay = SelfPlayConfig(precision="float32", device="cpu", search=SearchConfig(leaves_per_tree=2))
    stats = Reanalyser(run, 2, ReanalyseConfig(simulations=12, games_in_flight=8), selfplay,
                       window=lambda committed: committed, positions=30).run()
    assert stats.positions == 30 and stats.network == "candidate-0000040"

    fresh = FreshTargets(run)
    stored = whole_store(run)
    assert 0 < len(fresh) <= 30
    at = np.searchsorted(stored["key"], fresh.keys)
    assert (stored["key"][at] == fresh.keys).all()  # every entry names a committed position
    assert not stored["forced"][at].any()
    assert (fresh.columns["model_version"] == 40).all()
    for k, i in enumerate(at):
        position = Position(int(stored["black"][i]), int(stored["white"][i]), int(stored["kings"][i]),
                            bool(stored["black_to_move"][i]))
        legal = {move_action(m, position.black_to_move) for m in position.legal_moves()}
        actions = fresh.columns["policy_actions"][k]
        shares = fresh.columns["policy_visits"][k]
        assert set(actions[actions >= 0].tolist()) <= legal
        assert shares.sum() == pytest.approx(1, abs=1e-5) and (shares[actions < 0] == 0).all()
        assert -1 <= fresh.columns["root_value"][k] <= 1


def test_a_candidate_that_cannot_be_read_is_passed_over(tmp_path):
    # The gatekeeper removes candidates it is done with: one can go between being listed and being read.
    run = tmp_path / "run"
    write_games(run, 0, range(2))
    RunDir(run).candidate(40).parent.mkdir(parents=True)
    RunDir(run).candidate(40).write_bytes(b"half a file")
    selfplay = SelfPlayConfig(precision="float32", device="cpu")
    stats = Reanalyser(run, 0, ReanalyseConfig(simulations=4, games_in_flight=2), selfplay,
                       window=lambda committed: committed, positions=2).run()
    assert stats.positions == 2 and stats.network == "shipped"  # the run's best: before one, the shipped network


def test_a_newer_candidate_takes_over_between_searches(tmp_path):
    import zarr

    from zero.net.inference import Evaluator

    run = tmp_path / "run"
    write_games(run, 0, range(4))
    for step in (40, 80):
        torch.manual_seed(step)
        save_checkpoint(RunDir(run).candidate(step), net=PolicyValueNet(TINY), net_config=TINY, step=step)
    newer = RunDir(run).candidate(80)
    hidden = newer.with_name("later.pt")
    newer.rename(hidden)  # the trainer writes it once the first searches have begun
    loaded = []

    def load(info):
        loaded.append(info.step)
        return Evaluator.from_checkpoint(info.path, device="cpu", precision="float32")

    reanalyser = Reanalyser(run, 0, ReanalyseConfig(simulations=8, games_in_flight=4, network_poll_seconds=0,
                                                    commit_targets=1),
                            SelfPlayConfig(precision="float32", device="cpu"), window=lambda c: c, positions=24,
                            load_evaluator=load)
    draw = reanalyser._draw_game

    def draw_then_reveal(reader):
        roots = draw(reader)
        if hidden.exists():
            hidden.rename(newer)
        return roots

    reanalyser._draw_game = draw_then_reveal
    assert reanalyser.run().network == "candidate-0000080" and loaded == [40, 80]
    group = zarr.open_group(RunDir(run).replay_store / REANALYSIS_GROUP / "0", mode="r")
    steps = group["model_version"][:group.attrs["commit"]["targets"]]
    # Every search in flight when the newer network came finished with the older one; none mixed the two.
    assert len(steps) == 24 and steps[0] == 40 and steps[-1] == 80 and (np.diff(steps) >= 0).all()

"""Search labels: a dataset's positions labelled by searches, resumable, refused when damaged, trained on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import zarr

from selfplay.replay.replay_buffer import ChunkedColumns
from selfplay.tree_search.evaluators import HashEvaluator
from selfplay.tree_search.search import BatchedSearch, SearchConfig, visit_policy
from train.cli.pretrain import run as cli_run
from train.learner import learning
from train.learner.pretrain import PretrainConfig, train
from train.learner.pretrain_dataset import DatasetConfig, PretrainDataset, build_dataset
from train.learner.search_labels import (
    LabelConfig, LabelError, LabelWriter, find_labels, label, label_order, read_labels,
)
from training_data import TINY, scripted_game
from zero.corpus.pdn import PdnGame, read_pdn, write_game
from zero.endgames.egdb import Egdb, no_tables
from zero.net.checkpoint import save_checkpoint
from zero.net.network import PolicyValueNet
from zero.rules.game import Game, RulesConfig
from play.cli.main import build_parser

# Scripted games never come down to a database's few pieces: an empty one keeps the tests from building one.
NO_DATABASE = Egdb(no_tables(), Path("no-database"))
SIMULATIONS = 24


@pytest.fixture(scope="module")
def pdn_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pdn") / "games.pdn"
    path.write_text("".join(write_game(*scripted_game(seed, plies=30), {"Event": f"g{seed}"}) for seed in range(16)))
    return path


@pytest.fixture
def data(pdn_file, tmp_path) -> PretrainDataset:
    """A fresh dataset per test: the labels live inside it."""
    build_dataset(pdn_file, tmp_path / "data", DatasetConfig(val_fraction=0.2, test_fraction=0.2), progress=False)
    return PretrainDataset.open(tmp_path / "data")


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("teacher") / "teacher.pt"
    save_checkpoint(path, net=PolicyValueNet(TINY), net_config=TINY, step=0)
    return path


def _config(**changes) -> LabelConfig:
    return replace(LabelConfig(simulations=SIMULATIONS, games_in_flight=4, commit_labels=3), **changes)


def _label(data, teacher, **changes):
    # The hash evaluator answers each position the same in any batch: searches compare exactly.
    return label(data, teacher, _config(**changes), progress=False, evaluator=HashEvaluator(seed=1),
                 egdb=NO_DATABASE)


def _pdn_game(pdn_file: Path, data: PretrainDataset, row: int) -> Game:
    """The game of a dataset row as it stood there, replayed from the PDN file (not from the dataset)."""
    games = [g for g in read_pdn(pdn_file) if isinstance(g, PdnGame)]
    played = games[int(data.games["index"][data.arrays["game"][row]]) - 1]
    game = Game(played.start)
    for move in played.moves[:int(data.arrays["ply"][row])]:
        game.play(move)
    return game


def test_labels_are_a_direct_search_of_the_positions_in_the_fixed_order(data, teacher, pdn_file):
    summary = _label(data, teacher, positions=10)
    labels = read_labels(summary.path)
    order = label_order(data, RulesConfig())
    assert summary.added == summary.total == len(labels) == 10 and summary.order == len(order)
    np.testing.assert_array_equal(labels.columns["row"], order[:10])
    assert (data.split[order] == 0).all() and not data.arrays["forced"][order].any()
    # The order is a permutation, not the rows as they lie (the labels made so far are a sample of the split).
    assert not (np.diff(order) > 0).all()
    for i, row in enumerate(labels.columns["row"]):
        game = _pdn_game(pdn_file, data, int(row))
        assert game.position.black == data.arrays["black"][row]
        search = BatchedSearch(1, SearchConfig(), RulesConfig(), simulations=SIMULATIONS, egdb=NO_DATABASE)
        search.set_root(0, game)
        search.start(0, SIMULATIONS)
        search.run(HashEvaluator(seed=1))
        actions, shares = visit_policy(search.root_children(0), game.position.black_to_move)
        stored = labels.columns["policy_actions"][i]
        assert sorted(stored[stored >= 0]) == sorted(actions)
        got = dict(zip(stored.tolist(), labels.columns["policy_probs"][i].tolist()))
        for action, share in zip(actions.tolist(), shares.tolist()):
            assert got[action] == pytest.approx(share, abs=1e-6)
        assert labels.columns["root_value"][i] == pytest.approx(search.root_value(0), abs=1e-6)
        np.testing.assert_allclose(labels.columns["wdl"][i], search.root_wdl(0), atol=1e-6)
        assert np.isnan(labels.columns["plies_left"][i])  # moves_left_weight 0: the search weighs no plies


def test_an_interrupted_run_resumes_in_order_without_duplicates(data, teacher, monkeypatch):
    first = _label(data, teacher, positions=5)
    assert first.total == 5

    class Killed(BaseException):
        pass

    written = ChunkedColumns.put

    def killed_after_the_write(self, committed, new):  # a kill between the chunk write and the commit
        written(self, committed, new)
        raise Killed

    monkeypatch.setattr(ChunkedColumns, "put", killed_after_the_write)
    with pytest.raises(Killed):
        _label(data, teacher, positions=6)
    monkeypatch.undo()
    labels = read_labels(first.path)
    assert len(labels) == 5
    assert zarr.open_array(first.path / "row", mode="r").shape[0] > 5  # scratch rows past the commit

    resumed = _label(data, teacher, positions=6)
    assert (resumed.added, resumed.total) == (6, 11)
    rows = read_labels(first.path).columns["row"]
    np.testing.assert_array_equal(rows, label_order(data, RulesConfig())[:11])
    assert len(np.unique(rows)) == 11


@pytest.mark.parametrize("damage", ["garbage", "missing"])
def test_a_damaged_chunk_is_refused_in_one_line_naming_it(data, teacher, damage):
    path = _label(data, teacher, positions=4).path
    chunk = path / "policy_probs" / "c" / "0" / "0"
    assert chunk.exists()
    if damage == "garbage":
        chunk.write_bytes(b"not a chunk")
    else:
        chunk.unlink()
    for attempt in (lambda: read_labels(path), lambda: _label(data, teacher, positions=1)):
        with pytest.raises(LabelError) as refused:
            attempt()
        assert str(refused.value).startswith(str(chunk)) and "\n" not in str(refused.value)


def test_a_store_without_its_zarr_json_is_refused_never_started_again(data, teacher, monkeypatch, capsys):
    # Before: `pretrain label` started a new store in the same place (the labels gone) and exited 0, while
    # training refused the store.
    from zero.endgames import egdb_build

    monkeypatch.setattr(egdb_build, "largest_available", lambda *args, **kwargs: NO_DATABASE)
    args = build_parser().parse_args(["pretrain", "label", "--data", str(data.path), "--teacher", str(teacher),
                                      "--simulations", "8", "--positions", "3", "--quiet",
                                      "--set", "games_in_flight=2"])
    assert cli_run(args) == 0
    path = next(p for p in (data.path / "search-labels").iterdir() if p.is_dir())
    (path / "zarr.json").unlink()
    kept = sorted(p.relative_to(path) for p in path.rglob("*"))
    capsys.readouterr()
    assert cli_run(args) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path / 'zarr.json'}: missing" in err, err
    assert sorted(p.relative_to(path) for p in path.rglob("*")) == kept  # nothing written over
    with pytest.raises(LabelError) as refused:
        read_labels(path)
    assert str(refused.value).startswith(f"{path / 'zarr.json'}: missing") and "\n" not in str(refused.value)


def test_a_second_labeller_of_the_store_is_refused(data, teacher):
    path = _label(data, teacher, positions=1).path
    made_by = read_labels(path).made_by
    with LabelWriter(path, made_by, label_order(data, RulesConfig())):
        with pytest.raises(LabelError, match="another labeller is writing") as refused:
            _label(data, teacher, positions=1)
        assert "\n" not in str(refused.value)
    assert _label(data, teacher, positions=1).total == 2  # the lock goes with its holder


def test_other_settings_make_another_store(data, teacher):
    one = _label(data, teacher, positions=2).path
    other = _label(data, teacher, positions=2, simulations=SIMULATIONS + 1).path
    assert one != other and one.parent == other.parent == data.path / "search-labels"
    assert len(read_labels(one)) == len(read_labels(other)) == 2


def test_training_takes_the_search_targets_on_labelled_rows(data, teacher, monkeypatch, tmp_path, capsys):
    from zero.endgames import egdb_build

    monkeypatch.setattr(egdb_build, "largest_available", lambda *args, **kwargs: NO_DATABASE)
    labels = read_labels(_label(data, teacher, positions=12).path)
    seen: list[learning.Samples] = []

    class Seen(Exception):
        pass

    def recording(self, samples, lr):  # what the first step trains on is all this test asks
        seen.append(samples)
        raise Seen

    monkeypatch.setattr(learning.Learner, "step", recording)
    train_rows = data.rows("train")
    # One batch of the whole split: sample k is train row k.
    cfg = PretrainConfig(network=TINY, batch_size=len(train_rows), steps=1, threads=1, wandb_mode="disabled",
                         teacher=str(teacher), search_labels="auto", search_label_weight=2.0)
    with pytest.raises(Seen):
        train(cfg, data.path, tmp_path / "student.pt", tmp_path / "run", progress=False)
    assert f"12 of {len(train_rows)} train positions take the search labels" in capsys.readouterr().out
    samples = seen[0]
    at = np.searchsorted(train_rows, labels.columns["row"])
    np.testing.assert_array_equal(samples.policy_actions[at, :16], labels.columns["policy_actions"])
    np.testing.assert_array_equal(samples.policy_probs[at, :16], labels.columns["policy_probs"])
    np.testing.assert_array_equal(samples.wdl[at], labels.columns["wdl"])
    assert (samples.policy_weight[at] == 2.0).all() and (samples.value_weight[at] == 2.0).all()
    others = np.setdiff1d(np.arange(len(train_rows)), at)
    assert (samples.value_weight[others] == 1.0).all()
    # Elsewhere the teacher's own labels: its policy, not a search's shares.
    assert not np.array_equal(samples.policy_probs[others], np.zeros_like(samples.policy_probs[others]))

    other = tmp_path / "other-teacher.pt"
    save_checkpoint(other, net=PolicyValueNet(TINY), net_config=TINY, step=0)
    with pytest.raises(LabelError, match="no search labels of"):
        find_labels(data, other, "auto")


def test_labels_moved_to_other_positions_are_refused_in_one_line_when_trained_on(data, teacher):
    # Before: chunks swapped between rows passed every check of the files, and their labels were trained on.
    order = label_order(data, RulesConfig())
    path = data.path / "search-labels" / "by-hand"
    with LabelWriter(path, {"format": 1}, order, commit_labels=8, chunk_rows=4) as writer:
        for row in order[:8]:  # each entry names its own position's expert move
            actions = np.full(16, -1, np.int16)
            actions[0] = data.arrays["action"][row]
            writer.append({"row": row, "policy_actions": actions, "policy_probs": np.eye(16, dtype=np.float32)[0],
                           "root_value": 0.0, "wdl": np.array([0, 1, 0], np.float32), "plies_left": np.nan})
    rows = np.sort(order[:8])
    read_labels(path).lay_over(data.samples(rows), rows)  # sound: every move legal where it stands
    first, second = (path / "policy_actions" / "c" / str(chunk) / "0" for chunk in (0, 1))
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    with pytest.raises(LabelError) as refused:
        read_labels(path).lay_over(data.samples(rows), rows)
    message = str(refused.value)
    assert message.startswith(f"{path}: entry ") and "no legal move of its position" in message
    assert "\n" not in message


def test_cli_label_step_reports_the_store(data, teacher, monkeypatch, capsys):
    from zero.endgames import egdb_build

    monkeypatch.setattr(egdb_build, "largest_available", lambda *args, **kwargs: NO_DATABASE)
    args = build_parser().parse_args(["pretrain", "label", "--data", str(data.path), "--teacher", str(teacher),
                                      "--simulations", "8", "--positions", "3", "--quiet",
                                      "--set", "games_in_flight=2"])
    assert cli_run(args) == 0
    out = capsys.readouterr().out
    path = next(p for p in (data.path / "search-labels").iterdir() if p.is_dir())
    assert "3 labels added" in out and f"{path} holds 3 of the" in out
    assert read_labels(path).made_by["simulations"] == 8
    bad = build_parser().parse_args(["pretrain", "label", "--data", str(data.path), "--teacher", str(teacher),
                                     "--simulations", "0"])
    assert cli_run(bad) == 2
    assert "simulations = 0" in capsys.readouterr().err

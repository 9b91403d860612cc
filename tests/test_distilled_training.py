"""The distilled evaluation's labels (resumable chunk files, a pure function of their inputs) and its training."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from train.learner.distilled import labels as dl
from train.learner.distilled.training import DistilledTrainConfig, targets, train
from train.learner.pretrain_dataset import SPLITS, PretrainDataset
from training_data import save_tiny_network, scripted_dataset
from zero.distilled.model import load_eval, random_eval
from zero.endgames.egdb_build import ensure_built


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> PretrainDataset:
    return scripted_dataset(tmp_path_factory.mktemp("distilled"), games=20, plies=40)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    return save_tiny_network(tmp_path_factory.mktemp("teacher") / "teacher.pt", seed=5)


def test_labels_are_made_once_per_chunk_and_a_lost_chunk_is_made_again_the_same(data, teacher, monkeypatch):
    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    config = dl.DistilledLabelConfig(walk_plies=4, batch=64, threads=1)
    egdb = ensure_built(4)
    store = dl.label(data, teacher, config, egdb, progress=False)
    chunks = sorted(store.glob("chunk-*.npz"))
    assert len(chunks) == -(-len(data) // 128) >= 3
    stamps = [p.stat().st_mtime_ns for p in chunks]
    first, made_by = dl.read_labels(store)
    assert made_by["teacher_sha256"] and made_by["walk_plies"] == 4
    assert dl.label(data, teacher, config, egdb, progress=False) == store
    assert [p.stat().st_mtime_ns for p in chunks] == stamps  # nothing made twice
    lost = chunks[1].read_bytes()
    chunks[1].unlink()
    dl.label(data, teacher, config, egdb, progress=False)
    assert chunks[1].read_bytes() == lost and [p.stat().st_mtime_ns for p in chunks[2:]] == stamps[2:]
    labels, _ = dl.read_labels(store)
    assert all(np.array_equal(labels[c], first[c]) for c in dl.COLUMNS)
    # every labelled position is quiet and has a move; walks and expert positions both there
    from zero.rules.game import Position

    for i in range(0, len(labels["black"]), 7):
        pos = Position(int(labels["black"][i]), int(labels["white"][i]), int(labels["kings"][i]),
                       bool(labels["black_to_move"][i]))
        legal = pos.legal_moves()
        assert legal and not legal[0].is_capture
    assert labels["walked"].any() and (~labels["walked"]).any()
    assert np.allclose(labels["wdl"].astype(np.float32).sum(axis=1), 1, atol=1e-2)
    assert ((labels["result"] == dl.NO_RESULT) == labels["walked"]).all()


def test_a_damaged_or_foreign_chunk_is_refused_in_one_line(data, teacher, monkeypatch, tmp_path):
    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    store = dl.label(data, teacher, dl.DistilledLabelConfig(walk_plies=2, batch=64, threads=1), None, progress=False)
    chunk = store / "chunk-00001.npz"
    chunk.write_bytes(chunk.read_bytes()[:300])
    with pytest.raises(dl.DistilledLabelError, match="chunk-00001.npz") as info:
        dl.read_labels(store)
    assert "\n" not in str(info.value)
    chunk.write_bytes((store / "chunk-00000.npz").read_bytes())  # another chunk's labels under this name
    with pytest.raises(dl.DistilledLabelError, match="changed since its store was made"):
        dl.read_labels(store)
    with pytest.raises(dl.DistilledLabelError, match="changed since its store was made"):
        dl.label(data, teacher, dl.DistilledLabelConfig(walk_plies=2, batch=64, threads=1), None, progress=False)


def test_stores_of_one_teacher_are_learnt_together_and_another_teachers_refused(data, teacher, monkeypatch,
                                                                              tmp_path):
    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    config = dl.DistilledLabelConfig(walk_plies=5, batch=64, threads=1)
    one = dl.label(data, teacher, config, None, progress=False)
    other = dl.label(data, teacher, dl.DistilledLabelConfig(walk_plies=0, batch=64, threads=1), None, progress=False)
    both, made_by = dl.read_label_stores([one, other])
    first, second = dl.read_labels(one)[0], dl.read_labels(other)[0]
    assert [m["walk_plies"] for m in made_by] == [5, 0]
    assert all(np.array_equal(both[c], np.concatenate([first[c], second[c]])) for c in dl.COLUMNS)
    stranger = dl.label(data, save_tiny_network(tmp_path / "stranger.pt", seed=9), config, None, progress=False)
    with pytest.raises(dl.DistilledLabelError, match="2 teachers") as info:
        dl.read_label_stores([one, stranger])
    assert "\n" not in str(info.value)


def test_the_targets_blend_results_and_take_the_database_values():
    labels = {"wdl": np.array([[0.5, 0.5, 0.0]] * 3, np.float16), "result": np.array([1, dl.NO_RESULT, -1], np.int8),
              "exact": np.array([dl.NO_RESULT, dl.NO_RESULT, 1], np.int8)}
    teacher, target = targets(labels, DistilledTrainConfig(result_weight=0.5))
    assert np.allclose(teacher, 0.75) and np.allclose(target, [0.875, 0.75, 1.0])


def test_training_writes_an_evaluation_that_loads_and_learnt_something(data, teacher, monkeypatch, tmp_path):
    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    store = dl.label(data, teacher, dl.DistilledLabelConfig(walk_plies=4, batch=64, threads=1), None, progress=False)
    labels, _ = dl.read_labels(store)
    out = tmp_path / "eval.npz"
    config = DistilledTrainConfig(accumulator=16, hidden=8, steps=300, batch=256, threads=1, result_weight=0.0)
    held = train(labels, config, out, {"labels": str(store)}, progress=False)
    evaluation = load_eval(out)
    assert evaluation.meta["held_out"]["loss_vs_teacher"] == held.loss_vs_teacher
    assert evaluation.meta["made_from"] == {"labels": str(store)}
    assert held.teacher_entropy <= held.loss_vs_teacher
    # it learnt the teacher's values: closer to them than the weights it started from
    teacher_score, _ = targets(labels, config)
    columns = [labels[n] for n in ("black", "white", "kings", "black_to_move")]

    def loss(e) -> float:
        p = 1 / (1 + np.exp(-e.logits(*columns).astype(np.float64)))
        return float(np.mean(-(teacher_score * np.log(p) + (1 - teacher_score) * np.log(1 - p))))

    assert loss(evaluation) < loss(random_eval(evaluation.shape, config.seed)) - 0.01


def test_positions_the_database_answers_are_left_out_of_training_when_asked(data, teacher, monkeypatch, tmp_path):
    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    store = dl.label(data, teacher, dl.DistilledLabelConfig(walk_plies=4, batch=64, threads=1), None, progress=False)
    labels, _ = dl.read_labels(store)

    def thinned(rows: slice) -> dict[str, np.ndarray]:
        """The labels with at most 8 pieces left in `rows` (4 a side)."""
        out = {name: column.copy() for name, column in labels.items()}
        out["black"][rows] &= 0x000000F0
        out["white"][rows] &= 0x0F000000
        out["kings"][rows] &= out["black"][rows] | out["white"][rows]
        return out

    some = thinned(slice(0, None, 2))
    pieces = np.bitwise_count(some["black"] | some["white"])
    train_split = some["split"] == SPLITS.index("train")
    config = DistilledTrainConfig(accumulator=8, hidden=4, steps=2, batch=16, threads=1)
    learnt = {}
    for most in (0, 8):
        train(some, dataclasses.replace(config, database_pieces=most), tmp_path / "eval.npz", {}, progress=False)
        learnt[most] = load_eval(tmp_path / "eval.npz").meta["training"]["train_positions"]
        assert learnt[most] == (train_split & (pieces > most)).sum()
    assert 0 < learnt[8] < learnt[0]  # the thinned half left out
    with pytest.raises(dl.DistilledLabelError, match=r"no positions to learn .*more than 8 pieces"):
        train(thinned(slice(None)), dataclasses.replace(config, database_pieces=8), tmp_path / "none.npz", {},
              progress=False)


def test_search_scores_are_made_once_per_chunk_equal_the_players_search_and_are_blended(data, teacher, monkeypatch,
                                                                                      tmp_path):
    from train.learner.distilled import searched as ds
    from zero.alphabeta.player import DistilledPlayer
    from zero.distilled.model import DistilledShape, save_eval
    from zero.endgames.egdb_build import largest_available
    from zero.rules.game import Position

    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    # (walks of 3: a store of its own, never the one another test damages)
    store = dl.label(data, teacher, dl.DistilledLabelConfig(walk_plies=3, batch=64, threads=1), None, progress=False)
    evaluation = tmp_path / "eval.npz"
    save_eval(random_eval(DistilledShape(accumulator=16, hidden=8), seed=3), evaluation)
    searched = ds.search_label(store, evaluation, depth=3, every=5, workers=1, progress=False)
    chunks = sorted(searched.glob("chunk-*.npz"))
    assert len(chunks) == len(sorted(store.glob("chunk-*.npz"))) >= 3
    stamps = [p.stat().st_mtime_ns for p in chunks]
    assert ds.search_label(store, evaluation, depth=3, every=5, workers=1, progress=False) == searched
    assert [p.stat().st_mtime_ns for p in chunks] == stamps  # nothing made twice
    lost = chunks[1].read_bytes()
    chunks[1].unlink()
    ds.search_label(store, evaluation, depth=3, every=5, workers=1, progress=False)
    assert chunks[1].read_bytes() == lost and [p.stat().st_mtime_ns for p in chunks[2:]] == stamps[2:]

    labels, _ = dl.read_labels(store)
    scores = ds.read_searched(searched, store)
    lengths = [n for _, n in dl.chunk_lengths(store)]
    rows_scored = np.concatenate([offset + np.arange(0, n, 5) for offset, n in zip(np.cumsum([0] + lengths), lengths)])
    assert np.array_equal(np.flatnonzero(scores != ds.NO_SEARCH), rows_scored)
    player = DistilledPlayer(3, evaluation=load_eval(evaluation), egdb=largest_available())
    for r in rows_scored[::4]:
        position = Position(int(labels["black"][r]), int(labels["white"][r]), int(labels["kings"][r]),
                            bool(labels["black_to_move"][r]))
        assert scores[r] == ds.decided(player.search(position)[1])

    config = DistilledTrainConfig(result_weight=0.0, searched_weight=0.25, exact=False)
    teacher_score, target = targets(labels, config, scores)
    scored = scores != ds.NO_SEARCH
    assert np.allclose(target[~scored], teacher_score[~scored])
    assert np.allclose(target[scored], 0.75 * teacher_score[scored] + 0.25 / (1 + np.exp(-scores[scored] / 1000)))

    chunks[2].write_bytes(chunks[0].read_bytes())  # another chunk's scores under this name
    with pytest.raises(dl.DistilledLabelError, match="chunk-00002.npz") as info:
        ds.read_searched(searched, store)
    assert "\n" not in str(info.value)


def test_a_won_or_lost_search_score_is_learnt_as_near_certain_and_others_kept():
    from train.learner.distilled.searched import DECIDED_SCORE, decided
    from zero.alphabeta.search import WIN_SCORE

    assert decided(WIN_SCORE - 12) == DECIDED_SCORE and decided(-(WIN_SCORE - 3)) == -DECIDED_SCORE
    assert decided(-1234) == -1234 and decided(20_000) == DECIDED_SCORE


def test_a_store_knows_its_chunks_and_is_refused_missing_changed_or_given_twice(data, teacher, monkeypatch):
    import os

    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    config = dl.DistilledLabelConfig(walk_plies=1, batch=64, threads=1)
    store = dl.label(data, teacher, config, None, progress=False)
    middle = store / "chunk-00001.npz"
    sound = middle.read_bytes()
    made_by = dl.read_labels(store)[1]

    def refused(attempt) -> str:
        with pytest.raises(dl.DistilledLabelError) as info:
            attempt()
        assert "\n" not in str(info.value)
        return str(info.value)

    middle.unlink()  # a middle chunk lost: its labels would be missing from train and test alike
    assert "chunk-00001.npz: missing" in refused(lambda: dl.read_labels(store))
    cols = dl.read_chunk(store / "chunk-00002.npz", None, 2)
    dl.write_chunk(middle, made_by, 1, {**cols})  # sound in itself, but not the chunk its store made
    assert "changed since its store was made" in refused(lambda: dl.read_labels(store))
    for damage in ("fifo", "link"):
        middle.unlink()
        os.mkfifo(middle) if damage == "fifo" else middle.symlink_to("/dev/zero")
        said = refused(lambda: dl.label(data, teacher, config, None, progress=False))  # no hang, no "labels in"
        assert "chunk-00001.npz" in said and ("not a regular file" in said or "symbolic link" in said), said
    middle.unlink()
    middle.write_bytes(sound)
    assert len(dl.read_label_stores([store])[0]["black"]) == sum(n for _, n in dl.chunk_lengths(store))
    assert "given twice" in refused(lambda: dl.read_label_stores([store, store]))
    assert "given twice" in refused(lambda: dl.read_label_stores([store, store.parent / ".." / store.parent.name
                                                                  / store.name]))


def test_one_writer_at_a_time_per_store(data, teacher, monkeypatch):
    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    config = dl.DistilledLabelConfig(walk_plies=1, batch=64, threads=1)
    store = dl.label(data, teacher, config, None, progress=False)
    lock = dl.take_store_lock(store)  # as another labeller running now would hold it
    try:
        with pytest.raises(dl.DistilledLabelError, match="another process is writing it"):
            dl.label(data, teacher, config, None, progress=False)
    finally:
        lock.close()
    assert dl.label(data, teacher, config, None, progress=False) == store


def test_search_scores_name_their_label_store_and_another_stores_are_refused(data, teacher, monkeypatch, tmp_path):
    from train.learner.distilled import searched as ds
    from zero.distilled.model import DistilledShape, save_eval

    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    one = dl.label(data, teacher, dl.DistilledLabelConfig(walk_plies=7, batch=64, threads=1), None, progress=False)
    other = dl.label(data, teacher, dl.DistilledLabelConfig(walk_plies=8, batch=64, threads=1), None, progress=False)
    evaluation = tmp_path / "eval.npz"
    save_eval(random_eval(DistilledShape(accumulator=8, hidden=4), seed=3), evaluation)
    searched = ds.search_label(one, evaluation, depth=1, every=50, workers=1, progress=False)
    assert (ds.read_searched(searched, one) != ds.NO_SEARCH).any()
    with pytest.raises(dl.DistilledLabelError, match="search scores of the label store") as info:
        ds.read_searched(searched, other)
    assert str(one.name) in str(info.value) and "\n" not in str(info.value)


def test_distilled_train_checks_its_destination_first_and_replaces_the_shipped_file_only_when_told(
        data, teacher, monkeypatch, tmp_path, capsys):
    # Before: `distilled train --out checkpoints/distilled.npz` replaced the tracked file without a word, and a
    # bad --out was found only after the whole training (a traceback for a path under a file or in /proc).
    from play.cli.main import main
    from train.learner.distilled import training
    from zero.distilled import model

    monkeypatch.setattr(dl, "CHUNK_ROWS", 128)
    store = dl.label(data, teacher, dl.DistilledLabelConfig(walk_plies=1, batch=64, threads=1), None, progress=False)
    shipped = tmp_path / "checkpoints" / "distilled.npz"
    shipped.parent.mkdir()
    save_eval_file = random_eval(model.DistilledShape(accumulator=8, hidden=4), seed=1)
    model.save_eval(save_eval_file, shipped)
    monkeypatch.setattr(model, "DEFAULT_DISTILLED", shipped)
    real_train = training.train
    trained = []
    monkeypatch.setattr(training, "train", lambda *a, **k: trained.append(1) or real_train(*a, **k))
    small = ["--set", "accumulator=8", "--set", "hidden=4", "--set", "steps=1", "--set", "batch=16",
             "--set", "threads=1", "--quiet"]
    (tmp_path / "a-file").write_text("")
    before = shipped.read_bytes()
    capsys.readouterr()
    for out, said in [(shipped, "--force to replace it"), (tmp_path, "a directory"),
                      (tmp_path / "a-file" / "x.npz", "a file stands where its folder"),
                      (Path("/proc/x.npz"), "cannot write /proc/x.npz")]:
        assert main(["distilled", "train", "--labels", str(store), "--out", str(out), *small]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, err
    assert not trained and shipped.read_bytes() == before
    assert main(["distilled", "train", "--labels", str(store), "--out", str(shipped), "--force", *small]) == 0
    assert trained and shipped.read_bytes() != before and model.load_eval(shipped).shape.hidden == 4

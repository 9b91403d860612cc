"""Pretraining: the dataset built from a PDN file, the split by game, and training that learns and resumes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from train.cli.pretrain import run as cli_run
from train.learner import learning
from train.learner.learning import OptimConfig, lr_at
from train.learner.pretrain import PretrainConfig, predict, split_metrics, train
from train.learner.pretrain_dataset import (
    SPLITS, DatasetConfig, DatasetError, PretrainDataset, build_dataset, format_summary, split_of,
)
from play.cli.main import build_parser
from zero.corpus.pdn import write_game
from zero.net.checkpoint import load_checkpoint
from zero.net.encoding import move_action
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.rules.game import Game

from training_data import scripted_game

TINY = NetworkConfig(blocks=1, channels=16, policy_channels=8, value_channels=2, value_hidden=16)


@pytest.fixture(scope="module")
def pdn_file(tmp_path_factory):
    texts = []
    for seed in range(40):
        moves, result = scripted_game(seed)
        texts.append(write_game(moves, result, {"Event": f"g{seed}"}))
    # Duplicates of game 0 (different tags and result text do not matter: the moves decide the split).
    moves0, _ = scripted_game(0)
    texts += [write_game(moves0, "1/2-1/2", {"Event": "dup-a"}), write_game(moves0, "0-1", {"Event": "dup-b"})]
    # A game with a forced capture: 11-15 23-19 8-11? no: 9-14 22-18 leaves 14x23 / 18x9 style forced replies.
    forced = Game()
    for text in ["11-15", "23-19", "9-14", "22-17"]:
        forced.play(next(m for m in forced.legal_moves() if str(m) == text))
    texts.append(write_game(list(forced.moves), "1/2-1/2", {"Event": "forced"}))
    texts.append("[Event \"broken\"]\n1. 11-15 99-98 *\n\n")
    path = tmp_path_factory.mktemp("pdn") / "games.pdn"
    path.write_text("".join(texts))
    return path


@pytest.fixture(scope="module")
def dataset(pdn_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "oca"
    cfg = DatasetConfig(val_fraction=0.2, test_fraction=0.2, chunk_rows=256)
    summary = build_dataset(pdn_file, out, cfg, progress=False)
    return PretrainDataset.open(out), summary


def test_rows_match_a_replay(dataset, pdn_file):
    from zero.corpus.pdn import PdnGame, read_pdn

    data, summary = dataset
    games = [g for g in read_pdn(pdn_file) if isinstance(g, PdnGame)]
    assert summary["skipped"]["unreadable"] == 1
    assert len(data) == sum(g.plies for g in games) == summary["positions"]
    a = data.arrays
    for gi, g in enumerate(games):
        replay = Game()
        start = int(data.games["start"][gi])
        winner = {"1-0": 1, "0-1": -1, "1/2-1/2": 0}[g.result]
        for ply, move in enumerate(g.moves):
            r = start + ply
            pos = replay.position
            assert (int(a["black"][r]), int(a["white"][r]), int(a["kings"][r])) == (pos.black, pos.white, pos.kings)
            assert bool(a["black_to_move"][r]) == pos.black_to_move
            assert int(a["action"][r]) == move_action(move, pos.black_to_move)
            assert int(a["num_legal"][r]) == len(replay.legal_moves())
            assert bool(a["forced"][r]) == (len(replay.legal_moves()) == 1)
            assert int(a["result"][r]) == (winner if pos.black_to_move else -winner)
            assert int(a["no_progress"][r]) == replay.no_progress[-1]
            assert int(a["repetitions"][r]) == replay.repetitions()
            assert int(a["ply"][r]) == ply and int(a["game"][r]) == gi
            assert int(a["moves_left"][r]) == g.plies - ply
            replay.play(move)


def test_forced_positions_are_flagged(dataset):
    data, summary = dataset
    a = data.arrays
    assert summary["forced_positions"] == int(a["forced"].sum()) > 0
    rows = np.flatnonzero(a["forced"])
    batch = data.samples(rows).to_batch(torch.device("cpu"))
    assert np.all(batch.policy_weight.numpy() == 0) and np.all(batch.legal.numpy().sum(axis=1) == 1)
    # The one legal action is the expert's, and the policy target puts all its mass there.
    action = a["action"][rows].astype(np.int64)
    assert np.all(batch.legal.numpy()[np.arange(len(rows)), action])
    assert np.all(batch.policy.numpy()[np.arange(len(rows)), action] == 1.0)


def test_split_is_by_game_and_keeps_duplicates_together(dataset):
    data, summary = dataset
    g = data.games
    for gi in range(len(g["split"])):
        rows = slice(int(g["start"][gi]), int(g["start"][gi]) + int(g["length"][gi]))
        assert np.all(data.split[rows] == g["split"][gi])
    # Games 41 and 42 (file numbering) repeat game 1's moves.
    first, dup_a, dup_b = (int(np.flatnonzero(g["index"] == i)[0]) for i in (1, 41, 42))
    assert g["group"][first] == g["group"][dup_a] == g["group"][dup_b]
    assert g["split"][first] == g["split"][dup_a] == g["split"][dup_b]
    for k in np.unique(g["group"]):
        assert len(set(g["split"][g["group"] == k].tolist())) == 1
    assert summary["duplicate_groups"] >= 1 and summary["groups_split_across_sides"] == 0
    assert {SPLITS[s] for s in g["split"].tolist()} == set(SPLITS)
    text = format_summary(summary)
    assert "share a from-to action" in text and "train" in text


def test_split_is_deterministic_and_balanced():
    cfg = DatasetConfig(val_fraction=0.1, test_fraction=0.1)
    texts = [f"game {i}" for i in range(4000)]
    sides = [split_of(t, cfg) for t in texts]
    assert sides == [split_of(t, cfg) for t in texts]
    counts = np.bincount(sides, minlength=3) / len(texts)
    assert counts[0] == pytest.approx(0.8, abs=0.03) and counts[2] == pytest.approx(0.1, abs=0.03)
    other = DatasetConfig(val_fraction=0.1, test_fraction=0.1, split_salt="another")
    assert sides != [split_of(t, other) for t in texts]


def test_open_refuses_a_missing_dataset(tmp_path):
    with pytest.raises(DatasetError, match="no dataset"):
        PretrainDataset.open(tmp_path / "absent")


def test_learning_rate_schedule():
    cfg = OptimConfig(lr=1.0, schedule="onecycle", warmup_fraction=0.1, final_lr_fraction=0.0)
    lrs = [lr_at(cfg, s, 100) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0) and lrs[-1] == pytest.approx(0.0)
    assert max(lrs) == pytest.approx(1.0)


def _config(steps: int, checkpoint_every: int = 5) -> PretrainConfig:
    return PretrainConfig(
        network=TINY, optim=OptimConfig(lr=3e-3), batch_size=64, steps=steps, eval_every=10_000,
        val_positions=64, checkpoint_every=checkpoint_every, log_every=10, baseline_positions=20, threads=1,
        wandb_mode="disabled",
    )


@pytest.mark.slow  # 300 optimizer steps: ~10 s on an idle core, over a minute on the shared box
def test_training_fits_the_expert_moves(dataset, tmp_path):
    data, _ = dataset
    torch.manual_seed(0)
    metrics = train(_config(300, checkpoint_every=300), data.path, tmp_path / "final.pt", tmp_path / "run", progress=False)
    ck = load_checkpoint(tmp_path / "final.pt")
    assert ck.step == 300 and ck.metrics["policy"]["top1"] == metrics["policy"]["top1"]
    assert ck.provenance["source_sha256"] and ck.extra["config"]["steps"] == 300
    rows = data.rows("train")
    fit = split_metrics(predict(ck.build_network(), data, rows, torch.device("cpu"), 512), data, rows)
    # The scripted policy is a function of the position: the network must fit it far above chance.
    assert fit["policy"]["top1"] > 0.8 > 2 * fit["policy"]["uniform_top1"]
    assert {"opening", "middlegame", "endgame"} == set(metrics["policy_by_phase"])
    assert metrics["alphabeta"]["positions"] == 20


def test_reported_predictions_are_float32_on_any_cpu(dataset, monkeypatch):
    data, _ = dataset
    rows = data.rows("train")
    torch.manual_seed(0)
    net = PolicyValueNet(TINY)
    monkeypatch.setattr(learning, "cpu_multiplies_bf16", lambda: False)
    plain = predict(net, data, rows, torch.device("cpu"), 64)
    monkeypatch.setattr(learning, "cpu_multiplies_bf16", lambda: True)  # where training computes in bf16
    on_amx = predict(net, data, rows, torch.device("cpu"), 64)
    for name, values in plain.items():
        np.testing.assert_array_equal(on_amx[name], values, err_msg=name)


def test_an_interrupted_run_resumes_to_the_same_weights(dataset, tmp_path, monkeypatch):
    data, _ = dataset
    straight = train(_config(20), data.path, tmp_path / "a.pt", tmp_path / "run-a", progress=False)
    calls = {"n": 0}
    original = PretrainDataset.samples

    def interrupting(self, rows):
        calls["n"] += 1
        if calls["n"] == 13:  # during step 13: the last checkpoint is at step 10
            raise KeyboardInterrupt
        return original(self, rows)

    monkeypatch.setattr(PretrainDataset, "samples", interrupting)
    with pytest.raises(KeyboardInterrupt):
        train(_config(20), data.path, tmp_path / "b.pt", tmp_path / "run-b", progress=False)
    monkeypatch.setattr(PretrainDataset, "samples", original)
    assert load_checkpoint(tmp_path / "run-b" / "last.pt").step == 10
    resumed = train(_config(20), data.path, tmp_path / "b.pt", tmp_path / "run-b", progress=False)
    a, b = load_checkpoint(tmp_path / "a.pt"), load_checkpoint(tmp_path / "b.pt")
    for k in a.state_dict:
        assert torch.allclose(a.state_dict[k].float(), b.state_dict[k].float(), atol=1e-5), k
    assert resumed["policy"]["top1"] == pytest.approx(straight["policy"]["top1"])
    # Other settings cannot resume that run.
    from train.learner.pretrain import PretrainError

    with pytest.raises(PretrainError, match="other settings"):
        cfg = _config(20)
        cfg.batch_size = 32
        train(cfg, data.path, tmp_path / "c.pt", tmp_path / "run-b", progress=False)


def test_ctrl_c_saves_the_run_at_its_step_and_the_expected_time_is_said(dataset, tmp_path, monkeypatch, capsys):
    # Before: Ctrl-C said "interrupted" and lost the steps since the last checkpoint, and nothing said up front
    # how long a run would take.
    import os
    import re
    import signal

    data, _ = dataset
    train(_config(30), data.path, tmp_path / "a.pt", tmp_path / "run-a", progress=False)
    said = capsys.readouterr().out
    assert re.search(r"expected: about (\d+ h )?\d+ min more for steps 20 to 30 at this pace; Ctrl-C saves", said)
    calls = {"n": 0}
    original = PretrainDataset.samples

    def ctrl_c(self, rows):
        calls["n"] += 1
        if calls["n"] == 13:  # Ctrl-C while step 13 is drawn: it finishes, and the run is saved there
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, rows)

    monkeypatch.setattr(PretrainDataset, "samples", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        train(_config(30), data.path, tmp_path / "b.pt", tmp_path / "run-b", progress=False)
    assert "interrupted: saved at step 13/30" in capsys.readouterr().out
    assert load_checkpoint(tmp_path / "run-b" / "last.pt").step == 13
    monkeypatch.setattr(PretrainDataset, "samples", original)
    train(_config(30), data.path, tmp_path / "b.pt", tmp_path / "run-b", progress=False)
    a, b = load_checkpoint(tmp_path / "a.pt"), load_checkpoint(tmp_path / "b.pt")
    for k in a.state_dict:
        assert torch.allclose(a.state_dict[k].float(), b.state_dict[k].float(), atol=1e-5), k


def test_cli_dataset_command(pdn_file, tmp_path, capsys):
    args = build_parser().parse_args(["pretrain", "dataset", "--pdn", str(pdn_file), "--out", str(tmp_path / "d"),
                                      "--quiet", "--set", "test_fraction=0.3"])
    assert cli_run(args) == 0
    out = capsys.readouterr().out
    assert "duplicate move sequences:" in out and "split across sides: 0" in out
    args = build_parser().parse_args(["pretrain", "dataset", "--pdn", str(tmp_path / "none.pdn"), "--out",
                                      str(tmp_path / "e"), "--quiet"])
    assert cli_run(args) == 2
    assert "not found" in capsys.readouterr().err


def _teacher(path, seed: int = 5):
    from zero.net.checkpoint import save_checkpoint
    from zero.net.network import PolicyValueNet

    torch.manual_seed(seed)
    net = PolicyValueNet(TINY)
    with torch.no_grad():  # sharper than a fresh network's near-uniform policy, so there is a judgement to learn
        for p in net.parameters():
            p.mul_(3.0)
    save_checkpoint(path, net=net, net_config=TINY, step=0)
    return path


def _policies(evaluator, samples) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Legal-move distributions of a network on some samples, its WDL, and the legal masks."""
    batch = samples.to_batch(torch.device("cpu"))
    logits, wdl = evaluator.evaluate(batch.planes.numpy())
    legal = batch.legal.numpy()
    logits = np.where(legal, logits, -np.inf)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), wdl, legal


def test_teacher_labels_are_its_policy_over_the_legal_moves_and_its_wdl(dataset, tmp_path):
    from train.learner.distill import TOP_ACTIONS, dataset_positions, label
    from zero.net.inference import Evaluator

    data, _ = dataset
    teacher = Evaluator.from_checkpoint(_teacher(tmp_path / "teacher.pt"), device="cpu", precision="float32")
    rows = data.rows("train")[:300]
    labelled = label(teacher, dataset_positions(data, rows), "expert")
    policy, wdl, legal_masks = _policies(teacher, data.samples(rows))
    np.testing.assert_allclose(labelled.wdl, wdl, atol=1e-6)
    for i in range(len(rows)):
        legal = np.flatnonzero(legal_masks[i])
        kept = labelled.policy_actions[i][labelled.policy_actions[i] >= 0]
        assert len(kept) == min(len(legal), TOP_ACTIONS) and set(kept) <= set(legal)
        assert labelled.policy_probs[i].sum() == pytest.approx(1.0, abs=1e-5)
        # The teacher's likeliest moves, in its proportions.
        assert policy[i][kept].min() >= np.sort(policy[i])[::-1][len(kept) - 1] - 1e-7
        np.testing.assert_allclose(labelled.policy_probs[i][:len(kept)], policy[i][kept] / policy[i][kept].sum(),
                                   rtol=1e-4)


@pytest.mark.slow  # 300 optimizer steps, as test_training_fits_the_expert_moves
def test_distillation_brings_the_student_to_the_teachers_judgement(dataset, tmp_path):
    from dataclasses import replace

    from train.learner.distill import _cache_file, distilled
    from zero.endgames.egdb_build import largest_available
    from zero.net.inference import Evaluator

    data, _ = dataset
    teacher_path = _teacher(tmp_path / "teacher.pt")
    teacher = Evaluator.from_checkpoint(teacher_path, device="cpu", precision="float32")
    rows = data.rows("train")
    want, _, _ = _policies(teacher, data.samples(rows))

    def kl_from_teacher(checkpoint) -> float:
        student = Evaluator.from_checkpoint(checkpoint, device="cpu", precision="float32")
        got, _, _ = _policies(student, data.samples(rows))
        inside = want > 0
        return float((want[inside] * np.log(want[inside] / np.maximum(got[inside], 1e-12))).sum() / len(rows))

    cfg = replace(_config(300, checkpoint_every=300), teacher=str(teacher_path), teacher_positions=256)
    torch.manual_seed(0)
    train(replace(cfg, steps=1), data.path, tmp_path / "start.pt", tmp_path / "run-start", progress=False)
    torch.manual_seed(0)
    train(cfg, data.path, tmp_path / "student.pt", tmp_path / "run", progress=False)
    before, after = kl_from_teacher(tmp_path / "start.pt"), kl_from_teacher(tmp_path / "student.pt")
    assert after < 0.3 * before, (before, after)
    assert load_checkpoint(tmp_path / "student.pt").provenance["teacher"] == str(teacher_path)

    # The labels were kept beside the dataset; a damaged copy is labelled again, to the same labels.
    cache = _cache_file(teacher, data, 256, cfg.seed, largest_available().max_pieces)
    kept = distilled(teacher_path, data, 256, cfg.seed).labelled
    cache.write_bytes(cache.read_bytes()[:1000])
    again = distilled(teacher_path, data, 256, cfg.seed).labelled
    assert len(kept) == len(rows) + 256
    for name in ("black", "policy_actions", "policy_probs", "wdl", "source"):
        np.testing.assert_array_equal(getattr(again, name), getattr(kept, name))
    assert distilled(teacher_path, data, 256, cfg.seed).labelled.wdl.shape == (len(rows) + 256, 3)


def test_the_command_fine_tunes_a_checkpoint_in_its_own_shape(dataset, tmp_path, capsys):
    data, _ = dataset
    start = _teacher(tmp_path / "start.pt")  # TINY, not the small preset a run defaults to
    common = ["--data", str(data.path), "--no-wandb", "--quiet", "--set", "steps=2", "--set", "batch_size=64",
              "--set", "threads=1", "--set", "val_positions=64", "--set", "baseline_positions=20"]
    args = build_parser().parse_args(["pretrain", "train", "--init", str(start), "--out", str(tmp_path / "tuned.pt"),
                                      "--run-dir", str(tmp_path / "run"), *common])
    assert cli_run(args) == 0
    tuned = load_checkpoint(tmp_path / "tuned.pt")
    assert tuned.net_config == TINY and tuned.provenance["init"] == str(start)

    for extra, problem in ((["--net", "small"], "drop --net"), ([], "--init: ")):
        init = str(start) if extra else str(tmp_path / "missing.pt")
        args = build_parser().parse_args(["pretrain", "train", "--init", init, "--out", str(tmp_path / "x.pt"),
                                          "--run-dir", str(tmp_path / "run-x"), *extra, *common])
        capsys.readouterr()
        assert cli_run(args) == 2
        err = capsys.readouterr().err
        assert problem in err and err.count("\n") == 1


def test_a_run_can_start_from_a_checkpoints_weights_and_refuses_another_shape(dataset, tmp_path):
    from dataclasses import replace

    from train.learner.pretrain import PretrainError

    data, _ = dataset
    start = _teacher(tmp_path / "start.pt")
    cfg = replace(_config(2, checkpoint_every=2), init=str(start), optim=OptimConfig(lr=1e-7), quantization_aware=True)
    train(cfg, data.path, tmp_path / "tuned.pt", tmp_path / "run", progress=False)
    tuned, initial = load_checkpoint(tmp_path / "tuned.pt"), load_checkpoint(start)
    # Two steps at a tiny learning rate: the weights are the starting checkpoint's, not fresh ones (batch
    # normalisation's running statistics do move).
    for name, weight in initial.build_network().named_parameters():
        np.testing.assert_allclose(tuned.state_dict[name].numpy(), weight.detach().numpy(), atol=1e-4, err_msg=name)
    assert tuned.provenance["init"] == str(start) and tuned.provenance["init_sha256"]

    other = replace(cfg, network=NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1,
                                               value_hidden=16))
    with pytest.raises(PretrainError, match="^init: ") as refused:
        train(other, data.path, tmp_path / "other.pt", tmp_path / "run-other", progress=False)
    assert "\n" not in str(refused.value)


def test_a_dataset_without_a_train_split_has_a_uniform_value_baseline(pdn_file, tmp_path):
    # Before (issue 85, item 11): `ship`'s metrics of a small dataset, every game in its test split, warned
    # "RuntimeWarning: Mean of empty slice" (train.learner.pretrain.base_rates) and gave NaN baselines.
    build_dataset(pdn_file, tmp_path / "oca", DatasetConfig(val_fraction=0.0, test_fraction=1.0), progress=False)
    data = PretrainDataset.open(tmp_path / "oca")
    rows = data.rows("test")
    assert not len(data.rows("train")) and len(rows)
    torch.manual_seed(0)
    predictions = predict(PolicyValueNet(TINY), data, rows, torch.device("cpu"), 512)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = split_metrics(predictions, data, rows)
    assert metrics["value"]["base_rates_wdl"] == pytest.approx([1 / 3] * 3)
    assert np.isfinite(metrics["value"]["base_rate_ce"])

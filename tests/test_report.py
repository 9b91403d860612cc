"""`checkers-zero report`: per-checkpoint quality on fixed held-out positions."""

from __future__ import annotations

import numpy as np
import torch

from play.cli.main import main
from selfplay.replay.random_records import random_game_record
from selfplay.replay.replay_buffer import ReplayWriter
from train.arena.report import calibration_bins, load_samples, quality, selfplay_held_out
from zero.net.checkpoint import save_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.run.rundir import RunDir

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=8)


def test_calibration_bins_of_a_calibrated_and_an_overconfident_predictor():
    rng = np.random.default_rng(0)
    p_win = rng.uniform(0, 1, 20_000)
    predicted = np.stack([p_win, np.zeros_like(p_win), 1 - p_win], axis=1)
    honest = np.where(rng.uniform(0, 1, len(p_win)) < p_win, 0, 2)
    bins, error = calibration_bins(predicted, honest)
    assert error < 0.02 and sum(count for *_, count in bins["win"]) == len(p_win)
    assert all(abs(pred - seen) < 0.05 for pred, seen, _ in bins["win"])
    always_win = np.zeros(len(p_win), dtype=int)
    assert calibration_bins(predicted, always_win)[1] > 0.2


def make_run(tmp_path):
    run = RunDir(tmp_path / "run")
    with ReplayWriter(run.root, 0, commit_positions=1) as writer:
        for seed in range(6):
            writer.append_game(random_game_record(seed, max_plies=40))
    torch.manual_seed(0)
    initial = save_checkpoint(run.initial_checkpoint("tiny"), net=PolicyValueNet(TINY), net_config=TINY, step=10)
    run.write_best(initial, 10, "test")
    return run


def test_quality_figures_are_what_they_say(tmp_path):
    run = make_run(tmp_path)
    samples = selfplay_held_out(run.root, 100)
    q = quality(PolicyValueNet(TINY), samples)
    assert q.positions == 100 and set(q.losses) == {"policy", "value", "moves_left"}
    assert q.policy_kl >= 0 and 0 <= q.policy_entropy <= np.log(32)
    assert sum(count for *_, count in q.calibration["draw"]) == 100


def test_report_scores_the_chain_on_the_same_positions_every_time(tmp_path, capsys):
    run = make_run(tmp_path)
    assert main(["report", "--run", str(run.root), "--selfplay-positions", "64"]) == 0
    out = capsys.readouterr().out
    assert "initial-tiny" in out and "selfplay" in out and run.report_plot.exists()
    first = load_samples(run.report_positions)
    with ReplayWriter(run.root, 1, commit_positions=1) as writer:  # more games later: the set stays
        writer.append_game(random_game_record(99, max_plies=40))
    assert main(["report", "--run", str(run.root), "--selfplay-positions", "64"]) == 0
    again = load_samples(run.report_positions)
    np.testing.assert_array_equal(first.black, again.black)
    assert main(["report", "--run", str(tmp_path / "nothing")]) == 2

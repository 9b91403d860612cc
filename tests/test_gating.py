"""The gatekeeper's records: a stop at any point of a gating step, then a resume, counts every match once."""

from __future__ import annotations

import pytest
import torch

from train.gating import Gatekeeper, GatingConfig, GatingInterrupted, read_gating_log
from train.ratings import RatingsTable
from train.sprt import SprtConfig
from zero.checkpoint import save_checkpoint
from zero.network import NetworkConfig, PolicyValueNet
from zero.rundir import RunDir

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=16)


@pytest.fixture
def setup(tmp_path):
    run = RunDir(tmp_path / "run")
    paths = []
    for step, seed in ((100, 0), (200, 1)):
        torch.manual_seed(seed)
        paths.append(save_checkpoint(run.candidate(step), net=PolicyValueNet(TINY), net_config=TINY, step=step))
    ballot = tmp_path / "ballot.txt"
    ballot.write_text("9-13 21-17 5-9\n11-15 23-19 8-11\n10-14 22-18 6-10\n")
    cfg = GatingConfig(simulations=2, parallel_games=6, openings=str(ballot), rating_games=2,
                       rating_yardsticks=["alphabeta:2", "random"], calibration_games=2,
                       sprt=SprtConfig(max_pairs=3, min_pairs=1), torch_threads=1)
    return run, cfg, paths


def test_a_stop_during_the_rating_phase_counts_nothing_twice(setup):
    run, cfg, (best, candidate) = setup
    stop = {"now": False}
    keeper = Gatekeeper(run.root, cfg, should_stop=lambda: stop["now"])
    rate = keeper.rate
    yardsticks = list(cfg.rating_yardsticks)
    calls = []

    def rate_then_stop(checkpoint, step):
        # The first rating match is played and recorded; the stop comes during the second.
        calls.append(step)
        keeper.cfg.rating_yardsticks = yardsticks[:1]
        rate(checkpoint, step)
        keeper.cfg.rating_yardsticks = yardsticks
        stop["now"] = True
        rate(checkpoint, step)

    keeper.rate = rate_then_stop
    with pytest.raises(GatingInterrupted):
        keeper.gate(candidate, 200, best)
    assert read_gating_log(run.root) == [] and calls == [200]
    first = RatingsTable.load(run.ratings)

    resumed = Gatekeeper(run.root, cfg)
    entry = resumed.gate(candidate, 200, best)
    table = RatingsTable.load(run.ratings)
    pair = table.results["|".join(sorted(("candidate-0000200", "candidate-0000100")))]
    assert sum(pair) == entry["games"] == sum(first.results["|".join(sorted(("candidate-0000200",
                                                                           "candidate-0000100")))])
    for spec in cfg.rating_yardsticks:
        rated = table.results["|".join(sorted(("candidate-0000200", spec)))]
        assert sum(rated) == cfg.rating_games, spec
    assert len(table.recorded) == len(set(table.recorded)) == 3
    assert [e["candidate"] for e in read_gating_log(run.root)] == [str(candidate)]

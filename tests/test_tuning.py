"""SPSA tuning of the search constants (train.arena.tuning, `checkers-zero tune`)."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from play.cli.main import main as cli_main
from train.arena.gating import GatingConfig
from train.arena.match import mix_seed
from train.arena.player_specs import make_player
from train.arena.tuning import (TRAJECTORY, Param, TrajectoryError, TuneConfig, default_params, gains, load_tune_config,
                          probes, read_trajectory, spsa_update, summary, tune)
from zero.net.checkpoint import save_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.run.config import ConfigError, load_config

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=16)
BALLOT = "9-13 21-17\n11-15 23-19\n11-15 22-18\n10-14 24-20\n12-16 21-17\n"


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("net")
    return save_checkpoint(folder / "tiny.pt", net=PolicyValueNet(TINY), net_config=TINY, step=3)


@pytest.fixture(scope="module")
def ballot(tmp_path_factory):
    path = tmp_path_factory.mktemp("ballot") / "five.txt"
    path.write_text(BALLOT)
    return path


def config(tiny_checkpoint, ballot, **changes) -> TuneConfig:
    cfg = TuneConfig(network=str(tiny_checkpoint), openings=str(ballot), **changes)
    cfg.validate()
    return cfg


def values(spec: str) -> dict[str, str]:
    """The KEY=VALUE settings of a player spec, as written."""
    return dict(item.split("=") for item in spec.split(":") if "=" in item)


def referee(objective):
    """A match function that plays no game: the side whose settings score higher on `objective` wins both
    games of the pair (a tie is two draws)."""

    def play(share):
        a, b = (objective({k: float(v) for k, v in values(spec).items()}) for spec in (share.spec_a, share.spec_b))
        wins, losses = (2, 0) if a > b else (0, 2) if a < b else (0, 0)
        return SimpleNamespace(wins=wins, draws=2 - wins - losses, losses=losses)

    return play


def noisy_referee(calls: list, fail_at: int | None = None):
    """A match function with random outcomes tilted towards the better side, drawn from the share's seed (so
    reproducible); counts its calls, and raises KeyboardInterrupt (a Ctrl-C) at call `fail_at`."""

    def play(share):
        calls.append(share.seed)
        if len(calls) == fail_at:
            raise KeyboardInterrupt
        a, b = (-(float(values(spec)["c_puct"]) - 2.5) ** 2 for spec in (share.spec_a, share.spec_b))
        outcomes = np.random.default_rng(share.seed).choice((1, 0, -1), 2, p=(0.2 + (a > b) * 0.1, 0.6,
                                                                             0.2 - (a > b) * 0.1))
        return SimpleNamespace(wins=int((outcomes == 1).sum()), draws=int((outcomes == 0).sum()),
                               losses=int((outcomes == -1).sum()))

    return play


# ------------------------------------------------------------------------------------------------ the maths

def test_gain_schedules_end_at_c_end_and_r_end():
    cfg = TuneConfig(iterations=400)
    p = Param("c_puct", 1.5, 0.5, 4.0, c_end=0.2, r_end=0.05)
    c_last, r_last = gains(p, 400, cfg)
    assert math.isclose(c_last, 0.2) and math.isclose(r_last, 0.05)
    c_first, r_first = gains(p, 1, cfg)
    assert math.isclose(c_first, 0.2 * 400 ** 0.101)
    a = 0.1 * 400
    assert math.isclose(r_first * c_first ** 2, 0.05 * 0.2 ** 2 * ((a + 400) / (a + 1)) ** 0.602)
    shrinking = [gains(p, k, cfg)[0] for k in range(1, 401)]
    assert shrinking == sorted(shrinking, reverse=True)


def test_probes_and_update_clip_to_the_range_and_round_integers():
    params = [Param("c_puct", 1.5, 0.5, 4.0, 0.25, 0.03), Param("leaves_per_tree", 62.6, 1.0, 64.0, 4.0, 0.03)]
    plus, minus = probes(params, [1.5, 62.6], [0.25, 4.0], [1, -1])
    assert plus == [1.75, 59] and minus == [1.25, 64]  # 66.6 is clipped to 64; 58.6 rounds to 59
    assert all(isinstance(v, int) for v in (plus[1], minus[1]))
    # θ += R·c·(W−L)·flip: 1.5 + 2·0.25·2·1 = 2.5 and 62.6 + 2·4·2·(−1) = 46.6; past a bound, the bound.
    assert spsa_update(params, [1.5, 62.6], [0.25, 4.0], [2.0, 2.0], [1, -1], 2) == [2.5, 46.6]
    assert spsa_update(params, [3.9, 62.6], [0.25, 4.0], [2.0, 2.0], [1, 1], 2) == [4.0, 64.0]
    assert spsa_update(params, [1.5, 62.6], [0.25, 4.0], [2.0, 2.0], [1, 1], -2) == [0.5, 46.6]


def test_default_table_starts_where_a_player_on_the_clock_is(tiny_checkpoint):
    player = make_player(f"mcts:{tiny_checkpoint}:t0.1", search=GatingConfig().search)  # as split matches make it
    for p in default_params():
        assert p.start == getattr(player.config, p.name), p.name
    assert next(p for p in default_params() if p.name == "leaves_per_tree").start == 16


def test_on_a_game_clock_the_table_holds_the_time_manager_too(tmp_path, tiny_checkpoint):
    from selfplay.tree_search.time_manager import TimeManager

    cfg = load_tune_config(tmp_path / "out", None, ['clock="0+0.1"'])
    search = [p.name for p in default_params()]
    assert [p.name for p in cfg.params][:len(search)] == search
    timing = cfg.params[len(search):]
    assert {p.name for p in timing} == {f.name for f in dataclasses.fields(TimeManager)}
    assert all(p.start == getattr(TimeManager(), p.name) for p in timing)
    # Its players play on the clock, and a tuned value reaches the player's time manager.
    spec = summary(cfg, []).split("as a player spec: ")[1].split()[0].replace("moves_to_go=10", "moves_to_go=8")
    assert spec.startswith("mcts:t0+0.1:") and make_player(spec).time_manager.moves_to_go == 8
    # Without a game clock the default table stays the search's, and a setting only a game clock reads is refused.
    assert load_tune_config(tmp_path / "other", None, []).params == default_params()
    table = 'params=[{name="moves_to_go", start=20, min=4, max=60, c_end=4, r_end=0.03}]'
    with pytest.raises(ConfigError, match="acts only on a game clock"):
        load_tune_config(tmp_path / "other", None, [table])
    assert load_tune_config(tmp_path / "other", None, [table, 'clock="60+0.5"']).params[0].name == "moves_to_go"
    with pytest.raises(ConfigError, match="clock = '0\\+0'"):
        load_tune_config(tmp_path / "other", None, ['clock="0+0"'])


def test_noiseless_quadratic_drives_theta_to_its_optimum(tmp_path, tiny_checkpoint, ballot):
    # c_puct's optimum lies inside its range, virtual_loss's beyond its max, leaves_per_tree's at 24; each
    # costs about as much 2·c_end off its optimum. Every result is a full ±2 or 0, so θ ends within a few
    # steps of the optimum, not on it.
    best = {"c_puct": 2.5, "virtual_loss": 5.0, "leaves_per_tree": 24}
    scale = {"c_puct": 0.5, "virtual_loss": 1.0, "leaves_per_tree": 5}

    def objective(v):
        return -sum(((v[k] - best[k]) / scale[k]) ** 2 for k in best)

    params = [Param("c_puct", 1.5, 0.5, 4.0, 0.2, 0.1), Param("virtual_loss", 1.0, 0.0, 3.0, 0.3, 0.1),
              Param("leaves_per_tree", 16.0, 1.0, 64.0, 2.0, 0.1)]
    cfg = config(tiny_checkpoint, ballot, iterations=300, params=params)
    steps = tune(cfg, tmp_path / "out", play=referee(objective))
    assert [s.iteration for s in steps] == list(range(1, 301))
    theta = steps[-1].theta
    assert abs(theta["c_puct"] - 2.5) < 0.25, theta  # from 1.0 off
    assert theta["virtual_loss"] == 3.0  # held at its max
    assert abs(theta["leaves_per_tree"] - 24) < 2.5, theta  # from 8 off
    for s in steps:
        for side in (s.plus, s.minus, s.theta):
            assert all(p.min <= side[p.name] <= p.max for p in params)
        assert isinstance(s.plus["leaves_per_tree"], int) and isinstance(s.minus["leaves_per_tree"], int)
    text = summary(cfg, steps)
    assert "--set search.c_puct=" in text and "--set search.leaves_per_tree=2" in text
    tuned = text.split("as a player spec: ")[1].split()[0]
    assert make_player(tuned).config.virtual_loss == 3.0


# ------------------------------------------------------------------------------------------------ resuming

def test_an_interrupted_run_resumes_without_repeating_or_losing_an_iteration(tmp_path, tiny_checkpoint, ballot):
    params = [Param("c_puct", 1.5, 0.5, 4.0, 0.25, 0.1), Param("fpu_reduction", 0.25, 0.0, 1.0, 0.1, 0.03)]
    cfg = config(tiny_checkpoint, ballot, iterations=30, params=params, seed=3)
    whole = tune(cfg, tmp_path / "whole", play=noisy_referee([]))
    calls = []
    with pytest.raises(KeyboardInterrupt):
        tune(cfg, tmp_path / "parts", play=noisy_referee(calls, fail_at=12))
    # Iteration 12 probes around θ after iteration 10 (two at a time), so 10 were finished and written.
    done = read_trajectory(tmp_path / "parts" / TRAJECTORY, cfg.params)
    assert len(done) == 10 and done == whole[:10]
    assert calls == [mix_seed(3, k) for k in range(1, 13)]
    again = []
    parts = tune(cfg, tmp_path / "parts", play=noisy_referee(again))
    assert parts == whole
    assert again == [mix_seed(3, k) for k in range(11, 31)]  # 11, in flight at the stop, is played again
    assert (tmp_path / "parts" / TRAJECTORY).read_bytes() == (tmp_path / "whole" / TRAJECTORY).read_bytes()
    assert tune(cfg, tmp_path / "parts", play=noisy_referee(again)) == whole  # finished: nothing more to play
    assert len(again) == 20


def test_a_torn_last_line_is_dropped_and_a_damaged_line_refused(tmp_path, tiny_checkpoint, ballot, caplog):
    cfg = config(tiny_checkpoint, ballot, iterations=8, params=default_params()[:2])
    whole = tune(cfg, tmp_path / "whole", play=noisy_referee([]))
    out = tmp_path / "torn"
    with pytest.raises(KeyboardInterrupt):
        tune(cfg, out, play=noisy_referee([], fail_at=6))
    path = out / TRAJECTORY
    assert len(path.read_bytes().splitlines()) == 4
    with open(path, "ab") as fh:
        fh.write(whole[4].line()[:30])  # a crash in the middle of appending iteration 5
    assert tune(cfg, out, play=noisy_referee([])) == whole
    assert "cut short" in caplog.text
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2][:-5] + b"oops}"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(TrajectoryError, match=r"trajectory.jsonl:3: not iteration 3") as info:
        tune(cfg, out, play=noisy_referee([]))
    assert "\n" not in str(info.value)


def test_a_restart_keeps_its_settings_and_its_network(tmp_path, tiny_checkpoint, ballot):
    network = tmp_path / "net.pt"
    network.write_bytes(tiny_checkpoint.read_bytes())
    out = tmp_path / "out"
    cfg = config(network, ballot, iterations=4, params=default_params()[:1])
    tune(cfg, out, play=noisy_referee([]))
    assert len(list((out / "starts").glob("tune-*-record.json"))) == 1
    # A restart takes the stored settings, overrides on top (which tune() then refuses).
    assert load_tune_config(out) == cfg and load_tune_config(out, overrides=["seed=1"]).seed == 1
    with pytest.raises(TrajectoryError, match=r"other settings \(seed:") as info:
        tune(config(network, ballot, iterations=4, params=default_params()[:1], seed=1), out,
             play=noisy_referee([]))
    assert "\n" not in str(info.value)
    torch.manual_seed(1)
    save_checkpoint(network, net=PolicyValueNet(TINY), net_config=TINY, step=4)  # retrained under the run
    with pytest.raises(TrajectoryError, match="start a new output directory for the new network"):
        tune(cfg, out, play=noisy_referee([]))


# ------------------------------------------------------------------------------------------------ the table

@pytest.mark.parametrize("table, problem", [
    ('[{name="c_puct", start=1.5, min=0.5, max=4, c_end=0.2, r_end=0.03}, '
     '{name="nope", start=1, min=0, max=2, c_end=0.1, r_end=0.03}]',
     "params[1] (nope): not a numeric search or time manager setting"),
    ('[{name="reuse_tree", start=1, min=0, max=1, c_end=0.5, r_end=0.03}]',
     "not a numeric search or time manager setting"),
    ('[{name="c_puct", start=1.5, min=4, max=0.5, c_end=0.2, r_end=0.03}]', "min 4 must be below max 0.5"),
    ('[{name="c_puct", start=5, min=0.5, max=4, c_end=0.2, r_end=0.03}]', "start 5 is outside [0.5, 4]"),
    ('[{name="c_puct", start=nan, min=0.5, max=4, c_end=0.2, r_end=0.03}]', "params[0].start = nan: must be a finite"),
    ('[{name="c_puct", start=1.5, min=0.5, max=inf, c_end=0.2, r_end=0.03}]', "params[0].max = inf: must be a finite"),
    ('[{name="c_puct", start=1.5, min=0.5, max=4, c_end=0, r_end=0.03}]', "params[0].c_end = 0.0: must be above 0"),
    ('[{name="c_puct", start=1.5, min=0.5, max=4, c_end=0.2, r_end=-1}]', "params[0].r_end = -1.0: must be above 0"),
    ('[{name="c_puct", min=0.5, max=4, c_end=0.2, r_end=0.03}]', "params[0].start = nan: must be a finite"),
    ('[{name="c_puct", start=1.5, min=0.5, max=4, c_end=0.2}]', "params[0].r_end = nan: must be a finite"),
    ('[{name="c_puct", start=1.5, min=0, max=4, c_end=0.2, r_end=0.03}]', "a bound the player refuses"),
    ('[{name="leaves_per_tree", start=16, min=1.5, max=64, c_end=4, r_end=0.03}]', "min and max must be too"),
    ('[{name="c_puct", start=1.5, min=0.5, max=4, c_end=0.2, r_end=0.03}, '
     '{name="c_puct", start=1.5, min=0.5, max=4, c_end=0.2, r_end=0.03}]', "named twice"),
    ('[]', "the table is empty"),
    ('[{name="c_puct", start=1.5, min=0.5, max=4, c_end=0.2, r_end=0.03, typo=1}]', "unknown setting"),
])
def test_a_bad_parameter_table_is_refused_with_one_line(table, problem):
    with pytest.raises(ConfigError) as info:
        load_config(TuneConfig, overrides=[f"params={table}"]).validate()
    assert problem in str(info.value) and "\n" not in str(info.value)


def test_the_table_loads_from_a_toml_file_and_the_command_refuses_a_bad_one(tmp_path, capsys):
    good = tmp_path / "good.toml"
    good.write_text('iterations = 50\n[[params]]\nname = "fpu_reduction"\nstart = 0.3\nmin = 0.0\nmax = 1.0\n'
                    'c_end = 0.05\nr_end = 0.02\n')
    cfg = load_config(TuneConfig, good)
    cfg.validate()
    assert cfg.iterations == 50 and cfg.params == [Param("fpu_reduction", 0.3, 0.0, 1.0, 0.05, 0.02)]
    bad = tmp_path / "bad.toml"
    bad.write_text(good.read_text().replace("start = 0.3", "start = 1.3"))
    assert cli_main(["tune", "--out", str(tmp_path / "out"), "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "start 1.3 is outside [0, 1]" in err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------ for real

def test_one_real_iteration_through_real_player_specs(tmp_path, tiny_checkpoint, ballot):
    # A worker process of one thread plays the two games of one opening between real players on the clock.
    cfg = config(tiny_checkpoint, ballot, iterations=1, processes=1, seconds=0.005)
    (step,) = tune(cfg, tmp_path / "out")
    assert step.wins + step.draws + step.losses == 2
    assert step.opening in BALLOT.splitlines()
    assert set(step.theta) == {p.name for p in cfg.params}
    text = summary(cfg, [step])
    spec = text.split("as a player spec: ")[1].split()[0]
    assert spec.startswith(f"mcts:{tiny_checkpoint}:t0.005:c_puct=") and make_player(spec).seconds == 0.005
    assert f'"mcts:{tiny_checkpoint}:t0.005" --processes 1' in text

"""Settings are checked where they are read: before any process starts, with one clear message."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest

from play.cli.main import main
from train.loop.driver import LoopConfig, resolve_config
from zero.run.config import ConfigError, load_config, setting, with_overrides


@pytest.mark.parametrize("override,message", [
    ("actors=2.7", "expected a whole number"),
    ("actors=-2", "actors must be a number of processes, or -1"),
    # Before: accepted, saved in the run's config, and every resume hung after "resuming ... actor(s)".
    ("actors=99999999999999999999999", "actors = 99999999999999999999999: at most 1,024 processes"),
    # Before: a TypeError and an AttributeError traceback.
    ("trainer.batch_size.x=1", "'trainer.batch_size.x=1': trainer.batch_size is a setting, not a section"),
    ("selfplay.temperature.deep.x=1", "selfplay.temperature is a setting, not a section"),
    ("selfplay.device=tpu", "device must be auto, cpu or cuda"),
    ("selfplay.gpu_leaves_per_tree=0", "gpu_leaves_per_tree"),
    ("cluster.max_restarts=-1", "max_restarts"),
    ("selfplay.full_simulations=0", "full_simulations"),
    ("selfplay.games_in_flight=0", "games_in_flight"),
    ("selfplay.search.leaves_per_tree=0", "leaves_per_tree"),
    ("gating.search.c_puct=0", "c_puct"),
    ("gating.search.moves_left_weight=-0.1", "moves_left_weight"),
    ("selfplay.search.moves_left_threshold=1", "moves_left_threshold"),
    ("selfplay.resign_playthrough=1.5", "resign_playthrough"),
])
def test_bad_loop_settings_are_refused_when_loaded(tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        resolve_config(tmp_path, None, [override])


# Settings once accepted (0 of these 23 refused): the loop then hung on NaN, allocated 34 TiB, divided by
# zero or slept forever. Each is now one line naming the setting and what it must be.
@pytest.mark.parametrize("override, message", [
    ("selfplay.temperature=nan", "selfplay.temperature = nan: must be a finite number at least 0"),
    ("trainer.optim.weight_decay=nan", "trainer.optim.weight_decay = nan: must be a finite number at least 0"),
    ("trainer.heads.policy=nan", "trainer.heads.policy = nan: must be a finite number at least 0"),
    ("selfplay.search.virtual_loss=nan", "selfplay.search.virtual_loss = nan: must be a finite number"),
    ("selfplay.search.c_puct=inf", "selfplay.search.c_puct = inf: must be a finite number above 0"),
    ("status_seconds=nan", "status_seconds = nan: must be a finite number above 0"),
    ("selfplay.commit_seconds=nan", "selfplay.commit_seconds = nan: must be a finite number"),
    ("selfplay.torch_threads=0", "selfplay.torch_threads = 0: must be in \\[1, 1,024\\]"),
    ("gating.torch_threads=0", "gating.torch_threads = 0: must be in \\[1, 1,024\\]"),
    ("selfplay.commit_positions=0", "selfplay.commit_positions = 0: must be in \\[1, 1,048,576\\]"),
    ("gating.simulations=0", "gating.simulations = 0: must be in \\[1, 1,000,000\\]"),
    ("gating.parallel_games=0", "gating.parallel_games = 0: must be in \\[1, 16,384\\]"),
    ("gating.rating_games=-4", "gating.rating_games = -4: must be in \\[0, 1,000,000\\]"),
    ("selfplay.seed=-1", "selfplay.seed = -1: must be in \\[0, 9,223,372,036,854,775,807\\]"),
    ("selfplay.rules.max_plies=-5", "selfplay.rules.max_plies = -5: must be in \\[0, 10,000\\]"),
    ("trainer.poll_seconds=-1", "trainer.poll_seconds = -1.0: must be at least 0"),
    ("selfplay.checkpoint_poll_seconds=-1", "selfplay.checkpoint_poll_seconds = -1.0: must be at least 0"),
    ("status_seconds=-1", "status_seconds = -1.0: must be above 0"),
    ("gating.sprt.alpha=2", "gating.sprt.alpha = 2.0: must be in \\(0, 1\\)"),
    ("gating.device=tpu", "gating.device = 'tpu': must be one of 'auto', 'cpu', 'cuda'"),
    ("selfplay.games_in_flight=100000000", "selfplay.games_in_flight = 100000000: must be in \\[1, 16,384\\]"),
    ("trainer.batch_size=2000000", "trainer.batch_size = 2000000: must be at most trainer.window_max"),
    ("config file", "not UTF-8 text"),
])
def test_settings_out_of_range_stop_the_loop_in_one_line(tmp_path, capsys, override, message):
    args = ["--set", override]
    if override == "config file":
        (tmp_path / "latin1.toml").write_bytes("[selfplay]\n# température\nseed = 3\n".encode("latin-1"))
        args = ["--config", str(tmp_path / "latin1.toml")]
    assert main(["loop", "--run", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(message, err), err
    assert not (tmp_path / "run" / "loop-config.toml").exists()


def test_actors_minus_one_and_zero_keep_their_meaning(tmp_path):
    # -1: sized for the machine; 0: no local actor (a loop training on a taken replay, or fed by actors on
    # other machines through `selfplay --first-actor`).
    assert resolve_config(tmp_path, None, ["actors=-1"]).actors == -1
    assert resolve_config(tmp_path, None, ["actors=0"]).actors == 0


def test_a_whole_number_setting_takes_whole_floats():
    assert load_config(LoopConfig, None, ["actors=2.0"]).actors == 2


@pytest.mark.parametrize("args", [["--actors", "-1"], ["--minutes", "nan"], ["--minutes", "-1"],
                                  ["--minutes", "0"], ["--actors", "2.7"]])
def test_bad_loop_arguments_stop_before_anything_starts(tmp_path, capsys, args):
    with pytest.raises(SystemExit) as stop:
        main(["loop", "--run", str(tmp_path / "run"), *args])
    assert stop.value.code == 2 and "argument" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_loop_refuses_bad_settings_with_one_message(tmp_path, capsys):
    assert main(["loop", "--run", str(tmp_path / "run"), "--set", "selfplay.full_simulations=0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "full_simulations" in err and "Traceback" not in err


def test_wandb_asked_for_without_the_extra_is_one_clear_error(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if the optional extra were not installed
    assert main(["loop", "--run", str(tmp_path / "run"), "--wandb"]) == 2
    err = capsys.readouterr().err
    assert "wandb is not installed" in err and "pip install -e '.[wandb]'" in err
    assert not (tmp_path / "run" / "loop-config.toml").exists()


def test_a_missing_ballot_stops_the_loop_before_anything_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CHECKERS_ZERO_DATA", str(tmp_path / "no-data"))
    assert main(["loop", "--run", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "openings/acf_3move_144.txt" in err and "not found" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "loop-config.toml").exists()


@pytest.mark.parametrize("override,message", [
    ('initial_checkpoint="nowhere.pt"', "error: initial checkpoint: nowhere.pt: no such checkpoint file"),
    ('replay_storage="runs/replay"', "error: replay storage 'runs/replay' is not an object-store URL"),
    ('replay_storage="s3://bucket/run"', "error: an object-store URL needs obstore"),
])
def test_a_refused_start_leaves_nothing_behind(tmp_path, capsys, monkeypatch, override, message):
    # Before: each left the run's folder behind, holding loop.lock (the second also the first checkpoint's
    # copy and checkpoints/, the third replay-storage.url, after a traceback): a run that never started.
    from zero.run import objectstore
    from zero.run.data import data_file

    if data_file("openings/acf_3move_144.txt") is None:
        pytest.skip("openings/acf_3move_144.txt not found (set CHECKERS_ZERO_DATA)")

    def no_obstore():  # as without the cluster extra, whether or not this machine has it
        raise objectstore.LeaseError('an object-store URL needs obstore: pip install -e ".[cluster]"')

    monkeypatch.setattr(objectstore, "_obstore", no_obstore)
    run = tmp_path / "runs" / "new"
    assert main(["loop", "--run", str(run), "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(message), err
    assert list(tmp_path.iterdir()) == []  # the folders it made for the run went with it
    run.mkdir(parents=True)
    (run / "notes.txt").write_text("the person's own")
    assert main(["loop", "--run", str(run), "--set", override]) == 2
    assert [p.name for p in run.iterdir()] == ["notes.txt"]  # in a folder that was there: only what it found


def test_a_gatekeeper_without_its_ballot_fails_for_good(tmp_path, monkeypatch):
    # The data folder vanished during a run: a restart would fail the same way, so the role says so once
    # and exits with the code the supervisor does not restart.
    import signal

    from train.loop.driver import gatekeeper_role
    from train.loop.supervisor import FATAL_EXIT_CODE

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setenv("CHECKERS_ZERO_DATA", str(tmp_path / "no-data"))
    try:
        with pytest.raises(SystemExit) as stop:
            gatekeeper_role(str(tmp_path / "run"), LoopConfig())
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert stop.value.code == FATAL_EXIT_CODE


def test_a_resumed_run_refuses_a_setting_it_cannot_honour(tmp_path, capsys):
    # Before: `--set initial_checkpoint=...` on a resumed run was recorded in its config but never used (the
    # run goes on from the copy it made on its first start).
    from zero.run.config import save_config
    from zero.run.rundir import RunDir

    save_config(LoopConfig(), RunDir(tmp_path).config_file)
    with pytest.raises(ConfigError, match="initial_checkpoint: .* cannot change it to 'other.pt'"):
        resolve_config(tmp_path, None, ["initial_checkpoint=other.pt"])
    other_file = tmp_path / "other.toml"
    other_file.write_text('initial_checkpoint = "other.pt"\n')
    with pytest.raises(ConfigError, match="initial_checkpoint"):
        resolve_config(tmp_path, str(other_file), [])
    # What a resumed run can honour still goes through.
    assert resolve_config(tmp_path, None, ["actors=3", "selfplay.full_simulations=200"]).actors == 3
    assert main(["loop", "--run", str(tmp_path), "--set", "initial_checkpoint=other.pt"]) == 2
    err = capsys.readouterr().err
    assert "initial_checkpoint" in err and "Traceback" not in err


# Issue 68, item 5: every count has an upper bound a machine can hold. The roots of every settings class:
# those read from TOML and --set (loop, pretrain, its dataset and search labels, ship, tune) and those set in code (the web
# server's limits, the analysis engine's settings, which its command's options fill).
def _settings_roots() -> list[type]:
    from play.queries import EngineSettings
    from play.server import Limits
    from train.arena.tuning import TuneConfig
    from train.learner.pretrain import PretrainConfig
    from train.learner.pretrain_dataset import DatasetConfig
    from train.learner.search_labels import LabelConfig
    from train.shipping.ship import ShipConfig

    return [LoopConfig, PretrainConfig, DatasetConfig, LabelConfig, ShipConfig, TuneConfig, Limits, EngineSettings]


def _whole_number_settings(cls: type, prefix: str = "") -> list[tuple[str, dataclasses.Field]]:
    """(dotted path, field) of every whole-number setting below `cls`."""
    found = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(hints[f.name]):
            found += _whole_number_settings(hints[f.name], f"{path}.")
        elif hints[f.name] is int:
            found.append((path, f))
    return found


WHOLE_NUMBER_SETTINGS = [(root, path) for root in _settings_roots() for path, _ in _whole_number_settings(root)]
HUGE = 10**23


def test_every_whole_number_setting_has_an_upper_bound():
    unbounded = [f"{root.__name__}: {path}" for root in _settings_roots() for path, f in _whole_number_settings(root)
                 if not ("limits" in f.metadata and {f.metadata["limits"].high, f.metadata["limits"].below} != {None})]
    # The loop's actors are bounded by LoopConfig.validate, whose message says what -1 means
    # (test_bad_loop_settings_are_refused_when_loaded).
    assert unbounded == ["LoopConfig: actors"]
    assert len(WHOLE_NUMBER_SETTINGS) > 80


def test_a_whole_number_setting_without_an_upper_bound_fails_where_it_is_defined():
    with pytest.raises(TypeError, match="needs an upper bound"):
        setting(3, low=0)
    setting(3, low=0, high=10)
    setting(0.5, low=0)  # a float needs none: it measures, it does not count what a machine holds


@pytest.mark.parametrize("root, path", WHOLE_NUMBER_SETTINGS,
                         ids=[f"{root.__name__}.{path}" for root, path in WHOLE_NUMBER_SETTINGS])
def test_a_count_no_machine_can_hold_is_refused_in_one_line(tmp_path, capsys, root, path):
    # Before: 81 of these 94 (a setting counted at each place it is set) took 10^23 slots, simulations, games,
    # threads or batch positions, and the process met the count when it tried to hold that many.
    override = f"{path}={HUGE}"
    if root is LoopConfig:
        assert main(["loop", "--run", str(tmp_path / "run"), "--set", override]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        message = err.removeprefix("error: ").rstrip("\n")
    else:
        with pytest.raises(ConfigError) as refused:
            with_overrides(root(), [override])
        message = str(refused.value)
    if path == "actors":
        assert message == f"actors = {HUGE}: at most 1,024 processes"
    else:
        assert re.fullmatch(rf"{re.escape(path)} = {HUGE}: must be (in \[.*\]|at most .*)", message), message


def test_the_engine_refuses_a_count_no_machine_can_hold_in_one_line(capsys):
    for flag in ("--slots", "--tree-nodes", "--sims", "--cache", "--threads"):
        assert main(["engine", flag, str(HUGE)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f" = {HUGE}: must be in [" in err and "Traceback" not in err, (flag, err)


def test_engine_trees_that_do_not_fit_in_memory_together_are_refused_in_one_line():
    from counting import ClockedEvaluator
    from play.analysis_pool import AnalysisPool
    from play.queries import EngineSettings
    from selfplay.tree_search import mcts

    settings = EngineSettings(slots=4096, tree_nodes=mcts.MOST_NODES)  # each within its bound: 1.2 PB together
    with pytest.raises(ValueError, match=r"^4096 trees of 2,147,483,647 nodes do not fit in the memory this process "
                                         r"may have: ask for fewer slots or tree nodes$"):
        AnalysisPool(ClockedEvaluator(), settings)

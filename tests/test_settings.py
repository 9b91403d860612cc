"""Settings are checked where they are read: before any process starts, with one clear message."""

from __future__ import annotations

import pytest

from play.cli import main
from train.loop import LoopConfig, resolve_config
from zero.config import ConfigError, load_config


@pytest.mark.parametrize("override,message", [
    ("actors=2.7", "expected a whole number"),
    ("actors=-1", "actors must not be negative"),
    ("selfplay.full_simulations=0", "full_simulations"),
    ("selfplay.games_in_flight=0", "games_in_flight"),
    ("selfplay.search.leaves_per_tree=0", "leaves_per_tree"),
    ("gating.search.c_puct=0", "c_puct"),
    ("selfplay.resign_playthrough=1.5", "resign_playthrough"),
])
def test_bad_loop_settings_are_refused_when_loaded(tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        resolve_config(tmp_path, None, [override])


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

"""Player specs: every kind of player a command line can name, wired explicitly."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from play.engine import Engine
from selfplay.tree_search.analysis import SINGLE_GAME_POLICY_TEMPERATURE, GameSearch
from selfplay.tree_search.evaluators import UniformEvaluator, gives_plies_left
from selfplay.tree_search.search import SearchConfig
from train.arena.match import NetworkPlayer, play_match
from train.arena.player_specs import PlayerSpecError, make_player
from zero.corpus.openings import Opening
from zero.net.checkpoint import save_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.rules.player import Player
from zero.run.rundir import RunDir

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=16)


@pytest.fixture
def tiny_checkpoint(tmp_path):
    torch.manual_seed(0)
    return save_checkpoint(tmp_path / "tiny.pt", net=PolicyValueNet(TINY), net_config=TINY, step=3)


def test_yardstick_specs():
    assert make_player("random").name == "random"
    assert make_player("alphabeta:6").name == "alphabeta:6"
    assert make_player("ab3").name == "alphabeta:3"
    assert make_player("alphabeta:t0.1").name == "alphabeta:t0.1"
    for spec in ("alphabeta", "alphabeta:x", "ab0", "alphabeta:0", "nonsense", "random:3", "alphabeta:t0",
                 "alphabeta:t-1", "alphabeta:tx", "alphabeta:tnan"):
        with pytest.raises(PlayerSpecError):
            make_player(spec)
    assert isinstance(make_player("ab2"), Player)


def test_the_default_player_is_the_one_every_front_end_plays():
    # `default` names the player the matches chose; play.engine.Engine (play, serve, analyze) builds the same
    # one: the alpha-beta search over the shipped distilled evaluation, selective as in the matches, the largest
    # database, the opening book. Only the budget differs (the front ends' levels, --depth and --time).
    from play.engine import DEFAULT_KIND, AlphaBetaEngine
    from selfplay.tree_search.time_manager import GameClock
    from zero.alphabeta.player import DistilledPlayer, Selectivity

    player, engine = make_player("default"), Engine.load()
    assert isinstance(engine, AlphaBetaEngine) and engine.kind == DEFAULT_KIND
    assert player.name.startswith("distilled:default:t0+0.1:db") and player.name.endswith(":book")
    assert player.clock == GameClock(0.0, 0.1)
    searcher = player.player
    assert isinstance(searcher, DistilledPlayer) and isinstance(engine._searcher(), DistilledPlayer)
    assert searcher.selectivity == engine._searcher().selectivity == Selectivity()
    assert searcher.egdb.max_pieces == engine.egdb.max_pieces
    assert (searcher.book.source, len(searcher.book)) == (engine.book.source, len(engine.book)) and len(engine.book) > 0
    assert searcher.evaluation.shape == engine.evaluation.shape
    assert all(np.array_equal(a, b) for a, b in zip(searcher.evaluation.arrays, engine.evaluation.arrays))
    assert make_player("default:t1").seconds == 1.0 and make_player("default:12").depth == 12
    assert make_player("default:t0+1").name.startswith("distilled:default:t0+1:db")
    for bad in ("default:runs/other", "default:tx", "default:12:db"):
        with pytest.raises(PlayerSpecError, match="'default' takes one budget"):
            make_player(bad)


def test_a_default_spec_of_a_clock_and_more_says_it_takes_one_budget():
    # Before: default:t0+0.1:t1 said "t0+0.1: no such checkpoint file or run directory".
    from train.arena.player_specs import default_spec

    for bad in ("t0+0.1:t1", "t1+", "t+1", "t0+0.1:db"):
        with pytest.raises(PlayerSpecError, match=f"'default' takes one budget.*got '{re.escape(bad)}'"):
            default_spec(bad)
    assert default_spec("t0+0.1").startswith("distilled:t0+0.1:")


def test_policy_spec(tiny_checkpoint):
    player = make_player(f"policy:{tiny_checkpoint}")
    assert player.name.startswith("policy")
    with pytest.raises(PlayerSpecError, match="no such checkpoint"):
        make_player(f"policy:{tiny_checkpoint.parent / 'nope.pt'}")


def test_mcts_spec_plays_a_match_in_lockstep(tiny_checkpoint):
    player = make_player(f"mcts:{tiny_checkpoint}:20", seed=1)
    assert isinstance(player, NetworkPlayer)
    assert player.name == f"mcts:{tiny_checkpoint}:20" and player.simulations == 20
    openings = [Opening("9-13 21-17", ("9-13", "21-17")), Opening("11-15 23-19", ("11-15", "23-19"))]
    result = play_match(player, make_player("ab2"), openings, parallel=4)
    assert len(result.games) == 4
    # Its network's answers are remembered by position: the games' trees meet positions already judged.
    assert player.evaluator.hits > 0
    with pytest.raises(PlayerSpecError):
        make_player(f"mcts:{tiny_checkpoint.parent / 'missing.pt'}:20")
    with pytest.raises(PlayerSpecError, match="1 to 1,000,000 simulations"):
        make_player(f"mcts:{tiny_checkpoint}:0")


def test_a_run_directory_names_its_best_network(tmp_path, tiny_checkpoint):
    run = RunDir(tmp_path / "run")
    with pytest.raises(PlayerSpecError, match="best"):
        run.root.mkdir()
        make_player(f"mcts:{run.root}:8")
    run.write_best(tiny_checkpoint, 3, "test")
    player = make_player(f"mcts:{run.root}:8")
    assert player.evaluator.evaluator.config == TINY  # behind the position cache


class TickingEvaluator:
    """Counts a player's network calls (each search step is one), each taking 2 ms of a fake clock: what the
    player does with its time does not depend on how loaded the machine is."""

    def __init__(self, evaluator, clock):
        self.evaluator, self.clock, self.calls = evaluator, clock, 0

    def evaluate(self, planes):
        self.calls += 1
        self.clock.now += 0.002
        return self.evaluator.evaluate(planes)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_mcts_on_the_clock_searches_for_its_time_a_move(tiny_checkpoint):
    quick = make_player(f"mcts:{tiny_checkpoint}:t0.01", seed=1)
    slow = make_player(f"mcts:{tiny_checkpoint}:t0.1", seed=1)
    assert (quick.name, quick.seconds) == (f"mcts:{tiny_checkpoint}:t0.01", 0.01)
    assert make_player("mcts:t0.1").name == "mcts:default:t0.1"
    openings = [Opening("9-13 21-17", ("9-13", "21-17"))]
    calls_per_move = []
    for player in (quick, slow):
        clock = FakeClock()
        player.evaluator = TickingEvaluator(player.evaluator, clock)
        result = play_match(player, make_player("ab2"), openings, parallel=4, clock=clock)
        assert len(result.games) == 2
        seconds = result.move_seconds()[0]
        calls_per_move.append(player.evaluator.calls / len(seconds))
        assert max(seconds) <= player.seconds + 0.002 + 1e-9  # never past its time by more than a call
    # Ten times the time buys several times the search.
    assert calls_per_move[1] > 3 * calls_per_move[0], calls_per_move
    with pytest.raises(PlayerSpecError):
        make_player(f"mcts:{tiny_checkpoint}:t0")


def test_a_game_searched_alone_flattens_the_policy_and_a_fixed_search_does_not(tiny_checkpoint):
    # Players on the clock, play, analyze and serve search one game at a time with the temperature measured
    # for that (selfplay.tree_search.analysis.single_game_search); gating's and self-play's fixed searches keep 1.
    assert SINGLE_GAME_POLICY_TEMPERATURE != 1.0
    for spec in (f"mcts:{tiny_checkpoint}:t0.1", f"mcts:{tiny_checkpoint}:t0+0.1"):
        assert make_player(spec).config.policy_temperature == SINGLE_GAME_POLICY_TEMPERATURE
    assert make_player(f"mcts:{tiny_checkpoint}:t0.1:policy_temperature=1").config.policy_temperature == 1.0
    assert make_player(f"mcts:{tiny_checkpoint}:64").config.policy_temperature == 1.0
    assert Engine.load(tiny_checkpoint, endgame_database=False).search_config.policy_temperature \
        == SINGLE_GAME_POLICY_TEMPERATURE
    assert GameSearch(UniformEvaluator()).config.policy_temperature == SINGLE_GAME_POLICY_TEMPERATURE


def test_mcts_on_a_game_clock(tiny_checkpoint):
    from selfplay.tree_search.time_manager import GameClock

    player = make_player(f"mcts:{tiny_checkpoint}:t0+0.1", seed=1)
    assert (player.name, player.clock, player.seconds) == (f"mcts:{tiny_checkpoint}:t0+0.1", GameClock(0.0, 0.1), None)
    assert make_player("mcts:t60+0.5:c_puct=2.0").name == "mcts:default:t60+0.5:c_puct=2.0"
    for bad in ("mcts:t0+0", "mcts:t1+x", "mcts:t-1+0.1"):
        with pytest.raises(PlayerSpecError, match="game clock"):
            make_player(bad)


def test_time_manager_settings_in_a_spec(tiny_checkpoint):
    from selfplay.tree_search.time_manager import TimeManager

    player = make_player(f"mcts:{tiny_checkpoint}:t0+0.1:moves_to_go=10:c_puct=2.0:unstable_share=0")
    assert player.time_manager == TimeManager(moves_to_go=10.0, unstable_share=0.0)
    assert player.config.c_puct == 2.0 and player.name.endswith(":t0+0.1:moves_to_go=10:c_puct=2.0:unstable_share=0")
    assert make_player(f"mcts:{tiny_checkpoint}:t0.1").time_manager == TimeManager()
    # rate_margin also stops a search of a budget a move; the rest act only on a game clock.
    assert make_player(f"mcts:{tiny_checkpoint}:t0.1:rate_margin=2").time_manager == TimeManager(rate_margin=2.0)
    for bad, problem in ((f"mcts:{tiny_checkpoint}:64:moves_to_go=10", "searches a fixed number of simulations"),
                         (f"mcts:{tiny_checkpoint}:t0.1:moves_to_go=10", "moves_to_go=10 act only on a game clock"),
                         ("mcts:t0+0.1:moves_to_go=0", "moves_to_go = 0.0: must be at least 1"),
                         ("mcts:t0+0.1:extension=nan", "extension = nan")):
        with pytest.raises(PlayerSpecError, match=problem) as info:
            make_player(bad)
        assert "\n" not in str(info.value)


def test_a_db_spec_says_which_database_it_got_and_how_to_build_the_larger(tiny_checkpoint, capsys):
    # Before (issue 85, item 11): ':db' became the 4-piece database without a word (the test session's
    # folder holds the 4-piece one alone), where the README's figures are the 6-piece one's.
    for spec in (f"mcts:{tiny_checkpoint}:8:db", "distilled:2:db"):
        assert make_player(spec).egdb.max_pieces == 4
        err = capsys.readouterr().err
        # Issue 85, item 10: loading a player's network is said as it begins (`match` was 100 s silent).
        assert spec.startswith("distilled") or f"loading the network {tiny_checkpoint} ..." in err, err
        assert "using the 4-piece endgame database: the 6-piece one, which the README's figures use, is not " \
               "built in" in err and "(checkers-zero egdb build --pieces 6: 35 CPU-minutes, once)" in err, err
    make_player(f"mcts:{tiny_checkpoint}:8:db4")  # asked for the 4-piece one: nothing to say
    assert "endgame database" not in capsys.readouterr().err


def test_database_suffixes(tiny_checkpoint):
    # :db uses the endgame database as play does (its positions played from it); :dbleaves also makes its
    # positions exact leaves of the search.
    plain = make_player(f"mcts:{tiny_checkpoint}:8")
    root = make_player(f"mcts:{tiny_checkpoint}:8:db")
    leaves = make_player(f"mcts:{tiny_checkpoint}:t0.1:dbleaves")
    assert plain.egdb is None and not plain.config.database_leaves
    assert root.egdb is not None and not root.config.database_leaves and root.name.endswith(":8:db")
    assert leaves.egdb is not None and leaves.config.database_leaves and leaves.name.endswith(":t0.1:dbleaves")
    assert make_player("mcts:db").egdb is not None  # the shipped network


def test_a_database_size_in_a_spec_caps_the_database_a_player_uses(tiny_checkpoint):
    # :dbleavesN / :dbN: at most N pieces, so that one match can set two sizes against each other.
    small = make_player(f"mcts:{tiny_checkpoint}:8:dbleaves3:book")
    assert small.egdb.max_pieces == 3 and small.config.database_leaves and small.name.endswith(":8:dbleaves3:book")
    assert make_player(f"mcts:{tiny_checkpoint}:8:db2").egdb.max_pieces == 2
    for bad in ("mcts:8:db9", "mcts:8:dbleaves1"):
        with pytest.raises(PlayerSpecError, match="2 to 8 pieces"):
            make_player(bad)


def test_a_leaf_search_in_a_spec_values_the_leaves_by_the_distilled_players_search(tiny_checkpoint):
    from selfplay.tree_search.evaluators import SearchedValueEvaluator

    player = make_player(f"mcts:{tiny_checkpoint}:8:dbleaves3:distilled2")
    assert player.name.endswith(":8:dbleaves3:distilled2") and player.egdb.max_pieces == 3
    assert isinstance(player.evaluator.evaluator, SearchedValueEvaluator)
    assert not isinstance(make_player(f"mcts:{tiny_checkpoint}:8").evaluator.evaluator, SearchedValueEvaluator)
    for bad, message in (("mcts:8:distilled0", "1 to 64 plies"), ("mcts:8:distilled2:distilled3", "one leaf search"),
                         ("distilled:4:distilled2", "takes :db"), ("policy:distilled2", "only mcts players")):
        with pytest.raises(PlayerSpecError, match=message):
            make_player(bad)


def test_precision_suffixes(tiny_checkpoint):
    # :f32 runs the network in float32, :int8raw the int8 model alone; the default answers int8's near ties
    # in float32. An mcts player keeps its evaluator behind a position cache.
    def precision(player) -> str:
        evaluator = player.evaluator
        return getattr(evaluator, "evaluator", evaluator).precision

    assert precision(make_player(f"mcts:{tiny_checkpoint}:8")) == "int8"
    assert precision(make_player(f"mcts:{tiny_checkpoint}:t0.1:f32")) == "float32"
    raw = make_player(f"mcts:{tiny_checkpoint}:8:int8raw")
    assert precision(raw) == "int8-raw" and raw.name.endswith(":8:int8raw")
    assert make_player(f"policy:{tiny_checkpoint}:int8raw").evaluator.precision == "int8-raw"
    with pytest.raises(PlayerSpecError, match="one precision"):
        make_player(f"mcts:{tiny_checkpoint}:8:f32:int8raw")


def test_search_settings_in_a_spec(tiny_checkpoint):
    # Trailing KEY=VALUE items set that player's search (how a tuner or a match compares search settings).
    timed = make_player(f"mcts:{tiny_checkpoint}:t0.1:c_puct=2.5:resolve_captures=true")
    assert timed.config.c_puct == 2.5 and timed.config.resolve_captures and timed.seconds == 0.1
    assert timed.name == f"mcts:{tiny_checkpoint}:t0.1:c_puct=2.5:resolve_captures=true"
    counted = make_player(f"mcts:{tiny_checkpoint}:50:db:leaves_per_tree=4")
    assert counted.simulations == 50 and counted.config.leaves_per_tree == 4 and counted.egdb is not None
    # The spec's settings win over the command's and over the clock's leaves per call.
    assert make_player("mcts:t0.1:leaves_per_tree=3").config.leaves_per_tree == 3
    assert make_player("mcts:8", search=SearchConfig(c_puct=4.0)).config.c_puct == 4.0
    assert make_player("mcts:8:c_puct=1.0", search=SearchConfig(c_puct=4.0)).config.c_puct == 1.0
    for bad in ("mcts:t0.1:c_puct=-1", "mcts:t0.1:c_puct=nan", "mcts:t0.1:no_such=1", "policy:c_puct=2",
                "mcts:8:leaves_per_tree=0"):
        with pytest.raises(PlayerSpecError) as info:
            make_player(bad)
        assert "\n" not in str(info.value)


def test_the_moves_left_utility_is_a_search_setting_of_a_spec(tiny_checkpoint):
    # How a match sets a weight of the plies left against none: a KEY=VALUE item like any search setting.
    player = make_player(f"mcts:{tiny_checkpoint}:t0+0.1:dbleaves:book:moves_left_weight=0.3")
    assert player.config.moves_left_weight == 0.3 and player.config.database_leaves and player.book is not None
    assert player.name.endswith(":t0+0.1:dbleaves:book:moves_left_weight=0.3")
    assert gives_plies_left(player.evaluator)  # the network's head, through the player's answer cache
    # A player searching with it plays its games (the threshold 0: a tiny network's values are never clear).
    weighed = make_player(f"mcts:{tiny_checkpoint}:20:moves_left_weight=0.3:moves_left_threshold=0", seed=1)
    result = play_match(weighed, make_player("ab2"), [Opening("9-13 21-17", ("9-13", "21-17"))], parallel=2)
    assert len(result.games) == 2 and weighed.evaluator.table.arrays.plies.any()
    for bad in ("mcts:t0.1:moves_left_weight=2", "mcts:t0.1:moves_left_threshold=1", "mcts:8:moves_left_slope=0",
                "mcts:8:moves_left_weight=nan"):
        with pytest.raises(PlayerSpecError, match="moves_left"):
            make_player(bad)


def test_players_that_send_a_few_positions_a_call_run_their_network_on_one_thread(tiny_checkpoint):
    # At a single game's batches a second thread a call only adds synchronisation: a timed search made half
    # the simulations with two. A player searching many games in lockstep keeps torch's count.
    def threads(player) -> list[int]:
        evaluator = getattr(player.evaluator, "evaluator", player.evaluator)
        sessions = (evaluator._session, evaluator._near_tie_session)
        return [s.get_session_options().intra_op_num_threads for s in sessions if s is not None]

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for spec in ("t0.1", "t0+0.1", "t0.1:f32"):
            assert set(threads(make_player(f"mcts:{tiny_checkpoint}:{spec}"))) == {1}, spec
        assert threads(make_player(f"policy:{tiny_checkpoint}")) == [1, 1]
        assert threads(make_player(f"mcts:{tiny_checkpoint}:8")) == [2, 2]
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("spec, message", [
    ("alphabeta:1000000", "alpha-beta needs a depth of 1 to 40 plies"),
    ("ab99999999999999999999", "alpha-beta needs a depth of 1 to 40 plies"),
    ("alphabeta:t1e308", "at most 3600 s"),
    ("classical:t1e308", "at most 3600 s"),
    ("mcts:t1e308", "mcts on the clock needs a time above 0 and at most 3600 s"),
    ("mcts:t1e308+0", "a game clock's base and increment are at most 3600 s each"),
    ("mcts:2000000", "mcts needs 1 to 1,000,000 simulations"),
    ("mcts:10:dbleaves6:dbleaves4", "names :dbleaves twice"),
    ("mcts:10:db:dbleaves", "one database option a player"),
    ("mcts:10:book:book", "names :book twice"),
    ("mcts:10:c_puct=1:c_puct=2", "sets c_puct twice"),
])
def test_a_spec_no_machine_can_hold_or_naming_an_option_twice_is_refused_in_one_line(tmp_path, capsys, spec, message):
    # Before: alphabeta:1000000 tried to allocate 38.7 GiB (a traceback), ab99999999999999999999 was a ValueError
    # traceback, mcts:t1e308 was accepted and its match never ended, and of :dbleaves6:dbleaves4 one silently won.
    from play.cli.main import main

    ballot = tmp_path / "ballot.txt"
    ballot.write_text("11-15 23-19 8-11\n")
    assert main(["match", spec, "random", "--openings", str(ballot), "--games", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err

"""The alpha-beta player on a game clock: each move's time is the time manager's, from the bank it is given."""

from __future__ import annotations

import pytest

from selfplay.tree_search.time_manager import GameClock, TimeManager, move_time
from train.arena.clocked_search import ClockedSearchPlayer
from train.arena.player_specs import make_player
from zero.alphabeta.player import DistilledPlayer
from zero.distilled.model import DistilledShape, random_eval
from zero.endgames.egdb_build import ensure_built
from zero.rules.game import Game
from zero.rules.notation import fen_to_position

EVAL = random_eval(DistilledShape(accumulator=16, hidden=8), seed=3)


def clocked(egdb=None) -> ClockedSearchPlayer:
    return ClockedSearchPlayer(DistilledPlayer(seconds=1.0, evaluation=EVAL, tt_bits=12, egdb=egdb),
                               GameClock(0, 0.01), TimeManager(moves_to_go=10, moves_a_piece=1.0))


def test_a_move_spends_the_increment_and_a_share_of_the_bank():
    player = clocked()
    game = Game()
    player.choose_on_clock(game, left=0.01)  # nothing banked: the increment alone, less the manager's reserve
    assert player.player.seconds == pytest.approx(0.9 * 0.01)
    player.choose_on_clock(game, left=0.01 + 0.2)  # 0.2 s banked over 10 moves to go
    assert player.player.seconds == pytest.approx(0.01 + 0.02)
    player.choose_on_clock(game, left=0.01 - 0.05)  # a debt: nothing left, the least time a search takes
    assert player.player.seconds == pytest.approx(1e-3)


def test_near_the_database_the_bank_is_spread_over_fewer_moves():
    egdb = ensure_built(4)
    player = clocked(egdb)
    game = Game(start=fen_to_position("B:W21,28,30:B4,14,15"))  # 6 pieces: 2 above the database
    player.choose_on_clock(game, left=0.21)
    expected = move_time(player.manager, 0.01, 0.2, 2).target
    assert expected == pytest.approx(0.01 + 0.2 / 2)
    assert player.player.seconds == pytest.approx(expected)


def test_the_spec_names_a_distilled_player_on_a_game_clock(tmp_path):
    from zero.distilled.model import save_eval

    path = tmp_path / "eval.npz"
    save_eval(EVAL, path)
    player = make_player(f"distilled:{path}:t0+0.05")
    assert isinstance(player, ClockedSearchPlayer) and player.clock == GameClock(0, 0.05)
    assert player.name.endswith(":t0+0.05")
    assert make_player(f"distilled:{path}:t0.05").seconds == 0.05
    assert make_player(f"distilled:{path}:6").depth == 6


def test_the_distilled_spec_sets_what_its_search_prunes_and_refuses_a_bad_setting_in_one_line(tmp_path):
    from train.arena.player_specs import PlayerSpecError
    from zero.alphabeta.player import Selectivity
    from zero.distilled.model import save_eval

    path = tmp_path / "eval.npz"
    save_eval(EVAL, path)
    assert make_player(f"distilled:{path}:6").selectivity == Selectivity()
    plain = make_player(f"distilled:{path}:t0+0.05:book:reductions=0:deeper_cuts=false")
    assert plain.player.selectivity == Selectivity.none() and plain.player.book is not None
    assert plain.name.endswith(":book:reductions=0:deeper_cuts=false")
    assert make_player(f"distilled:{path}:8:db4:reductions=2:reduce_after=5").selectivity == Selectivity(2, 5)
    for spec, message in ((f"distilled:{path}:6:reductions=9", r"reductions = 9: must be in \[0, 4\]"),
                          (f"distilled:{path}:6:reductions=1:reductions=2", "sets reductions twice"),
                          (f"distilled:{path}:6:depth_limit=3", "depth_limit")):
        with pytest.raises(PlayerSpecError, match=message) as info:
            make_player(spec)
        assert "\n" not in str(info.value)

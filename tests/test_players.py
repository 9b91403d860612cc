"""Yardstick players: the alpha-beta kernel against a plain minimax, tactics, the random player, specs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zero.rules.game import Game, Position
from zero.rules.notation import fen_to_position
from zero.yardsticks.players import (
    KING_VALUE, MAN_VALUE, WIN_SCORE, AlphaBetaPlayer, RandomPlayer, alphabeta_search,
)
from positions import ENDGAMES, random_position


def reference_material(pos: Position) -> int:
    own, opp = (pos.black, pos.white) if pos.black_to_move else (pos.white, pos.black)

    def value(mask: int) -> int:
        return MAN_VALUE * (mask & ~pos.kings).bit_count() + KING_VALUE * (mask & pos.kings).bit_count()

    return value(own) - value(opp)


def reference_minimax(pos: Position, depth: int, ply: int = 0) -> int:
    """Plain negamax with the kernel's rules: no moves loses (nearer is worse), a leaf with a capture to make
    is searched on, otherwise material."""
    moves = pos.legal_moves()
    if not moves:
        return -(WIN_SCORE - ply)
    if depth <= 0 and not moves[0].is_capture:
        return reference_material(pos)
    return max(-reference_minimax(pos.play(mv), depth - 1, ply + 1) for mv in moves)




@pytest.mark.parametrize("fen", ENDGAMES)
@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
def test_alphabeta_score_equals_plain_minimax_on_endgames(fen, depth):
    game = Game(start=fen_to_position(fen))
    move, score, _ = AlphaBetaPlayer(depth, seed=depth).search(game)
    assert score == reference_minimax(game.position, depth)
    # The chosen move is one of the best: its own minimax value (one ply less, seen from the mover) matches.
    assert -reference_minimax(game.position.play(move), depth - 1, 1) == score


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), plies=st.integers(0, 60), depth=st.integers(1, 3))
def test_alphabeta_score_equals_plain_minimax_on_game_positions(seed, plies, depth):
    game = Game(start=random_position(seed, plies))
    if not game.legal_moves():
        return
    move, score, _ = AlphaBetaPlayer(depth, seed=seed).search(game)
    assert score == reference_minimax(game.position, depth)
    assert move in game.legal_moves()


def test_alphabeta_finds_two_for_one_shot():
    # 7-10 gives a man: White must take it (14x7 or 15x6), then Black takes two back (2x11x18 or 2x9x18)
    # and evens the material.
    start = fen_to_position("B:W12,14,15,29:B2,7,13")
    for seed in range(5):
        move, score, _ = AlphaBetaPlayer(4, seed=seed).search(Game(start=start))
        assert str(move) == "7-10"
        assert score == 0  # from three men against four
    after = start.play(move)
    for reply in after.legal_moves():
        assert reply.is_capture
        shot = AlphaBetaPlayer(2).choose(Game(start=after.play(reply)))
        assert shot.captured.bit_count() == 2


def test_alphabeta_avoids_hanging_a_piece():
    # 14-17 walks into 21x14; the other moves keep the material.
    game = Game(start=fen_to_position("B:W21,28,32:BK4,14"))
    chosen = {str(AlphaBetaPlayer(2, seed=seed).choose(game)) for seed in range(20)}
    assert "14-17" not in chosen
    # Both safe moves score alike, so the seeded tie-break picks each of them across seeds.
    assert chosen == {"4-8", "14-18"}


def test_alphabeta_prefers_the_quickest_win():
    # 6-1 leaves White's last man on 5 without a move: a win at once; the other moves win later or not at all.
    game = Game(start=fen_to_position("B:W5:BK6,K32"))
    move, score, _ = AlphaBetaPlayer(6, seed=0).search(game)
    assert str(move) == "6-1"
    assert score == WIN_SCORE - 1


def test_alphabeta_plays_a_single_legal_move_without_search():
    game = Game(start=fen_to_position("W:W21,28,32:BK4,17"))
    player = AlphaBetaPlayer(6)
    assert [str(m) for m in game.legal_moves()] == ["21x14"]
    assert str(player.choose(game)) == "21x14"


def test_alphabeta_choice_is_reproducible_per_seed():
    game = Game(start=random_position(3, 10))
    a, b = AlphaBetaPlayer(4, seed=11), AlphaBetaPlayer(4, seed=11)
    a.reset(5)
    b.reset(5)
    assert [str(a.choose(game)) for _ in range(5)] == [str(b.choose(game)) for _ in range(5)]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_random_player_returns_only_legal_moves(seed):
    game = Game()
    player = RandomPlayer(seed)
    player.reset(seed)
    while game.outcome is None and game.ply < 200:
        move = player.choose(game)
        assert move in game.legal_moves()
        game.play(move)


def test_random_player_uses_every_move():
    game = Game()
    player = RandomPlayer(1)
    assert {str(player.choose(game)) for _ in range(200)} == {str(m) for m in game.legal_moves()}




def test_a_search_stopped_by_its_node_budget_returns_the_best_finished_root_move():
    import numpy as np

    from zero.rules.movegen import BUFFER_ROWS, MOVE_FIELDS
    from zero.yardsticks.players import MAX_CAPTURE_EXTENSION, STACK_FIELDS

    pos = random_position(5, 12)
    legal = pos.legal_moves()
    depth = 6
    plies = depth + MAX_CAPTURE_EXTENSION + 1
    buffers = (np.zeros((plies, BUFFER_ROWS, MOVE_FIELDS), np.int64), np.zeros((plies, STACK_FIELDS), np.int64))
    order = np.arange(len(legal), dtype=np.int64)
    args = (pos.black, pos.white, pos.kings, pos.black_to_move, depth, order)
    full_score, full_row, full_nodes, complete = alphabeta_search(*args, *buffers, 1 << 62)
    assert complete
    cut_score, cut_row, cut_nodes, complete = alphabeta_search(*args, *buffers, full_nodes // 2)
    assert not complete and cut_nodes == full_nodes // 2
    # Whatever it returns is a root move it searched to the end: its score is that move's true score.
    if cut_row >= 0:
        assert cut_score == -reference_minimax(pos.play(legal[cut_row]), depth - 1, 1)
    assert alphabeta_search(*args, *buffers, 1)[1] == -1  # stopped before any root move was finished


def test_alphabeta_on_the_clock_deepens_while_it_has_time_and_keeps_it():
    import time

    game = Game(start=random_position(8, 14))
    player = AlphaBetaPlayer(seed=1, seconds=0.05)
    start = time.perf_counter()
    move = player.choose(game)
    elapsed = time.perf_counter() - start
    assert move in game.legal_moves()
    assert player.last_depth >= 4  # a 2-core machine reaches depth 8 or more in 50 ms
    assert elapsed < 2.0  # the node budget holds the time (unbounded, depth 40 would take hours)
    # It finds what a fixed search finds: a quick win.
    win = Game(start=fen_to_position("B:W5:BK6,K32"))
    assert str(AlphaBetaPlayer(seed=0, seconds=0.05).choose(win)) == "6-1"
    with pytest.raises(ValueError):
        AlphaBetaPlayer(4, seconds=0.1)

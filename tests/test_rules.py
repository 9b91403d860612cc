"""Each rule of English checkers on a hand-built position, the draw rules of Game, and move/FEN notation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zero.rules.game import Game, Move, Position, RulesConfig, Termination
from zero.rules.notation import INITIAL_FEN, NotationError, fen_to_position, resolve_move


def _squares(*squares: int) -> int:
    return sum(1 << (s - 1) for s in squares)


def _moves(fen: str, count_paths: bool = False) -> set[str]:
    return {str(mv) for mv in fen_to_position(fen).legal_moves(count_paths=count_paths)}


def _play(game: Game, *texts: str) -> None:
    for text in texts:
        game.play(resolve_move(text, game.legal_moves()))


# --- moves ---------------------------------------------------------------------------------------------

def test_initial_moves():
    assert _moves(INITIAL_FEN) == {"9-13", "9-14", "10-14", "10-15", "11-15", "11-16", "12-16"}
    assert _moves("W:W21-32:B1-12") == {"21-17", "22-17", "22-18", "23-18", "23-19", "24-19", "24-20"}


def test_men_step_forward_only_and_kings_both_ways():
    assert _moves("B:W32:B14") == {"14-17", "14-18"}
    assert _moves("B:W32:BK14") == {"14-17", "14-18", "14-9", "14-10"}
    assert _moves("W:WK14:B1") == {"14-17", "14-18", "14-9", "14-10"}
    assert _moves("W:W14:B1") == {"14-9", "14-10"}


def test_capture_is_compulsory():
    # 9 could step to 13 and 14 to 17, but 14 can capture, so that is the only move.
    assert _moves("B:W18:B9,14") == {"14x23"}


def test_free_choice_among_captures_without_majority_rule():
    # The single capture 11x20 is as legal as the double 14x23x32.
    assert _moves("B:W16,18,27:B11,14") == {"11x20", "14x23x32"}


def test_multi_jump_is_jumped_to_its_end():
    moves = fen_to_position("B:W16,18,27:B11,14").legal_moves()
    assert all(mv.to_square != 23 for mv in moves)
    double = next(mv for mv in moves if mv.from_square == 14)
    assert double.path == (14, 23, 32)
    assert double.captured == _squares(18, 27)


def test_no_piece_is_jumped_twice():
    # After 10x19 the king could only go on by jumping 15 again, back to its (now empty) origin.
    assert _moves("B:W15:BK10") == {"10x19"}


def test_king_passes_over_its_own_origin_and_duplicate_paths_are_one_move():
    fen = "B:W6,7,14,15,22:BK18"
    assert _moves(fen, count_paths=True) == {"18x25", "18x9x2x11x18x25", "18x11x2x9x18x25"}
    merged = fen_to_position(fen).legal_moves()
    assert len(merged) == 2
    loop = next(mv for mv in merged if len(mv.path) > 2)
    assert loop.captured == _squares(6, 7, 14, 15, 22)
    after = fen_to_position(fen).play(loop)
    assert after == Position(_squares(25), 0, _squares(25), False)


def test_king_loop_ending_on_its_origin():
    # P1 of perft.txt: the two directions round the loop are one move unless paths are counted.
    assert _moves("B:W6,7,14,15,24,28:BK2,4", count_paths=True) == {"2x9x18x11x2", "2x11x18x9x2"}
    assert len(fen_to_position("B:W6,7,14,15,24,28:BK2,4").legal_moves()) == 1


def test_crowning_ends_the_move():
    man = fen_to_position("B:W26,27:B22")
    (move,) = man.legal_moves()
    assert move.path == (22, 31)
    after = man.play(move)
    assert after.piece_at(31) == "B" and after.piece_at(27) == "w"
    # A king on the same square does jump on over 27.
    assert _moves("B:W26,27:BK22") == {"22x31x24"}


def test_white_man_crowns_on_row_one():
    pos = fen_to_position("W:W6:B20")
    after = pos.play(resolve_move("6-1", pos.legal_moves()))
    assert after.piece_at(1) == "W"


# --- game end and draw rules -----------------------------------------------------------------------------

def test_no_pieces_loses():
    game = Game(start=fen_to_position("B:W18:B"))
    assert game.outcome is not None
    assert (game.outcome.winner, game.outcome.termination) == (-1, Termination.NO_MOVES)
    assert game.outcome.pdn_result == "0-1"


def test_blocked_side_loses():
    game = Game(start=fen_to_position("B:W9,14:B5"))
    assert game.legal_moves() == []
    assert (game.outcome.winner, game.outcome.termination) == (-1, Termination.NO_MOVES)
    game = Game(start=fen_to_position("W:W28:B19,24"))
    assert (game.outcome.winner, game.outcome.termination) == (1, Termination.NO_MOVES)
    assert game.outcome.pdn_result == "1-0"


def test_losing_the_last_piece_ends_the_game():
    game = Game(start=fen_to_position("B:W18:B14"))
    _play(game, "14x23")
    assert (game.outcome.winner, game.outcome.termination) == (1, Termination.NO_MOVES)
    with pytest.raises(ValueError, match="game is over"):
        game.play(Move((23, 26)))


SHUFFLE = ["1-5", "32-27", "5-1", "27-32"]


def test_threefold_repetition_is_a_draw():
    game = Game(start=fen_to_position("B:WK32:BK1"))
    _play(game, *SHUFFLE)
    assert game.repetitions() == 2 and game.outcome is None
    _play(game, *SHUFFLE[:3])
    assert game.outcome is None
    _play(game, SHUFFLE[3])
    assert game.repetitions() == 3
    assert (game.outcome.winner, game.outcome.termination) == (0, Termination.REPETITION)
    assert game.outcome.pdn_result == "1/2-1/2"


def test_repetition_count_is_a_setting():
    game = Game(start=fen_to_position("B:WK32:BK1"), rules=RulesConfig(repetitions_for_draw=2))
    _play(game, *SHUFFLE)
    assert game.outcome.termination == Termination.REPETITION


def _king_walk(game: Game, plies: int) -> None:
    """Shuffle two lone kings for `plies` plies."""
    for i in range(plies):
        _play(game, SHUFFLE[i % 4])


def test_no_progress_draw_at_the_default_80_plies():
    game = Game(start=fen_to_position("B:WK32:BK1"), rules=RulesConfig(repetitions_for_draw=1000))
    _king_walk(game, 79)
    assert game.outcome is None and game.no_progress[-1] == 79
    _play(game, SHUFFLE[79 % 4])
    assert (game.outcome.winner, game.outcome.termination) == (0, Termination.NO_PROGRESS)


def test_no_progress_count_is_a_setting_and_man_moves_reset_it():
    rules = RulesConfig(repetitions_for_draw=1000, no_progress_plies=10)
    game = Game(start=fen_to_position("B:WK32,20:BK1,9"), rules=rules)
    _play(game, *SHUFFLE)
    assert game.no_progress[-1] == 4
    _play(game, "9-13")
    assert game.no_progress[-1] == 0
    _play(game, "32-27", "1-5", "27-32", "5-1", "32-27", "1-5", "27-32", "5-1")
    assert game.no_progress[-1] == 8 and game.outcome is None
    _play(game, "32-27")
    assert game.outcome is None
    _play(game, "1-5")
    assert game.no_progress[-1] == 10
    assert game.outcome.termination == Termination.NO_PROGRESS


def test_captures_reset_the_no_progress_count():
    game = Game(start=fen_to_position("B:WK32,K23:BK1,K12"), rules=RulesConfig(repetitions_for_draw=1000))
    _play(game, "1-5", "32-27", "5-1", "23-19", "12-16")
    assert game.no_progress[-1] == 5
    _play(game, "19x12")
    assert game.no_progress[-1] == 0


def test_undo_restores_position_and_reopens_a_finished_game():
    game = Game(start=fen_to_position("B:W18:B14"))
    start = game.position
    _play(game, "14x23")
    assert game.outcome is not None
    move = game.undo()
    assert str(move) == "14x23"
    assert game.position == start and game.outcome is None and game.moves == []
    assert [str(mv) for mv in game.legal_moves()] == ["14x23"]
    with pytest.raises(ValueError):
        game.undo()


def test_illegal_move_is_refused():
    game = Game()
    with pytest.raises(ValueError, match="illegal"):
        game.play(Move((9, 18)))


# --- notation ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "fen",
    [INITIAL_FEN, "W:WK19,K23:B12,K28", "B:W6,7,14,15,24,28:BK2,4", "B:W18:B", "W:W:BK1"],
)
def test_fen_round_trip(fen):
    assert fen_to_position(fen).fen() == fen


def test_fen_ranges_kings_and_decorations():
    assert fen_to_position("B:W21-32:B1-12") == Position.initial()
    assert fen_to_position('"B:W21-32:B1-12."') == Position.initial()
    pos = fen_to_position("W:WK19,K23:B12,K28")
    assert pos.kings == _squares(19, 23, 28)
    assert pos.white == _squares(19, 23) and pos.black == _squares(12, 28)
    assert not pos.black_to_move
    assert fen_to_position("B:WK1-3:B9").kings == _squares(1, 2, 3)


@pytest.mark.parametrize(
    "fen",
    ["", "X:W1:B2", "B:W33:B1", "B:W0:B1", "B:W5:B5", "B:W5:W6", "B:Wx:B1", "B:W9-3:B1", "B:W5:B30", "B:W2:B12"],
)
def test_bad_fen_is_a_notation_error(fen):
    with pytest.raises(NotationError):
        fen_to_position(fen)


def test_resolve_full_and_short_capture_forms():
    legal = fen_to_position("B:W16,18,27:B11,14").legal_moves()
    assert str(resolve_move("14x23x32", legal)) == "14x23x32"
    assert str(resolve_move("14x32", legal)) == "14x23x32"
    assert str(resolve_move(" 11 x 20 ", legal)) == "11x20"
    assert str(resolve_move("11:20", legal)) == "11x20"


def test_resolve_long_short_form():
    # The 26x1 style: only the ends of a long capture.
    pos = fen_to_position("W:W26:B22,14,6")
    legal = pos.legal_moves()
    assert [str(mv) for mv in legal] == ["26x17x10x1"]
    assert resolve_move("26x1", legal) == legal[0]


def test_ambiguous_short_form_lists_candidates():
    # Two routes from 10 to 26 capture different men, so "10x26" does not say which.
    legal = fen_to_position("B:W14,15,22,23:B10").legal_moves()
    assert {str(mv) for mv in legal} == {"10x17x26", "10x19x26"}
    with pytest.raises(NotationError, match="ambiguous") as err:
        resolve_move("10x26", legal)
    assert "10x17x26" in str(err.value) and "10x19x26" in str(err.value)
    assert str(resolve_move("10x19x26", legal)) == "10x19x26"


def test_illegal_move_error_lists_legal_moves():
    legal = fen_to_position("B:W16,18,27:B11,14").legal_moves()
    with pytest.raises(NotationError) as err:
        resolve_move("14-17", legal)
    assert "11x20" in str(err.value) and "14x23x32" in str(err.value)


@pytest.mark.parametrize("text", ["", "14", "14-", "abc", "14-40", "0-4"])
def test_malformed_move_text(text):
    with pytest.raises(NotationError):
        resolve_move(text, Position.initial().legal_moves())


def test_strict_capture_mark():
    legal = fen_to_position("B:W16,18,27:B11,14").legal_moves()
    assert str(resolve_move("11-20", legal)) == "11x20"
    with pytest.raises(NotationError, match="capture"):
        resolve_move("11-20", legal, strict_capture_mark=True)


# --- properties ----------------------------------------------------------------------------------------------

@st.composite
def positions(draw) -> Position:
    """Any board with at most 12 pieces a side and no man on its own crowning row."""
    owner = draw(st.lists(st.sampled_from("..bw"), min_size=32, max_size=32))
    crowned = draw(st.lists(st.booleans(), min_size=32, max_size=32))
    black = white = kings = 0
    for i, (who, king) in enumerate(zip(owner, crowned)):
        bit = 1 << i
        if who == "b" and black.bit_count() < 12:
            black |= bit
            kings |= bit if king or i >= 28 else 0
        elif who == "w" and white.bit_count() < 12:
            white |= bit
            kings |= bit if king or i < 4 else 0
    return Position(black, white, kings, draw(st.booleans()))


@given(positions())
def test_fen_round_trip_of_any_position(pos):
    assert fen_to_position(pos.fen()) == pos


def _mirror_move(move: Move) -> Move:
    """The move seen from the other side: square s becomes 33 - s."""
    captured = sum(1 << (32 - s) for s in range(1, 33) if move.captured >> (s - 1) & 1)
    return Move(tuple(33 - s for s in move.path), captured)


@given(positions())
def test_mirroring_maps_legal_moves_to_legal_moves(pos):
    mirrored = pos.mirrored()
    assert mirrored.mirrored() == pos
    paths = pos.legal_moves(count_paths=True)
    expected = sorted((m.path, m.captured) for m in map(_mirror_move, paths))
    assert expected == sorted((m.path, m.captured) for m in mirrored.legal_moves(count_paths=True))
    merged = {(m.from_square, m.to_square, m.captured) for m in map(_mirror_move, pos.legal_moves())}
    assert merged == {(m.from_square, m.to_square, m.captured) for m in mirrored.legal_moves()}
    for move in paths:
        assert pos.play(move).mirrored() == mirrored.play(_mirror_move(move))


def test_a_side_with_more_pieces_than_it_starts_with_is_refused():
    # Before: a FEN with 13 kings was analysed (and the JSON engine grew its tree on it until it died).
    thirteen = "W:WK1,K2,K3,K4,K5,K6,K7,K8,K9,K10,K11,K12,K13:B20"
    with pytest.raises(NotationError, match="White has 13 pieces, more than the 12 a side starts with"):
        fen_to_position(thirteen)
    with pytest.raises(NotationError, match="Black has 13 pieces"):
        fen_to_position("B:W10:B" + ",".join(f"K{s}" for s in range(20, 33)))
    assert fen_to_position("W:W" + ",".join(str(s) for s in range(21, 33)) + ":B1").white.bit_count() == 12

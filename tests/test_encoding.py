"""Input planes and action indices: perspective symmetry, batch = single, shared from-to actions, the board
read back from the planes and how near a tie a network's best legal moves are."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from zero.net.encoding import (
    NUM_ACTIONS, NUM_PLANES, PLANE_NO_PROGRESS, PLANE_OPP_KINGS, PLANE_OPP_MEN, PLANE_OWN_KINGS, PLANE_OWN_MEN,
    PLANE_PLAYABLE, PLANE_REPETITION, action_index, action_squares, count_shared_moves, encode, encode_batch,
    fill_legal_mask, legal_action_array, legal_actions, legal_logit_gaps, legal_policy, move_action, planes_board,
)
from zero.rules.bitboard import square_rc
from zero.rules.game import Game, Move, Position
from zero.rules.movegen import new_move_buffer
from zero.rules.notation import fen_to_position
from zero.rules.reference import reference_moves, square_to_rc

# A black king on 17 can take 22 and 23 or 14 and 23 (via 26 or via 10) and land on 28 both ways.
SHARED_FEN = "B:W14,15,18,22,23,24,27:BK17"


def _random_position(seed: int, plies: int) -> Position:
    """The position after up to `plies` random legal moves from the start."""
    rng = np.random.default_rng(seed)
    pos = Position.initial()
    for _ in range(plies):
        moves = pos.legal_moves()
        if not moves:
            break
        pos = pos.play(moves[int(rng.integers(len(moves)))])
    return pos


positions = st.builds(_random_position, st.integers(0, 10**6), st.integers(0, 120))


def test_initial_position_planes():
    x = encode(Position.initial())
    assert x.shape == (NUM_PLANES, 8, 8) and x.dtype == np.float32
    for sq in range(1, 13):
        assert x[PLANE_OWN_MEN][square_rc(sq)] == 1
    for sq in range(21, 33):
        assert x[PLANE_OPP_MEN][square_rc(sq)] == 1
    assert x[PLANE_OWN_MEN].sum() == 12 and x[PLANE_OPP_MEN].sum() == 12
    assert x[PLANE_OWN_KINGS].sum() == 0 and x[PLANE_OPP_KINGS].sum() == 0
    assert x[PLANE_PLAYABLE].sum() == 32
    # Pieces only ever sit on dark squares: (row + col) odd.
    rows, cols = np.nonzero(x[:4].sum(axis=0))
    assert np.all((rows + cols) % 2 == 1)


def test_white_sees_the_board_turned():
    # After 11-15 White to move: White's men must look like "own men on rows 0-2", moving to higher rows.
    pos = Position.initial().play(Move((11, 15)))
    x = encode(pos)
    assert x[PLANE_OWN_MEN][:3].sum() == 12
    # Black's man on 15 is seen on square 33 - 15 = 18.
    assert x[PLANE_OPP_MEN][square_rc(18)] == 1


@settings(max_examples=60, deadline=None)
@given(positions)
def test_position_and_its_mirror_encode_identically(pos):
    assert np.array_equal(encode(pos, 7, 2), encode(pos.mirrored(), 7, 2))


@settings(max_examples=60, deadline=None)
@given(positions)
def test_actions_map_consistently_under_mirroring(pos):
    mirror = pos.mirrored()
    moves = pos.legal_moves()
    mirrored_moves = mirror.legal_moves()
    assert len(moves) == len(mirrored_moves)
    by_action = {move_action(m, pos.black_to_move) for m in moves}
    assert by_action == {move_action(m, mirror.black_to_move) for m in mirrored_moves}
    for m in moves:
        a = move_action(m, pos.black_to_move)
        assert 0 <= a < NUM_ACTIONS
        assert action_squares(a, pos.black_to_move) == (m.from_square, m.to_square)
        flipped = Move(tuple(33 - s for s in m.path), 0)
        assert move_action(flipped, not pos.black_to_move) == a


@settings(max_examples=30, deadline=None)
@given(st.lists(positions, min_size=1, max_size=8), st.integers(0, 80), st.integers(1, 3))
def test_batch_matches_single(batch, no_progress, reps):
    n = len(batch)
    out = np.full((n, NUM_PLANES, 8, 8), 9.0, dtype=np.float32)
    encode_batch(
        np.array([p.black for p in batch], dtype=np.int64), np.array([p.white for p in batch], dtype=np.int64),
        np.array([p.kings for p in batch], dtype=np.int64), np.array([p.black_to_move for p in batch]),
        np.full(n, no_progress, dtype=np.int64), np.full(n, reps, dtype=np.int64), out,
    )
    for i, p in enumerate(batch):
        assert np.array_equal(out[i], encode(p, no_progress, reps))


def test_counter_planes():
    x = encode(Position.initial(), no_progress=40, repetitions=1)
    assert np.all(x[PLANE_NO_PROGRESS] == 0.5) and np.all(x[PLANE_REPETITION] == 0)
    assert np.all(encode(Position.initial(), 0, 2)[PLANE_REPETITION] == 1)
    # A game that shuffles two kings back and forth sees the repetition.
    game = Game(fen_to_position("B:WK32:BK1"))
    for text in ["1-5", "32-28", "5-1", "28-32"]:
        game.play(next(m for m in game.legal_moves() if str(m) == text))
    assert game.repetitions() == 2
    from zero.net.encoding import encode_game
    x = encode_game(game)
    assert np.all(x[PLANE_REPETITION] == 1) and np.all(x[PLANE_NO_PROGRESS] == 4 / 80)


def test_action_index_formula():
    assert action_index(8, 12, True) == 8 * 32 + 12
    assert action_index(8, 12, False) == (31 - 8) * 32 + (31 - 12)


@settings(max_examples=40, deadline=None)
@given(positions)
def test_kernel_actions_match_python(pos):
    moves = new_move_buffer()
    actions = np.zeros(256, dtype=np.int64)
    n = legal_action_array(pos.black, pos.white, pos.kings, pos.black_to_move, moves, actions)
    assert actions[:n].tolist() == legal_actions(pos).tolist()
    mask = np.zeros(NUM_ACTIONS, dtype=np.bool_)
    fill_legal_mask(actions, n, mask)
    assert set(np.flatnonzero(mask).tolist()) == set(actions[:n].tolist())


def test_shared_action_is_counted_and_its_prior_split():
    pos = fen_to_position(SHARED_FEN)
    moves = pos.legal_moves()
    actions = legal_actions(pos)
    assert len(moves) == 3 and len(set(actions.tolist())) == 2
    assert count_shared_moves(actions, len(actions)) == 2
    assert count_shared_moves(legal_actions(Position.initial()), 7) == 0
    logits = np.zeros(NUM_ACTIONS, dtype=np.float32)
    prior = np.zeros(3)
    legal_policy(logits, actions, 3, prior)
    # Two distinct actions with equal logits: 1/2 each; the shared one is halved between its two moves.
    shared = [k for k in range(3) if (actions == actions[k]).sum() == 2]
    assert prior.sum() == pytest.approx(1.0)
    for k in range(3):
        assert prior[k] == pytest.approx(0.25 if k in shared else 0.5)


def legal_logit_gap_twin(planes: np.ndarray, logits: np.ndarray) -> float:
    """legal_logit_gaps read plainly: the board from the planes square by square, its moves from the plain
    rules (zero.rules.reference) as if the side to move were Black, one logit per distinct from-to action."""
    def on(plane: int) -> int:
        return sum(1 << (s - 1) for s in range(1, 33) if planes[plane][square_to_rc(s)] == 1.0)

    own, opp = on(PLANE_OWN_MEN) | on(PLANE_OWN_KINGS), on(PLANE_OPP_MEN) | on(PLANE_OPP_KINGS)
    actions = {(path[0] - 1) * 32 + path[-1] - 1 for path, _ in reference_moves(own, opp, on(PLANE_OWN_KINGS)
                                                                                | on(PLANE_OPP_KINGS), True)}
    best = sorted((float(logits[a]) for a in actions), reverse=True)
    return best[0] - best[1] if len(best) > 1 else np.inf


@settings(max_examples=60, deadline=None)
@given(positions, st.integers(0, 2**32 - 1))
def test_the_legal_logit_gap_kernel_matches_its_twin(pos, seed):
    planes = encode(pos)[None]
    # Logits rounded to a coarse grid, so that some legal moves tie exactly.
    logits = (np.random.default_rng(seed).integers(0, 8, (1, NUM_ACTIONS)) / 4).astype(np.float32)
    gaps = np.empty(1, dtype=np.float32)
    legal_logit_gaps(planes, logits, gaps)
    assert gaps[0] == legal_logit_gap_twin(planes[0], logits[0])


@settings(max_examples=40, deadline=None)
@given(positions)
def test_the_board_read_back_from_the_planes_has_the_positions_moves(pos):
    own, opp, kings = planes_board(encode(pos))
    moves, actions = new_move_buffer(), np.zeros(256, dtype=np.int64)
    n = legal_action_array(own, opp, kings, True, moves, actions)
    assert sorted(actions[:n].tolist()) == sorted(legal_actions(pos).tolist())


def test_moves_that_share_an_action_are_one_choice_not_a_tie():
    pos = fen_to_position(SHARED_FEN)  # three moves, two actions
    actions = sorted(set(legal_actions(pos).tolist()))
    logits = np.zeros((1, NUM_ACTIONS), dtype=np.float32)
    logits[0, actions] = [1.0, 3.0]
    gaps = np.empty(1, dtype=np.float32)
    legal_logit_gaps(encode(pos)[None], logits, gaps)
    assert gaps[0] == 2.0
    forced = fen_to_position("B:W14:B10")  # one capture only
    legal_logit_gaps(encode(forced)[None], logits, gaps)
    assert gaps[0] == np.inf

"""What the network sees and what it answers in: input planes and the action index of a move.

Everything is from the side to move's view. For White the board is turned 180 degrees (square s becomes
33 - s, bit b becomes 31 - b), so own men always move toward higher rows and one network plays both colours.

Input planes, each 8x8 with the 32 playable squares on their (row, column) of the real board so that a 3x3
convolution sees exactly the diagonal neighbours of a square:

    0 own men            1 own kings          2 opponent men       3 opponent kings
    4 no-progress count  (constant no_progress / 80 over the board: how close the 80-ply draw is)
    5 repetition         (constant 1 when the position occurred before, i.e. a third time draws)
    6 playable squares   (constant 1 on the dark squares: with zero padding it tells the convolutions where
                          the board and its edges are, which an all-zero empty board would not)

Actions: one per full move (a multi-jump is one decision), index = p(from) * 32 + p(to) with p the
perspective bit above, so NUM_ACTIONS = 1024 logits that are masked to the legal moves.

Shared actions. Two legal moves can start and end on the same squares (a king capturing along different
routes, taking different pieces); they have one logit between them. The rules for that, used everywhere:
  * search: the prior of such an action is split equally among the moves that share it (`legal_policy`);
  * expert-move targets: the target is simply that from-to action (the network cannot tell the routes apart,
    and the case is rare: `count_shared_moves` measures it, the dataset command prints how often).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from zero.rules import movegen
from zero.rules.bitboard import lowest_bit_index, square_rc

NUM_ACTIONS = 1024
NUM_PLANES = 7
# The input planes and the action index as a whole. A network only makes sense with the encoding it was
# trained on, so every checkpoint records this (NetworkConfig.encoding_version); change it with either.
ENCODING_VERSION = 1
PLANE_OWN_MEN, PLANE_OWN_KINGS, PLANE_OPP_MEN, PLANE_OPP_KINGS = 0, 1, 2, 3
PLANE_NO_PROGRESS, PLANE_REPETITION, PLANE_PLAYABLE = 4, 5, 6
NO_PROGRESS_SCALE = 80.0  # the draw limit of the default rules: the plane reaches 1.0 when the draw is due

# (row, column) on the 8x8 board of each bit 0-31.
SQUARE_ROW = np.array([square_rc(b + 1)[0] for b in range(32)], dtype=np.int64)
SQUARE_COL = np.array([square_rc(b + 1)[1] for b in range(32)], dtype=np.int64)


@njit(cache=True, inline="always")
def perspective_bit(bit, black_to_move):
    """Bit as seen by the side to move: unchanged for Black, 31 - bit (square s -> 33 - s) for White."""
    return bit if black_to_move else 31 - bit


@njit(cache=True)
def action_index(frm_bit, to_bit, black_to_move):
    """Action index of the move frm -> to (bits 0-31, real board) for the side to move."""
    return perspective_bit(frm_bit, black_to_move) * 32 + perspective_bit(to_bit, black_to_move)


def move_action(move, black_to_move: bool) -> int:
    """Action index of a zero.rules.game.Move played by the given side."""
    return int(action_index(move.from_square - 1, move.to_square - 1, bool(black_to_move)))


def action_squares(action: int, black_to_move: bool) -> tuple[int, int]:
    """(from square, to square), 1-32 on the real board, of an action index: the inverse of move_action."""
    pf, pt = divmod(int(action), 32)
    if black_to_move:
        return pf + 1, pt + 1
    return 32 - pf, 32 - pt


@njit(cache=True, inline="always")
def _place(mask, black_to_move, plane, out):
    while mask:
        b = lowest_bit_index(mask)
        mask &= mask - 1
        p = perspective_bit(b, black_to_move)
        out[plane, SQUARE_ROW[p], SQUARE_COL[p]] = 1.0


@njit(cache=True)
def encode_position(black, white, kings, black_to_move, no_progress, repetitions, out):
    """Write the planes of one position into out (float32 [NUM_PLANES, 8, 8]); out is overwritten.

    no_progress: plies since the last capture or man move (Game.no_progress[-1]).
    repetitions: how many times this position (same side to move) has occurred, counting this time
    (Game.repetitions(): 1 = first time); the plane is 1 from the second occurrence on.
    """
    out[:] = 0.0
    if black_to_move:
        own, opp = black, white
    else:
        own, opp = white, black
    _place(own & ~kings, black_to_move, PLANE_OWN_MEN, out)
    _place(own & kings, black_to_move, PLANE_OWN_KINGS, out)
    _place(opp & ~kings, black_to_move, PLANE_OPP_MEN, out)
    _place(opp & kings, black_to_move, PLANE_OPP_KINGS, out)
    out[PLANE_NO_PROGRESS, :, :] = min(no_progress / NO_PROGRESS_SCALE, 1.0)
    if repetitions > 1:
        out[PLANE_REPETITION, :, :] = 1.0
    for b in range(32):
        out[PLANE_PLAYABLE, SQUARE_ROW[b], SQUARE_COL[b]] = 1.0


@njit(cache=True)
def encode_batch(black, white, kings, black_to_move, no_progress, repetitions, out):
    """encode_position over arrays of N positions into out (float32 [N, NUM_PLANES, 8, 8])."""
    for i in range(black.shape[0]):
        encode_position(
            np.int64(black[i]), np.int64(white[i]), np.int64(kings[i]), bool(black_to_move[i]),
            no_progress[i], repetitions[i], out[i],
        )


def encode(position, no_progress: int = 0, repetitions: int = 1) -> np.ndarray:
    """Planes of a zero.rules.game.Position (float32 [NUM_PLANES, 8, 8])."""
    out = np.empty((NUM_PLANES, 8, 8), dtype=np.float32)
    encode_position(position.black, position.white, position.kings, position.black_to_move, no_progress,
                    repetitions, out)
    return out


def encode_game(game) -> np.ndarray:
    """Planes of a zero.rules.game.Game's current position, with its no-progress count and repetitions."""
    return encode(game.position, game.no_progress[-1], game.repetitions())


@njit(cache=True)
def legal_action_array(black, white, kings, black_to_move, moves, actions):
    """Generate the legal moves into moves (a movegen buffer) and their action indices into actions.

    Returns the number of moves n; row k of moves and actions[k] describe the same move.
    """
    n = movegen.generate(black, white, kings, black_to_move, True, moves)
    for k in range(n):
        actions[k] = action_index(moves[k, movegen.F_FROM], moves[k, movegen.F_TO], black_to_move)
    return n


@njit(cache=True)
def planes_board(planes):
    """(own, opponent, kings) bitboards of one position's planes, in the side to move's perspective: the
    inverse of encode_position's first four planes. As a position with own pieces Black and Black to move it
    has the real position's legal moves, with the same action indices (action_index(..., True))."""
    own, opp, kings = 0, 0, 0
    for b in range(32):
        r, c = SQUARE_ROW[b], SQUARE_COL[b]
        bit = np.int64(1) << b
        if planes[PLANE_OWN_MEN, r, c] > 0.5 or planes[PLANE_OWN_KINGS, r, c] > 0.5:
            own |= bit
        if planes[PLANE_OPP_MEN, r, c] > 0.5 or planes[PLANE_OPP_KINGS, r, c] > 0.5:
            opp |= bit
        if planes[PLANE_OWN_KINGS, r, c] > 0.5 or planes[PLANE_OPP_KINGS, r, c] > 0.5:
            kings |= bit
    return own, opp, kings


@njit(cache=True)
def legal_logit_gaps(planes, logits, gaps):
    """gaps[i] = how far position i's best legal action's logit lies above its second best distinct legal
    action's (inf with fewer than two): how near a tie the network's choice of move is. Planes float32
    [N, NUM_PLANES, 8, 8], logits float32 [N, NUM_ACTIONS], gaps float32/float64 [N]."""
    moves = np.zeros((movegen.BUFFER_ROWS, movegen.MOVE_FIELDS), dtype=np.int64)
    actions = np.zeros(movegen.MAX_MOVES, dtype=np.int64)
    for i in range(planes.shape[0]):
        own, opp, kings = planes_board(planes[i])
        n = legal_action_array(own, opp, kings, True, moves, actions)
        best, second = -np.inf, -np.inf
        best_action = -1
        for k in range(n):
            x = logits[i, actions[k]]
            if actions[k] == best_action:
                continue  # moves that share an action share its logit: one choice, not a tie
            if x > best:
                best, second, best_action = x, best, actions[k]
            elif x > second:
                second = x
        gaps[i] = best - second if second > -np.inf else np.inf


def legal_actions(position) -> np.ndarray:
    """Action indices (int64) of position.legal_moves(), in the same order."""
    moves = position.legal_moves()
    return np.array([move_action(m, position.black_to_move) for m in moves], dtype=np.int64)


@njit(cache=True)
def count_shared_moves(actions, n):
    """How many of the n legal moves share their action with another legal move (0 in most positions)."""
    shared = 0
    for i in range(n):
        for j in range(n):
            if i != j and actions[i] == actions[j]:
                shared += 1
                break
    return shared


@njit(cache=True)
def legal_policy(logits, actions, n, out, temperature=1.0):
    """Prior per legal move: softmax over the distinct legal actions' logits divided by `temperature`, each
    action's probability split equally among the moves that share it. Writes out[:n] (float32/float64),
    which sums to 1.

    Logits that give no distribution (NaN or infinite ones: a diverged network) give equal priors: a prior
    that is not a number would make every PUCT score NaN, and a descent that can choose no child never ends."""
    top = -np.inf
    for k in range(n):
        if logits[actions[k]] > top:
            top = logits[actions[k]]
    total = 0.0
    for k in range(n):
        # Shared actions count once in the normaliser: weight each move by 1/multiplicity.
        mult = 0
        for j in range(n):
            if actions[j] == actions[k]:
                mult += 1
        out[k] = np.exp((logits[actions[k]] - top) / temperature) / mult
        total += out[k]
    if not (np.isfinite(total) and total > 0.0):
        for k in range(n):
            out[k] = 1.0 / n
        return
    for k in range(n):
        out[k] /= total


@njit(cache=True)
def fill_legal_mask(actions, n, mask):
    """Set mask (bool [NUM_ACTIONS]) to True exactly on the legal actions."""
    mask[:] = False
    for k in range(n):
        mask[actions[k]] = True


@njit(cache=True)
def legal_mask_batch(black, white, kings, black_to_move, masks):
    """masks[i] (bool [NUM_ACTIONS]) = the legal actions of position i; rebuilt from the board, so datasets
    need not store 1024 flags per position."""
    moves = np.zeros((movegen.BUFFER_ROWS, movegen.MOVE_FIELDS), dtype=np.int64)
    actions = np.zeros(movegen.MAX_MOVES, dtype=np.int64)
    for i in range(black.shape[0]):
        n = legal_action_array(np.int64(black[i]), np.int64(white[i]), np.int64(kings[i]), bool(black_to_move[i]),
                               moves, actions)
        fill_legal_mask(actions, n, masks[i])

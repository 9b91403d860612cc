"""The alpha-beta search, numba kernels on plain integers and arrays: a negamax with a transposition table,
move ordering, quiescence and endgame-database leaves, whose quiet leaves are scored by an evaluation of
zero.alphabeta.evaluations: the classical one (fitted hand-made features) or the distilled one (zero.distilled: a
small network learnt from the policy-value network, its accumulators carried down the tree and updated by each
move's pieces). zero.alphabeta.player is their Python face (the player); zero.alphabeta.reference holds the
full-width minimax the tests hold the search to.

An evaluation is a named tuple of its arrays, with work arrays of its own (zero.alphabeta.evaluations.new_work,
MAX_PLY plies of them); numba compiles the search once for each evaluation's type, and the three calls the
search makes of it (enter_root, enter_child, leaf_score) resolve to that evaluation's kernels while it compiles.
The classical evaluation is in points (P(win) ~ sigmoid(points / its scale)), the distilled one in thousandths
of a logit.

Search. score(position, depth) for the side to move, negamax:
  - no legal move: a loss, -(WIN_SCORE - ply), so that a nearer win scores higher;
  - below the root, no capture for either side and few enough pieces for the database: the database's value,
    +-(WIN_SCORE - (ply + distance)) (a win in `distance` plies is a win at ply + distance), 0 for a draw;
  - depth <= 0 and no capture for the side to move: the evaluation (a quiet leaf);
  - otherwise the best child, one ply less deep. At depth <= 0 every move is a capture (they are
    compulsory), so this is the quiescence search: an exchange is played out until no capture is pending.
Draw rules (repetition, no progress) are not seen inside the tree, so a position's value does not depend
on the path to it; that is what makes the transposition table exact. Only at the root does the game's
history count: a root move back to a position of the game scores as a draw (search_root's root_draws).

Alpha-beta finds that score with: principal-variation search (null windows after the first move),
iterative deepening (the caller: zero.alphabeta.player), a transposition table (entries keyed by the whole
position, so no collision is ever trusted: the bound, the depth and the best move; a stored bound cuts only
at the same remaining depth, so a fixed-depth search returns exactly the fixed-depth minimax score, and
deeper or shallower entries still give their move first), and move ordering (hash move, then captures by
pieces taken, two killer moves a ply, the history heuristic). Both the table and the ordering can be
switched off (use_tt, use_ordering) to show that they change nothing but the speed. Two settings trade that
exactness for depth (zero.alphabeta.player.Selectivity, off for the classical yardstick and the
tests that hold the search to the minimax): late move reductions (C_REDUCTIONS plies less for a late quiet
move, searched again at full depth when it beats alpha: _reduction, _open_child) and entries searched deeper
than asked cutting too (C_DEEPER_CUTS). Others look further where the evaluation is blind: a leaf whose side
to move is threatened with a capture is searched one ply deeper (C_THREAT_EXTENSIONS), and a capture that
answers a capture is searched a ply deeper (C_RECAPTURE_EXTENSIONS), at most MOST_EXTENSIONS times a line
for both together (zero.alphabeta.reference.minimax with threats or recaptures is the twin). Verified pruning
(C_VERIFY_MARGIN) trusts the evaluation where it is far above beta only once a search VERIFY_PLIES shallower
agrees (its twin: zero.alphabeta.reference.verified_alphabeta, as its cuts depend on the windows).

The search is iterative with an explicit stack (search_root says how it maps onto the recursion): a
self-recursive kernel crashed when numba loaded it from its cache (numba 0.68), and compiling one afresh
costs every process many seconds.

search_root is compiled without numba's reference counting (NRT, `_nrt=False`), and the kernels it calls
inherit that unless they say otherwise: with it, every array view (frames[ply]), every array or tuple of arrays
handed to a function, and every row a kernel takes cost an atomic count up and down, which was two thirds of
the search's time (0.9 M nodes a second; 2.5 to 3 M without, benchmarks/alphabeta_speed.py). What counting is
for, the search never does: it allocates nothing and hands back no array, and its caller owns every array it
touches. A kernel compiled so serves its other callers too (numba keeps one compilation a signature), which is
sound for the same reasons; one that must allocate does not compile without it (numba refuses), so it opts back
in (`_nrt=True`: database_value, whose probe of the database allocates). The per-node steps (_enter,
_open_child, _child_done, _leave) are inlined into search_root, a sixth faster again: a call copies the
descriptor of every array it is handed, the evaluation's (eight for the distilled one) and the tables' eight
among them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from zero.alphabeta.evaluations import enter_child, enter_root, leaf_score
from zero.endgames.egdb import DRAW_CODE, MAX_DISTANCE, probe_code
from zero.rules.bitboard import popcount
from zero.rules.movegen import (
    BUFFER_ROWS, F_CAPTURED, F_FROM, F_TO, MAX_MOVES, MOVE_FIELDS, can_capture, count_moves, generate, make,
)

WIN_SCORE = 1_000_000_000
INFINITY = 2 * WIN_SCORE
# Scores beyond this are wins or losses at a known distance (plies), stored in the table relative to the
# node so that the same position found at another ply gets its own distance.
WIN_THRESHOLD = WIN_SCORE - 100_000
MAX_DEPTH = 64
# Plies a search may reach: the depth, the extensions (MOST_EXTENSIONS), then at most one capture a ply
# until the pieces run out.
MAX_PLY = MAX_DEPTH + 26

# Columns of a table entry. A slot holds one position; KEY packs the kings, the side to move and the
# generation (entries of another generation are absent), so a zero row never matches.
T_BLACK, T_WHITE, T_KEY, T_SCORE, T_INFO = range(5)
TT_FIELDS = 5
EXACT, LOWER, UPPER = 0, 1, 2

# The counters and settings of one search (an int64 array the caller owns).
C_NODES, C_MAX_NODES, C_ABORTED, C_ROOT_ROW, C_ROOT_SCORE, C_GENERATION, C_USE_TT, C_USE_ORDERING = range(8)
C_TT_CUTS, C_DB_HITS, C_REDUCTIONS, C_REDUCE_AFTER, C_DEEPER_CUTS, C_THREAT_EXTENSIONS = 8, 9, 10, 11, 12, 13
# The root's window (an aspiration window: the caller re-searches a score that falls outside it), and whether a
# quiet move that refuted the opponent's last move is tried early after that move again (counter-moves).
C_ROOT_ALPHA, C_ROOT_BETA, C_COUNTERMOVES = 14, 15, 16
# A capture that answers a capture searched a ply deeper (recapture extensions); the margin by which a null-window
# node's static value must clear beta for a shallower search to be allowed to cut it (verified pruning, 0: off);
# how many nodes were so cut, and how many were searched again at full depth, their shallower search short of beta.
C_RECAPTURE_EXTENSIONS, C_VERIFY_MARGIN, C_VERIFIED_CUTS, C_VERIFY_FAILS = 17, 18, 19, 20
COUNTERS = 21
# Plies a line may be extended, for threats (C_THREAT_EXTENSIONS) and recaptures (C_RECAPTURE_EXTENSIONS)
# together: the stack holds the depth, the captures the pieces allow, and these.
MOST_EXTENSIONS = 2
# Verified pruning: a node at least VERIFY_MIN_DEPTH deep whose static value clears beta by the margin is first
# searched VERIFY_PLIES less deep; only if that search also clears beta is the node cut.
VERIFY_PLIES = 3
VERIFY_MIN_DEPTH = 4

_HASH_ORDER = 1 << 50
_CAPTURE_ORDER = 1 << 40
_KILLER_ORDER = 1 << 30
_COUNTER_ORDER = 1 << 29


@njit(cache=True, inline="always")
def _mix(x):
    """splitmix64's finaliser (wrapping int64 arithmetic)."""
    x = (x ^ (x >> 30)) * -4658895280553007687
    x = (x ^ (x >> 27)) * -7723592293110705685
    return x ^ (x >> 31)


@njit(cache=True, inline="always")
def _slot(black, white, kings, black_to_move, size):
    h = _mix(black * -7046029254386353131 ^ white * 0x632BE59BD9B4E019 ^ kings * 0x2545F4914F6CDD1D
             ^ (1 if black_to_move else 0))
    return h & (size - 1)


@njit(cache=True, inline="always")
def _key(kings, black_to_move, generation):
    return kings | (np.int64(1 if black_to_move else 0) << 32) | (generation << 33)


@njit(cache=True, inline="always")
def _to_table(score, ply):
    if score > WIN_THRESHOLD:
        return score + ply
    if score < -WIN_THRESHOLD:
        return score - ply
    return score


@njit(cache=True, inline="always")
def _from_table(score, ply):
    if score > WIN_THRESHOLD:
        return score - ply
    if score < -WIN_THRESHOLD:
        return score + ply
    return score


@njit(cache=True, _nrt=True)  # the database's probe allocates: reference counting stays on (module doc)
def database_value(black, white, kings, black_to_move, ply, tables):
    """The database's score of a quiet position (neither side can capture) at `ply`, or INFINITY when the
    database does not hold it."""
    if popcount(black | white) > tables.max_pieces or can_capture(black, white, kings, not black_to_move):
        return INFINITY
    code = probe_code(tables, black, white, kings, black_to_move)
    if code == DRAW_CODE:
        return 0
    if code > MAX_DISTANCE:
        return INFINITY
    return WIN_SCORE - (ply + code) if code & 1 else -(WIN_SCORE - (ply + code))


# Columns of a search frame, one row a ply (the explicit stack).
(P_BLACK, P_WHITE, P_KINGS, P_DEPTH, P_ALPHA, P_BETA, P_ALPHA0, P_BEST, P_BEST_ROW, P_COUNT, P_NEXT, P_CAPTURE,
 P_SLOT, P_USE_TT, P_ROW, P_FULL_WINDOW, P_REDUCED, P_EXTENDED, P_VERIFY) = range(19)
FRAME_FIELDS = 19
# P_VERIFY: 0 where the node may be verified, its full depth while its shallower search runs, -1 once that search
# failed to cut it (it is then searched at full depth, and not verified again).
_ENTER, _NEXT, _RETURN = 0, 1, 2


@njit(cache=True, inline="always")
def _quiet_value(black, white, kings, btm, ply, counters, evaluation, work, tables):
    """A quiet leaf's score: the database's where it holds the position, else the evaluation."""
    if tables.max_pieces > 0:
        value = database_value(black, white, kings, btm, ply, tables)
        if value != INFINITY:
            counters[C_DB_HITS] += 1
            return value
    return leaf_score(black, white, kings, btm, ply, evaluation, work)


@njit(cache=True, inline="always")
def _enter(ply, btm, frames, root_order, moves, order, rows, tt, killers, history, countermoves, counters, evaluation,
           work, tables):
    """Open the node in frames[ply] (position, depth, window set by its parent). Returns (True, its score)
    when the node is settled at once (no move, a database position, a quiet leaf, a table cut), else
    (False, 0) with its moves generated and their ordering keys set."""
    f = frames[ply]
    black, white, kings, depth = f[P_BLACK], f[P_WHITE], f[P_KINGS], f[P_DEPTH]
    counters[C_NODES] += 1
    if counters[C_NODES] >= counters[C_MAX_NODES]:
        counters[C_ABORTED] = 1
        return True, 0
    buf = moves[ply]
    if ply > 0 and depth <= 0 and not can_capture(black, white, kings, btm):
        if (depth == 0 and counters[C_THREAT_EXTENSIONS] != 0 and f[P_EXTENDED] < MOST_EXTENSIONS
                and can_capture(black, white, kings, not btm)):
            # A leaf whose side to move is threatened with a capture: its evaluation cannot see whether the
            # threat is met, one ply more can (a move that defends, or a counter-threat).
            depth = 1
            f[P_DEPTH] = 1
            f[P_EXTENDED] += 1
        else:
            # A quiet leaf: counting its moves (a few popcounts) is all it needs of them.
            if count_moves(black, white, kings, btm, True, buf) == 0:
                return True, -(WIN_SCORE - ply)
            return True, _quiet_value(black, white, kings, btm, ply, counters, evaluation, work, tables)
    n = generate(black, white, kings, btm, True, buf)
    if n == 0:
        return True, -(WIN_SCORE - ply)
    capture = buf[0, F_CAPTURED] != 0
    if not capture and ply > 0 and tables.max_pieces > 0:
        value = database_value(black, white, kings, btm, ply, tables)
        if value != INFINITY:
            counters[C_DB_HITS] += 1
            return True, value

    use_tt = counters[C_USE_TT] != 0 and depth > 0
    hash_row = -1
    slot = 0
    if use_tt:
        slot = _slot(black, white, kings, btm, tt.shape[0])
        if (tt[slot, T_BLACK] == black and tt[slot, T_WHITE] == white
                and tt[slot, T_KEY] == _key(kings, btm, counters[C_GENERATION])):
            info = tt[slot, T_INFO]
            hash_row = (info >> 16) - 1
            stored_depth = info & 0xFF
            if ply > 0 and (stored_depth == depth or (stored_depth > depth and counters[C_DEEPER_CUTS] != 0)):
                stored = _from_table(tt[slot, T_SCORE], ply)
                flag = (info >> 8) & 0xFF
                if (flag == EXACT or (flag == LOWER and stored >= f[P_BETA])
                        or (flag == UPPER and stored <= f[P_ALPHA])):
                    counters[C_TT_CUTS] += 1
                    return True, stored

    if (counters[C_VERIFY_MARGIN] != 0 and ply > 0 and not capture and f[P_VERIFY] == 0 and depth >= VERIFY_MIN_DEPTH
            and f[P_BETA] - f[P_ALPHA] == 1 and -WIN_THRESHOLD < f[P_BETA] < WIN_THRESHOLD
            and leaf_score(black, white, kings, btm, ply, evaluation, work) >= f[P_BETA] + counters[C_VERIFY_MARGIN]):
        # Far above beta by the evaluation, which alone might be blind to a shot: a shallower search must agree
        # before the node is cut (search_root searches it again at full depth when it does not).
        f[P_VERIFY] = depth
        f[P_DEPTH] = depth - VERIFY_PLIES

    # Ordering keys: the hash move, then captures by pieces taken, then the killers, then the counter-move to
    # the move that led here, then history; the root keeps root_order after its hash move.
    side = 0 if btm else 1
    keys = order[ply]
    seq = rows[ply]
    for i in range(n):
        seq[i] = i
        keys[i] = 0
    if ply == 0:
        for rank in range(n):
            keys[root_order[rank]] = -rank
    elif counters[C_USE_ORDERING] != 0:
        counter = _counter_move(ply, side, frames, moves, countermoves, counters)
        for i in range(n):
            frm = buf[i, F_FROM]
            to = buf[i, F_TO]
            key = history[side, frm, to]
            if capture:
                key += popcount(buf[i, F_CAPTURED]) * _CAPTURE_ORDER
            elif frm * 32 + to == killers[ply, 0]:
                key += 2 * _KILLER_ORDER
            elif frm * 32 + to == killers[ply, 1]:
                key += _KILLER_ORDER
            elif frm * 32 + to == counter:
                key += _COUNTER_ORDER
            keys[i] = key
    if hash_row >= 0:
        keys[hash_row] = _HASH_ORDER
    f[P_COUNT] = n
    f[P_NEXT] = 0
    f[P_CAPTURE] = capture
    f[P_SLOT] = slot
    f[P_USE_TT] = use_tt
    f[P_ALPHA0] = f[P_ALPHA]
    f[P_BEST] = -INFINITY
    f[P_BEST_ROW] = -1
    return False, 0


@njit(cache=True, inline="always")
def _open_child(ply, btm, frames, moves, full_window, reduction, counters, evaluation, work):
    """Set up frames[ply + 1] for the child of the move in frames[ply][P_ROW]: a full window, or (principal
    variation search, after the first move) the null window just above alpha; `reduction` plies less deep
    where the move is quiet (late move reductions: neither a crowning nor one that leaves a capture to
    answer, whose outcome a shallower look misjudges)."""
    f = frames[ply]
    c = frames[ply + 1]
    row = f[P_ROW]
    c[P_BLACK], c[P_WHITE], c[P_KINGS] = make(f[P_BLACK], f[P_WHITE], f[P_KINGS], btm, moves[ply, row, F_FROM],
                                              moves[ply, row, F_TO], moves[ply, row, F_CAPTURED])
    enter_child(ply, f[P_BLACK], f[P_WHITE], f[P_KINGS], c[P_BLACK], c[P_WHITE], c[P_KINGS], evaluation, work)
    if reduction > 0 and (popcount(c[P_KINGS]) > popcount(f[P_KINGS])
                          or can_capture(c[P_BLACK], c[P_WHITE], c[P_KINGS], not btm)):
        reduction = 0
    c[P_DEPTH] = f[P_DEPTH] - 1 - reduction
    c[P_EXTENDED] = f[P_EXTENDED]
    c[P_VERIFY] = 0
    if (counters[C_RECAPTURE_EXTENSIONS] != 0 and ply > 0 and f[P_CAPTURE] and frames[ply - 1, P_CAPTURE]
            and f[P_DEPTH] > 0 and f[P_EXTENDED] < MOST_EXTENSIONS):
        # An exchange: the position after it, not the middle of it, is what the depth should be spent beyond.
        c[P_DEPTH] += 1
        c[P_EXTENDED] += 1
    c[P_BETA] = -f[P_ALPHA]
    c[P_ALPHA] = -f[P_BETA] if full_window else -f[P_ALPHA] - 1
    f[P_FULL_WINDOW] = full_window
    f[P_REDUCED] = reduction


@njit(cache=True, inline="always")
def _reduction(ply, k, frames, order, rows, counters):
    """Plies the k-th move tried at ply is searched less deep (late move reductions): none for the first
    moves (the hash move, the captures, the killers come first), at the root, in an exchange, or near the
    leaves; a null-window look otherwise, searched again at full depth when it beats alpha."""
    f = frames[ply]
    if (counters[C_REDUCTIONS] == 0 or ply == 0 or f[P_CAPTURE] or f[P_DEPTH] < 3
            or k < counters[C_REDUCE_AFTER] or order[ply][rows[ply][k]] >= _KILLER_ORDER):
        return 0
    return min(counters[C_REDUCTIONS], f[P_DEPTH] - 2)


@njit(cache=True, inline="always")
def _last_move(ply, frames, moves):
    """The move that led to the node at ply (> 0), as from * 32 + to."""
    row = frames[ply - 1, P_ROW]
    return moves[ply - 1, row, F_FROM] * 32 + moves[ply - 1, row, F_TO]


@njit(cache=True, inline="always")
def _counter_move(ply, side, frames, moves, countermoves, counters):
    """The quiet move (from * 32 + to) of `side` that last refuted the move leading to the node at ply; -1 for
    none, at the root (whose last move was the game's) and with counter-moves off."""
    if counters[C_COUNTERMOVES] == 0 or ply == 0:
        return -1
    return countermoves[side, _last_move(ply, frames, moves)]


@njit(cache=True, inline="always")
def _child_done(ply, btm, score, frames, moves, killers, history, countermoves, counters):
    """Take the score of the child just searched into the node at ply; True when the node is cut off."""
    f = frames[ply]
    row = f[P_ROW]
    if score > f[P_BEST]:
        f[P_BEST] = score
        f[P_BEST_ROW] = row
        if ply == 0:
            counters[C_ROOT_ROW] = row
            counters[C_ROOT_SCORE] = score
        if score > f[P_ALPHA]:
            f[P_ALPHA] = score
            if score >= f[P_BETA]:
                if not f[P_CAPTURE]:
                    frm = moves[ply, row, F_FROM]
                    to = moves[ply, row, F_TO]
                    if killers[ply, 0] != frm * 32 + to:
                        killers[ply, 1] = killers[ply, 0]
                        killers[ply, 0] = frm * 32 + to
                    depth = f[P_DEPTH]
                    history[0 if btm else 1, frm, to] += depth * depth if depth > 0 else 1
                    if ply > 0:
                        countermoves[0 if btm else 1, _last_move(ply, frames, moves)] = frm * 32 + to
                return True
    return False


@njit(cache=True, inline="always")
def _leave(ply, btm, frames, tt, counters):
    """Close the node at ply: store its score in the table (as a bound or exact); return the score."""
    f = frames[ply]
    best = f[P_BEST]
    if f[P_USE_TT]:
        flag = UPPER if best <= f[P_ALPHA0] else LOWER if best >= f[P_BETA] else EXACT
        slot = f[P_SLOT]
        tt[slot, T_BLACK] = f[P_BLACK]
        tt[slot, T_WHITE] = f[P_WHITE]
        tt[slot, T_KEY] = _key(f[P_KINGS], btm, counters[C_GENERATION])
        tt[slot, T_SCORE] = _to_table(best, ply)
        tt[slot, T_INFO] = f[P_DEPTH] | (flag << 8) | ((f[P_BEST_ROW] + 1) << 16)
    return best


@njit(cache=True, _nrt=False, nogil=True)  # a server's other threads answer while it searches
def search_root(black, white, kings, black_to_move, depth, root_order, root_draws, frames, moves, order, rows, tt,
                killers, history, countermoves, counters, evaluation, work, tables):
    """One iteration: the score of the position to `depth` (module doc) by fail-soft principal-variation
    alpha-beta with the window (counters[C_ROOT_ALPHA], counters[C_ROOT_BETA]) at the root (a score at or
    outside it is a bound: the caller searches again with a wider window), stopping once counters[C_NODES]
    reaches counters[C_MAX_NODES].

    frames (MAX_PLY, FRAME_FIELDS): the explicit stack (see the module doc). moves (MAX_PLY, BUFFER_ROWS, MOVE_FIELDS), order and rows
    (MAX_PLY, MAX_MOVES): each ply's moves, their ordering keys and the order they are searched in. tt
    (size: a power of two, TT_FIELDS), killers (MAX_PLY, 2) as from * 32 + to, history (2, 32, 32),
    countermoves (2, 32 * 32): a side's refutation (from * 32 + to) of the move before it, counters (COUNTERS):
    the search's state. root_order: the root's moves (rows of generate()'s order) in
    the order to try them after the hash move. root_draws[row] != 0: that root move repeats a position of
    the game and scores as a draw, unsearched (the game's history is the root's alone: inside the tree a
    position's value stays independent of its path, and the root, whose value then is not, is not stored).
    evaluation and work: an evaluation of zero.alphabeta.evaluations and its work arrays.

    Returns (score for the side to move, the best root move's row or -1, complete). A search stopped early
    returns the best of the root moves it finished (row -1 when none).

    The loop is the recursion written out. A node is opened (_enter: settled at once, or its moves
    ordered); its children are searched one by one (_open_child), the first with the node's window and the
    others with a null window, re-searched with the full one when they land inside it; each child's score
    comes back negated (_child_done) until the moves run out or one reaches beta; then the node closes
    (_leave) and its score goes to its parent.
    """
    counters[C_ABORTED] = 0
    counters[C_ROOT_ROW] = -1
    counters[C_ROOT_SCORE] = -INFINITY
    f = frames[0]
    f[P_BLACK], f[P_WHITE], f[P_KINGS], f[P_DEPTH] = black, white, kings, depth
    f[P_ALPHA], f[P_BETA] = counters[C_ROOT_ALPHA], counters[C_ROOT_BETA]
    f[P_EXTENDED] = 0
    f[P_VERIFY] = 0
    enter_root(black, white, kings, evaluation, work)
    ply = 0
    value = 0
    step = _ENTER
    while True:
        btm = black_to_move if ply % 2 == 0 else not black_to_move
        if step == _ENTER:
            settled, value = _enter(ply, btm, frames, root_order, moves, order, rows, tt, killers, history,
                                    countermoves, counters, evaluation, work, tables)
            step = _RETURN if settled else _NEXT
            if ply == 0 and not settled:
                for row in range(frames[0, P_COUNT]):
                    if root_draws[row]:
                        frames[0, P_USE_TT] = 0
        elif step == _NEXT:
            f = frames[ply]
            k = f[P_NEXT]
            if k < f[P_COUNT]:
                # Selection sort, one step a move: most moves of a cut node are never reached.
                keys = order[ply]
                seq = rows[ply]
                top = k
                for j in range(k + 1, f[P_COUNT]):
                    if keys[seq[j]] > keys[seq[top]]:
                        top = j
                seq[k], seq[top] = seq[top], seq[k]
                f[P_ROW] = seq[k]
                f[P_NEXT] = k + 1
                if ply == 0 and root_draws[seq[k]]:
                    if _child_done(0, btm, 0, frames, moves, killers, history, countermoves, counters):
                        value = _leave(0, btm, frames, tt, counters)  # a draw at or above the root's beta
                        step = _RETURN
                else:
                    _open_child(ply, btm, frames, moves, k == 0, _reduction(ply, k, frames, order, rows, counters),
                                counters, evaluation, work)
                    ply += 1
                    step = _ENTER
            else:
                value = _leave(ply, btm, frames, tt, counters)
                step = _RETURN
        else:  # _RETURN: value is the score of the node at ply
            if counters[C_ABORTED] != 0:
                return counters[C_ROOT_SCORE], counters[C_ROOT_ROW], False
            f = frames[ply]
            if f[P_VERIFY] > 0:
                if value < f[P_BETA]:  # the shallower search did not confirm the cut: the full depth decides
                    counters[C_VERIFY_FAILS] += 1
                    f[P_DEPTH] = f[P_VERIFY]
                    f[P_VERIFY] = -1
                    step = _ENTER
                    continue
                counters[C_VERIFIED_CUTS] += 1
            if ply == 0:
                return value, counters[C_ROOT_ROW], True
            ply -= 1
            btm = not btm
            f = frames[ply]
            score = -value
            if f[P_REDUCED] and score > f[P_ALPHA]:
                _open_child(ply, btm, frames, moves, False, 0, counters, evaluation, work)  # a reduced move beat alpha: full depth
                ply += 1
                step = _ENTER
            elif not f[P_FULL_WINDOW] and f[P_ALPHA] < score < f[P_BETA]:
                _open_child(ply, btm, frames, moves, True, 0, counters, evaluation, work)  # the null window failed high: search it again
                ply += 1
                step = _ENTER
            elif _child_done(ply, btm, score, frames, moves, killers, history, countermoves, counters):
                value = _leave(ply, btm, frames, tt, counters)
            else:
                step = _NEXT


def new_state(tt_bits: int) -> dict[str, np.ndarray]:
    """The arrays one search works in (a player keeps them between moves)."""
    return {
        "frames": np.zeros((MAX_PLY, FRAME_FIELDS), dtype=np.int64),
        "moves": np.zeros((MAX_PLY, BUFFER_ROWS, MOVE_FIELDS), dtype=np.int64),
        "order": np.zeros((MAX_PLY, MAX_MOVES), dtype=np.int64),
        "rows": np.zeros((MAX_PLY, MAX_MOVES), dtype=np.int64),
        "tt": np.zeros((1 << tt_bits, TT_FIELDS), dtype=np.int64),
        "killers": np.full((MAX_PLY, 2), -1, dtype=np.int64),
        "history": np.zeros((2, 32, 32), dtype=np.int64),
        "countermoves": np.full((2, 32 * 32), -1, dtype=np.int64),
        "counters": np.zeros(COUNTERS, dtype=np.int64),
    }


@njit(cache=True)
def table_move(tt, black, white, kings, black_to_move, generation):
    """The row of the best move the table holds for a position (in its move generator's order), -1 where it
    holds none: the principal variation's next move (alphabeta_player.AlphaBetaSearchPlayer.principal_variation)."""
    slot = _slot(black, white, kings, black_to_move, tt.shape[0])
    if tt[slot, T_BLACK] != black or tt[slot, T_WHITE] != white or tt[slot, T_KEY] != _key(kings, black_to_move,
                                                                                           generation):
        return -1
    return (tt[slot, T_INFO] >> 16) - 1

"""PUCT search kernels over many trees at once: numba on plain arrays, one node pool per game in flight.

A `Forest` holds G trees, each a pool of `capacity` nodes in row g of 2-D arrays. The root of every tree is
node 0: after a move is played, `advance_root` compacts the chosen child's subtree to the front of the pool
(one linear pass; children are always allocated after their parent, so moving kept nodes forward in index
order never overwrites a node not yet moved).

Values. `value_sum` of a node is from the view of the player who moved INTO it (the chooser at its
parent), so a parent picks the child with the highest Q = value_sum / visits. A network result for a leaf
is for the leaf's side to move and is negated on the way up, one ply at a time. `draw_sum` adds up the
draw probability, so any visited node also has a win/draw/loss estimate.

Search step, driven from Python (selfplay.search.BatchedSearch):
  1. `select_leaves`: in every active tree, up to `leaves_per_tree` descents by PUCT. A descent ends at
     - a new node: the rules decide whether it is terminal (no legal move = loss; the position's
       repetitions, counted over the tree path and the game history, reaching the draw count; the
       no-progress count reaching its limit). A terminal node is backed up at once with its exact value
       and never goes to the network; otherwise it becomes pending, gets a virtual loss along its path and
       its planes are written into the batch;
     - a terminal node: backed up again with its exact value;
     - a pending node (another descent of this batch already chose it): the tree stops selecting for this
       batch, so a leaf is never evaluated twice.
  2. the caller evaluates the batch's planes with the network;
  3. `expand_and_backup`: each leaf gets its children (priors = softmax over the legal actions' logits, a
     from-to action shared by several moves split equally among them) and its value is backed up, the
     virtual loss removed.
A tree's search is complete when its root has `target` visits (in flight counted), or when its pool is
too full for another expansion (`full`).

PUCT at a node p choosing among children c (all from the chooser's view):
    score(c) = Q(c) + c_puct * prior(c) * sqrt(N(p)) / (1 + N(c))
with N counting in-flight visits, Q(c) = (value_sum(c) - virtual(c) * virtual_loss) / N(c), and for an
unvisited child the first-play urgency Q = Q(p) - fpu_reduction * sqrt(prior mass of visited children).
Ties go to the first child in move-generation order. `selfplay.reference_mcts` restates all of this in
plain Python; the tests hold the two to identical visit counts.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from zero import movegen
from zero.encoding import encode_position, legal_action_array, legal_policy

# Node states.
NEW, PENDING, EXPANDED, TERMINAL = 0, 1, 2, 3

Forest = namedtuple(
    "Forest",
    [
        # per node, shape [G, capacity]
        "black", "white", "kings",  # int64 board masks
        "black_to_move",  # bool
        "no_progress",  # int32 plies since the last capture or man move
        "parent",  # int32, -1 for the root
        "first_child", "n_children",  # int32; children are a contiguous block
        "move_from", "move_to",  # int32 bits of the move that led here
        "captured",  # int64 mask captured by that move
        "state",  # int8 NEW / PENDING / EXPANDED / TERMINAL
        "prior",  # float64
        "visits", "virtual",  # int32 completed and in-flight visits
        "value_sum", "draw_sum",  # float64, value from the view of the player who moved here
        "terminal_value",  # float64 exact value for the node's side to move (-1 loss, 0 draw)
        # per tree, shape [G]
        "used",  # int32 nodes allocated
        "target",  # int32 root visits at which the search is complete
        "full",  # bool the pool cannot take another expansion
        # game history before the root (positions since the last irreversible move), shape [G, H] / [G]
        "hist_black", "hist_white", "hist_kings", "hist_len",
    ],
)


def new_forest(games: int, capacity: int, history: int) -> Forest:
    """Empty pools for `games` trees of `capacity` nodes, with room for `history` earlier positions."""
    if capacity < movegen.MAX_MOVES + 1:
        raise ValueError(f"tree capacity {capacity} is below one full expansion ({movegen.MAX_MOVES + 1})")
    shape = (games, capacity)
    return Forest(
        black=np.zeros(shape, np.int64), white=np.zeros(shape, np.int64), kings=np.zeros(shape, np.int64),
        black_to_move=np.zeros(shape, np.bool_), no_progress=np.zeros(shape, np.int32),
        parent=np.full(shape, -1, np.int32), first_child=np.zeros(shape, np.int32),
        n_children=np.zeros(shape, np.int32), move_from=np.zeros(shape, np.int32),
        move_to=np.zeros(shape, np.int32), captured=np.zeros(shape, np.int64),
        state=np.zeros(shape, np.int8), prior=np.zeros(shape, np.float64),
        visits=np.zeros(shape, np.int32), virtual=np.zeros(shape, np.int32),
        value_sum=np.zeros(shape, np.float64), draw_sum=np.zeros(shape, np.float64),
        terminal_value=np.zeros(shape, np.float64),
        used=np.zeros(games, np.int32), target=np.zeros(games, np.int32), full=np.zeros(games, np.bool_),
        hist_black=np.zeros((games, history), np.int64), hist_white=np.zeros((games, history), np.int64),
        hist_kings=np.zeros((games, history), np.int64), hist_len=np.zeros(games, np.int32),
    )


@njit(cache=True)
def _clear_node(f, g, i):
    f.parent[g, i] = -1
    f.first_child[g, i] = 0
    f.n_children[g, i] = 0
    f.state[g, i] = NEW
    f.prior[g, i] = 0.0
    f.visits[g, i] = 0
    f.virtual[g, i] = 0
    f.value_sum[g, i] = 0.0
    f.draw_sum[g, i] = 0.0
    f.terminal_value[g, i] = 0.0


@njit(cache=True)
def reset_tree(f, g, black, white, kings, black_to_move, no_progress):
    """Make tree g a single new root holding the given position (the history is set separately)."""
    _clear_node(f, g, 0)
    f.black[g, 0] = black
    f.white[g, 0] = white
    f.kings[g, 0] = kings
    f.black_to_move[g, 0] = black_to_move
    f.no_progress[g, 0] = no_progress
    f.move_from[g, 0] = -1
    f.move_to[g, 0] = -1
    f.captured[g, 0] = 0
    f.prior[g, 0] = 1.0
    f.used[g] = 1
    f.full[g] = False


@njit(cache=True)
def repetitions(f, g, node):
    """How many times the node's position has occurred on its line (1 = first), counted back through
    the tree path and then the game history, over the plies since the last irreversible move."""
    b, w, k = f.black[g, node], f.white[g, node], f.kings[g, node]
    count = 1
    cur = node
    hist = f.hist_len[g]
    for back in range(1, f.no_progress[g, node] + 1):
        if cur != 0:
            cur = f.parent[g, cur]
            pb, pw, pk = f.black[g, cur], f.white[g, cur], f.kings[g, cur]
        else:
            hist -= 1
            if hist < 0:
                break
            pb, pw, pk = f.hist_black[g, hist], f.hist_white[g, hist], f.hist_kings[g, hist]
        # Same side to move only every second ply back.
        if back % 2 == 0 and pb == b and pw == w and pk == k:
            count += 1
    return count


@njit(cache=True)
def _best_child(f, g, p, c_puct, fpu_reduction, virtual_loss):
    first = f.first_child[g, p]
    end = first + f.n_children[g, p]
    sqrt_n = math.sqrt(f.visits[g, p] + f.virtual[g, p])
    visited_mass = 0.0
    for c in range(first, end):
        if f.visits[g, c] + f.virtual[g, c] > 0:
            visited_mass += f.prior[g, c]
    # The parent's value_sum is from its opponent's view: negate for the chooser.
    fpu = -f.value_sum[g, p] / f.visits[g, p] - fpu_reduction * math.sqrt(visited_mass)
    best = -np.inf
    best_c = first
    for c in range(first, end):
        n = f.visits[g, c] + f.virtual[g, c]
        if n > 0:
            q = (f.value_sum[g, c] - f.virtual[g, c] * virtual_loss) / n
        else:
            q = fpu
        score = q + c_puct * f.prior[g, c] * sqrt_n / (1 + n)
        if score > best:
            best = score
            best_c = c
    return best_c


@njit(cache=True)
def _backup(f, g, node, value, draw, in_flight):
    """Add one visit with `value` for the node's side to move up to the root; `in_flight` removes the
    virtual loss the descent added."""
    v = -value
    cur = node
    while cur >= 0:
        f.visits[g, cur] += 1
        f.value_sum[g, cur] += v
        f.draw_sum[g, cur] += draw
        f.virtual[g, cur] -= in_flight
        v = -v
        cur = f.parent[g, cur]


@njit(cache=True)
def _terminal_check(f, g, node, repetitions_for_draw, no_progress_plies, moves):
    """Decide a new node by the rules, in the order zero.game applies them; returns True if terminal.

    Also returns the position's repetition count, which the network input needs."""
    reps = repetitions(f, g, node)
    if movegen.count_moves(f.black[g, node], f.white[g, node], f.kings[g, node], f.black_to_move[g, node],
                           True, moves) == 0:
        f.terminal_value[g, node] = -1.0
    elif reps >= repetitions_for_draw or f.no_progress[g, node] >= no_progress_plies:
        f.terminal_value[g, node] = 0.0
    else:
        return False, reps
    f.state[g, node] = TERMINAL
    return True, reps


@njit(cache=True)
def select_leaves(f, active, leaves_per_tree, c_puct, fpu_reduction, fpu_reduction_root, virtual_loss,
                  repetitions_for_draw, no_progress_plies, leaf_game, leaf_node, planes, moves):
    """One selection pass over the active trees (see the module docstring); returns the number of leaves
    written to leaf_game / leaf_node / planes for the network."""
    n_leaves = 0
    for g in range(active.shape[0]):
        if not active[g]:
            continue
        taken = 0
        while taken < leaves_per_tree and not f.full[g] and f.visits[g, 0] + f.virtual[g, 0] < f.target[g]:
            node = 0
            while f.state[g, node] == EXPANDED:
                reduction = fpu_reduction_root if node == 0 else fpu_reduction
                node = _best_child(f, g, node, c_puct, reduction, virtual_loss)
            state = f.state[g, node]
            if state == PENDING:
                break
            if state == NEW:
                terminal, reps = _terminal_check(f, g, node, repetitions_for_draw, no_progress_plies, moves)
                if not terminal:
                    f.state[g, node] = PENDING
                    cur = node
                    while cur >= 0:
                        f.virtual[g, cur] += 1
                        cur = f.parent[g, cur]
                    leaf_game[n_leaves] = g
                    leaf_node[n_leaves] = node
                    encode_position(f.black[g, node], f.white[g, node], f.kings[g, node],
                                    f.black_to_move[g, node], f.no_progress[g, node], reps, planes[n_leaves])
                    n_leaves += 1
                    taken += 1
                    continue
            value = f.terminal_value[g, node]
            _backup(f, g, node, value, 1.0 if value == 0.0 else 0.0, 0)
    return n_leaves


@njit(cache=True)
def expand_and_backup(f, n_leaves, leaf_game, leaf_node, logits, wdl, moves, actions, priors):
    """Expand each evaluated leaf and back up its value (wdl: win, draw, loss for the leaf's side to move)."""
    for i in range(n_leaves):
        g = leaf_game[i]
        node = leaf_node[i]
        btm = f.black_to_move[g, node]
        b, w, k = f.black[g, node], f.white[g, node], f.kings[g, node]
        n = legal_action_array(b, w, k, btm, moves, actions)
        first = f.used[g]
        if first + n <= f.black.shape[1]:
            legal_policy(logits[i], actions, n, priors)
            for j in range(n):
                c = first + j
                _clear_node(f, g, c)
                frm, to, cap = moves[j, movegen.F_FROM], moves[j, movegen.F_TO], moves[j, movegen.F_CAPTURED]
                cb, cw, ck = movegen.make(b, w, k, btm, frm, to, cap)
                f.black[g, c] = cb
                f.white[g, c] = cw
                f.kings[g, c] = ck
                f.black_to_move[g, c] = not btm
                f.no_progress[g, c] = 0 if movegen.is_irreversible(k, frm, cap) else f.no_progress[g, node] + 1
                f.parent[g, c] = node
                f.move_from[g, c] = frm
                f.move_to[g, c] = to
                f.captured[g, c] = cap
                f.prior[g, c] = priors[j]
            f.used[g] = first + n
            f.first_child[g, node] = first
            f.n_children[g, node] = n
            f.state[g, node] = EXPANDED
        else:
            # No room: the leaf's value still counts, the node stays unexpanded and the search of this
            # tree ends here (until the next move's compaction frees the pool).
            f.state[g, node] = NEW
            f.full[g] = True
        _backup(f, g, node, np.float64(wdl[i, 0]) - np.float64(wdl[i, 2]), np.float64(wdl[i, 1]), 1)


@njit(cache=True)
def mix_root_noise(f, g, noise, fraction):
    """prior <- (1 - fraction) * prior + fraction * noise over the root's children (root expanded)."""
    first = f.first_child[g, 0]
    for j in range(f.n_children[g, 0]):
        f.prior[g, first + j] = (1.0 - fraction) * f.prior[g, first + j] + fraction * noise[j]


@njit(cache=True)
def advance_root(f, g, child, new_index):
    """Re-root tree g onto `child` (a child of the root), keeping its subtree and dropping the rest.

    new_index is scratch of at least `capacity` int32. Returns the number of nodes kept."""
    used = f.used[g]
    new_index[:used] = -1
    new_index[child] = 0
    kept = 1
    for i in range(child + 1, used):
        p = f.parent[g, i]
        if p >= child and new_index[p] >= 0:
            new_index[i] = kept
            kept += 1
    for i in range(child, used):
        j = new_index[i]
        if j < 0:
            continue
        f.black[g, j] = f.black[g, i]
        f.white[g, j] = f.white[g, i]
        f.kings[g, j] = f.kings[g, i]
        f.black_to_move[g, j] = f.black_to_move[g, i]
        f.no_progress[g, j] = f.no_progress[g, i]
        f.parent[g, j] = new_index[f.parent[g, i]] if i != child else -1
        f.n_children[g, j] = f.n_children[g, i]
        f.first_child[g, j] = new_index[f.first_child[g, i]] if f.n_children[g, i] > 0 else 0
        f.move_from[g, j] = f.move_from[g, i]
        f.move_to[g, j] = f.move_to[g, i]
        f.captured[g, j] = f.captured[g, i]
        f.state[g, j] = f.state[g, i]
        f.prior[g, j] = f.prior[g, i]
        f.visits[g, j] = f.visits[g, i]
        f.virtual[g, j] = f.virtual[g, i]
        f.value_sum[g, j] = f.value_sum[g, i]
        f.draw_sum[g, j] = f.draw_sum[g, i]
        f.terminal_value[g, j] = f.terminal_value[g, i]
    f.used[g] = kept
    f.full[g] = False
    return kept


@njit(cache=True)
def find_child(f, g, frm, to, captured):
    """Index of the root's child reached by the move frm -> to capturing `captured`, or -1."""
    if f.state[g, 0] != EXPANDED:
        return -1
    first = f.first_child[g, 0]
    for c in range(first, first + f.n_children[g, 0]):
        if f.move_from[g, c] == frm and f.move_to[g, c] == to and f.captured[g, c] == captured:
            return c
    return -1

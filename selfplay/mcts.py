"""PUCT search kernels over many trees at once: numba on plain arrays, one node pool per game in flight.

A `Forest` holds G trees, each a pool of `capacity` nodes in row g of 2-D arrays. The root of every tree is
node 0: after a move is played, `advance_root` compacts the chosen child's subtree to the front of the pool
(one linear pass; children are always allocated after their parent, so moving kept nodes forward in index
order never overwrites a node not yet moved).

Values. The value sum of a node is from the view of the player who moved INTO it (the chooser at its
parent), so a parent picks the child with the highest Q = value_sum / visits. A network result for a leaf
is for the leaf's side to move and is negated on the way up, one ply at a time. `draw_sum` adds up the
draw probabilities, so any visited node also has a win/draw/loss estimate.

Search step, driven from Python (selfplay.search.BatchedSearch):
  1. `select_leaves`: in every active tree, up to `leaves_per_tree` descents by PUCT. A descent ends at
     - a new node: the rules decide whether it is terminal (no legal move = loss; the position's
       repetitions, counted over the tree path and the game history, reaching the draw count; the
       no-progress count reaching its limit). A terminal node is backed up at once with its exact value
       and never goes to the network; otherwise it becomes pending, gets a virtual loss along its path and
       joins the batch (`encode_leaves` writes the batch's input planes);
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

# What the descent and the backup read sits together: one record of `stats` (float64) and one of `links`
# (int32) per node, so a block of sibling records is a few adjacent cache lines. With the fields in
# separate arrays a descent into a tree that is cold in the cache (hundreds of games in flight) cost a
# cache miss per field and level, several times the arithmetic.
VISITS, VIRTUAL, PRIOR, VALUE_SUM, DRAW_SUM = range(5)  # stats[g, node, field]
STAT_FIELDS = 5
PARENT, FIRST_CHILD, N_CHILDREN, STATE = range(4)  # links[g, node, field]
LINK_FIELDS = 4

Forest = namedtuple(
    "Forest",
    [
        # per node, [G, capacity, fields]
        "stats",  # float64: completed visits, in-flight visits, prior, value sum, draw-probability sum
        "links",  # int32: parent (-1 for the root), first child, number of children (a contiguous block), state
        # per node, [G, capacity]
        "black", "white", "kings",  # int64 board masks
        "black_to_move",  # bool
        "no_progress",  # int32 plies since the last capture or man move
        "move_from", "move_to",  # int32 bits of the move that led here
        "captured",  # int64 mask captured by that move
        "terminal_value",  # float64 exact value for the node's side to move (-1 loss, 0 draw)
        # per tree, [G]
        "used",  # int32 nodes allocated
        "target",  # int32 root visits at which the search is complete
        "full",  # bool the pool cannot take another expansion
        # game history before the root (positions since the last irreversible move), [G, H] / [G]
        "hist_black", "hist_white", "hist_kings", "hist_len",
    ],
)


def new_forest(games: int, capacity: int, history: int) -> Forest:
    """Empty pools for `games` trees of `capacity` nodes, with room for `history` earlier positions."""
    if capacity < movegen.MAX_MOVES + 1:
        raise ValueError(f"tree capacity {capacity} is below one full expansion ({movegen.MAX_MOVES + 1})")
    shape = (games, capacity)
    return Forest(
        stats=np.zeros(shape + (STAT_FIELDS,), np.float64), links=np.zeros(shape + (LINK_FIELDS,), np.int32),
        black=np.zeros(shape, np.int64), white=np.zeros(shape, np.int64), kings=np.zeros(shape, np.int64),
        black_to_move=np.zeros(shape, np.bool_), no_progress=np.zeros(shape, np.int32),
        move_from=np.zeros(shape, np.int32), move_to=np.zeros(shape, np.int32), captured=np.zeros(shape, np.int64),
        terminal_value=np.zeros(shape, np.float64),
        used=np.zeros(games, np.int32), target=np.zeros(games, np.int32), full=np.zeros(games, np.bool_),
        hist_black=np.zeros((games, history), np.int64), hist_white=np.zeros((games, history), np.int64),
        hist_kings=np.zeros((games, history), np.int64), hist_len=np.zeros(games, np.int32),
    )


@njit(cache=True)
def _clear_node(f, g, i, parent, prior):
    st = f.stats[g, i]
    st[VISITS] = 0.0
    st[VIRTUAL] = 0.0
    st[PRIOR] = prior
    st[VALUE_SUM] = 0.0
    st[DRAW_SUM] = 0.0
    ln = f.links[g, i]
    ln[PARENT] = parent
    ln[FIRST_CHILD] = 0
    ln[N_CHILDREN] = 0
    ln[STATE] = NEW
    f.terminal_value[g, i] = 0.0


@njit(cache=True)
def reset_tree(f, g, black, white, kings, black_to_move, no_progress):
    """Make tree g a single new root holding the given position (the history is set separately)."""
    _clear_node(f, g, 0, -1, 1.0)
    f.black[g, 0] = black
    f.white[g, 0] = white
    f.kings[g, 0] = kings
    f.black_to_move[g, 0] = black_to_move
    f.no_progress[g, 0] = no_progress
    f.move_from[g, 0] = -1
    f.move_to[g, 0] = -1
    f.captured[g, 0] = 0
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
            cur = f.links[g, cur, PARENT]
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
    """The PUCT choice at p, in one pass over the children: every unvisited child has the same Q (the
    first-play urgency), so the best of them is the first with the highest prior, and it is compared with
    the best visited child at the end (on equal scores the earlier child wins, as a plain scan would)."""
    first = f.links[g, p, FIRST_CHILD]
    end = first + f.links[g, p, N_CHILDREN]
    stats = f.stats[g]
    sqrt_n = math.sqrt(stats[p, VISITS] + stats[p, VIRTUAL])
    visited_mass = 0.0
    best = -np.inf
    best_c = -1
    unvisited_prior = -1.0
    unvisited_c = -1
    for c in range(first, end):
        n = stats[c, VISITS] + stats[c, VIRTUAL]
        prior = stats[c, PRIOR]
        if n > 0:
            visited_mass += prior
            q = (stats[c, VALUE_SUM] - stats[c, VIRTUAL] * virtual_loss) / n
            score = q + c_puct * prior * sqrt_n / (1 + n)
            if score > best:
                best = score
                best_c = c
        elif prior > unvisited_prior:
            unvisited_prior = prior
            unvisited_c = c
    if unvisited_c < 0:
        return best_c
    # The parent's value sum is from its opponent's view: negate for the chooser.
    fpu = -stats[p, VALUE_SUM] / stats[p, VISITS] - fpu_reduction * math.sqrt(visited_mass)
    score = fpu + c_puct * unvisited_prior * sqrt_n / (1 + 0.0)
    if best_c < 0 or score > best or (score == best and unvisited_c < best_c):
        return unvisited_c
    return best_c


@njit(cache=True)
def _backup(f, g, node, value, draw, in_flight):
    """Add one visit with `value` for the node's side to move up to the root; `in_flight` removes the
    virtual loss the descent added."""
    v = -value
    cur = node
    while cur >= 0:
        st = f.stats[g, cur]
        st[VISITS] += 1.0
        st[VALUE_SUM] += v
        st[DRAW_SUM] += draw
        st[VIRTUAL] -= in_flight
        v = -v
        cur = f.links[g, cur, PARENT]


@njit(cache=True)
def _terminal_check(f, g, node, repetitions_for_draw, no_progress_plies, moves):
    """Decide a new node by the rules, in the order zero.game applies them; returns (terminal?, the
    position's repetition count, which the network input needs)."""
    reps = repetitions(f, g, node)
    if movegen.count_moves(f.black[g, node], f.white[g, node], f.kings[g, node], f.black_to_move[g, node],
                           True, moves) == 0:
        f.terminal_value[g, node] = -1.0
    elif reps >= repetitions_for_draw or f.no_progress[g, node] >= no_progress_plies:
        f.terminal_value[g, node] = 0.0
    else:
        return False, reps
    f.links[g, node, STATE] = TERMINAL
    return True, reps


@njit(cache=True)
def select_leaves(f, active, leaves_per_tree, c_puct, fpu_reduction, fpu_reduction_root, virtual_loss,
                  repetitions_for_draw, no_progress_plies, leaf_game, leaf_node, leaf_reps, moves):
    """One selection pass over the active trees (see the module docstring). Writes the leaves for the
    network (tree, node, repetition count) and returns (their number, visits to terminal nodes made)."""
    n_leaves = 0
    n_terminal = 0
    for g in range(active.shape[0]):
        if not active[g]:
            continue
        taken = 0
        root = f.stats[g, 0]
        while taken < leaves_per_tree and not f.full[g] and root[VISITS] + root[VIRTUAL] < f.target[g]:
            node = 0
            while f.links[g, node, STATE] == EXPANDED:
                reduction = fpu_reduction_root if node == 0 else fpu_reduction
                node = _best_child(f, g, node, c_puct, reduction, virtual_loss)
            state = f.links[g, node, STATE]
            if state == PENDING:
                break
            if state == NEW:
                terminal, reps = _terminal_check(f, g, node, repetitions_for_draw, no_progress_plies, moves)
                if not terminal:
                    f.links[g, node, STATE] = PENDING
                    cur = node
                    while cur >= 0:
                        f.stats[g, cur, VIRTUAL] += 1.0
                        cur = f.links[g, cur, PARENT]
                    leaf_game[n_leaves] = g
                    leaf_node[n_leaves] = node
                    leaf_reps[n_leaves] = reps
                    n_leaves += 1
                    taken += 1
                    continue
            value = f.terminal_value[g, node]
            _backup(f, g, node, value, 1.0 if value == 0.0 else 0.0, 0.0)
            n_terminal += 1
    return n_leaves, n_terminal


@njit(cache=True)
def encode_leaves(f, n_leaves, leaf_game, leaf_node, leaf_reps, planes):
    """The network input planes of the selected leaves."""
    for i in range(n_leaves):
        g, node = leaf_game[i], leaf_node[i]
        encode_position(f.black[g, node], f.white[g, node], f.kings[g, node], f.black_to_move[g, node],
                        f.no_progress[g, node], leaf_reps[i], planes[i])


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
                _clear_node(f, g, c, node, priors[j])
                frm, to, cap = moves[j, movegen.F_FROM], moves[j, movegen.F_TO], moves[j, movegen.F_CAPTURED]
                cb, cw, ck = movegen.make(b, w, k, btm, frm, to, cap)
                f.black[g, c] = cb
                f.white[g, c] = cw
                f.kings[g, c] = ck
                f.black_to_move[g, c] = not btm
                f.no_progress[g, c] = 0 if movegen.is_irreversible(k, frm, cap) else f.no_progress[g, node] + 1
                f.move_from[g, c] = frm
                f.move_to[g, c] = to
                f.captured[g, c] = cap
            f.used[g] = first + n
            f.links[g, node, FIRST_CHILD] = first
            f.links[g, node, N_CHILDREN] = n
            f.links[g, node, STATE] = EXPANDED
        else:
            # No room: the leaf's value still counts, the node stays unexpanded and the search of this
            # tree ends here (until the next move's compaction frees the pool).
            f.links[g, node, STATE] = NEW
            f.full[g] = True
        _backup(f, g, node, np.float64(wdl[i, 0]) - np.float64(wdl[i, 2]), np.float64(wdl[i, 1]), 1.0)


@njit(cache=True)
def mix_root_noise(f, g, noise, fraction):
    """prior <- (1 - fraction) * prior + fraction * noise over the root's children (root expanded)."""
    first = f.links[g, 0, FIRST_CHILD]
    for j in range(f.links[g, 0, N_CHILDREN]):
        st = f.stats[g, first + j]
        st[PRIOR] = (1.0 - fraction) * st[PRIOR] + fraction * noise[j]


@njit(cache=True)
def advance_root(f, g, child, new_index):
    """Re-root tree g onto `child` (a child of the root), keeping its subtree and dropping the rest.

    new_index is scratch of at least `capacity` int32. Returns the number of nodes kept."""
    used = f.used[g]
    new_index[:used] = -1
    new_index[child] = 0
    kept = 1
    for i in range(child + 1, used):
        p = f.links[g, i, PARENT]
        if p >= child and new_index[p] >= 0:
            new_index[i] = kept
            kept += 1
    for i in range(child, used):
        j = new_index[i]
        if j < 0:
            continue
        f.stats[g, j] = f.stats[g, i]
        parent = f.links[g, i, PARENT]
        n_children = f.links[g, i, N_CHILDREN]
        f.links[g, j, PARENT] = new_index[parent] if i != child else -1
        f.links[g, j, FIRST_CHILD] = new_index[f.links[g, i, FIRST_CHILD]] if n_children > 0 else 0
        f.links[g, j, N_CHILDREN] = n_children
        f.links[g, j, STATE] = f.links[g, i, STATE]
        f.black[g, j] = f.black[g, i]
        f.white[g, j] = f.white[g, i]
        f.kings[g, j] = f.kings[g, i]
        f.black_to_move[g, j] = f.black_to_move[g, i]
        f.no_progress[g, j] = f.no_progress[g, i]
        f.move_from[g, j] = f.move_from[g, i]
        f.move_to[g, j] = f.move_to[g, i]
        f.captured[g, j] = f.captured[g, i]
        f.terminal_value[g, j] = f.terminal_value[g, i]
    f.used[g] = kept
    f.full[g] = False
    return kept


@njit(cache=True)
def find_child(f, g, frm, to, captured):
    """Index of the root's child reached by the move frm -> to capturing `captured`, or -1."""
    if f.links[g, 0, STATE] != EXPANDED:
        return -1
    first = f.links[g, 0, FIRST_CHILD]
    for c in range(first, first + f.links[g, 0, N_CHILDREN]):
        if f.move_from[g, c] == frm and f.move_to[g, c] == to and f.captured[g, c] == captured:
            return c
    return -1

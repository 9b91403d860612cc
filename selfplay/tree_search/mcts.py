"""PUCT search kernels over many trees at once: numba on plain arrays, one node pool per game in flight.

A `Forest` holds G trees, each a pool of `capacity` nodes in row g of its arrays. The root of every tree is
node 0: after a move is played, `advance_root` compacts the chosen child's subtree to the front of the pool
(one linear pass; children are always allocated after their parent, so moving kept nodes forward in index
order never overwrites a node not yet moved).

Values. The value sum of a node is from the view of the player who moved INTO it (the chooser at its
parent), so a parent picks the child with the highest Q = value_sum / visits. A network result for a leaf
is for the leaf's side to move and is negated on the way up, one ply at a time. The draw sum adds up the
draw probabilities, so any visited node also has a win/draw/loss estimate. The plies-left sum adds up the
plies to the end of the game: a leaf's from the network's moves-left head (0 where the evaluator has none),
a proven node's its exact PROVEN_PLIES, one more for each ply on the way up (the same for both sides, so
never negated); M = plies-left sum / visits is the plies a node has left on average below it.

Layout. A node is three records: `stats` (float64: what the descent and the backup read and write),
`links` (int32: tree structure and state) and `nodes` (int64: position and move, one 64-byte line). Sibling
records are contiguous, so a descent into a tree that is cold in the cache (hundreds of games in flight)
touches a few adjacent cache lines per level instead of one line per field. Few arrays also keep the
Python -> numba call cheap: each array argument costs the dispatcher time on every call.

Proven values (MCTS-solver). A node whose game value is known exactly is proven: PROVEN_VALUE holds it
for the node's side to move (+1 win, 0 draw, -1 loss) and PROVEN_PLIES the plies to the end with best play
(the winner hurrying, the loser delaying); PROVEN_PLIES is -1 while a node is unproven. Terminal nodes are
proven by the rules (plies 0), positions with few pieces by an endgame database (its distance). A proof climbs at once:
a node is a win when one child is a loss for its side to move (the fastest such win counts), and a loss or draw when
every child is proven (the best of
them; a loss counts the longest resistance). Repetition draws depend on the path, and so does a proof built
on one: that is sound here because a tree node stands for its whole line (the path plus the game history).

Search step, driven from Python (selfplay.tree_search.search.BatchedSearch):
  1. `select_leaves`: in every active tree whose root is unproven, up to `leaves_per_tree` descents by
     PUCT, which never enters a child proven lost for the chooser and counts a proven draw at its exact
     value. A descent ends at
     - a new node: the rules decide whether it is terminal (no legal move = loss; the position's
       repetitions, counted over the tree path and the game history, reaching the draw count; the
       no-progress count reaching its limit), and below the root an endgame database, when the search has
       one, gives the value of a position with few pieces. Such a node is proven, its proof climbs, it is backed up
       at once with its exact value and never goes to the network. A node with a single legal move is
       expanded on the spot, its one child taking all the prior, and the descent goes on through it: its
       value is its child's, so it costs no network call (captures are compulsory, so such nodes are
       common). With `resolve_captures`, so is a node where a capture is pending, its captures taking
       equal priors: its value comes from the quiet positions after the exchange. Any other new node gets its
       input planes written into the batch; below the root, where the search has a table of remembered
       answers (`selfplay.tree_search.answer_table`) that holds the position, the node is expanded and backed up with
       that answer at once, as step 3 would, and the descents go on (a call to the network carries only
       positions the table lacks, and a recalled one never waits under a virtual loss); otherwise it becomes
       pending, gets a virtual loss along its path and joins the batch;
     - a proven node: backed up again with its exact value;
     - a pending node (another descent of this batch already chose it): the tree stops selecting for this
       batch, so a leaf is never evaluated twice.
  2. the caller evaluates the batch's planes with the network (and asks for the plies left only where it
     weighs them: see the moves-left utility below);
  3. `expand_and_backup`: each leaf gets its children (priors = softmax over the legal actions' logits
     divided by the policy temperature, a from-to action shared by several moves split equally among them;
     equal priors where the logits give no distribution) and its value and plies left are backed up (0
     where the answer is not finite), the virtual loss removed.
A tree's search is complete when its root has `target` visits (in flight counted), when its root is
proven, or when its pool is too full for another expansion (`full`).

At the root of a tree searched by sequential halving (Gumbel AlphaZero's root, selfplay.tree_search.gumbel; the
caller gives each root child a visit limit, 0 for a child out of the contest), the descent takes the child
below its limit with the fewest visits (in flight counted), ties to the higher `root_score`; when every
child has reached its limit the tree stops selecting until the caller sets the next phase's limits.

PUCT at a node p choosing among children c (all from the chooser's view):
    score(c) = Q(c) + C(p) * prior(c) * sqrt(N(p)) / (1 + N(c))
    C(p) = c_puct + c_puct_growth * ln((N(p) + c_puct_base) / c_puct_base)
with N counting in-flight visits, Q(c) = (value_sum(c) - virtual(c) * virtual_loss + w * draw_sum(c)) / N(c)
(w for a proven draw), and for an unvisited child the first-play urgency Q = Q(p) - fpu_reduction *
sqrt(prior mass of visited children), Q(p) (its draws weighed the same) counting as 0 while p has no visit
of its own (a node expanded without the network). w is the search's draw_value where the root's side
chooses (0 by default); where the opponent does, it is the draw value's negation in a zero-sum search (the
default) or 0 for an opponent supposed to value a draw as a search without a draw value does. A child
proven lost for the chooser is never chosen.
Moves-left utility (lc0's, `moves_left_weight` > 0): where p's result is clear, |Q(p)| > threshold, a
visited unproven child c (one with a visit backed up) adds to its score
    U(c) = -sign(Q(c)) * weight * clamp(slope * (M(c) - M(p)), -1, 1) * max(0, |Q(c)| - threshold) / (1 - threshold)
so the side winning prefers the way with fewer plies left (a won ending is converted, not drawn out until
a mistake or the no-progress rule spoils it) and the side losing the way with more (a lost one is resisted,
its opponent given the most chances to go wrong). Bounded by the weight; 0 near the threshold, so it grows
continuously with Q; an unvisited child's urgency is unchanged (no M yet). Proven nodes need none of it:
their PROVEN_PLIES already hurry the winner and delay the loser exactly.
Ties go to the first child in move-generation order. `selfplay.tree_search.reference_mcts` restates all of this in
plain Python; the tests hold the two to identical visit counts.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from selfplay.tree_search.answer_table import recall, row_key
from zero.endgames import egdb
from zero.net.encoding import encode_position, legal_action_array, legal_policy
from zero.rules import movegen
from zero.rules.bitboard import popcount

# Node states.
NEW, PENDING, EXPANDED, TERMINAL = 0, 1, 2, 3

# stats[g, node, field], float64
VISITS, VIRTUAL, PRIOR, VALUE_SUM, DRAW_SUM, PROVEN_VALUE, PROVEN_PLIES, PLIES_SUM = range(8)
STATS_FIELDS = 8  # 64 bytes: a node's stats fill one cache line
# links[g, node, field], int32; children of a node are the block first_child .. first_child + n_children - 1
PARENT, FIRST_CHILD, N_CHILDREN, STATE = range(4)
# The most nodes a pool may have: links index them as int32.
MOST_NODES = 2**31 - 1
# nodes[g, node, field], int64; history[g, k, field] uses the first three
BLACK, WHITE, KINGS, BLACK_TO_MOVE, NO_PROGRESS, MOVE_FROM, MOVE_TO, CAPTURED = range(8)
# trees[g, field], int64
USED, TARGET, FULL, HISTORY_LEN = range(4)

Forest = namedtuple(
    "Forest",
    [
        "stats",  # [G, capacity, 8] visits, in-flight visits, prior, value sum, draw-probability sum, the
        #           proven value for the node's side to move (+1, 0, -1) with its plies (-1 = unproven), and
        #           the sum of the plies left backed up through the node
        "links",  # [G, capacity, 4] parent (-1 for the root), first child, number of children, state
        "nodes",  # [G, capacity, 8] board masks, side to move, no-progress plies, the move that led here
        "trees",  # [G, 4] nodes used, root visits at which the search is complete, pool full, history length
        "history",  # [G, H, 3] positions before the root since the last irreversible move (oldest first)
    ],
)


def new_forest(games: int, capacity: int, history: int) -> Forest:
    """Empty pools for `games` trees of `capacity` nodes, with room for `history` earlier positions."""
    if capacity < movegen.MAX_MOVES + 1:
        raise ValueError(f"tree capacity {capacity} is below one full expansion ({movegen.MAX_MOVES + 1})")
    return Forest(
        stats=np.zeros((games, capacity, STATS_FIELDS), np.float64),
        links=np.zeros((games, capacity, 4), np.int32),
        nodes=np.zeros((games, capacity, 8), np.int64),
        trees=np.zeros((games, 4), np.int64),
        history=np.zeros((games, history, 3), np.int64),
    )


@njit(cache=True)
def _clear_node(f, g, i, parent, prior):
    st = f.stats[g, i]
    st[VISITS] = 0.0
    st[VIRTUAL] = 0.0
    st[PRIOR] = prior
    st[VALUE_SUM] = 0.0
    st[DRAW_SUM] = 0.0
    st[PROVEN_VALUE] = 0.0
    st[PROVEN_PLIES] = -1.0
    st[PLIES_SUM] = 0.0
    ln = f.links[g, i]
    ln[PARENT] = parent
    ln[FIRST_CHILD] = 0
    ln[N_CHILDREN] = 0
    ln[STATE] = NEW


@njit(cache=True)
def reset_tree(f, g, black, white, kings, black_to_move, no_progress):
    """Make tree g a single new root holding the given position (the history is set separately)."""
    _clear_node(f, g, 0, -1, 1.0)
    nd = f.nodes[g, 0]
    nd[BLACK] = black
    nd[WHITE] = white
    nd[KINGS] = kings
    nd[BLACK_TO_MOVE] = black_to_move
    nd[NO_PROGRESS] = no_progress
    nd[MOVE_FROM] = -1
    nd[MOVE_TO] = -1
    nd[CAPTURED] = 0
    f.trees[g, USED] = 1
    f.trees[g, FULL] = 0


@njit(cache=True)
def repetitions(f, g, node):
    """How many times the node's position has occurred on its line (1 = first), counted back through
    the tree path and then the game history, over the plies since the last irreversible move."""
    nd = f.nodes[g, node]
    b, w, k = nd[BLACK], nd[WHITE], nd[KINGS]
    count = 1
    cur = node
    hist = f.trees[g, HISTORY_LEN]
    for back in range(1, nd[NO_PROGRESS] + 1):
        if cur != 0:
            cur = f.links[g, cur, PARENT]
            earlier = f.nodes[g, cur]
        else:
            hist -= 1
            if hist < 0:
                break
            earlier = f.history[g, hist]
        # Same side to move only every second ply back.
        if back % 2 == 0 and earlier[BLACK] == b and earlier[WHITE] == w and earlier[KINGS] == k:
            count += 1
    return count


@njit(cache=True)
def _moves_left_utility(q, child_m, parent_m, weight, slope, threshold):
    """What the plies left add to a visited child's score (see the module docstring): for a child whose Q
    (the chooser's view) is past the threshold, `weight` times the plies it has left beyond its parent's
    (times `slope`, clamped to [-1, 1]: a bounded effect, whatever the head says) times how far past the
    threshold Q is (0 at it, 1 at a certain result, so the utility grows continuously from nothing), its sign
    such that the winner prefers fewer plies left and the loser more."""
    strength = (abs(q) - threshold) / (1.0 - threshold)
    if strength <= 0.0:
        return 0.0
    effect = min(max(slope * (child_m - parent_m), -1.0), 1.0)
    if q > 0.0:
        return -weight * effect * strength
    return weight * effect * strength


@njit(cache=True)
def _best_child(f, g, p, c_puct, c_puct_growth, c_puct_base, fpu_reduction, virtual_loss, draw_worth,
                moves_left_weight, moves_left_slope, moves_left_threshold):
    """The PUCT choice at p, in one pass over the children: every unvisited child has the same Q (the
    first-play urgency), so the best of them is the first with the highest prior, and it is compared with
    the best visited child at the end (on equal scores the earlier child wins, as a plain scan would).
    Children proven lost for the chooser are passed over (p is unproven, so another child is not).
    `draw_worth`: what a draw adds to the chooser's Q (w in the module docstring), times the draw
    probability the child's visits found (1 for a proven draw). With `moves_left_weight` > 0 and p's Q
    past `moves_left_threshold` either way, each visited unproven child's score adds the moves-left utility
    (_moves_left_utility); a weight of 0 costs one comparison a call."""
    first = f.links[g, p, FIRST_CHILD]
    end = first + f.links[g, p, N_CHILDREN]
    if end == first + 1:
        return first  # a forced move (its node may have no visit yet, so no Q for the first-play urgency)
    stats = f.stats[g]
    n_parent = stats[p, VISITS] + stats[p, VIRTUAL]
    sqrt_n = math.sqrt(n_parent)
    if c_puct_growth > 0.0:  # a logarithm per descent step only where it changes the weight
        c_puct = c_puct + c_puct_growth * math.log((n_parent + c_puct_base) / c_puct_base)
    # The moves-left utility acts where p's result is clear (its Q for the chooser, as the first-play
    # urgency's below, past the threshold): there the plies left tell the ways to it apart, elsewhere the
    # value does. M = plies-left sum / visits, in-flight visits not counted (they have backed up none).
    moves_left = False
    parent_m = 0.0
    if moves_left_weight > 0.0 and stats[p, VISITS] > 0:
        q_p = (-stats[p, VALUE_SUM] + draw_worth * stats[p, DRAW_SUM]) / stats[p, VISITS]
        if abs(q_p) > moves_left_threshold:
            moves_left = True
            parent_m = stats[p, PLIES_SUM] / stats[p, VISITS]
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
            if stats[c, PROVEN_PLIES] >= 0:
                if stats[c, PROVEN_VALUE] > 0:  # a win for the child's side to move
                    continue
                q = draw_worth  # a proven draw (a proven loss of the child would have proven p)
                score = q + c_puct * prior * sqrt_n / (1 + n)
            else:
                q = (stats[c, VALUE_SUM] - stats[c, VIRTUAL] * virtual_loss + draw_worth * stats[c, DRAW_SUM]) / n
                score = q + c_puct * prior * sqrt_n / (1 + n)
                if moves_left and stats[c, VISITS] > 0:
                    score += _moves_left_utility(q, stats[c, PLIES_SUM] / stats[c, VISITS], parent_m,
                                                 moves_left_weight, moves_left_slope, moves_left_threshold)
            if score > best:
                best = score
                best_c = c
        elif prior > unvisited_prior:
            unvisited_prior = prior
            unvisited_c = c
    if unvisited_c < 0:
        return best_c
    # The parent's value sum is from its opponent's view: negate for the chooser. A parent expanded
    # without the network (a capture pending) has no value of its own until a descent below it returns.
    parent_q = 0.0
    if stats[p, VISITS] > 0:
        parent_q = (-stats[p, VALUE_SUM] + draw_worth * stats[p, DRAW_SUM]) / stats[p, VISITS]
    fpu = parent_q - fpu_reduction * math.sqrt(visited_mass)
    score = fpu + c_puct * unvisited_prior * sqrt_n / (1 + 0.0)
    if best_c < 0 or score > best or (score == best and unvisited_c < best_c):
        return unvisited_c
    return best_c


@njit(cache=True)
def _backup(f, g, node, value, draw, plies, in_flight):
    """Add one visit with `value` for the node's side to move up to the root, and `plies` left from the
    node (one more for each ply up: the plies left need no negation); `in_flight` removes the virtual loss
    the descent added."""
    v = -value
    m = plies
    cur = node
    while cur >= 0:
        st = f.stats[g, cur]
        st[VISITS] += 1.0
        st[VALUE_SUM] += v
        st[DRAW_SUM] += draw
        st[PLIES_SUM] += m
        st[VIRTUAL] -= in_flight
        v = -v
        m += 1.0
        cur = f.links[g, cur, PARENT]


@njit(cache=True)
def _decide_new(f, g, node, repetitions_for_draw, no_progress_plies, moves, tables):
    """Decide a new node by the rules, in the order zero.rules.game applies them, then by the endgame database
    (below the root: the root's moves are what a search is for); a terminal or database node is proven and
    never expanded. Returns (its number of legal moves, 0 for a node so decided; the position's repetition
    count, which the network input needs)."""
    reps = repetitions(f, g, node)
    nd = f.nodes[g, node]
    b, w, k, btm = nd[BLACK], nd[WHITE], nd[KINGS], nd[BLACK_TO_MOVE] != 0
    n_moves = movegen.count_moves(b, w, k, btm, True, moves)
    plies = 0.0
    if n_moves == 0:
        f.stats[g, node, PROVEN_VALUE] = -1.0
    elif reps >= repetitions_for_draw or nd[NO_PROGRESS] >= no_progress_plies:
        f.stats[g, node, PROVEN_VALUE] = 0.0
    else:
        value = egdb.UNKNOWN
        if node != 0 and popcount(b | w) <= tables.max_pieces:
            value, distance = egdb.probe(tables, b, w, k, btm)
        if value == egdb.UNKNOWN:
            return n_moves, reps
        # The database knows no repetition or no-progress draw (as the published ones): its distance is
        # the plies to the end of best play under the other rules.
        f.stats[g, node, PROVEN_VALUE] = value
        plies = max(distance, 0)
    f.stats[g, node, PROVEN_PLIES] = plies
    f.links[g, node, STATE] = TERMINAL
    return 0, reps


@njit(cache=True)
def _make_child(f, g, c, parent, prior, b, w, k, btm, moves, j):
    """Node c becomes the position after move j of the parent's position (b, w, k, btm)."""
    _clear_node(f, g, c, parent, prior)
    frm, to, cap = moves[j, movegen.F_FROM], moves[j, movegen.F_TO], moves[j, movegen.F_CAPTURED]
    child = f.nodes[g, c]
    child[BLACK], child[WHITE], child[KINGS] = movegen.make(b, w, k, btm, frm, to, cap)
    child[BLACK_TO_MOVE] = not btm
    child[NO_PROGRESS] = 0 if movegen.is_irreversible(k, frm, cap) else f.nodes[g, parent, NO_PROGRESS] + 1
    child[MOVE_FROM] = frm
    child[MOVE_TO] = to
    child[CAPTURED] = cap


@njit(cache=True)
def _expand_without_network(f, g, node, n_moves, resolve_captures, moves):
    """Expand a new node whose value is to come from below it rather than from the network: a node with a
    single legal move (its child takes all the prior), and with `resolve_captures` one where a capture is
    pending (equal priors: a static value of a position in the middle of an exchange is the least reliable
    one, so the descent goes on to the quiet position after it). Returns whether it did; False for any other
    node, and when the pool has no room."""
    nd = f.nodes[g, node]
    b, w, k, btm = nd[BLACK], nd[WHITE], nd[KINGS], nd[BLACK_TO_MOVE] != 0
    if n_moves != 1 and not (resolve_captures and movegen.can_capture(b, w, k, btm)):
        return False
    first = f.trees[g, USED]
    if first + n_moves > f.links.shape[1]:
        return False
    movegen.generate(b, w, k, btm, True, moves)
    for j in range(n_moves):
        _make_child(f, g, first + j, node, 1.0 / n_moves, b, w, k, btm, moves, j)
    f.trees[g, USED] = first + n_moves
    f.links[g, node, FIRST_CHILD] = first
    f.links[g, node, N_CHILDREN] = n_moves
    f.links[g, node, STATE] = EXPANDED
    return True


@njit(cache=True)
def _prove(f, g, p):
    """Prove expanded node p from its children if they settle it (see the module docstring); returns
    whether p is proven now."""
    first = f.links[g, p, FIRST_CHILD]
    win_plies = np.inf
    draw_plies = np.inf
    loss_plies = -1.0
    all_proven = True
    for c in range(first, first + f.links[g, p, N_CHILDREN]):
        st = f.stats[g, c]
        if st[PROVEN_PLIES] < 0:
            all_proven = False
            continue
        plies = st[PROVEN_PLIES] + 1.0
        if st[PROVEN_VALUE] < 0:
            win_plies = min(win_plies, plies)
        elif st[PROVEN_VALUE] == 0:
            draw_plies = min(draw_plies, plies)
        else:
            loss_plies = max(loss_plies, plies)
    st = f.stats[g, p]
    if win_plies < np.inf:
        st[PROVEN_VALUE], st[PROVEN_PLIES] = 1.0, win_plies
    elif not all_proven:
        return False
    elif draw_plies < np.inf:
        st[PROVEN_VALUE], st[PROVEN_PLIES] = 0.0, draw_plies
    else:
        st[PROVEN_VALUE], st[PROVEN_PLIES] = -1.0, loss_plies
    return True


@njit(cache=True)
def _propagate_proof(f, g, node):
    """A node was just proven: prove its ancestors while they are settled by it."""
    cur = f.links[g, node, PARENT]
    while cur >= 0 and f.stats[g, cur, PROVEN_PLIES] < 0 and _prove(f, g, cur):
        cur = f.links[g, cur, PARENT]


@njit(cache=True)
def _halving_child(f, g, limit, score):
    """Sequential halving's choice at tree g's root: the child below its visit limit with the fewest visits
    (in flight counted), ties to the higher score; -1 when every child has reached its limit."""
    first = f.links[g, 0, FIRST_CHILD]
    best = -1
    best_n = np.inf
    best_score = -np.inf
    for k in range(f.links[g, 0, N_CHILDREN]):
        n = f.stats[g, first + k, VISITS] + f.stats[g, first + k, VIRTUAL]
        if n >= limit[k]:
            continue
        if n < best_n or (n == best_n and score[k] > best_score):
            best, best_n, best_score = first + k, n, score[k]
    return best


@njit(cache=True)
def select_leaves(f, active, leaves_per_tree, c_puct, c_puct_growth, c_puct_base, fpu_reduction,
                  fpu_reduction_root, virtual_loss, resolve_captures, repetitions_for_draw, no_progress_plies,
                  leaf_game, leaf_node, leaf_reps, planes, moves, tables, halving, root_limit, root_score,
                  answers, actions, priors, policy_temperature, draw_value, opponent_draw_value,
                  moves_left_weight, moves_left_slope, moves_left_threshold):
    """One selection pass over the active trees (see the module docstring). Writes the leaves for the
    network (tree, node, repetition count, input planes) and returns (their number, visits to proven nodes
    made, leaves answered from `answers`). `tables` is an endgame database (zero.endgames.egdb.Tables;
    zero.endgames.egdb.no_tables() for none); `answers` a table of remembered network answers
    (selfplay.tree_search.answer_table.AnswerArrays; one of no slots for none), whose answers expand a leaf at
    `policy_temperature` as expand_and_backup's would. Trees with `halving[g]` choose at the root by
    sequential halving, with root child k's visit limit root_limit[g, k] and its tie-break
    root_score[g, k]. `draw_value`: what a draw is worth to the root's side to move, `opponent_draw_value`
    what the search supposes it is worth to the other side (_best_child). `moves_left_*`: the moves-left
    utility's weight (0: off), slope per ply and threshold on |Q| (_moves_left_utility)."""
    n_leaves = 0
    n_terminal = 0
    n_recalled = 0
    for g in range(active.shape[0]):
        if not active[g]:
            continue
        taken = 0
        root = f.stats[g, 0]
        tree = f.trees[g]
        while (taken < leaves_per_tree and tree[FULL] == 0 and root[VISITS] + root[VIRTUAL] < tree[TARGET]
               and root[PROVEN_PLIES] < 0):
            node = 0
            reps = 0
            roots_side = True  # choosing at `node`: the root's side, then each in turn
            while True:
                if f.stats[g, node, PROVEN_PLIES] >= 0:
                    break
                state = f.links[g, node, STATE]
                if state == EXPANDED:
                    if node == 0 and halving[g]:
                        node = _halving_child(f, g, root_limit[g], root_score[g])
                        roots_side = False
                        if node < 0:
                            break
                        continue
                    reduction = fpu_reduction_root if node == 0 else fpu_reduction
                    node = _best_child(f, g, node, c_puct, c_puct_growth, c_puct_base, reduction, virtual_loss,
                                       draw_value if roots_side else opponent_draw_value, moves_left_weight,
                                       moves_left_slope, moves_left_threshold)
                    roots_side = not roots_side
                    continue
                if state == NEW:
                    n_moves, reps = _decide_new(f, g, node, repetitions_for_draw, no_progress_plies, moves, tables)
                    if n_moves == 0:
                        _propagate_proof(f, g, node)
                    elif _expand_without_network(f, g, node, n_moves, resolve_captures, moves):
                        continue
                break
            if node < 0:
                break  # every root child has had this phase's visits
            if f.stats[g, node, PROVEN_PLIES] >= 0:
                value = f.stats[g, node, PROVEN_VALUE]
                _backup(f, g, node, value, 1.0 if value == 0.0 else 0.0, f.stats[g, node, PROVEN_PLIES], 0.0)
                n_terminal += 1
                continue
            if f.links[g, node, STATE] == PENDING:
                break
            nd = f.nodes[g, node]
            encode_position(nd[BLACK], nd[WHITE], nd[KINGS], nd[BLACK_TO_MOVE] != 0, nd[NO_PROGRESS], reps,
                            planes[n_leaves])
            # Never the root: the caller mixes its noise into the root's priors, or begins its halving, once
            # a network call has expanded it, before any descent below it. No table (no slots): no key to make.
            slot = -1
            if node != 0 and answers.keys.shape[0] > 0:
                slot = recall(answers, row_key(planes[n_leaves].reshape(-1).view(np.uint32)))
            if slot >= 0:
                _expand_leaf(f, g, node, answers.logits[slot], answers.wdl[slot], answers.plies[slot], 0.0, moves,
                             actions, priors, policy_temperature)
                n_recalled += 1
                continue
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
    return n_leaves, n_terminal, n_recalled


@njit(cache=True)
def _expand_leaf(f, g, node, logits, wdl, plies, in_flight, moves, actions, priors, policy_temperature):
    """Expand a leaf with the network's answer for it (logits; wdl: win, draw, loss for its side to move;
    plies: the plies left in the game, 0 where the evaluator has no moves-left head) and back up its value;
    its children's priors are the policy at `policy_temperature`. `in_flight`: 1.0 for a leaf that waited
    for the network under a virtual loss, 0.0 for one answered at once."""
    nd = f.nodes[g, node]
    b, w, k, btm = nd[BLACK], nd[WHITE], nd[KINGS], nd[BLACK_TO_MOVE] != 0
    n = legal_action_array(b, w, k, btm, moves, actions)
    first = f.trees[g, USED]
    if first + n <= f.links.shape[1]:
        legal_policy(logits, actions, n, priors, policy_temperature)
        for j in range(n):
            _make_child(f, g, first + j, node, priors[j], b, w, k, btm, moves, j)
        f.trees[g, USED] = first + n
        f.links[g, node, FIRST_CHILD] = first
        f.links[g, node, N_CHILDREN] = n
        f.links[g, node, STATE] = EXPANDED
    else:
        # No room: the leaf's value still counts, the node stays unexpanded and the search of this
        # tree ends here (until the next move's compaction frees the pool).
        f.links[g, node, STATE] = NEW
        f.trees[g, FULL] = 1
    value = np.float64(wdl[0]) - np.float64(wdl[2])
    draw = np.float64(wdl[1])
    if not (np.isfinite(value) and np.isfinite(draw)):
        # A diverged network's answer counts as an even one: a NaN in a value sum makes every
        # score above it NaN, and a descent that can choose no child never ends.
        value, draw = 0.0, 0.0
    m = np.float64(plies)
    if not (np.isfinite(m) and m > 0.0):
        m = 0.0  # the same for the plies left (a head's answer is never below 0)
    _backup(f, g, node, value, draw, m, in_flight)


@njit(cache=True)
def expand_and_backup(f, n_leaves, leaf_game, leaf_node, logits, wdl, plies, moves, actions, priors,
                      policy_temperature):
    """Expand each evaluated leaf and back up its value and plies left (_expand_leaf)."""
    for i in range(n_leaves):
        _expand_leaf(f, leaf_game[i], leaf_node[i], logits[i], wdl[i], plies[i], 1.0, moves, actions, priors,
                     policy_temperature)


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
    used = f.trees[g, USED]
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
        f.nodes[g, j] = f.nodes[g, i]
        parent = f.links[g, i, PARENT]
        n_children = f.links[g, i, N_CHILDREN]
        f.links[g, j, PARENT] = new_index[parent] if i != child else -1
        f.links[g, j, FIRST_CHILD] = new_index[f.links[g, i, FIRST_CHILD]] if n_children > 0 else 0
        f.links[g, j, N_CHILDREN] = n_children
        f.links[g, j, STATE] = f.links[g, i, STATE]
    f.trees[g, USED] = kept
    f.trees[g, FULL] = 0
    return kept


@njit(cache=True)
def find_child(f, g, frm, to, captured):
    """Index of the root's child reached by the move frm -> to capturing `captured`, or -1."""
    if f.links[g, 0, STATE] != EXPANDED:
        return -1
    first = f.links[g, 0, FIRST_CHILD]
    for c in range(first, first + f.links[g, 0, N_CHILDREN]):
        nd = f.nodes[g, c]
        if nd[MOVE_FROM] == frm and nd[MOVE_TO] == to and nd[CAPTURED] == captured:
            return c
    return -1

"""The one alpha-beta search with either evaluation, the classical features or the distilled network: the same
scores as a full-width minimax over that evaluation (the distilled one's accumulators carried down the tree
as the plain recomputation gives them), whatever the table and the ordering do, database leaves exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from zero.alphabeta import reference as ref
from zero.alphabeta import search as ab
from zero.alphabeta.evaluations import (
    ClassicalEvaluation, DistilledEvaluation, enter_child, enter_root, leaf_score, new_work,
)
from zero.alphabeta.player import DistilledPlayer, Selectivity
from zero.distilled import kernels as dk
from zero.distilled.model import DistilledShape, random_eval
from zero.endgames.egdb_build import ensure_built
from zero.rules.game import Position
from zero.rules.notation import fen_to_position
from zero.yardsticks.classical import ClassicalPlayer, load_eval
from positions import ENDGAMES, random_position

DISTILLED = random_eval(DistilledShape(accumulator=32, hidden=16, buckets=2), seed=11)
CLASSICAL = load_eval()


def distilled_leaf(pos: Position) -> int:
    """The distilled evaluation's score of a position, its accumulators recomputed from the board."""
    return int(dk.score(DISTILLED.logits([pos.black], [pos.white], [pos.kings], [pos.black_to_move])[0]))


def classical_leaf(pos: Position) -> int:
    return ref.evaluate(pos, CLASSICAL.weights)


def distilled_player(depth: int, selectivity: Selectivity = Selectivity.none(), **kw) -> DistilledPlayer:
    """The plain search unless told (no selectivity), whose score is the minimax's."""
    return DistilledPlayer(depth, evaluation=DISTILLED, tt_bits=12, selectivity=selectivity, **kw)


def classical_player(depth: int, **kw) -> ClassicalPlayer:
    return ClassicalPlayer(depth, evaluation=CLASSICAL, tt_bits=12, **kw)


EVALUATIONS = {"distilled": (distilled_player, distilled_leaf), "classical": (classical_player, classical_leaf)}
KERNEL_VALUES = {"distilled": DistilledEvaluation(*DISTILLED.arrays), "classical": ClassicalEvaluation(CLASSICAL.weights)}


@pytest.mark.parametrize("evaluation", EVALUATIONS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_evaluation_type_runs_its_own_kernels(evaluation, seed):
    """The three calls the search makes of an evaluation (zero.alphabeta.evaluations), chosen by its type: taken
    into the root, then down a game's moves one ply at a time (captures and crownings among them), every
    position's leaf score is that evaluation's score of the position computed afresh."""
    value, leaf = KERNEL_VALUES[evaluation], EVALUATIONS[evaluation][1]
    work = new_work(value, 80)
    pos = random_position(seed, 4)
    enter_root(pos.black, pos.white, pos.kings, value, work)
    for ply in range(60):
        assert leaf_score(pos.black, pos.white, pos.kings, pos.black_to_move, ply, value, work) == leaf(pos)
        moves = pos.legal_moves()
        if not moves:
            break
        child = pos.play(moves[(seed * 7 + ply) % len(moves)])
        enter_child(ply, pos.black, pos.white, pos.kings, child.black, child.white, child.kings, value, work)
        pos = child
    assert ply > 20


@pytest.mark.parametrize("evaluation", EVALUATIONS)
@pytest.mark.parametrize("fen", ENDGAMES + ["B:W18,K26,31:B9,K14,22", "B:W21-32:B1-12"])
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_the_search_equals_full_width_minimax(evaluation, fen, depth):
    player, leaf = EVALUATIONS[evaluation]
    pos = fen_to_position(fen)
    move, score, _ = player(depth, seed=depth).search(pos)
    assert score == ref.minimax(pos, depth, leaf)
    # The chosen move is one of the best: its own minimax value (one ply less, from the mover) is the score.
    assert -ref.minimax(pos.play(move), depth - 1, leaf, ply=1) == score


@pytest.mark.parametrize("evaluation", EVALUATIONS)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), plies=st.integers(0, 90), depth=st.integers(1, 3))
def test_the_search_equals_minimax_on_game_positions_with_captures_and_kings(evaluation, seed, plies, depth):
    player, leaf = EVALUATIONS[evaluation]
    pos = random_position(seed, plies)
    if not pos.legal_moves():
        return
    move, score, _ = player(depth, seed=seed).search(pos)
    assert score == ref.minimax(pos, depth, leaf)
    assert move in pos.legal_moves()


THREATS_ONLY = Selectivity(reductions=0, deeper_cuts=False, threat_extensions=True)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), plies=st.integers(0, 90), depth=st.integers(1, 3))
def test_threat_extensions_equal_the_minimax_that_looks_past_threatened_leaves(seed, plies, depth):
    pos = random_position(seed, plies)
    if not pos.legal_moves():
        return
    for use_ordering in (True, False):
        player = distilled_player(depth, THREATS_ONLY, seed=seed, use_tt=False, use_ordering=use_ordering)
        _, score, _ = player.search(pos)
        assert score == ref.minimax(pos, depth, distilled_leaf, extensions=2, threats=True)


@pytest.mark.parametrize("fen", ["B:WK1,18,24,25,26,28,30:B4,7,8,10,11,13", "B:WK4,15,20,23,25,26,29:B3,5,6,7,12"])
def test_a_threatened_leaf_is_searched_a_ply_deeper(fen):
    """In these positions some of depth 1's leaves are threatened with a capture: the extended search's score
    is the minimax that looks a ply past them, and not the plain one's."""
    pos = fen_to_position(fen)
    plain = distilled_player(1).search(pos)[1]
    extended = distilled_player(1, THREATS_ONLY).search(pos)[1]
    assert plain == ref.minimax(pos, 1, distilled_leaf)
    assert extended == ref.minimax(pos, 1, distilled_leaf, extensions=2, threats=True) != plain


RECAPTURES_ONLY = Selectivity(reductions=0, deeper_cuts=False, recapture_extensions=True)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), plies=st.integers(0, 90), depth=st.integers(1, 4))
def test_recapture_extensions_equal_the_minimax_that_searches_an_answered_capture_a_ply_deeper(seed, plies, depth):
    pos = random_position(seed, plies)
    assume(pos.legal_moves())
    for use_ordering in (True, False):
        player = distilled_player(depth, RECAPTURES_ONLY, seed=seed, use_tt=False, use_ordering=use_ordering)
        assert player.search(pos)[1] == ref.minimax(pos, depth, distilled_leaf, extensions=2, recaptures=True)


def test_a_recapture_is_searched_a_ply_deeper():
    """Positions where an exchange starts within depth 2: the extended search's score is the minimax that
    searches the answering capture a ply deeper, and not the plain one's."""
    changed = 0
    for seed in range(40):
        pos = random_position(seed, 24)
        if not pos.legal_moves():
            continue
        plain = distilled_player(2).search(pos)[1]
        extended = distilled_player(2, RECAPTURES_ONLY, use_tt=False).search(pos)[1]
        assert extended == ref.minimax(pos, 2, distilled_leaf, extensions=2, recaptures=True)
        changed += extended != plain
    assert changed > 0


def verified(margin: int) -> Selectivity:
    return Selectivity(reductions=0, deeper_cuts=False, verified_pruning=margin)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), plies=st.integers(0, 60), depth=st.integers(5, 6), margin=st.sampled_from([1, 30, 100]))
def test_verified_pruning_equals_its_plain_twin(seed, plies, depth, margin):
    """The kernel's verified pruning (the table and the ordering off) is the alpha-beta of reference.verified_alphabeta,
    cut for cut."""
    pos = random_position(seed, plies)
    assume(pos.legal_moves())
    order = np.random.default_rng(seed).permutation(len(pos.legal_moves())).astype(np.int64)
    player = distilled_player(depth, verified(margin), use_tt=False, use_ordering=False)
    score, _, complete = player._iteration(pos, depth, order, 1 << 40)
    assert complete
    assert score == ref.verified_alphabeta(pos, depth, distilled_leaf, margin, list(order))


def test_verified_pruning_cuts_nodes_and_keeps_the_plain_score_out_of_its_reach():
    """With a margin nothing clears, the search is the plain one, node for node; with a small one it cuts
    nodes (counted) and visits fewer, and searches at full depth the nodes whose shallower search fell short."""
    cuts, fails, fewer = 0, 0, 0
    for seed in range(8):
        pos = random_position(seed, 16)
        plain = distilled_player(7, seed=seed).search(pos)
        unreachable = distilled_player(7, verified(100_000), seed=seed).search(pos)
        assert unreachable == plain
        player = distilled_player(7, verified(20), seed=seed)
        pruned = player.search(pos)
        cuts += int(player._state["counters"][ab.C_VERIFIED_CUTS])
        fails += int(player._state["counters"][ab.C_VERIFY_FAILS])
        fewer += pruned[2] < plain[2]
    assert cuts > 0 and fails > 0 and fewer > 0


def test_the_twin_sees_verifications_that_cut_and_that_fall_short():
    """The positions of the twin test exercise both paths of the kernel: nodes cut by their shallower search,
    and nodes searched again at full depth (their scores held equal to reference.verified_alphabeta there)."""
    cuts, fails = 0, 0
    for seed in range(12):
        pos = random_position(seed, 2 * seed)
        order = np.random.default_rng(seed).permutation(len(pos.legal_moves())).astype(np.int64)
        player = distilled_player(5, verified(30), use_tt=False, use_ordering=False)
        score, _, _ = player._iteration(pos, 5, order, 1 << 40)
        assert score == ref.verified_alphabeta(pos, 5, distilled_leaf, 30, list(order))
        cuts += int(player._state["counters"][ab.C_VERIFIED_CUTS])
        fails += int(player._state["counters"][ab.C_VERIFY_FAILS])
    assert cuts > 0 and fails > 0


@pytest.mark.parametrize("evaluation", EVALUATIONS)
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), plies=st.integers(0, 80), depth=st.integers(1, 6))
def test_table_and_ordering_change_only_the_speed(evaluation, seed, plies, depth):
    player = EVALUATIONS[evaluation][0]
    pos = random_position(seed, plies)
    if not pos.legal_moves():
        return
    scores = {player(depth, seed=seed, use_tt=t, use_ordering=o).search(pos)[1] for t in (True, False)
              for o in (True, False)}
    assert len(scores) == 1


ASPIRATION_AND_COUNTERMOVES = [Selectivity(reductions=0, deeper_cuts=False, aspiration=width, countermoves=counter)
                               for width in (0, 1, 40) for counter in (False, True)]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), plies=st.integers(0, 80), depth=st.integers(5, 7))
def test_aspiration_windows_and_counter_moves_change_only_the_speed(seed, plies, depth):
    # A window one unit wide makes nearly every iteration fail low or high and be searched again: the score
    # is still the plain search's (the minimax's, which test_the_search_equals_... hold it to).
    pos = random_position(seed, plies)
    assume(pos.legal_moves())
    scores = {distilled_player(depth, selectivity, seed=seed).search(pos)[1]
              for selectivity in ASPIRATION_AND_COUNTERMOVES}
    assert len(scores) == 1


def test_counter_moves_change_the_order():
    # The score is the same (above); the nodes show that the counter-moves were tried first somewhere.
    changed = 0
    for seed in range(6):
        pos = random_position(seed, 20)
        nodes = {distilled_player(7, Selectivity(reductions=0, deeper_cuts=False, countermoves=c), seed=seed).search(pos)[2]
                 for c in (False, True)}
        changed += len(nodes) > 1
    assert changed > 0


def test_an_iteration_that_fails_low_and_runs_out_of_nodes_names_no_move():
    """An aspiration window above the true score makes every root move fail low; stopped before the search
    again, the iteration has no move it knows best (the player keeps the last iteration's); given the nodes,
    it finds the true score below the window."""
    pos = fen_to_position("B:W18,K26,31:B9,K14,22")
    player = distilled_player(6, Selectivity(reductions=0, deeper_cuts=False, aspiration=1))
    order = np.arange(len(pos.legal_moves()), dtype=np.int64)
    draws = np.zeros(len(order), dtype=np.int64)
    true = ref.minimax(pos, 6, distilled_leaf)
    budgets = iter([1 << 40, None])  # the window's search completes; no time is left for the second
    assert player._deepening(pos, 6, order, draws, true + 1_000, lambda: next(budgets)) == (0, -1, False)
    budgets = iter([50, None])  # the window's search itself is cut short, still below its floor
    score, row, complete = player._deepening(pos, 6, order, draws, true + 1_000, lambda: next(budgets))
    assert (row, complete) == (-1, False)
    score, row, complete = player._deepening(pos, 6, order, draws, true + 1_000, lambda: 1 << 40)
    assert (score, complete) == (true, True) and row >= 0
    score, row, complete = player._deepening(pos, 6, order, draws, true - 1_000, lambda: 1 << 40)  # fails high
    assert (score, complete) == (true, True) and row >= 0


@pytest.mark.parametrize("fen", ["W:WK10,K19:BK14,23", "B:W21,K30:BK6,K27", "B:W18,K26:B9,K14"])
def test_database_positions_are_exact_leaves_of_the_distilled_search(fen):
    egdb = ensure_built(4)
    pos = fen_to_position(fen)
    for depth in (1, 3):
        _, score, _ = distilled_player(depth, egdb=egdb).search(pos)
        assert score == ref.minimax(pos, depth, distilled_leaf, egdb)


def test_the_distilled_player_moves_on_the_clock():
    start = Position.initial()
    logits = DISTILLED.logits(*zip(*[(p.black, p.white, p.kings, p.black_to_move)
                                     for p in (start, start.play(start.legal_moves()[0]))]))
    assert np.isfinite(logits).all() and logits[0] != logits[1]
    p = DistilledPlayer(seconds=0.05, evaluation=DISTILLED, tt_bits=12)
    move, _, nodes = p.search(start)
    assert move in start.legal_moves() and nodes > 0 and p.last_depth >= 1


@pytest.mark.parametrize("evaluation", EVALUATIONS)
def test_reductions_and_deeper_cuts_prune_the_tree_and_still_choose_legal_moves(evaluation):
    player = EVALUATIONS[evaluation][0]
    plain_nodes = selective_nodes = 0
    for seed in range(6):
        pos = random_position(seed, 10 + 6 * seed)
        if not pos.legal_moves():
            continue
        _, _, n = player(7, seed=seed).search(pos)
        move, _, m = player(7, seed=seed, selectivity=Selectivity()).search(pos)
        plain_nodes += n
        selective_nodes += m
        assert move in pos.legal_moves()
    assert selective_nodes < plain_nodes


def test_the_search_lets_other_threads_run():
    # A server's other requests (the page, other games) are answered while its engine searches: the kernel
    # releases the interpreter's lock (before, a 3 s search at depth 20 held every other thread for 1.65 s).
    from zero.alphabeta import search

    assert search.search_root.targetoptions.get("nogil") is True

"""The evaluator cache: the same answers as the evaluator it wraps, fewer calls. The evaluator whose values
are a short search's."""

from __future__ import annotations

import numpy as np
import pytest

from counting import Counting
from selfplay.tree_search.analysis import analyse
from selfplay.tree_search.answer_table import WAYS, ReferenceAnswerTable
from selfplay.tree_search.evaluators import CachedEvaluator, HashEvaluator, SearchedValueEvaluator, gives_plies_left
from selfplay.tree_search.search import SearchConfig
from zero.net.encoding import encode
from zero.rules.game import Game, Position


def positions(n: int) -> np.ndarray:
    game, out = Game(), []
    while len(out) < n:
        out.append(encode(game.position))
        game.play(game.legal_moves()[len(out) % len(game.legal_moves())])
    return np.stack(out)


def test_searched_values_are_the_searchs_of_each_position_and_the_policy_the_wrapped_evaluators():
    # MCTS leaves valued by a short search (the spec's :distilledN). The planes give the position turned to
    # the side to move's view; the search of that must be the search of the real position, White to move too.
    from zero.alphabeta.player import DistilledPlayer, Selectivity
    from zero.distilled.model import random_eval

    # A plain search: its score at a fixed depth is the minimax's, whatever order the moves come in.
    searcher = DistilledPlayer(3, evaluation=random_eval(seed=1), selectivity=Selectivity.none())
    game, real = Game(), []
    while len(real) < 16:
        real.append(game.position)
        game.play(game.legal_moves()[(3 * len(real)) % len(game.legal_moves())])
    planes = np.stack([encode(position) for position in real])
    assert {position.black_to_move for position in real} == {True, False}
    evaluator = SearchedValueEvaluator(HashEvaluator(seed=2), lambda own, opponent, kings: searcher.expected_score(
        Position(own, opponent, kings, True)))
    assert gives_plies_left(evaluator)
    logits, wdl, plies = evaluator.predict(planes)
    want_logits, _, want_plies = HashEvaluator(seed=2).predict(planes)
    np.testing.assert_array_equal(logits, want_logits)
    np.testing.assert_array_equal(plies, want_plies)
    assert np.all(wdl >= 0) and np.allclose(wdl.sum(axis=1), 1)
    want = np.array([2 * searcher.expected_score(position) - 1 for position in real])
    np.testing.assert_allclose(wdl[:, 0] - wdl[:, 2], want, atol=1e-6)
    assert len(set(np.round(want, 6))) > 8  # the values differ from position to position


def test_answers_equal_the_wrapped_evaluators_row_for_row():
    planes = positions(12)
    batch = np.concatenate([planes, planes[::3], planes[:2]])  # repeats inside one batch, too
    inner = Counting(HashEvaluator(seed=4))
    cached = CachedEvaluator(inner, capacity=100)
    for _ in range(2):
        logits, wdl = cached.evaluate(batch)
        want_logits, want_wdl = HashEvaluator(seed=4).evaluate(batch)
        np.testing.assert_array_equal(logits, want_logits)
        np.testing.assert_array_equal(wdl, want_wdl)
    assert inner.positions == 12 and cached.misses == 12 and cached.hits == 2 * len(batch) - 12


def test_the_cache_keeps_the_plies_left_with_its_answers():
    # A search that weighs the plies left recalls them from the table with the rest of an answer. A wrapped
    # evaluator with the head is asked through `predict` even by `evaluate`, so the table never holds an
    # answer without them; one without the head has none to give.
    planes = positions(10)
    cached = CachedEvaluator(HashEvaluator(seed=6), capacity=100)
    cached.evaluate(planes[:6])
    logits, wdl, plies = cached.predict(planes)
    want_logits, want_wdl, want_plies = HashEvaluator(seed=6).predict(planes)
    np.testing.assert_array_equal(logits, want_logits)
    np.testing.assert_array_equal(wdl, want_wdl)
    np.testing.assert_array_equal(plies, want_plies)
    assert gives_plies_left(cached) and cached.hits == 6 and len(set(plies.tolist())) == len(planes)
    no_head = CachedEvaluator(Counting(HashEvaluator(seed=6)))
    assert not gives_plies_left(no_head) and no_head.predict(planes)[2] is None


def test_the_least_recently_used_positions_are_forgotten_past_capacity():
    planes = positions(6)
    inner = Counting(HashEvaluator())
    cached = CachedEvaluator(inner, capacity=4)
    cached.evaluate(planes[:4])
    cached.evaluate(planes[:1])  # position 0 is now the most recently used
    cached.evaluate(planes[4:6])  # evicts positions 1 and 2
    inner.positions = 0
    cached.evaluate(planes[[0, 3, 4, 5]])
    assert inner.positions == 0
    cached.evaluate(planes[1:3])
    assert inner.positions == 2
    with pytest.raises(ValueError):
        CachedEvaluator(inner, capacity=0)


def test_a_batch_larger_than_the_cache_is_answered_whole_and_its_last_positions_kept():
    planes = positions(6)
    inner = Counting(HashEvaluator(seed=2))
    cached = CachedEvaluator(inner, capacity=4)
    logits, wdl = cached.evaluate(planes)
    want_logits, want_wdl = HashEvaluator(seed=2).evaluate(planes)
    np.testing.assert_array_equal(logits, want_logits)
    np.testing.assert_array_equal(wdl, want_wdl)
    inner.positions = 0
    logits, _ = cached.evaluate(planes[2:])
    assert inner.positions == 0
    np.testing.assert_array_equal(logits, want_logits[2:])


def test_a_search_through_the_cache_is_the_same_search_with_fewer_network_calls():
    # One leaf a call: a leaf the table answers is expanded at once, as the network's answer would expand
    # it in its own call. (With more, the remembered ones no longer wait in the batch: test_mcts holds
    # that search to the reference's.)
    config = SearchConfig(leaves_per_tree=1)
    game = Game(start=Position.initial())
    plain = analyse(game, HashEvaluator(seed=1), 400, config)
    inner = Counting(HashEvaluator(seed=1))
    cached = CachedEvaluator(inner)
    first = analyse(game, cached, 400, config)
    assert [(m.move, m.visits) for m in first.moves] == [(m.move, m.visits) for m in plain.moves]
    calls_first = inner.positions
    game.play(first.moves[0].move)
    analyse(game, cached, 400, config)  # the reply's tree was mostly searched already
    assert inner.positions - calls_first < calls_first


def test_the_table_kernels_equal_their_python_twin_slot_for_slot():
    pool = positions(40)
    pool[5:10, 4] = 0.25  # the same pieces with another no-progress count, and repeated:
    pool[10:12, 5] = 1.0  # every plane is part of the key
    cached = CachedEvaluator(HashEvaluator(seed=3), capacity=3 * WAYS)
    twin = ReferenceAnswerTable(buckets=3)
    rng = np.random.default_rng(7)
    for _ in range(30):
        batch = pool[rng.integers(0, len(pool), rng.integers(1, 20))]
        logits, wdl, plies = cached.predict(batch)
        want_logits, want_wdl, want_plies = twin.predict(HashEvaluator(seed=3), batch)
        np.testing.assert_array_equal(logits, want_logits)
        np.testing.assert_array_equal(wdl, want_wdl)
        np.testing.assert_array_equal(plies, want_plies)
        assert cached.table.arrays.clock[0] == twin.clock
        for slot in range(3 * WAYS):
            key, last_used = twin.slots.get(slot, (0, -1))[:2]
            assert (int(cached.table.arrays.keys[slot]), int(cached.table.arrays.last_used[slot])) == (key, last_used)
    assert len({ReferenceAnswerTable.key(row) for row in pool}) == len(pool)

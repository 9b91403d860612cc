"""The batched numba search: same visit counts as the plain-Python reference, exact terminal values,
tree reuse, noise, and that it finds short forced wins and keeps the value of solved key endings."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from selfplay.tree_search import mcts
from selfplay.tree_search.analysis import Proven, analyse, best_move
from selfplay.tree_search.answer_table import WAYS, ReferenceAnswerTable
from selfplay.tree_search.evaluators import CachedEvaluator, HashEvaluator, MaterialEvaluator, UniformEvaluator
from selfplay.tree_search.reference_mcts import ReferenceMcts
from selfplay.tree_search.search import BatchedSearch, RootChildren, RootNoise, SearchConfig, choose_move, visit_policy
from zero.net.encoding import NUM_ACTIONS, PLANE_OPP_KINGS, PLANE_OPP_MEN, PLANE_OWN_KINGS, PLANE_OWN_MEN, move_action
from zero.rules import movegen
from zero.rules.game import Game, RulesConfig, Termination
from zero.rules.notation import fen_to_position, resolve_move
from zero.run.data import data_file
from zero.yardsticks.players import AlphaBetaPlayer, material


def _random_game(rng: np.random.Generator, plies: int) -> Game:
    game = Game()
    for _ in range(plies):
        if game.outcome is not None:
            break
        legal = game.legal_moves()
        game.play(legal[int(rng.integers(len(legal)))])
    if game.outcome is not None:
        game.undo()
    return game


def _shuffle_game(rules: RulesConfig | None = None) -> Game:
    """Two lone kings shuffling: 5-9 28-24 9-5 24-28 5-9 28-24 9-5 (White to move; 24-28 repeats thrice)."""
    game = Game(fen_to_position("B:WK28:BK5"), rules=rules or RulesConfig())
    for text in "5-9 28-24 9-5 24-28 5-9 28-24 9-5".split():
        game.play(resolve_move(text, game.legal_moves()))
    return game


def _wins_after(game: Game, move, plies: int) -> bool:
    """Exhaustive: after `move` by the side to move, it can force a win (the opponent left without a
    move) within `plies` plies, counting `move` itself."""
    game.play(move)
    try:
        if game.outcome is not None:
            return game.outcome.termination == Termination.NO_MOVES
        if plies < 3:
            return False
        for reply in game.legal_moves():
            game.play(reply)
            try:
                if game.outcome is not None or not any(_wins_after(game, m, plies - 2) for m in game.legal_moves()):
                    return False
            finally:
                game.undo()
        return True
    finally:
        game.undo()


# A growing exploration weight (its base small, so that 250 visits feel it) and a flattened policy.
_GROWTH_AND_TEMPERATURE = {"c_puct_growth": 0.8, "c_puct_base": 20.0, "policy_temperature": 1.7}
# The moves-left utility, its threshold low so that the hash evaluator's values (rarely clear) pass it often.
_MOVES_LEFT = {"moves_left_weight": 0.5, "moves_left_slope": 0.1, "moves_left_threshold": 0.1}


def _plies_sums(search: BatchedSearch, g: int) -> list[float]:
    """The plies-left sums of tree g's root children (root_children's order)."""
    first, n = (int(x) for x in search.forest.links[g, 0, [mcts.FIRST_CHILD, mcts.N_CHILDREN]])
    return search.forest.stats[g, first:first + n, mcts.PLIES_SUM].tolist()


@pytest.mark.parametrize("leaves_per_tree,resolve_captures,settings",
                         [(1, False, {}), (3, False, {}), (1, True, {}), (3, True, {}),
                          (3, False, _GROWTH_AND_TEMPERATURE), (1, False, {"draw_value": 0.4}),
                          (3, True, {"draw_value": -0.3}),
                          (3, False, {"draw_value": -0.4, "draw_value_zero_sum": False}),
                          (1, False, _MOVES_LEFT), (3, True, _MOVES_LEFT),
                          (3, False, {**_MOVES_LEFT, "moves_left_threshold": 0.0, "draw_value": -0.3})])
def test_numba_search_matches_reference(leaves_per_tree, resolve_captures, settings):
    rng = np.random.default_rng(1)
    games = [Game()] + [_random_game(rng, int(rng.integers(4, 40))) for _ in range(3)]
    config = SearchConfig(leaves_per_tree=leaves_per_tree, fpu_reduction=0.3, fpu_reduction_root=0.1,
                          resolve_captures=resolve_captures, **settings)
    evaluator = HashEvaluator(seed=7)
    search = BatchedSearch(len(games), config, capacity=60_000)
    for g, game in enumerate(games):
        search.set_root(g, game)
        search.start(g, 250)
    search.run(evaluator)
    for g, game in enumerate(games):
        root = ReferenceMcts(game, evaluator, config).run(250)
        children = search.root_children(g)
        assert [c.visits for c in root.children] == children.visits.tolist()
        assert [c.value_sum for c in root.children] == pytest.approx(children.value_sum.tolist(), abs=1e-12)
        assert [c.plies_sum for c in root.children] == pytest.approx(_plies_sums(search, g), abs=1e-9)
        assert root.visits == search.root_visits(g)


def test_the_moves_left_weight_changes_the_search_the_twins_are_held_to():
    # The comparison above with the moves-left settings is no comparison of two searches that ignore them.
    def visits(weight: float) -> list[list[int]]:
        rng = np.random.default_rng(1)
        games = [Game()] + [_random_game(rng, int(rng.integers(4, 40))) for _ in range(3)]
        config = SearchConfig(leaves_per_tree=3, **{**_MOVES_LEFT, "moves_left_weight": weight})
        search = BatchedSearch(len(games), config, capacity=60_000)
        for g, game in enumerate(games):
            search.set_root(g, game)
            search.start(g, 250)
        search.run(HashEvaluator(seed=7))
        return [search.root_children(g).visits.tolist() for g in range(len(games))]

    assert visits(0.5) != visits(0.0)


def test_a_draw_value_weighs_each_childs_draw_share_for_the_side_choosing():
    # A root with two visited children, from the chooser's view: a sure draw (Q 0) and a slightly worse
    # decisive line (Q -0.1, no draw). Drawing is the plain choice; a draw worth -0.3 to the chooser makes
    # the decisive line the better, and the opponent, for whom the same draw is worth +0.3, keeps it.
    f = mcts.new_forest(1, 300, 4)
    mcts.reset_tree(f, 0, 0, 0, 0, True, 0)
    f.links[0, 0, mcts.FIRST_CHILD], f.links[0, 0, mcts.N_CHILDREN] = 1, 2
    f.links[0, 0, mcts.STATE] = mcts.EXPANDED
    f.stats[0, 0, mcts.VISITS] = 200
    for c, (value_sum, draw_sum) in ((1, (0.0, 100.0)), (2, (-10.0, 0.0))):
        f.stats[0, c, mcts.VISITS], f.stats[0, c, mcts.PRIOR] = 100, 0.5
        f.stats[0, c, mcts.VALUE_SUM], f.stats[0, c, mcts.DRAW_SUM] = value_sum, draw_sum
        f.stats[0, c, mcts.PROVEN_PLIES] = -1

    def choice(draw_worth: float) -> int:
        return int(mcts._best_child(f, 0, 0, 1.0, 0.0, 1000.0, 0.25, 1.0, draw_worth, 0.0, 0.05, 0.8))

    assert (choice(0.0), choice(-0.3), choice(0.3)) == (1, 2, 1)
    f.stats[0, 1, mcts.PROVEN_PLIES], f.stats[0, 1, mcts.PROVEN_VALUE] = 4, 0.0  # the draw proven: the same
    assert (choice(0.0), choice(-0.3)) == (1, 2)


def test_an_opponent_supposed_indifferent_to_draws_changes_the_search():
    # The twin comparison above holds both searches to one rule; this holds the setting to mattering: the
    # opponent's choices, made without the draw value, send the root's visits elsewhere.
    def visits(zero_sum: bool) -> list[int]:
        config = SearchConfig(draw_value=-0.5, draw_value_zero_sum=zero_sum)
        search = BatchedSearch(1, config, capacity=60_000)
        search.set_root(0, Game())
        search.start(0, 400)
        search.run(HashEvaluator(seed=3))
        return search.root_children(0).visits.tolist()

    assert visits(True) != visits(False)


def test_the_moves_left_utility_hurries_the_winner_and_delays_the_loser():
    # A root with two children of the same value and visits, one with 10 plies left below it on average
    # and one with 40, from the chooser's view; the priors lean to the long one.
    f = mcts.new_forest(1, 300, 4)
    mcts.reset_tree(f, 0, 0, 0, 0, True, 0)
    f.links[0, 0, mcts.FIRST_CHILD], f.links[0, 0, mcts.N_CHILDREN] = 1, 2
    f.links[0, 0, mcts.STATE] = mcts.EXPANDED

    def tree(q: float) -> None:
        f.stats[0, 0, mcts.VISITS], f.stats[0, 0, mcts.VALUE_SUM] = 200, -200 * q  # the root's: its mover's
        f.stats[0, 0, mcts.PLIES_SUM] = 100 * (10 + 1) + 100 * (40 + 1)
        for c, (prior, plies) in ((1, (0.45, 10.0)), (2, (0.55, 40.0))):
            f.stats[0, c, mcts.VISITS], f.stats[0, c, mcts.PRIOR] = 100, prior
            f.stats[0, c, mcts.VALUE_SUM], f.stats[0, c, mcts.PLIES_SUM] = 100 * q, 100 * plies
            f.stats[0, c, mcts.PROVEN_PLIES] = -1

    def choice(weight: float, threshold: float = 0.8) -> int:
        return int(mcts._best_child(f, 0, 0, 1.0, 0.0, 1000.0, 0.25, 1.0, 0.0, weight, 0.05, threshold))

    tree(0.9)  # winning: the shorter way, once the utility is on
    assert (choice(0.0), choice(0.3)) == (2, 1)
    tree(-0.9)  # losing: the longer way, which the priors already prefer, and more clearly
    assert (choice(0.0), choice(0.3)) == (2, 2)
    f.stats[0, 2, mcts.PRIOR], f.stats[0, 1, mcts.PRIOR] = 0.45, 0.55
    assert (choice(0.0), choice(0.3)) == (1, 2)
    tree(0.5)  # no clear result: the value and the priors decide, whatever the weight
    assert (choice(0.0), choice(0.3), choice(0.3, threshold=0.4)) == (2, 2, 1)


class _EndingEvaluator:
    """An evaluator for constructed endings: the side with more pieces wins (Q = +-q, no draws), the game
    has `long` plies left while the side with fewer pieces keeps a king and `short` once it has none; the
    policy is even but for a `bias` on the action `favourite`."""

    plies_left_head = True

    def __init__(self, favourite: int, bias: float = 0.5, q: float = 0.9, short: float = 10.0, long: float = 40.0):
        self.favourite, self.bias, self.q, self.short, self.long = favourite, bias, q, short, long

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.predict(planes)[:2]

    def predict(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        def count(plane: int) -> np.ndarray:
            return planes[:, plane].sum(axis=(1, 2))

        own, opp = count(PLANE_OWN_MEN) + count(PLANE_OWN_KINGS), count(PLANE_OPP_MEN) + count(PLANE_OPP_KINGS)
        q = self.q * np.sign(own - opp)
        wdl = np.stack([(1 + q) / 2, np.zeros_like(q), (1 - q) / 2], axis=1).astype(np.float32)
        behind_has_king = np.where(own < opp, count(PLANE_OWN_KINGS) > 0, count(PLANE_OPP_KINGS) > 0)
        plies = np.where(behind_has_king, self.long, self.short).astype(np.float32)
        logits = np.zeros((len(planes), NUM_ACTIONS), dtype=np.float32)
        logits[:, self.favourite] = self.bias
        return logits, wdl, plies


def _ending_visits(fen: str, favourite: str, weight: float, head: bool = True) -> dict[str, int]:
    """Root visits per move of a 300-visit search of the ending `fen` with _EndingEvaluator, `favourite`
    the move its policy leans to."""
    game = Game(fen_to_position(fen))
    evaluator = _EndingEvaluator(move_action(resolve_move(favourite, game.legal_moves()), game.position.black_to_move))
    if not head:
        evaluator.plies_left_head = False
    search = BatchedSearch(1, SearchConfig(moves_left_weight=weight), simulations=300)
    search.set_root(0, game)
    search.start(0, 300)
    search.run(evaluator)
    children = search.root_children(0)
    return {str(children.move(k, game.position)): int(n) for k, n in enumerate(children.visits)}


def test_a_won_ending_is_converted_the_shorter_way():
    # Black is two pieces up and must take: 14x21 takes a man and leaves White its king (40 plies left),
    # 14x23 takes the king (10). The value is the same either way; the policy leans to 14x21.
    fen = "B:WK18,17,29,30:BK14,K1,K2,3,4,5"
    plain, weighed = _ending_visits(fen, "14x21", 0.0), _ending_visits(fen, "14x21", 0.3)
    assert plain["14x21"] > plain["14x23"]
    assert weighed["14x23"] > 2 * weighed["14x21"]
    assert _ending_visits(fen, "14x21", 0.3, head=False) == plain  # no head: the utility stays off


def test_a_lost_ending_is_resisted_the_longer_way():
    # White is two pieces down: 5-9 gives its king away (6x13 is forced: 10 plies left), its man moves
    # keep it (40). The value is the same either way; the policy leans to 5-9.
    fen = "W:WK5,29,30:BK6,K1,K2,3,4"
    plain, weighed = _ending_visits(fen, "5-9", 0.0), _ending_visits(fen, "5-9", 0.3)
    assert max(plain, key=plain.get) == "5-9"
    assert weighed["5-9"] == min(weighed.values())  # the least visited of its four moves


@pytest.mark.parametrize("leaves_per_tree,settings", [(1, {}), (4, {}), (16, {}), (1, _MOVES_LEFT), (4, _MOVES_LEFT)])
def test_numba_search_through_a_cache_matches_reference(leaves_per_tree, settings):
    # The table's answers expand their leaves during the selection. Three searches share one small table
    # (positions pushed out of it, too): each next root was searched below the last one's, so most of its
    # tree's positions are remembered. With the moves-left utility, a remembered answer brings its plies left.
    config = SearchConfig(leaves_per_tree=leaves_per_tree, **settings)
    game = _random_game(np.random.default_rng(3), 12)
    cached = CachedEvaluator(HashEvaluator(seed=5), capacity=96 * WAYS)
    twin = ReferenceAnswerTable(buckets=96)
    recalled = 0
    for _ in range(3):
        search = BatchedSearch(1, config, capacity=60_000)
        search.set_root(0, game)
        search.start(0, 300)
        search.run(cached)
        root = ReferenceMcts(game, HashEvaluator(seed=5), config, table=twin).run(300)
        children = search.root_children(0)
        assert [c.visits for c in root.children] == children.visits.tolist()
        assert [c.value_sum for c in root.children] == pytest.approx(children.value_sum.tolist(), abs=1e-12)
        assert [c.plies_sum for c in root.children] == pytest.approx(_plies_sums(search, 0), abs=1e-9)
        assert cached.table.arrays.clock[0] == twin.clock
        recalled += search.times.recalled
        game.play(children.move(int(np.argmax(children.visits)), game.position))
    assert recalled > 100


def test_a_remembered_root_gets_its_noise_before_any_descent():
    # The root always goes to the network (here: through the table's own call), so that its noise is mixed
    # in before the first descent below it; the rest of a remembered tree is recalled during selection.
    config = SearchConfig(leaves_per_tree=1)

    def visits(evaluator) -> list[int]:
        search = BatchedSearch(1, config, capacity=20_000)
        search.set_root(0, Game())
        search.start(0, 200, noise=RootNoise(np.random.default_rng(5), alpha=1.0, fraction=0.5))
        search.run(evaluator)
        return search.root_children(0).visits.tolist()

    warm = CachedEvaluator(HashEvaluator(seed=2))
    visits(warm)
    assert visits(warm) == visits(CachedEvaluator(HashEvaluator(seed=2)))
    assert warm.hits > 150


def _root_after(config: SearchConfig, evaluator, simulations: int = 250) -> RootChildren:
    search = BatchedSearch(1, config, capacity=60_000)
    search.set_root(0, Game())
    search.start(0, simulations)
    search.run(evaluator)
    return search.root_children(0)


def test_policy_temperature_flattens_the_priors():
    evaluator = HashEvaluator(seed=7)
    plain = _root_after(SearchConfig(), evaluator).prior
    flat = _root_after(SearchConfig(policy_temperature=2.0), evaluator).prior
    # softmax(l / 2) is softmax(l) squared, renormalised (the start position shares no from-to action)
    assert flat == pytest.approx(np.sqrt(plain) / np.sqrt(plain).sum(), rel=1e-5)
    assert flat.max() < plain.max() and flat.min() > plain.min()


def test_a_growing_exploration_weight_leans_on_the_priors():
    # The larger the exploration weight, the more the visits follow the priors rather than the values.
    def distance_from_prior(config: SearchConfig) -> float:
        root = _root_after(config, HashEvaluator(seed=7), 400)
        return float(np.abs(root.visits / root.visits.sum() - root.prior).sum())

    constant = distance_from_prior(SearchConfig(leaves_per_tree=1))
    growing = distance_from_prior(SearchConfig(leaves_per_tree=1, c_puct_growth=2.0, c_puct_base=20.0))
    assert growing < 0.5 * constant


def test_reference_match_includes_terminal_nodes():
    # Near the draw limits the tree is full of repetition and no-progress terminals.
    game = _shuffle_game(RulesConfig(no_progress_plies=12))
    config = SearchConfig(leaves_per_tree=2)
    evaluator = HashEvaluator(seed=3)
    search = BatchedSearch(1, config, game.rules, capacity=20_000)
    search.set_root(0, game)
    search.start(0, 300)
    search.run(evaluator)
    root = ReferenceMcts(game, evaluator, config).run(300)
    assert [c.visits for c in root.children] == search.root_children(0).visits.tolist()


def _root_child(search: BatchedSearch, game: Game, text: str) -> int:
    move = resolve_move(text, game.legal_moves())
    return int(mcts.find_child(search.forest, 0, move.from_square - 1, move.to_square - 1, move.captured))


def test_threefold_repetition_is_a_draw_inside_the_tree():
    game = _shuffle_game()
    search = BatchedSearch(1, SearchConfig(), game.rules, simulations=1000)
    search.set_root(0, game)
    search.start(0, 200)
    search.run(UniformEvaluator(wdl=(0.6, 0.0, 0.4)))
    f = search.forest
    repeat = _root_child(search, game, "24-28")
    assert f.links[0, repeat, mcts.STATE] == mcts.TERMINAL and f.stats[0, repeat, mcts.PROVEN_VALUE] == 0.0
    # Every other reply is an ordinary position the network was asked about.
    for text in ("24-19", "24-20", "24-27"):
        assert f.links[0, _root_child(search, game, text), mcts.STATE] == mcts.EXPANDED
    game.play(resolve_move("24-28", game.legal_moves()))
    assert game.outcome.termination == Termination.REPETITION


def test_no_progress_limit_is_a_draw_inside_the_tree():
    game = _shuffle_game(RulesConfig(no_progress_plies=8, repetitions_for_draw=10))
    assert game.no_progress[-1] == 7
    search = BatchedSearch(1, SearchConfig(), game.rules, simulations=1000)
    search.set_root(0, game)
    search.start(0, 50)
    search.run(UniformEvaluator(wdl=(1.0, 0.0, 0.0)))
    f = search.forest
    first, n = f.links[0, 0, mcts.FIRST_CHILD], f.links[0, 0, mcts.N_CHILDREN]
    for c in range(first, first + n):
        assert f.links[0, c, mcts.STATE] == mcts.TERMINAL and f.stats[0, c, mcts.PROVEN_VALUE] == 0.0
    # Every reply draws, so the root is a proven draw as soon as each has been visited once: the search
    # stops there (the root's evaluation and one visit a child), and its value is exactly 0.
    assert search.root_proven(0) == (0, 1)
    assert search.root_visits(0) == 1 + n
    assert search.root_value(0) == 0.0 and search.root_wdl(0) == (0.0, 1.0, 0.0)


def test_a_side_without_moves_has_lost():
    # Black's only move captures the last white piece: White, to move with nothing, has lost.
    game = Game(fen_to_position("B:W10:B6"))
    analysis = analyse(game, UniformEvaluator(), 20)
    assert [str(s.move) for s in analysis.moves] == ["6x15"]
    assert analysis.moves[0].q == 1.0 and analysis.moves[0].wdl == (1.0, 0.0, 0.0)
    # The root's one move is forced, so it costs no network call, and the position after it is lost for
    # White: the root is a proven win in 1 after one visit, and the search ends there.
    assert analysis.proven == Proven(1, 1) and analysis.moves[0].proven == Proven(1, 1)
    assert analysis.root_wdl == (1.0, 0.0, 0.0) and analysis.simulations == 1


# Found by exhaustive search; the test re-checks each claim below.
SHOTS = [
    ("B:W14,15:B2,6,25", "6-10"),  # two for one: give a man, jump both white men
    ("B:W16,30:B8,26,27", "8-12"),
    ("B:W15,22:B1,9,13", "13-17"),
]
CROWNING_CAPTURES = [
    ("B:W8,25:B3,21", "21x30"),  # the capture that crowns wins; the other capture does not
    ("B:WK18,25:B21,22", "21x30"),
]


@pytest.mark.parametrize("fen,winning", SHOTS + CROWNING_CAPTURES)
def test_finds_short_forced_wins_with_a_uniform_prior(fen, winning):
    game = Game(fen_to_position(fen))
    # Ground truth: the move wins within 5 plies, no other move does.
    assert [str(m) for m in game.legal_moves() if _wins_after(game, m, 5)] == [winning]
    analysis = analyse(game, UniformEvaluator(), 3000)
    assert str(best_move(analysis)) == winning
    assert analysis.moves[0].q > 0.5


def _key_endings() -> list[dict]:
    path = data_file("endgames/key_endings_solved.tsv")
    if path is None:
        pytest.skip("endgames/key_endings_solved.tsv not found (set CHECKERS_ZERO_DATA)")
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _solved_moves(row: dict) -> dict[str, tuple[str, int | None]]:
    out = {}
    for item in row["all_moves(move:value_for_mover:plies)"].split():
        move, value, plies = item.split(":")
        out[move] = (value, int(plies) if plies else None)
    return out


SHORT_WIN_PLIES = 15  # wins this short are found by a search with no knowledge at all (uniform evaluator)
SHORT_LOSS_PLIES = 10


def test_key_endings_short_wins_are_found():
    rows = [r for r in _key_endings()
            if r["value_for_side_to_move"] == "win" and int(r["plies_to_win"]) <= SHORT_WIN_PLIES]
    assert rows, "the table has short wins"
    for row in rows:
        analysis = analyse(Game(fen_to_position(row["fen"])), UniformEvaluator(), 4000)
        assert _solved_moves(row)[str(best_move(analysis))][0] == "win", row["name"]


def test_key_endings_no_move_that_loses_quickly():
    for row in _key_endings():
        if row["value_for_side_to_move"] == "loss":
            continue
        analysis = analyse(Game(fen_to_position(row["fen"])), UniformEvaluator(), 3000)
        value, plies = _solved_moves(row)[str(best_move(analysis))]
        assert not (value == "loss" and plies <= SHORT_LOSS_PLIES), row["name"]


# A 61-ply win that material alone does not show. The search before the MCTS-solver kept it at 2,000 to
# 10,000 simulations, carried by the visits it went on giving to the defender's proven blunders; the solver
# stops those visits and draws it at every budget tried up to 10,000. The database plays it exactly
# (test_database_positions_are_exact_leaves).
BEYOND_MATERIAL = {"First Position w/ man on 4, alternative"}


def test_key_endings_keep_their_value_with_a_material_evaluator():
    # With material as the only knowledge the search keeps every won or drawn ending's value (long wins
    # included: it avoids the moves that throw the win or the draw away), but one (BEYOND_MATERIAL).
    for row in _key_endings():
        want = row["value_for_side_to_move"]
        if want == "loss" or row["name"] in BEYOND_MATERIAL:
            continue
        analysis = analyse(Game(fen_to_position(row["fen"])), MaterialEvaluator(), 3000)
        assert _solved_moves(row)[str(best_move(analysis))][0] == want, row["name"]


def test_tree_reuse_keeps_the_played_subtree():
    game = Game()
    search = BatchedSearch(1, SearchConfig(), game.rules, simulations=1000)
    search.set_root(0, game)
    search.start(0, 400)
    search.run(HashEvaluator(seed=1))
    children = search.root_children(0)
    k = int(np.argmax(children.visits))
    kept_visits = int(children.visits[k])
    move = next(m for m in game.legal_moves()
                if (m.from_square - 1, m.to_square - 1) == (children.move_from[k], children.move_to[k]))
    game.play(move)
    kept = search.play(0, move, game)
    f = search.forest
    assert kept == f.trees[0, mcts.USED] > 1
    assert search.root_visits(0) == kept_visits
    pos = game.position
    assert f.nodes[0, 0, :mcts.NO_PROGRESS].tolist() == [pos.black, pos.white, pos.kings, pos.black_to_move]
    # Links stay consistent: every node's children point back to it and visits add up (a node's own
    # evaluation is one visit, except at a forced move, whose node the network never sees).
    for node in range(kept):
        if f.links[0, node, mcts.STATE] == mcts.EXPANDED:
            first, n = f.links[0, node, mcts.FIRST_CHILD], f.links[0, node, mcts.N_CHILDREN]
            assert (f.links[0, first:first + n, mcts.PARENT] == node).all()
            own = 0 if n == 1 else 1
            assert f.stats[0, first:first + n, mcts.VISITS].sum() == f.stats[0, node, mcts.VISITS] - own
    # The search goes on from the kept tree to the new target.
    search.start(0, 600)
    search.run(HashEvaluator(seed=1))
    assert search.root_visits(0) == 600


def test_root_noise_changes_priors_reproducibly():
    game = Game()

    def noisy_priors(seed: int) -> np.ndarray:
        search = BatchedSearch(1, SearchConfig(), game.rules, simulations=1000)
        search.set_root(0, game)
        search.start(0, 10, noise=RootNoise(np.random.default_rng(seed), alpha=1.0, fraction=0.25))
        search.run(UniformEvaluator())
        return search.root_children(0).prior

    a, b, c = noisy_priors(1), noisy_priors(1), noisy_priors(2)
    assert a.sum() == pytest.approx(1.0)
    assert np.array_equal(a, b) and not np.allclose(a, c)
    assert not np.allclose(a, 1 / 7)


def test_visit_policy_sums_to_one_over_actions():
    game = _random_game(np.random.default_rng(4), 10)
    search = BatchedSearch(1, SearchConfig(), game.rules, simulations=1000)
    search.set_root(0, game)
    search.start(0, 100)
    search.run(HashEvaluator())
    actions, shares = visit_policy(search.root_children(0), game.position.black_to_move)
    assert shares.sum() == pytest.approx(1.0)
    assert len(set(actions.tolist())) == len(actions)


def test_analysis_api():
    game = Game()
    analysis = analyse(game, HashEvaluator(seed=2), 300)
    assert analysis.simulations == 300
    assert sorted(str(s.move) for s in analysis.moves) == sorted(str(m) for m in game.legal_moves())
    assert [s.visits for s in analysis.moves] == sorted((s.visits for s in analysis.moves), reverse=True)
    assert sum(s.visits for s in analysis.moves) == 299
    assert sum(analysis.root_wdl) == pytest.approx(1.0)
    assert analysis.pv and analysis.pv[0] == analysis.moves[0].move
    replay = Game()
    for move in analysis.pv:
        replay.play(move)  # the principal variation is a legal line
    assert best_move(analysis) == analysis.moves[0].move
    assert best_move(analysis, temperature=1.0, rng=np.random.default_rng(0)) in game.legal_moves()
    finished = Game(fen_to_position("W:W10:B6"))
    finished.play(finished.legal_moves()[0])
    with pytest.raises(ValueError):
        analyse(finished, UniformEvaluator(), 10)


# ------------------------------------------------------------------------------------------ MCTS-solver

def _forced_win_within(game: Game, plies: int) -> bool:
    """Exhaustive: the side to move can force a win within `plies` plies."""
    return plies >= 1 and any(_wins_after(game, m, plies) for m in game.legal_moves())


def _small_endgames(count: int, seed: int) -> list[Game]:
    """Random positions of 3 or 4 pieces, men and kings, with a move for the side to move."""
    rng = np.random.default_rng(seed)
    games = []
    while len(games) < count:
        squares = rng.choice(32, size=int(rng.integers(3, 5)), replace=False) + 1
        black = [int(s) for s in squares[: 1 + len(squares) // 2]]
        white = [int(s) for s in squares[1 + len(squares) // 2:]]

        def side(sqs, crown_row):
            return ",".join(("K" if (rng.random() < 0.5 or s in crown_row) else "") + str(s) for s in sqs)

        fen = f"{'B' if rng.random() < 0.5 else 'W'}:W{side(white, range(1, 5))}:B{side(black, range(29, 33))}"
        game = Game(fen_to_position(fen))
        if game.outcome is None and len(game.legal_moves()) > 1:
            games.append(game)
    return games


def test_proven_values_agree_with_exhaustive_search():
    # Every win or loss the solver proves among the root's moves is exact: the winner can force the end in
    # that many plies and not in fewer (checked by exhaustive search over the game's rules).
    checked = 0
    for game in _small_endgames(12, seed=5) + [Game(fen_to_position(fen)) for fen, _ in SHOTS]:
        analysis = analyse(game, UniformEvaluator(), 1500)
        for stat in analysis.moves:
            if stat.proven is None or stat.proven.value == 0:
                continue
            game.play(stat.move)
            try:
                if stat.proven.value == 1:  # the opponent, to move, has lost within plies - 1
                    assert game.outcome is not None or not any(
                        not _forced_win_within_after(game, r, stat.proven.plies - 1) for r in game.legal_moves())
                else:
                    k = stat.proven.plies - 1
                    assert _forced_win_within(game, k) and not _forced_win_within(game, k - 2), str(stat.move)
            finally:
                game.undo()
            checked += 1
        if analysis.proven is not None and analysis.proven.value == 1:
            k = analysis.proven.plies
            assert _forced_win_within(game, k) and not _forced_win_within(game, k - 2)
            assert best_move(analysis) == analysis.moves[0].move and analysis.moves[0].proven == analysis.proven
    assert checked >= 10, "the positions give the solver something to prove"


def _forced_win_within_after(game: Game, reply, plies: int) -> bool:
    """After the opponent's `reply`, the side that just moved before it wins within plies - 1 plies."""
    game.play(reply)
    try:
        if game.outcome is not None:
            return game.outcome.termination == Termination.NO_MOVES
        return _forced_win_within(game, plies - 1)
    finally:
        game.undo()


@pytest.mark.parametrize("fen,winning", SHOTS)
def test_a_proven_win_ends_the_search_and_is_played(fen, winning):
    game = Game(fen_to_position(fen))
    analysis = analyse(game, UniformEvaluator(), 100_000)
    # Proven long before the budget, and the move played is the win.
    assert analysis.proven is not None and analysis.proven.value == 1
    assert analysis.simulations < 100_000
    assert str(best_move(analysis)) == winning
    assert str(analysis.proven).startswith("win in ")


def test_a_proven_loss_is_avoided_while_another_move_is_unproven():
    # 28-24 loses in 2 (the solved table says so); with a uniform prior and a value that favours it the
    # search would still visit it, but once proven it is never the move played.
    game = Game(fen_to_position("W:WK23,K28:B4,K20"))
    analysis = analyse(game, UniformEvaluator(wdl=(0.0, 0.2, 0.8)), 400)
    losing = next(s for s in analysis.moves if str(s.move) == "28-24")
    assert losing.proven is not None and (losing.proven.value, losing.proven.plies) == (-1, 2)
    assert analysis.moves[-1] is losing and str(best_move(analysis)) != "28-24"
    # choose_move passes over a proven loss even when it has the most visits, and plays a proven win at once.
    visits, prior = np.array([90, 5, 5]), np.full(3, 1 / 3)
    assert choose_move(visits, prior, np.array([-1.0, np.nan, np.nan]), np.array([2, -1, -1])) == 1
    assert choose_move(visits, prior, np.array([np.nan, 1.0, 1.0]), np.array([-1, 7, 5])) == 2
    assert choose_move(visits, prior, np.array([-1.0, -1.0, -1.0]), np.array([2, 6, 4])) == 1
    rng = np.random.default_rng(0)
    picks = {choose_move(visits, prior, np.array([-1.0, np.nan, np.nan]), np.array([2, -1, -1]), 1.0, rng)
             for _ in range(50)}
    assert picks == {1, 2}


def test_a_repetition_draw_is_proven_and_taken_over_a_loss():
    # White to move after the shuffle: 24-28 repeats the position a third time, a proven draw. With a value
    # that calls every position won for its side to move (so lost for the player who moved into it), the
    # unproven moves look lost and the draw is the move.
    game = _shuffle_game()
    analysis = analyse(game, UniformEvaluator(wdl=(1.0, 0.0, 0.0)), 300)
    repeat = next(s for s in analysis.moves if str(s.move) == "24-28")
    assert repeat.proven is not None and (repeat.proven.value, repeat.proven.plies) == (0, 1)
    assert str(best_move(analysis)) == "24-28"


class _CountingEvaluator:
    def __init__(self, inner):
        self.inner = inner
        self.positions = 0

    def evaluate(self, planes):
        self.positions += len(planes)
        return self.inner.evaluate(planes)


def test_forced_positions_cost_no_network_call():
    # A middlegame with captures about: every position the network is asked about has a choice, and the
    # positions with one legal move are in the tree all the same (expanded with their one child).
    game = _random_game(np.random.default_rng(11), 24)
    evaluator = _CountingEvaluator(HashEvaluator(seed=3))
    search = BatchedSearch(1, SearchConfig(leaves_per_tree=4), game.rules, simulations=3000)
    search.set_root(0, game)
    search.start(0, 1500)
    search.run(evaluator)
    f = search.forest
    used = int(f.trees[0, mcts.USED])
    expanded = f.links[0, :used, mcts.STATE] == mcts.EXPANDED
    forced = expanded & (f.links[0, :used, mcts.N_CHILDREN] == 1)
    assert forced.sum() > 0
    assert evaluator.positions == search.times.leaves == (expanded & ~forced).sum()


# ------------------------------------------------------------------------------------- endgame database

@pytest.fixture(scope="module")
def four_pieces(tmp_path_factory):
    from zero.endgames.egdb_build import ensure_built

    return ensure_built(4, tmp_path_factory.mktemp("egdb"))


def test_database_positions_are_exact_leaves(four_pieces):
    # First Position (4 pieces): a 61-ply win that no uniform search finds. With the database every reply
    # below the root is an exact leaf: the win is proven at once, with the database's distance, and played.
    game = Game(fen_to_position("W:WK23,K28:B4,K20"))
    evaluator = _CountingEvaluator(UniformEvaluator())
    analysis = analyse(game, evaluator, 1000, SearchConfig(database_leaves=True), egdb=four_pieces)
    assert analysis.proven == Proven(1, 61)
    assert str(best_move(analysis)) == "23-19"
    assert evaluator.positions == 1  # the root alone went to the network
    # The database's view of the root, as the engine shows it.
    assert str(four_pieces.probe(game.position)) == "database win in 61"


def test_key_endings_keep_their_value_with_the_database(four_pieces):
    # Every key ending the 4-piece database holds, or that reaches it after a capture, is played right by
    # the search with a material evaluator and the database.
    for row in _key_endings():
        game = Game(fen_to_position(row["fen"]))
        if game.position.piece_count() > 5:
            continue
        analysis = analyse(game, MaterialEvaluator(), 3000, SearchConfig(database_leaves=True), egdb=four_pieces)
        want = row["value_for_side_to_move"]
        got = _solved_moves(row)[str(best_move(analysis))][0]
        if game.position.piece_count() <= 4:
            assert got == want and analysis.proven is not None, row["name"]
        else:
            assert got == want or want == "loss", row["name"]


@pytest.mark.parametrize("leaves_per_tree", [1, 3])
def test_numba_search_matches_reference_with_database_leaves(four_pieces, leaves_per_tree):
    # Positions of 5 to 7 pieces: their captures reach the database below the root, where both searches
    # take the database's exact values (and a 4-piece root is searched, not looked up).
    fens = ["W:WK23,K28:B4,K20", "B:W18,22,K30:B9,K2", "W:W19,24,27:B10,12,K22,K1", "B:W21,26,K6:B5,9,13,K32"]
    games = [Game(fen_to_position(fen)) for fen in fens]
    config = SearchConfig(leaves_per_tree=leaves_per_tree, database_leaves=True)
    evaluator = HashEvaluator(seed=11)
    search = BatchedSearch(len(games), config, capacity=60_000, egdb=four_pieces)
    for g, game in enumerate(games):
        search.set_root(g, game)
        search.start(g, 200)
    search.run(evaluator)
    proven = 0
    for g, game in enumerate(games):
        reference = ReferenceMcts(game, evaluator, config, egdb=four_pieces)
        root = reference.run(200)
        children = search.root_children(g)
        assert [c.visits for c in root.children] == children.visits.tolist(), fens[g]
        assert [c.value_sum for c in root.children] == pytest.approx(children.value_sum.tolist(), abs=1e-12)
        twin_proven = [np.nan if c.proven_value is None else -c.proven_value for c in root.children]
        np.testing.assert_array_equal(twin_proven, children.proven)
        proven += int(np.sum(~np.isnan(children.proven)))
    assert proven > 0  # the database decided some of the root's moves


def test_database_leaves_are_a_setting(four_pieces):
    # Given a database without database_leaves, the search is the one without a database (the database
    # then serves at the root only, through GameSearch).
    game = Game(fen_to_position("W:WK23,K28:B4,K20"))
    off = SearchConfig(database_leaves=False)
    plain = analyse(game, HashEvaluator(seed=2), 300, off)
    unused = analyse(game, HashEvaluator(seed=2), 300, off, egdb=four_pieces)
    used = analyse(game, HashEvaluator(seed=2), 300, egdb=four_pieces)  # on by default
    assert [(str(s.move), s.visits) for s in plain.moves] != [(str(s.move), s.visits) for s in used.moves]
    assert [(str(s.move), s.visits) for s in plain.moves] == [(str(s.move), s.visits) for s in unused.moves]
    # At the root, GameSearch plays the database's best move whatever the search found.
    from selfplay.tree_search.analysis import GameSearch

    at_root = GameSearch(HashEvaluator(seed=2), egdb=four_pieces).analyse(game, simulations=30)
    assert str(best_move(at_root)) == "23-19" and str(at_root.proven) == "database win in 61"


class _DivergedEvaluator:
    """HashEvaluator's answers with the logits and/or the values made NaN or infinite, as a network whose
    weights diverged gives them."""

    def __init__(self, logits: float | None, wdl: float | None):
        self.inner, self.logits, self.wdl = HashEvaluator(seed=5), logits, wdl

    def evaluate(self, planes):
        logits, wdl = (np.array(a) for a in self.inner.evaluate(planes))
        if self.logits is not None:
            logits[:, ::2] = self.logits
        if self.wdl is not None:
            wdl[:] = self.wdl
        return logits, wdl


_DIVERGED_SEARCH = """
import sys
sys.path.insert(0, sys.argv[1])
from test_mcts import _DivergedEvaluator
from selfplay.tree_search.search import BatchedSearch, SearchConfig
from zero.rules.game import Game
search = BatchedSearch(1, SearchConfig(leaves_per_tree=3), capacity=20_000)
search.set_root(0, Game())
search.start(0, 200)
search.run(_DivergedEvaluator(*(float(a) if a else None for a in sys.argv[2:])))
print(search.root_children(0).visits.tolist())
"""


@pytest.mark.parametrize("logits, wdl", [(float("nan"), None), (None, float("nan")), (float("inf"), float("nan")),
                                         (float("-inf"), None)])
def test_a_diverged_network_does_not_hang_the_search(logits, wdl):
    # Non-finite priors or values once made every PUCT score NaN and select_leaves loop forever (in a
    # child process here, so that a hang fails the test instead of stopping the suite). Both searches read
    # such logits as equal priors and such values as 0, and still agree.
    import subprocess
    import sys
    from pathlib import Path

    args = [str(Path(__file__).parent)] + ["" if a is None else repr(a) for a in (logits, wdl)]
    try:
        out = subprocess.run([sys.executable, "-c", _DIVERGED_SEARCH, *args], capture_output=True, text=True,
                             timeout=120, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail("the search did not end")
    visits = [int(v) for v in out.stdout.strip().splitlines()[-1].strip("[]").split(",")]
    reference = ReferenceMcts(Game(), _DivergedEvaluator(logits, wdl), SearchConfig(leaves_per_tree=3)).run(200)
    assert visits == [c.visits for c in reference.children]
    assert sum(visits) == 199


# Quiet positions (no capture for the side to move) where one move alone wins a man by force, found by
# alpha-beta over material: a man given so that the forced exchange that follows returns two.
MAN_WINNING_SHOTS = [
    ("W:W20,23,25,26,27,29,30,31,32:B3,4,7,8,9,11,14,16,21", "23-18"),
    ("B:W17,18,19,21,22,25,26,30,31:B1,2,4,5,7,8,10,11,13", "11-15"),
    ("W:W17,18,24,25,27,28,29,31,32:B1,2,3,4,5,6,7,8,16,23", "18-14"),
]


@pytest.mark.parametrize("fen,shot", MAN_WINNING_SHOTS)
def test_resolved_captures_find_a_shot_the_plain_search_misses(fen, shot):
    # A value that counts material, asked in the middle of an exchange, sees only the man given; with the
    # captures resolved it sees the position after the exchange. Same evaluator, same budget.
    game = Game(fen_to_position(fen))
    assert not any(m.captured for m in game.legal_moves())
    _, score, _ = AlphaBetaPlayer(depth=7).search(game)
    pos = game.position
    assert score - material(pos.black, pos.white, pos.kings, pos.black_to_move) >= 100  # a man won
    budget = 4 * len(game.legal_moves())
    plain = analyse(game, MaterialEvaluator(), budget, SearchConfig(leaves_per_tree=1))
    resolved = analyse(game, MaterialEvaluator(), budget, SearchConfig(leaves_per_tree=1, resolve_captures=True))
    assert str(resolved.moves[0].move) == shot
    assert str(plain.moves[0].move) != shot


def test_pending_captures_cost_no_network_call():
    # The network is asked only about quiet positions: a node where a capture is pending is searched
    # through, its captures taking equal priors (whatever the network would have said), and so is a forced one.
    game = Game(fen_to_position(MAN_WINNING_SHOTS[0][0]))
    search = BatchedSearch(1, SearchConfig(leaves_per_tree=4, resolve_captures=True), simulations=400)
    search.set_root(0, game)
    search.start(0, 400)
    search.run(HashEvaluator(seed=2))
    f = search.forest
    expanded = np.flatnonzero(f.links[0, : f.trees[0, mcts.USED], mcts.STATE] == mcts.EXPANDED)
    captures, quiet = [], []
    for i in expanded:
        b, w, k, btm = (int(x) for x in f.nodes[0, i, :4])
        n = int(f.links[0, i, mcts.N_CHILDREN])
        if movegen.can_capture(b, w, k, bool(btm)) and n > 1:
            captures.append(i)
            first = f.links[0, i, mcts.FIRST_CHILD]
            assert np.all(f.stats[0, first:first + n, mcts.PRIOR] == 1.0 / n)
        elif n > 1:
            quiet.append(i)
    assert len(captures) > 10
    assert search.times.leaves == len(quiet)

"""The single-game search (play, analysis, a match player on the clock): full batches, its tree kept from
move to move, limits by simulations and time; choosing a move, forced moves unsearched and the clock's time
spent only while the move can still change (on a fake clock: no test here depends on the machine's speed)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from counting import ClockedEvaluator
from selfplay.tree_search.analysis import DRAWN_LINE_MOVES, SINGLE_GAME_LEAVES, GameSearch, analyse, best_move
from selfplay.tree_search.evaluators import HashEvaluator, UniformEvaluator
from selfplay.tree_search.search import RootChildren, SearchConfig, warm_up
from selfplay.tree_search.time_manager import GameClock, Instability, MoveTime, TimeManager, decided, move_time
from zero.net.encoding import move_action
from zero.endgames.egdb import DRAW, LOSS
from zero.endgames.egdb_build import ensure_built
from zero.rules.game import Game
from zero.rules.notation import fen_to_position, resolve_move


class _BatchLog:
    def __init__(self) -> None:
        self.inner = HashEvaluator(seed=4)
        self.sizes: list[int] = []

    def evaluate(self, planes):
        self.sizes.append(len(planes))
        return self.inner.evaluate(planes)


def test_network_calls_carry_many_leaves():
    log = _BatchLog()
    GameSearch(log).analyse(Game(), simulations=2000)
    # Virtual loss spreads the descents, so nearly every call is full (a call ends early only where a
    # descent meets a leaf already in the batch).
    full = sum(1 for n in log.sizes if n == SINGLE_GAME_LEAVES)
    assert max(log.sizes) == SINGLE_GAME_LEAVES and full >= 0.9 * len(log.sizes)
    assert sum(log.sizes) / len(log.sizes) >= 0.9 * SINGLE_GAME_LEAVES


def test_the_tree_follows_the_game_between_searches():
    game = Game()
    search = GameSearch(HashEvaluator(seed=4))
    first = search.analyse(game, simulations=1500)
    move = best_move(first)
    game.play(move)
    game.play(first.pv[1] if len(first.pv) > 1 else game.legal_moves()[0])
    # The two moves' subtree is kept: the next search starts with its visits and needs fewer new ones.
    kept = search._rooted_at(game).root_visits(0)  # (re-rooting again is a no-op: no new moves)
    assert kept > 0
    log = _BatchLog()
    search.evaluator = log
    again = search.analyse(game, simulations=1500)
    assert again.simulations >= 1500
    assert sum(log.sizes) <= 1500 - kept + SINGLE_GAME_LEAVES
    # The answer is the same search as a fresh one would be asked to make, only cheaper: same legal moves.
    assert sorted(str(s.move) for s in again.moves) == sorted(str(m) for m in game.legal_moves())


def test_a_different_game_gets_a_fresh_tree():
    search = GameSearch(HashEvaluator(seed=4), SearchConfig(leaves_per_tree=1))
    game = Game()
    game.play(game.legal_moves()[0])
    search.analyse(game, simulations=300)
    other = Game()
    other.play(other.legal_moves()[1])  # not a continuation of the first game
    fresh = search.analyse(other, simulations=300)
    # Same result as a search that never saw the first game (the evaluator is deterministic).
    alone = analyse(other, HashEvaluator(seed=4), 300, SearchConfig(leaves_per_tree=1))
    assert [(str(s.move), s.visits) for s in fresh.moves] == [(str(s.move), s.visits) for s in alone.moves]


def test_a_time_limit_stops_the_search_and_keeps_its_moves():
    search = GameSearch(HashEvaluator(seed=4))
    search.analyse(Game(), simulations=50)  # compile the kernels first
    started = time.perf_counter()
    analysis = search.analyse(Game(), seconds=0.3)
    elapsed = time.perf_counter() - started
    assert 0.3 <= elapsed < 1.5
    assert analysis.simulations > 50 and best_move(analysis) in Game().legal_moves()
    # With both limits, whichever comes first ends the search.
    quick = GameSearch(HashEvaluator(seed=4)).analyse(Game(), simulations=64, seconds=30)
    assert 64 <= quick.simulations < 64 + SINGLE_GAME_LEAVES


def test_a_time_limit_already_spent_still_gives_a_move():
    # On a loaded machine the time can run out before the first network call (re-rooting, compiling the
    # kernels): a player on the clock must still answer with a legal move, not an analysis without moves.
    search, game = GameSearch(HashEvaluator(seed=4)), Game()
    for _ in range(2):  # a fresh tree, then a kept one
        analysis = search.analyse(game, seconds=0.0)
        assert analysis.simulations >= 1 and best_move(analysis) in game.legal_moves()
        game.play(best_move(analysis))


def test_a_search_needs_a_limit():
    with pytest.raises(ValueError):
        GameSearch(HashEvaluator()).analyse(Game())


class _SlowFirstCall:
    """An evaluator whose first call takes `delay` seconds, as the first search after an install spends
    compiling its kernels."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0
        self.inner = HashEvaluator()

    def evaluate(self, planes):
        self.calls += 1
        if self.calls == 1:
            time.sleep(self.delay)
        return self.inner.evaluate(planes)


def _calls_at_first_timed_step(monkeypatch, module, slow: _SlowFirstCall) -> list[int]:
    """Cold search kernels, and a record of how many calls `slow` had had when the search that `module`
    makes (not warm_up's) took its first step."""
    import selfplay.tree_search.search as search_module

    monkeypatch.setattr(search_module, "_warmed_up", False)
    record: list[int] = []

    class Recorded(search_module.BatchedSearch):
        def step(self, evaluator):
            if not record:
                record.append(slow.calls)
            return super().step(evaluator)

    monkeypatch.setattr(module, "BatchedSearch", Recorded)
    return record


def test_the_first_search_on_the_clock_gets_its_time(monkeypatch, capsys):
    """The kernels are compiled and the evaluator warmed before the clock starts, with a message while that
    takes long: the slow first call comes before the timed search's first step (before, it was that step,
    and the move's time was gone)."""
    import selfplay.tree_search.analysis as analysis_module
    import selfplay.tree_search.search as search_module

    monkeypatch.setattr(search_module, "WARM_UP_NOTICE_SECONDS", 0.1)
    slow = _SlowFirstCall(2.0)
    calls_at_first_step = _calls_at_first_timed_step(monkeypatch, analysis_module, slow)
    GameSearch(slow).analyse(Game(), seconds=0.05)
    assert calls_at_first_step[0] >= 1
    assert "preparing the search: compiling its kernels" in capsys.readouterr().err
    # Once per process: a second search warms nothing and says nothing.
    GameSearch(_SlowFirstCall(0.0)).analyse(Game(), seconds=0.05)
    assert capsys.readouterr().err == ""


def test_the_first_search_of_a_number_of_simulations_says_it_prepares_the_search(monkeypatch, capsys):
    # Before (issue 85, item 10): `play` at its default level (64 simulations) compiled the kernels inside
    # its first search, 81 s silent after "Engine thinking (64 simulations)..." after an install.
    import selfplay.tree_search.search as search_module

    monkeypatch.setattr(search_module, "_warmed_up", False)
    monkeypatch.setattr(search_module, "WARM_UP_NOTICE_SECONDS", 0.1)
    GameSearch(_SlowFirstCall(2.0)).analyse(Game(), simulations=8)
    assert "preparing the search: compiling its kernels" in capsys.readouterr().err


def test_a_match_player_on_the_clock_is_warmed_before_its_first_move(monkeypatch):
    import selfplay.tree_search.analysis as analysis_module
    from train.arena.match import NetworkPlayer, play_match
    from zero.corpus.openings import Opening
    from zero.yardsticks.players import RandomPlayer

    slow = _SlowFirstCall(0.3)
    # Its games are searched by GameSearch (selfplay.tree_search.analysis), where the warm-up is checked.
    calls_at_first_step = _calls_at_first_timed_step(monkeypatch, analysis_module, slow)
    player = NetworkPlayer("clock", slow, None, SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES), seconds=0.05)
    play_match(player, RandomPlayer(0), [Opening("start", ())], games=1)
    assert calls_at_first_step[0] >= 1  # the slow first call came before the match's first search step


# ------------------------------------------------------------------------------------------ on the clock

def _clocked_search(evaluator: ClockedEvaluator, **kwargs) -> GameSearch:
    warm_up(UniformEvaluator())  # the once-a-process warm-up, before any fake clock runs
    return GameSearch(evaluator, clock=evaluator.clock, **kwargs)


def _played(*moves: str) -> Game:
    game = Game()
    for text in moves:
        game.play(resolve_move(text, game.legal_moves()))
    return game


def test_a_forced_move_is_played_unsearched_and_the_tree_follows_it():
    evaluator = ClockedEvaluator()
    search = _clocked_search(evaluator)
    game = _played("11-15")
    reply = resolve_move("22-18", game.legal_moves())
    search.choose(game, simulations=800)
    game.play(reply)  # Black's only legal move is now the capture 15x22
    calls = evaluator.calls
    move, analysis = search.choose(game, seconds=1.0)
    assert (str(move), analysis, evaluator.calls) == ("15x22", None, calls)  # no search, no network call
    game.play(move)
    # The next search starts from the subtree of the two moves played since the last one.
    kept = search._rooted_at(game).root_visits(0)
    assert kept > 0
    positions = evaluator.positions
    move, analysis = search.choose(game, simulations=kept + 100)
    assert analysis.simulations >= kept + 100 and move in game.legal_moves()
    assert evaluator.positions - positions <= 100 + SINGLE_GAME_LEAVES


def test_a_search_on_the_clock_ends_within_one_network_call_of_its_time():
    for seconds in (0.5, 0.333, 0.01):
        for choose in (False, True):  # even positions: the early stop never applies
            evaluator = ClockedEvaluator(seconds=0.01)
            search = _clocked_search(evaluator)
            started = evaluator.calls
            analysis = search.choose(Game(), seconds=seconds)[1] if choose else search.analyse(Game(), seconds=seconds)
            assert seconds <= analysis.seconds <= seconds + evaluator.seconds + 1e-9
            assert evaluator.calls - started == pytest.approx(seconds / evaluator.seconds, abs=1)


def test_a_search_on_the_clock_stops_once_its_move_cannot_change():
    game = Game()
    favourite = resolve_move("11-15", game.legal_moves())
    evaluator = ClockedEvaluator(seconds=0.01, favourite=move_action(favourite, True))
    move, analysis = _clocked_search(evaluator).choose(game, seconds=1.0)
    assert move == favourite
    # Stopped well before its second: the rest of the time could not have changed the move.
    assert analysis.seconds < 0.8
    visits = sorted((stat.visits for stat in analysis.moves), reverse=True)
    left = TimeManager().simulations_left(analysis.simulations, analysis.seconds, 1.0 - analysis.seconds)
    assert visits[1] + left < visits[0]
    # Analysis spends the whole time on the same position, and finds the same move.
    evaluator = ClockedEvaluator(seconds=0.01, favourite=move_action(favourite, True))
    full = _clocked_search(evaluator).analyse(game, seconds=1.0)
    assert full.seconds >= 1.0 and best_move(full) == favourite and full.simulations > analysis.simulations


def _children(visits, proven=None) -> RootChildren:
    n = len(visits)
    zeros = np.zeros(n)
    return RootChildren(zeros, zeros, zeros, np.array(visits), np.full(n, 1.0 / n), zeros, zeros,
                        np.array(proven if proven is not None else [np.nan] * n), np.full(n, -1))


def test_a_move_is_decided_when_no_rival_can_reach_it():
    assert decided(_children([100, 50, 3]), 49)
    assert not decided(_children([100, 50, 3]), 50)  # a tie could go to the rival (ties go by prior)
    assert not decided(_children([100, 50, 3]), float("inf"))  # nothing measured yet
    # A move proven lost is no rival; the move left alone is decided.
    assert decided(_children([100, 90, 3], proven=[np.nan, -1, np.nan]), 60)
    assert decided(_children([5, 90], proven=[np.nan, -1]), 1000)


def test_the_rate_margin_counts_more_simulations_left():
    assert TimeManager(rate_margin=2.0).simulations_left(100, 1.0, 0.5) == 100
    assert TimeManager().simulations_left(0, 0.0, 1.0) == float("inf")
    with pytest.raises(ValueError):
        TimeManager(rate_margin=0.5).validate()


def test_a_game_clock_spreads_its_bank_and_pays_back_an_overrun():
    manager = TimeManager(moves_to_go=20, extension=3.0, most_of_bank=0.3)
    increment = 0.1
    # Nothing banked: the increment less the reserve kept for an overrun, no more.
    assert move_time(manager, increment, 0.0) == MoveTime(pytest.approx(0.09), pytest.approx(0.09))
    banked = move_time(manager, increment, 2.0)
    assert banked.target == pytest.approx(0.2) and banked.most == pytest.approx(0.6)
    assert move_time(manager, increment, 20.0).most == pytest.approx(3 * 1.1)  # at most `extension` times the target
    assert move_time(manager, increment, 1.0).most == pytest.approx(0.1 + 0.3)  # at most that share of the bank
    # A debt bigger than the increment (a real clock would have fallen): one step, then the move.
    assert move_time(manager, increment, -0.2) == MoveTime(0.0, 0.0)
    assert move_time(manager, 0.0, -1.0) == MoveTime(0.0, 0.0)


@pytest.mark.parametrize("increment", [0.0, 0.1, 1.0])
@pytest.mark.parametrize("pieces_above_database", [None, 0, 1, 4, 30])
def test_a_move_never_plans_past_what_the_clock_holds_less_its_reserve(increment, pieces_above_database):
    manager = TimeManager(moves_to_go=20, moves_a_piece=1.0, extension=3.0, most_of_bank=1.0, reserve=0.1)
    for bank in (0.0, 0.01, 0.5, 2.0, 60.0):
        budget = move_time(manager, increment, bank, pieces_above_database)
        assert budget.target <= budget.most <= 0.9 * (increment + bank) + 1e-12


def test_a_game_on_the_clock_overrunning_each_search_a_little_never_runs_its_clock_out():
    # Base 0 and 0.1 s a move; every searched move runs 5 ms past the time it aimed at (its last network
    # call), and every fifth is played at once (a book or forced move) and banks its increment. Before the
    # reserve the first searched move, aiming at the whole 0.1 s, left the clock 5 ms below zero.
    manager, increment, bank, lowest = TimeManager(), 0.1, 0.0, 0.0
    for move in range(200):
        budget = move_time(manager, increment, bank, pieces_above_database=max(30 - move // 5, 0))
        spent = 0.0 if move % 5 == 0 else budget.target + 0.005
        bank += increment - spent
        lowest = min(lowest, bank)
    assert lowest >= 0.0
    assert bank < 3 * increment  # and the bank is spent as it is earned, not hoarded


def test_a_game_clock_spends_its_bank_before_the_database_plays():
    # A database plays its positions at once, so a bank carried into them is never spent: with 4 pieces
    # above the database's size, one move a piece, the bank is spread over 4 moves instead of 20.
    manager = TimeManager(moves_to_go=20, moves_a_piece=1.0)
    assert move_time(manager, 0.1, 2.0, pieces_above_database=30).target == pytest.approx(0.1 + 2.0 / 20)
    assert move_time(manager, 0.1, 2.0, pieces_above_database=4).target == pytest.approx(0.1 + 2.0 / 4)
    # The last search: the whole clock, less its reserve.
    assert move_time(manager, 0.1, 2.0, pieces_above_database=0).target == pytest.approx(0.9 * (0.1 + 2.0))
    slower = TimeManager(moves_to_go=20, moves_a_piece=2.0)
    assert move_time(slower, 0.1, 2.0, pieces_above_database=4).target == pytest.approx(0.1 + 2.0 / 8)


@pytest.mark.parametrize("text", ["0.1", "a+0.1", "1+", "-1+0.1", "1+-0.1", "0+0", "inf+0.1", "nan+1"])
def test_a_game_clock_that_is_not_one_is_refused_with_its_text(text):
    with pytest.raises(ValueError, match="game clock"):
        GameClock.parse(text)


def test_a_game_clock_reads_base_plus_increment():
    assert GameClock.parse("60+0.5") == GameClock(60.0, 0.5) and str(GameClock.parse("0+0.1")) == "0+0.1"


def test_a_choice_is_unstable_when_its_move_changed_late_or_its_value_fell():
    manager = TimeManager(unstable_share=0.25, value_drop=0.1)
    instability = Instability(manager, previous_value=0.2)
    instability.observe(_children([10, 5, 1]), searched=16)
    instability.observe(_children([20, 12, 1]), searched=100)
    assert not instability.unstable(100, value=0.15)  # the leader since 16 of 100, the value 0.05 lower
    assert instability.unstable(100, value=0.05)  # the value fell by 0.15
    instability.observe(_children([20, 30, 1]), searched=110)  # another leader, in the last quarter
    assert instability.unstable(110, value=0.2)
    assert not instability.unstable(500, value=0.2)  # ... of 110, not of 500
    assert not Instability(manager, previous_value=None).unstable(100, value=-1.0)  # no earlier search


@pytest.mark.parametrize("share, thinks_on", [(1.0, True), (0.0, False)])
def test_a_search_on_a_game_clock_thinks_on_only_while_its_choice_is_unstable(share, thinks_on):
    # Share 1: every leader counts as late (always unstable); share 0: never. Even positions: no early stop.
    evaluator = ClockedEvaluator(seconds=0.01)
    search = _clocked_search(evaluator, time_manager=TimeManager(unstable_share=share, value_drop=2.0))
    _, analysis = search.choose(Game(), seconds=0.1, most_seconds=0.3)
    expected = 0.3 if thinks_on else 0.1
    assert expected <= analysis.seconds <= expected + evaluator.seconds + 1e-9


def test_the_tree_grows_so_that_the_clock_ends_the_search():
    # A pool far too small for the time asked grows as the search fills it, up to its bound.
    evaluator = ClockedEvaluator(seconds=0.01)
    search = _clocked_search(evaluator, capacity=2_000)
    analysis = search.analyse(Game(), seconds=1.0)
    assert analysis.seconds >= 1.0 and analysis.nodes > 2_000
    # At the bound, a full tree ends the search before its time.
    evaluator = ClockedEvaluator(seconds=0.01)
    search = _clocked_search(evaluator, capacity=2_000, max_capacity=4_000)
    analysis = search.analyse(Game(), seconds=1.0)
    assert analysis.seconds < 1.0 and 3_000 < analysis.nodes <= 4_000
    assert best_move(analysis) in Game().legal_moves()


class _Overlap:
    """An evaluator that records how many of its calls run at once (each waits a little, releasing the
    interpreter as a network call does)."""

    def __init__(self) -> None:
        import threading

        self.inner = HashEvaluator(seed=4)
        self.running = 0
        self.most = 0
        self.calls = 0
        self._lock = threading.Lock()

    def evaluate(self, planes):
        with self._lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        time.sleep(0.002)
        with self._lock:
            self.running -= 1
        return self.inner.evaluate(planes)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_search_with_threads_keeps_that_many_network_calls_in_flight_and_a_whole_tree(threads):
    from selfplay.tree_search import mcts

    evaluator = _Overlap()
    search = GameSearch(evaluator, SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES, threads=threads))
    game = Game()
    analysis = search.analyse(game, simulations=1500)
    assert evaluator.most == threads
    # Every call was backed up before the search was read: no visit pending, no leaf left waiting, and the
    # root's visits are its target and the sum of its children's (plus its own expansion).
    forest = search._search.forest
    used = int(forest.trees[0, mcts.USED])
    assert not forest.stats[0, :used, mcts.VIRTUAL].any()
    assert not (forest.links[0, :used, mcts.STATE] == mcts.PENDING).any()
    assert forest.stats[0, 0, mcts.VISITS] == 1500 == sum(m.visits for m in analysis.moves) + 1
    # The search goes on from its tree move after move, as with one thread.
    game.play(best_move(analysis))
    again = search.analyse(game, simulations=3000)
    assert sum(m.visits for m in again.moves) + 1 == 3000


def test_a_search_with_threads_finds_the_shot_one_thread_finds():
    """7-10 gives a man to take two back (tests/test_players.py): found alike with calls in flight."""
    from selfplay.tree_search.evaluators import MaterialEvaluator
    from zero.rules.notation import fen_to_position

    game = Game(start=fen_to_position("B:W12,14,15,29:B2,7,13"))
    for threads in (1, 2):
        config = SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES, threads=threads)
        assert str(best_move(GameSearch(MaterialEvaluator(), config).analyse(game, simulations=3000))) == "7-10"


def test_the_line_of_a_database_position_is_the_databases_to_the_end_of_the_game():
    # Before (issue 85, item 11): `analyze` of a database loss in 22 showed the line "5-1" alone: the proven
    # root stopped the search at 3 simulations and the line followed the tree, whose children were leaves.
    egdb = ensure_built(4)
    search = GameSearch(UniformEvaluator(), egdb=egdb)
    lost = Game(start=fen_to_position("B:WK18,K19:BK5"))
    analysis = search.analyse(lost, simulations=100)
    assert analysis.proven.value == LOSS and len(analysis.pv) == analysis.proven.plies > 1, analysis.pv
    for move in analysis.pv:
        lost.play(resolve_move(str(move), lost.legal_moves()))
    assert not lost.legal_moves()  # the line ends with the game, lost for Black
    # So does each move's line (the engine protocol's and the browser's `lines`), the first as the PV.
    start = fen_to_position("B:WK18,K19:BK5")
    lines = search.candidate_lines(start, [stat.move for stat in analysis.moves])
    assert lines[analysis.moves[0].move] == analysis.pv
    assert all(len(line) == stat.proven.plies for stat, line in zip(analysis.moves, lines.values()))
    drawn = Game(start=fen_to_position("B:WK14,K15:BK10"))
    analysis = search.analyse(drawn, simulations=100)
    assert analysis.proven.value == DRAW and len(analysis.pv) == 1 + DRAWN_LINE_MOVES, analysis.pv

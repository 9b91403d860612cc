"""The match engine, ballots and the score/Elo statistics."""

from __future__ import annotations

import argparse
import importlib
import math
import sys

import pytest

from selfplay.tree_search.evaluators import HashEvaluator
from train.arena.match import (
    IllegalMoveError, MatchGame, MatchResult, elo_from_score, format_elo, format_elo_interval, match_schedule,
    play_match, score_statistics,
)
from train.cli.match import add_arguments, run
from zero.corpus.openings import BallotError, Opening, load_openings
from zero.rules.game import Game, Position, RulesConfig, Termination
from zero.rules.player import SearchingPlayer
from zero.run.data import REPOSITORY, data_file
from zero.yardsticks.players import AlphaBetaPlayer, RandomPlayer
from match_starts import StartLog, long_first_pair

OPENINGS = [Opening("9-13 21-17 5-9", ("9-13", "21-17", "5-9")), Opening("11-15 23-19 8-11", ("11-15", "23-19", "8-11"))]


# ---------------------------------------------------------------------------------------------- statistics

def test_elo_from_score_known_values():
    assert elo_from_score(0.5) == 0.0
    assert elo_from_score(0.75) == pytest.approx(190.85, abs=0.01)  # 400 log10(3)
    assert elo_from_score(0.25) == pytest.approx(-elo_from_score(0.75))
    assert elo_from_score(1.0) == math.inf
    assert elo_from_score(0.0) == -math.inf
    with pytest.raises(ValueError):
        elo_from_score(1.5)


def test_even_match_is_zero_elo_with_a_symmetric_interval():
    # Pairs scoring 2, 0, 1, 1: mean 1 per pair, score 0.5.
    s = score_statistics([(2, 2), (0, 2), (1, 2), (1, 2)])
    assert s.score == 0.5 and s.elo == 0.0
    low, high = s.elo_ci95
    assert low < 0 < high and low == pytest.approx(-high)
    # Pair points 2, 0, 1, 1 have sample variance 2/3; the score is their mean over 2 games.
    assert s.stderr == pytest.approx(math.sqrt(2 / 3 / 4) / 2)


def test_all_draws_give_zero_with_an_interval_that_keeps_a_width():
    # Before: two identical players over 20 games, "Elo -0 (95% CI -0 .. -0)": a spread of 0 seen in 10 pairs
    # taken for none. It is taken as if one more pair had gone each way.
    s = score_statistics([(1.0, 2)] * 10)
    assert s.score == 0.5 and s.elo == 0.0 and s.units == 10 and s.games == 20
    assert s.stderr == pytest.approx(math.sqrt(2 * 12 / 11) / 24)
    low, high = s.elo_ci95
    assert low == pytest.approx(-high) and 50 < high < 150
    assert format_elo(-0.0) == "+0" and format_elo_interval(low, high) == f"-{high:.0f} .. +{high:.0f}"


def test_all_wins_give_no_finite_elo_and_a_finite_lower_bound():
    s = score_statistics([(2.0, 2)] * 10)
    assert s.score == 1.0 and s.elo == math.inf and s.elo_ci95[1] == math.inf
    assert 0 < s.elo_ci95[0] < math.inf
    assert format_elo(s.elo) == "no finite estimate"
    assert format_elo_interval(*s.elo_ci95) == f"from {format_elo(s.elo_ci95[0])} up"
    s = score_statistics([(0.0, 2)] * 10)
    assert s.elo == -math.inf and -math.inf < s.elo_ci95[1] < 0


def test_interval_narrows_with_more_pairs_and_is_clipped():
    few = score_statistics([(2, 2), (1, 2), (1.5, 2), (1, 2)])
    many = score_statistics([(2, 2), (1, 2), (1.5, 2), (1, 2)] * 25)
    assert few.score == many.score
    assert many.elo_ci95[1] - many.elo_ci95[0] < few.elo_ci95[1] - few.elo_ci95[0]
    lopsided = score_statistics([(2, 2), (2, 2), (0, 2)])
    assert 0.0 <= lopsided.score_ci95[0] <= lopsided.score_ci95[1] <= 1.0


def test_single_games_and_pairs_mix():
    s = score_statistics([(2, 2), (1, 1), (0.5, 2)])
    assert s.score == pytest.approx(3.5 / 5) and s.games == 5 and s.units == 3


def test_one_unit_says_nothing_about_the_spread():
    s = score_statistics([(1.5, 2)])
    assert s.score == 0.75 and s.score_ci95 == (0.0, 1.0)


# --------------------------------------------------------------------------------------------------- ballots

def test_text_ballot(tmp_path):
    path = tmp_path / "b.txt"
    path.write_text("# deck\n9-13 21-17 5-9\n\n11-15 23-19 8-11  # a comment\n")
    openings = load_openings(path)
    assert [o.moves for o in openings] == [OPENINGS[0].moves, OPENINGS[1].moves]


def test_ballot_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("9-13 21-17\n9-14 9-13\n")
    with pytest.raises(BallotError, match=r"bad.txt:2"):
        load_openings(bad)
    with pytest.raises(BallotError, match="cannot read"):
        load_openings(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(BallotError, match="no openings"):
        load_openings(empty)
    binary = tmp_path / "binary.txt"  # before: a UnicodeDecodeError traceback from `match --openings`
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(BallotError, match="binary.txt: not a ballot: not UTF-8 text"):
        load_openings(binary)


def test_tsv_ballot_checks_fen_and_skips_barred(tmp_path):
    after = Position.initial()
    for text in ("9-13", "21-17", "5-9"):
        after = after.play(next(m for m in after.legal_moves() if str(m) == text))
    path = tmp_path / "b.tsv"
    path.write_text("acf_no\tmoves\tdeck\tfen_after\n"
                    f"1\t9-13 21-17 5-9\tcrossboard\t{after}\n"
                    f"3\t9-13 21-17 10-14\tbarred\t\n")
    assert [o.name for o in load_openings(path)] == ["9-13 21-17 5-9"]
    path.write_text("no\tmoves\tfen\n1\t9-13 21-17 6-9\t" + str(after) + "\n")
    with pytest.raises(BallotError, match="does not reach"):
        load_openings(path)


def test_tsv_ballot_with_removed_pieces(tmp_path):
    path = tmp_path / "eleven.tsv"
    path.write_text("no\tremove_black\tremove_white\tmoves\tstatus\tfen\n"
                    "1\t11\t28\t8-11 24-19\tstandard\tB:W19,21,22,23,25,26,27,29,30,31,32:B1,2,3,4,5,6,7,9,10,11,12\n")
    (opening,) = load_openings(path)
    assert opening.start.piece_count() == 22


@pytest.mark.parametrize("name, count", [("acf_3move_144.txt", 144), ("acf_3move_all174.tsv", 144 + 12),
                                         ("english_11man_pydraughts.tsv", None)])
def test_shared_ballots_load(name, count):
    path = data_file(f"openings/{name}")
    if path is None:
        pytest.skip(f"openings/{name} not found")
    openings = load_openings(path)
    assert count is None or len(openings) == count


# ----------------------------------------------------------------------------------------------------- games

def one_game(a, b, opening: Opening, seed: int = 0, rules: RulesConfig = RulesConfig()):
    """The first game of a match over one opening: A plays Black."""
    return play_match(a, b, [opening], rules, seed=seed, games=1).games[0]


def test_a_game_is_a_pure_function_of_its_seed():
    one = one_game(RandomPlayer(1), RandomPlayer(2), OPENINGS[0], seed=7)
    two = one_game(RandomPlayer(1), RandomPlayer(2), OPENINGS[0], seed=7)
    other = one_game(RandomPlayer(1), RandomPlayer(2), OPENINGS[0], seed=8)
    assert one.moves == two.moves and one.outcome == two.outcome
    assert one.moves != other.moves
    assert [str(m) for m in one.moves[:3]] == ["9-13", "21-17", "5-9"]
    # The record replays under the rules to the same outcome.
    game = Game(moves=list(one.moves))
    assert game.outcome == one.outcome


def test_games_in_flight_do_not_change_any_game():
    # Plain players with random choices: the same games one at a time and eight at a time, as the players
    # are reseeded from each game's seed before every move.
    ballot = OPENINGS * 4
    alone = play_match(AlphaBetaPlayer(2, seed=1), RandomPlayer(2), ballot, seed=3, parallel=1)
    together = play_match(AlphaBetaPlayer(2, seed=1), RandomPlayer(2), ballot, seed=3, parallel=8)
    key = sorted((g.seed, g.moves) for g in alone.games)
    assert key == sorted((g.seed, g.moves) for g in together.games)
    assert len({g.moves for g in alone.games}) > 1


def test_a_match_starts_no_game_beyond_what_its_caller_lets_start(monkeypatch):
    # Issue 85, item 8: a gate counts pairs in ballot order, and its first had finished 119 games but counted 3
    # pairs at 10.3 min: one game of pair 4 went on at the pace of 48 games in flight while the later games
    # finished and waited. A caller that says which openings may start holds the later games back.
    ballot = long_first_pair(6)

    def players():
        return RandomPlayer(1), RandomPlayer(2)

    free = StartLog(monkeypatch)
    unheld = play_match(*players(), ballot, seed=3, parallel=4, on_game=free.finished)
    assert max(free.pairs_ahead(ballot)) >= 2  # unheld, later pairs start while the first goes on

    log = StartLog(monkeypatch)
    held = play_match(*players(), ballot, seed=3, parallel=4, on_game=log.finished,
                      may_start=lambda opening: opening < log.pairs_done() + 2)
    ahead = log.pairs_ahead(ballot)
    assert len(ahead) == 12 and max(ahead) == 1  # never past the 2 pairs it lets start, and up to them
    key = sorted((g.round, g.seed, g.moves) for g in unheld.games)
    assert sorted((g.round, g.seed, g.moves) for g in held.games) == key  # every game, each the same

    # Stopped while the first pair goes on, then resumed from its finished games (the second pair), it holds
    # the rest back alike and plays the same games.
    log = StartLog(monkeypatch)
    stopped = play_match(*players(), ballot, seed=3, parallel=4, on_game=log.finished,
                         may_start=lambda opening: opening < log.pairs_done() + 2,
                         should_stop=lambda result: len(result.games) >= 2)
    assert sorted(g.round for g in stopped.games) == [3, 4]
    log = StartLog(monkeypatch)
    for game in stopped.games:
        log.finished(game)
    resumed = play_match(*players(), ballot, seed=3, parallel=4, on_game=log.finished, done=stopped,
                         may_start=lambda opening: opening < log.pairs_done() + 2)
    ahead = log.pairs_ahead(ballot)
    assert len(ahead) == 12 - len(stopped.games) and max(ahead) <= 1
    assert sorted((g.round, g.seed, g.moves) for g in resumed.games) == key


def test_a_match_that_may_start_no_game_plays_them_one_at_a_time(monkeypatch):
    # With no game in flight nothing could change the caller's answer: waiting for it would never end, and
    # ending there would drop the rest of the match.
    log = StartLog(monkeypatch)
    result = play_match(RandomPlayer(1), RandomPlayer(2), OPENINGS, seed=3, parallel=4, on_game=log.finished,
                        may_start=lambda _: False)
    assert log.events == [None, 1, None, 2, None, 3, None, 4] and len(result.games) == 4


def test_length_cap_is_a_flagged_draw():
    record = one_game(RandomPlayer(1), RandomPlayer(2), OPENINGS[0], rules=RulesConfig(max_plies=10))
    assert len(record.moves) == 10 and record.truncated and record.result == "1/2-1/2"
    assert record.outcome.termination == Termination.MAX_LENGTH


def test_draw_rules_apply_in_matches():
    # Two kings each, nothing to win: tight rules end it by repetition or no progress, not the cap.
    start = Position(black=(1 << 0) | (1 << 1), white=(1 << 30) | (1 << 31), kings=(1 << 0) | (1 << 1) | (1 << 30) | (1 << 31))
    record = one_game(AlphaBetaPlayer(2), AlphaBetaPlayer(2), Opening("kings", (), start),
                      rules=RulesConfig(repetitions_for_draw=3, no_progress_plies=20, max_plies=1000))
    assert record.outcome.termination in (Termination.REPETITION, Termination.NO_PROGRESS)


def test_illegal_move_is_reported():
    class Cheater:
        name = "cheater"

        def choose(self, game):
            return Position.initial().legal_moves()[0] if game.ply else game.legal_moves()[0]

    with pytest.raises(IllegalMoveError, match="cheater"):
        one_game(Cheater(), Cheater(), Opening("none", ()))


# --------------------------------------------------------------------------------------------------- matches

def test_schedule_plays_each_opening_with_both_colours():
    assert match_schedule(OPENINGS) == [(0, True), (0, False), (1, True), (1, False)]
    assert match_schedule(OPENINGS, games=3) == [(0, True), (0, False), (1, True)]


def test_mini_match_counts_from_a_view():
    result = play_match(AlphaBetaPlayer(2, seed=1), RandomPlayer(2), OPENINGS, seed=3)
    assert isinstance(result, MatchResult)
    assert len(result.games) == 4 and result.wins + result.draws + result.losses == 4
    assert result.score == pytest.approx((result.wins + result.draws / 2) / 4)
    assert sum(result.pentanomial()) == 2
    for record, a_black in zip(result.games, result.a_is_black):
        assert (record.black if a_black else record.white) == "alphabeta:2"
    assert "alphabeta:2 vs random" in result.summary()


def test_match_command_writes_pdn_that_reads_back(tmp_path, capsys):
    import argparse

    pdn = pytest.importorskip("zero.corpus.pdn")
    ballot = tmp_path / "ballot.txt"
    ballot.write_text("\n".join(" ".join(o.moves) for o in OPENINGS) + "\n")
    out = tmp_path / "m.pdn"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["ab2", "random", "--openings", str(ballot), "--out", str(out), "--games", "3",
                              "--seed", "5"])
    assert run(args) == 0
    printed = capsys.readouterr().out
    assert "Elo difference" in printed and "3 games" in printed
    games = list(pdn.read_pdn(out))
    assert len(games) == 3 and all(isinstance(g, pdn.PdnGame) for g in games)
    assert sorted(g.tags["Round"] for g in games) == ["1", "2", "3"]
    first = next(g for g in games if g.tags["Round"] == "1")
    assert first.tags["Black"] == "alphabeta:2" and first.tags["White"] == "random"
    assert first.tags["Opening"] == "9-13 21-17 5-9"
    assert [str(m) for m in first.moves[:3]] == ["9-13", "21-17", "5-9"]
    assert first.result == first.tags["Result"]
    replayed = Game(moves=first.moves)
    assert replayed.outcome is not None and replayed.outcome.pdn_result == first.result


def test_match_command_rejects_bad_input(tmp_path, capsys):
    import argparse

    ballot = tmp_path / "ballot.txt"
    ballot.write_text("9-13 21-17\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run(parser.parse_args(["ab2", "nobody", "--openings", str(ballot)])) == 2
    assert "unknown player" in capsys.readouterr().err
    assert run(parser.parse_args(["ab2", "random", "--openings", str(tmp_path / "none.txt")])) == 2


def test_match_pdn_lists_the_games_in_round_order(tmp_path, capsys):
    # Before: the PDN listed the games in the order they finished (here rounds 3, 4, 1, 2).
    import argparse

    from zero.corpus.pdn import read_pdn

    ballot = tmp_path / "ballot.pdn"
    # The second opening is over before a move (White has none): its two games end first.
    ballot.write_text(f'[FEN "{Position.initial().fen()}"] *\n[FEN "W:W5:B1"] *\n')
    out = tmp_path / "m.pdn"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["random", "ab2", "--openings", str(ballot), "--out", str(out), "--max-plies", "12",
                              "--no-endgame-judge"])
    assert run(args) == 0
    capsys.readouterr()
    assert [g.tags["Round"] for g in read_pdn(out)] == ["1", "2", "3", "4"]
    assert not list(tmp_path.glob(".m.pdn*"))  # the rewrite leaves no temporary file behind


# ------------------------------------------------------------------------------------------- time per move

class _FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Deliberate(RandomPlayer):
    """A random player whose every choice takes `seconds` of a fake clock."""

    def __init__(self, name: str, clock: _FakeClock, seconds: float, seed: int) -> None:
        super().__init__(seed)
        self.name, self.clock, self.seconds = name, clock, seconds

    def choose(self, game):
        self.clock.now += self.seconds
        return super().choose(game)


def _forced(record) -> list[bool]:
    """Per move after the opening: whether it was the only legal one."""
    game = Game(start=record.opening.start)
    forced = []
    for ply, move in enumerate(record.moves):
        if ply >= len(record.moves) - len(record.move_seconds):
            forced.append(len(game.legal_moves()) == 1)
        game.play(move)
    return forced


def test_the_summary_gives_each_players_mean_and_longest_time_a_move():
    clock = _FakeClock()
    a, b = _Deliberate("slow", clock, 0.5, 1), _Deliberate("quick", clock, 0.25, 2)
    result = play_match(a, b, OPENINGS, RulesConfig(max_plies=60), seed=3, clock=clock)
    expected: tuple[list[float], list[float]] = ([], [])
    for record, a_black in zip(result.games, result.a_is_black):
        mover_is_a = [(ply % 2 == 0) == a_black for ply in range(len(record.moves))][-len(record.move_seconds):]
        for is_a, forced in zip(mover_is_a, _forced(record)):
            # A forced move is played at once: it counts, at no time.
            expected[0 if is_a else 1].append(0.0 if forced else (0.5 if is_a else 0.25))
    assert result.move_seconds() == expected
    assert 0.0 in expected[0] + expected[1]  # the openings' captures leave forced moves
    a_mean, b_mean = (sum(t) / len(t) for t in expected)
    assert (f"time per move: slow: mean {a_mean:.3f} s, max 0.500 s ({len(expected[0])} moves); "
            f"quick: mean {b_mean:.3f} s, max 0.250 s ({len(expected[1])} moves)") in result.summary()
    # The times travel with a game's record (gating's match records, resumed matches).
    record = result.games[0]
    again = MatchGame.from_json(record.to_json(), record.opening, RulesConfig(max_plies=60))
    assert again.move_seconds == pytest.approx(record.move_seconds)


class _TickingEvaluator:
    """A network whose every call takes 1 ms of a fake clock."""

    def __init__(self, clock: _FakeClock) -> None:
        self.clock = clock
        self.inner = HashEvaluator(seed=5)

    def evaluate(self, planes):
        self.clock.now += 0.001
        return self.inner.evaluate(planes)


def test_network_players_times_a_move_on_the_clock_and_in_lockstep():
    from selfplay.tree_search.analysis import SINGLE_GAME_LEAVES
    from selfplay.tree_search.search import SearchConfig
    from train.arena.match import NetworkPlayer

    clock = _FakeClock()
    timed = NetworkPlayer("timed", _TickingEvaluator(clock), None, SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES),
                          seconds=0.02)
    fixed = NetworkPlayer("fixed", _TickingEvaluator(clock), 16, SearchConfig(leaves_per_tree=2))
    result = play_match(timed, fixed, OPENINGS[:1], RulesConfig(max_plies=30), clock=clock)
    timed_seconds, fixed_seconds = result.move_seconds()
    assert len(timed_seconds) + len(fixed_seconds) == sum(len(g.move_seconds) for g in result.games) > 0
    # On the clock: within one network call of its time. In lockstep (one game here): its steps' time, at
    # most a call a simulation (2 leaves a call but for batches cut short), none for a forced move.
    assert max(timed_seconds) <= 0.02 + 0.001 + 1e-9
    assert 0 < max(fixed_seconds) <= 16 * 0.001 + 1e-9
    assert "time per move: timed: mean" in result.summary() and "; fixed: mean" in result.summary()


def test_a_player_on_a_game_clock_spends_what_its_moves_save_and_no_more():
    from selfplay.tree_search.analysis import SINGLE_GAME_LEAVES
    from selfplay.tree_search.search import SearchConfig
    from selfplay.tree_search.time_manager import GameClock
    from train.arena.match import NetworkPlayer

    clock = _FakeClock()
    game_clock = GameClock(0.05, 0.01)
    clocked = NetworkPlayer("clocked", _TickingEvaluator(clock), None,
                            SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES), clock=game_clock)
    fixed = NetworkPlayer("fixed", _TickingEvaluator(clock), 16, SearchConfig(leaves_per_tree=2))
    result = play_match(clocked, fixed, OPENINGS[:2], RulesConfig(max_plies=40), clock=clock)
    longest = 0.0
    for record, a_black in zip(result.games, result.a_is_black):
        own = record.seconds_by_colour()[0 if a_black else 1]
        # The whole game within its clock: the base and an increment a move, and the overruns of at most
        # one network call a move still being paid back (at 1/moves_to_go of the debt a move).
        assert sum(own) <= game_clock.base + game_clock.increment * len(own) + 20 * 0.001 + 1e-9
        longest = max(longest, max(own))
    # The base and what forced moves saved were spent: some moves thought longer than an increment.
    assert longest > game_clock.increment + 0.001


def test_a_player_on_a_game_clock_spends_it_as_its_own_time_manager_says():
    from selfplay.tree_search.analysis import SINGLE_GAME_LEAVES
    from selfplay.tree_search.search import SearchConfig
    from selfplay.tree_search.time_manager import GameClock, TimeManager
    from train.arena.match import NetworkPlayer

    def longest_move(manager: TimeManager) -> float:
        clock = _FakeClock()
        clocked = NetworkPlayer("clocked", _TickingEvaluator(clock), None,
                                SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES), clock=GameClock(0.05, 0.01),
                                time_manager=manager)
        fixed = NetworkPlayer("fixed", _TickingEvaluator(clock), 16, SearchConfig(leaves_per_tree=2))
        result = play_match(clocked, fixed, OPENINGS[:2], RulesConfig(max_plies=40), clock=clock)
        return max(max(record.seconds_by_colour()[0 if a_black else 1])
                   for record, a_black in zip(result.games, result.a_is_black))

    # Spreading the bank over 60 moves and never thinking on: a move gets its increment and a sixtieth of a
    # bank that 20 moves' increments and the base bound (0.25 s), and one network call over.
    frugal = longest_move(TimeManager(moves_to_go=60, extension=1.0))
    assert frugal <= 0.01 + 0.25 / 60 + 0.001 + 1e-9
    assert longest_move(TimeManager()) > frugal + 0.005


def test_a_player_with_a_database_spends_its_bank_before_the_database_plays():
    from selfplay.tree_search.analysis import SINGLE_GAME_LEAVES
    from selfplay.tree_search.search import SearchConfig
    from selfplay.tree_search.time_manager import GameClock, TimeManager
    from train.arena.match import NetworkPlayer
    from zero.endgames.egdb_build import ensure_built
    from zero.rules.notation import fen_to_position

    database = ensure_built(3)
    # Eight pieces: five above the database's size, so about five moves left to spend the bank on.
    endgame = [Opening("8 pieces", (), fen_to_position("B:W21,22,23,24:B9,10,11,12"))]

    def first_move(manager: TimeManager) -> float:
        clock = _FakeClock()
        clocked = NetworkPlayer("clocked", _TickingEvaluator(clock), None,
                                SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES), clock=GameClock(0.2, 0.01),
                                time_manager=manager, egdb=database)
        fixed = NetworkPlayer("fixed", _TickingEvaluator(clock), 16, SearchConfig(leaves_per_tree=2))
        result = play_match(clocked, fixed, endgame, RulesConfig(max_plies=2), clock=clock)
        return result.games[0].seconds_by_colour()[0]

    # Never stopping early nor thinking on, so that a move takes its target: the increment and the bank
    # (the base) spread over 5 moves, not 20; as many moves a piece as moves to go leaves the spread at 20.
    steady = dict(moves_to_go=20, moves_a_piece=1.0, extension=1.0, rate_margin=1000.0)
    assert first_move(TimeManager(**steady))[0] == pytest.approx(0.01 + 0.2 / 5, abs=0.0011)
    assert first_move(TimeManager(**{**steady, "moves_a_piece": 20.0}))[0] == pytest.approx(0.01 + 0.2 / 20, abs=0.0011)


class _CompilingSearcher(SearchingPlayer):
    """A searching yardstick whose first search takes 10 s of a fake clock (its kernels compiling), and every
    later one 0.05 s."""

    def __init__(self, clock: _FakeClock) -> None:
        self.name, self.clock, self.searches, self.start_searches = "compiling", clock, 0, 0
        self.random = RandomPlayer(4)

    def search(self, game):
        self.start_searches += game.position == Game().position
        self.clock.now += 10.0 if self.searches == 0 else 0.05
        self.searches += 1
        return self.random.choose(game), 0, 1


def test_a_yardstick_is_warmed_up_before_its_first_moves_clock():
    # classical:t0.1 once showed a longest move of 16 s in a 288-game match: its first search compiling.
    clock = _FakeClock()
    player = _CompilingSearcher(clock)
    result = play_match(player, _Deliberate("quick", clock, 0.25, 2), OPENINGS[:1], RulesConfig(max_plies=30),
                        clock=clock)
    assert player.searches > 1 and max(result.move_seconds()[0]) == pytest.approx(0.05)


def test_a_yardstick_is_warmed_up_once_however_many_matches_it_plays():
    clock = _FakeClock()
    player = _CompilingSearcher(clock)
    opponent = _Deliberate("quick", clock, 0.25, 2)
    for _ in range(2):
        play_match(player, opponent, OPENINGS[:1], RulesConfig(max_plies=30), clock=clock)
    # A ballot opening is never the start position: only a warm-up searches that.
    assert player.start_searches == 1


class _Program(RandomPlayer):
    """engine_match's program player, played at once by a random player: the test is of where games go."""

    def __init__(self, name, command, cwd=None, **budget):
        super().__init__(0)

    def close(self):
        pass


@pytest.mark.parametrize("script", ["split_match", "engine_match"])
def test_match_scripts_write_their_games_under_runs_not_beside_the_code(script, tmp_path, monkeypatch, capsys):
    # Before: split-match.pdn and engine-match.pdn landed in the current directory, the checkout's root when
    # run from there; the match command writes only where --out says.
    monkeypatch.syspath_prepend(str(REPOSITORY / "benchmarks"))
    module = importlib.import_module(script)
    ballot = tmp_path / "ballot.txt"
    ballot.write_text("\n".join(" ".join(o.moves) for o in OPENINGS) + "\n")
    if script == "split_match":
        monkeypatch.setattr(module, "play_split_match",
                            lambda a, b, openings, *_, **__: play_match(RandomPlayer(1), RandomPlayer(2), openings))
    else:
        monkeypatch.setattr(module, "ProgramPlayer", _Program)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.chdir(checkout)
    monkeypatch.setattr(sys, "argv", [script, "a", "b", "--openings", str(ballot), "--processes", "1"])
    module.main()
    assert [p.name for p in checkout.iterdir()] == ["runs"]  # which git ignores
    (written,) = (checkout / "runs" / "matches").iterdir()
    assert written.name.startswith(script.replace("_", "-") + "-") and written.suffix == ".pdn"
    assert written.read_text().count("[Round ") == 2 * len(OPENINGS)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run(parser.parse_args(["random", "random", "--openings", str(ballot), "--no-endgame-judge"])) == 0
    assert [p.name for p in checkout.iterdir()] == ["runs"]

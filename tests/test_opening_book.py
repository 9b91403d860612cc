"""The opening book: what it holds, what it answers, its file, and the match player that plays from it."""

from __future__ import annotations

import numpy as np
import pytest

from zero.corpus.openings import Opening
from zero.rules.game import Game, Position, RulesConfig
from zero.run.data import OCA_FILE, data_file
from zero.corpus.opening_book import (
    BookFileError, book_from_pdn, build_book, ensure_book, load_book, save_book,
)
from zero.corpus.pdn import read_pdn_text

# Four games from the start: 11-15 twice (a win and a draw for Black), 9-13 once (a loss), 11-16 once (a
# win); the last two meet after 9-13 22-18 11-16 by different move orders and go on differently.
GAMES = """
[Result "1-0"]
1. 11-15 23-19 2. 8-11 22-17 1-0

[Result "1/2-1/2"]
1. 11-15 23-19 2. 9-13 1/2-1/2

[Result "0-1"]
1. 9-13 22-18 2. 11-16 24-19 0-1

[Result "1-0"]
1. 11-16 22-18 2. 9-13 24-20 1-0

[Result "*"]
1. 9-13 22-18 *
"""


def _book(max_plies: int = 30):
    return build_book(read_pdn_text(GAMES), "test games", max_plies)


def _after(*moves: str) -> Position:
    game = Game()
    for text in moves:
        game.play(next(m for m in game.legal_moves() if str(m) == text))
    return game.position


def test_the_book_counts_each_move_and_the_movers_score():
    entries = _book().entries(Position.initial())
    assert [(str(e.move_from) + "-" + str(e.move_to), e.games, e.score) for e in entries] == [
        ("11-15", 2, 0.75), ("11-16", 1, 1.0), ("9-13", 1, 0.0)]  # the unfinished game counts nothing
    # White's moves are scored for White.
    after = _book().entries(_after("11-15"))
    assert [(e.games, e.score) for e in after] == [(2, 0.25)]


def test_the_book_answers_only_where_enough_games_went_and_plays_their_most_played_move():
    book = _book()
    assert str(book.move(Position.initial(), min_games=4)) == "11-15"
    assert book.move(Position.initial(), min_games=5) is None
    assert book.move(_after("11-15", "23-19"), min_games=2) is not None
    # A position off the book, and one only one game reached (left out of the book).
    assert book.move(_after("12-16"), min_games=1) is None
    assert book.entries(_after("11-15", "23-19", "8-11")) == []


def test_transpositions_meet_in_one_position_and_ties_go_to_the_better_score():
    book = _book()
    # 9-13 22-18 11-16 and 11-16 22-18 9-13: one position, two games, so it is in the book; the positions
    # on the way, one game each, are not.
    meeting = _after("9-13", "22-18", "11-16")
    assert meeting == _after("11-16", "22-18", "9-13")
    assert [(str(e.move_to), e.games, e.score) for e in book.entries(meeting)] == [("19", 1, 1.0), ("20", 1, 0.0)]
    assert str(book.move(meeting, min_games=2)) == "24-19"  # a game each: White's win ranks first
    assert book.entries(_after("9-13")) == [] and book.entries(_after("11-16")) == []


def test_max_plies_bounds_how_deep_the_book_goes():
    assert _book(max_plies=1).entries(_after("11-15")) == []
    assert _book(max_plies=2).entries(_after("11-15")) != []


def test_a_saved_book_loads_back_the_same(tmp_path):
    book = _book()
    save_book(book, tmp_path / "book.npz")
    again = load_book(tmp_path / "book.npz")
    assert again.source == "test games" and again.max_plies == 30 and len(again) == len(book)
    for name, column in book.columns.items():
        np.testing.assert_array_equal(again.columns[name], column)


def test_a_missing_damaged_or_foreign_book_is_refused_with_a_clear_error(tmp_path):
    with pytest.raises(BookFileError, match="no opening book there"):
        load_book(tmp_path / "none.npz")
    path = tmp_path / "book.npz"
    save_book(_book(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(BookFileError, match="not a readable opening book"):
        load_book(path)
    np.savez(path, format=np.array("something else"))
    with pytest.raises(BookFileError, match="not a checkers-zero-opening-book file"):
        load_book(path)
    columns = {k: v for k, v in _book().columns.items()}
    columns["games"] = columns["games"][:-1]
    np.savez(path, format=np.array("checkers-zero-opening-book"), version=np.array(1), source=np.array("x"),
             max_plies=np.array(30), **columns)
    with pytest.raises(BookFileError, match="damaged opening book"):
        load_book(path)


def test_ensure_book_builds_from_the_data_folder_once_and_replaces_a_damaged_file(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / OCA_FILE).write_text(GAMES)
    monkeypatch.setenv("CHECKERS_ZERO_DATA", str(data))
    path = tmp_path / "cache" / "book.npz"
    built = ensure_book(path)
    assert path.exists() and built.source.startswith(f"{OCA_FILE} sha256 ")
    assert str(built.move(Position.initial(), min_games=4)) == "11-15"
    path.write_bytes(b"junk")
    assert len(ensure_book(path)) == len(built)
    assert load_book(path).source == built.source


def test_a_match_player_plays_the_book_move_at_once_without_a_network_call():
    from selfplay.tree_search.analysis import SINGLE_GAME_LEAVES
    from selfplay.tree_search.evaluators import HashEvaluator
    from selfplay.tree_search.search import SearchConfig
    from train.arena.match import NetworkPlayer, play_match
    from zero.yardsticks.players import RandomPlayer

    class Counting(HashEvaluator):
        calls = 0

        def evaluate(self, planes):
            Counting.calls += 1
            return super().evaluate(planes)

    book = _book()
    assert book.move(Position.initial()) is None  # by default it asks for broader evidence than 4 games
    book.min_games = 4
    booked = NetworkPlayer("booked", Counting(seed=1), 8, SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES),
                           book=book)
    start = [Opening("start", (), Position.initial())]
    result = play_match(booked, RandomPlayer(3), start, RulesConfig(max_plies=1), games=1)
    assert str(result.games[0].moves[0]) == "11-15" and Counting.calls == 0
    # Without the book the same player searches its first move.
    plain = NetworkPlayer("plain", Counting(seed=1), 8, SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES))
    play_match(plain, RandomPlayer(3), start, RulesConfig(max_plies=1), games=1)
    assert Counting.calls > 0


def test_the_book_player_spec(tmp_path, monkeypatch):
    from train.arena.player_specs import PlayerSpecError, make_player

    path = tmp_path / "book.npz"
    save_book(_book(), path)
    monkeypatch.setenv("CHECKERS_ZERO_BOOK", str(path))
    player = make_player("mcts:t0.1:book")
    assert player.book is not None and len(player.book) == len(_book()) and player.name.endswith(":book")
    assert make_player("mcts:t0.1").book is None
    with pytest.raises(PlayerSpecError, match=":book"):
        make_player("policy:book")
    path.write_bytes(b"junk")
    monkeypatch.setenv("CHECKERS_ZERO_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(PlayerSpecError, match="no opening book"):
        make_player("mcts:t0.1:book")


@pytest.mark.skipif(data_file(OCA_FILE) is None, reason="OCA_2.0.pdn not found (set CHECKERS_ZERO_DATA)")
def test_the_oca_book_holds_the_experts_main_lines():
    book = book_from_pdn(data_file(OCA_FILE))
    assert len(book) > 20_000
    # 11-15 is the experts' most played first move, and the book answers the ballot's openings.
    assert str(book.move(Position.initial())) == "11-15"
    assert book.move(_after("9-13", "21-17", "5-9")) is not None

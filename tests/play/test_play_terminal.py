"""`checkers-zero play` driven by scripted standard input, as a pipe would."""

from __future__ import annotations

import io

import pytest

from play.cli.main import main
from play.engine import DRAW_ACCEPT_MAX_SCORE
from zero.corpus.pdn import PdnGame, read_pdn, write_game
from zero.rules.game import Position


def play(monkeypatch, capsys, tiny_checkpoint, tmp_path, script: str, *extra: str) -> tuple[int, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    # Without the opening book, so that the engine searches its opening moves as these tests expect.
    code = main(["play", "--checkpoint", str(tiny_checkpoint), "--sims", "4", "--no-book",
                 "--save", str(tmp_path / "game.pdn"), *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def saved_game(tmp_path, name: str = "game.pdn") -> PdnGame:
    games = list(read_pdn(tmp_path / name))
    assert len(games) == 1 and isinstance(games[0], PdnGame), games
    return games[0]


@pytest.fixture
def run(monkeypatch, capsys, tiny_checkpoint, tmp_path):
    return lambda script, *extra: play(monkeypatch, capsys, tiny_checkpoint, tmp_path, script, *extra)


def first_start(monkeypatch, capsys, tiny_checkpoint, tmp_path, data: str | None) -> str:
    """`play` (book and endgame database asked for) on a machine that has built neither yet: the data folder
    holds `data` as its OCA games, or nothing. The quick endgame database is the 2-piece one here (seconds
    fewer than the 4-piece one, the same code)."""
    from zero.endgames import egdb_build

    folder = tmp_path / "data"
    folder.mkdir()
    if data is not None:
        (folder / "OCA_2.0.pdn").write_text(data)
    monkeypatch.setenv("CHECKERS_ZERO_DATA", str(folder))
    monkeypatch.setenv("CHECKERS_ZERO_BOOK", str(tmp_path / "cache" / "book.npz"))
    monkeypatch.setenv("CHECKERS_ZERO_EGDB", str(tmp_path / "cache" / "egdb"))
    monkeypatch.setattr(egdb_build, "QUICK_PIECES", 2)
    monkeypatch.setattr("sys.stdin", io.StringIO("quit\n"))
    assert main(["play", "--checkpoint", str(tiny_checkpoint), "--sims", "4",
                 "--save", str(tmp_path / "game.pdn")]) == 0
    captured = capsys.readouterr()
    return captured.err


def test_the_first_start_says_what_it_builds_before_it_builds_it(monkeypatch, capsys, tiny_checkpoint, tmp_path):
    # Before: the first `play` sat silent for some 26 s while it built the opening book and the database.
    err = first_start(monkeypatch, capsys, tiny_checkpoint, tmp_path, "[Result \"1-0\"]\n1. 11-15 23-19 1-0\n")
    assert (f"building the opening book from {tmp_path / 'data' / 'OCA_2.0.pdn'} into "
            f"{tmp_path / 'cache' / 'book.npz'} (once, some seconds) ...\n") in err
    assert (f"building the 2-piece endgame database in {tmp_path / 'cache' / 'egdb'} (once, some seconds) "
            "...\n") in err
    assert (tmp_path / "cache" / "book.npz").is_file()


def test_play_without_the_data_folder_says_it_plays_without_the_book(monkeypatch, capsys, tiny_checkpoint,
                                                                    tmp_path):
    # Before: the engine searched its openings without a word of the book it was meant to play from.
    err = first_start(monkeypatch, capsys, tiny_checkpoint, tmp_path, None)
    lines = [line for line in err.splitlines() if "opening book" in line]
    # (A notice is time-stamped in a process that logs, as this one may after other tests.)
    assert len(lines) == 1 and lines[0].endswith(
        f"playing without the opening book (data file 'OCA_2.0.pdn' not found: "
        f"{tmp_path / 'data' / 'OCA_2.0.pdn'} is missing (the data folder is $CHECKERS_ZERO_DATA))"), lines


def test_board_shows_pieces_and_square_numbers(run):
    code, out = run("quit\n")
    assert code == 0
    assert "Black to move (you)" in out
    for sq in (1, 12, 21, 32):
        assert f" {sq} " in out or f"{sq:>3} " in out
    assert out.count(" b ") + out.count(" b|") >= 1 and " w " in out


def test_illegal_move_is_refused_with_the_legal_moves(run, tmp_path):
    code, out = run("11-20\n")
    assert code == 0
    assert "illegal move 11-20; legal moves: " in out
    legal = [str(mv) for mv in Position.initial().legal_moves()]
    assert all(mv in out for mv in legal)
    assert not (tmp_path / "game.pdn").exists()  # nothing was played, so nothing to save


def test_unparseable_input_is_refused(run):
    _, out = run("hello\n")
    assert "not a move: 'hello'" in out


def test_capture_by_its_end_squares_and_resignation_saved_as_pdn(multi_jump_fen, run, tmp_path):
    code, out = run("9x25\nresign\n", "--fen", multi_jump_fen)
    assert code == 0
    assert "You play 9x18x25" in out
    assert "Engine plays" in out
    assert "White wins: resignation (0-1)" in out
    assert f"Game saved to {tmp_path / 'game.pdn'}" in out
    game = saved_game(tmp_path)
    assert game.result == "0-1"
    assert str(game.start) == multi_jump_fen
    assert [str(mv) for mv in game.moves][0] == "9x18x25"
    assert len(game.moves) == 2


def test_a_move_whose_capture_mark_is_wrong_is_refused_in_one_line(multi_jump_fen, run, tmp_path):
    # Before: 12x16 played the step 12-16 without a word, and 9-25 the capture 9x18x25.
    _, out = run("12x16\n")
    assert "> 12x16 is not a capture: write 12-16\n" in out and "You play 12-16" not in out
    assert not (tmp_path / "game.pdn").exists()
    _, out = run("9-25\n", "--fen", multi_jump_fen)
    assert "> 9-25 is a capture: write 9x18x25\n" in out and "You play 9x18x25" not in out


def test_a_capture_stopped_halfway_is_refused(multi_jump_fen, run):
    _, out = run("9x18\n", "--fen", multi_jump_fen)
    assert "illegal move 9x18" in out  # both captures go on to 25 or 27


def test_ambiguous_short_capture_names_the_candidates(king_routes_fen, run, tmp_path):
    _, out = run("3x17\n3x12x19x10x17\nsave\n", "--fen", king_routes_fen)
    assert "ambiguous move 3x17: it could be 3x10x17, 3x12x19x10x17; write the full path" in out
    assert "You play 3x12x19x10x17" in out
    assert str(saved_game(tmp_path).moves[0]) == "3x12x19x10x17"


def test_undo_takes_back_the_move_and_the_reply(run, tmp_path):
    _, out = run("11-15\nundo\nsave\n")
    assert "Taken back: " in out
    game = saved_game(tmp_path)
    assert game.moves == [] and game.result == "*"


def test_undo_with_nothing_to_take_back(run):
    _, out = run("undo\n")
    assert "no move of yours to take back" in out


def test_hint_lists_top_moves_with_visit_share_and_wdl(run):
    _, out = run("hint\n")
    assert "Hint:" in out
    assert "% of visits" in out and "win " in out and "draw " in out and "loss " in out
    assert "main line:" in out


def test_save_on_request_to_a_named_file_then_eof_saves_the_game(run, tmp_path):
    _, out = run(f"11-15\nsave {tmp_path / 'mid.pdn'}\n")
    mid = saved_game(tmp_path, "mid.pdn")
    assert [str(mv) for mv in mid.moves][0] == "11-15" and len(mid.moves) == 2 and mid.result == "*"
    assert f"Game saved to {tmp_path / 'game.pdn'}" in out  # end of input: the game is saved before leaving
    assert saved_game(tmp_path).moves == mid.moves


def test_draw_offer_follows_the_stated_rule(run, tmp_path):
    _, out = run("draw\n")
    assert "The engine accepts the draw" in out or "The engine declines the draw" in out
    score = int(out.split("expects to score ")[1].split("%")[0])
    accepted = "accepts" in out
    assert accepted == (score <= 100 * DRAW_ACCEPT_MAX_SCORE + 0.5)
    if accepted:
        assert saved_game(tmp_path).result == "1/2-1/2"


def test_engine_moves_first_when_you_play_white(run):
    _, out = run("quit\n", "--color", "white")
    assert out.index("Engine plays") < out.index("White to move (you)")


def test_continue_a_game_from_pdn(run, tmp_path):
    start = Position.initial()
    moves = [start.legal_moves()[0]]
    (tmp_path / "start.pdn").write_text(write_game(moves, "*"))
    _, out = run("undo\n", "--pdn", str(tmp_path / "start.pdn"))
    assert "Engine plays" in out  # White (the engine) is to move after the file's one move
    assert "no move of yours to take back" in out  # the moves from the file are not the person's


def test_bad_start_and_missing_checkpoint_are_clear_errors(run, monkeypatch, capsys, tmp_path):
    code, out = run("", "--fen", "X:W1:B2")
    assert code == 2 and "FEN must start with the side to move" in out
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main(["play", "--checkpoint", str(tmp_path / "none.pt")])
    assert code == 2 and "none.pt: no such checkpoint file or run directory" in capsys.readouterr().err
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    code = main(["play", "--checkpoint", str(tmp_path / "junk.pt")])
    assert code == 2 and "not a checkers-zero checkpoint" in capsys.readouterr().err


def test_game_over_by_the_rules_is_reported_and_saved(run, tmp_path):
    # Black's capture takes White's last piece: the game ends at once.
    _, out = run("10x19\n", "--fen", "B:W15:B10")
    assert "Black wins: White has no legal move (1-0)" in out
    assert saved_game(tmp_path).result == "1-0"


class FirstLegalMove:
    """A player at the keyboard who always types the first legal move (read like a file, line by line)."""

    def __init__(self, ui):
        self.ui = ui

    def readline(self) -> str:
        s = self.ui.session
        return "quit\n" if s.over else f"{s.game.legal_moves()[0]}\n"


def test_a_full_game_to_its_end_by_the_rules(engine, tmp_path):
    from play.engine import Budget
    from play.session import HumanGame
    from play.terminal import TerminalGame

    out = io.StringIO()
    ui = TerminalGame(HumanGame(engine, True, Budget(simulations=2)), tmp_path / "full.pdn", out)
    ui.loop(FirstLegalMove(ui))
    assert ui.session.over and ui.session.game.outcome is not None  # ended by the rules, not by a person
    text = out.getvalue()
    assert "Game over: " in text and f"Game saved to {tmp_path / 'full.pdn'}" in text
    game = saved_game(tmp_path, "full.pdn")
    assert game.result == ui.session.result != "*"
    assert [str(m) for m in game.moves] == [str(m) for m in ui.session.game.moves]


def test_the_engines_analysis_is_off_until_asked_for(run):
    # Before: the whole analysis, main line included (the player's best reply), after every engine move.
    _, out = run("11-15\nanalysis\n9-14\nanalysis off\nquit\n")
    assert out.count("Engine plays") == 2
    before, after = out.split("Analysis after engine moves: on.")
    assert "simulations;" not in before and "main line:" not in before
    assert "simulations;" in after.split("Analysis after engine moves: off.")[0]
    _, out = run("11-15\nquit\n", "--analysis")
    assert "simulations;" in out


def test_the_default_save_path_is_in_the_games_folder_and_is_shown(monkeypatch, capsys, tiny_checkpoint, tmp_path):
    # Before: saved into the current directory without saying where until the end.
    monkeypatch.setenv("CHECKERS_ZERO_GAMES", str(tmp_path / "my-games"))
    monkeypatch.setattr("sys.stdin", io.StringIO("11-15\nquit\n"))
    assert main(["play", "--checkpoint", str(tiny_checkpoint), "--sims", "4"]) == 0
    out = capsys.readouterr().out
    saved = list((tmp_path / "my-games").glob("checkers-zero-*.pdn"))
    assert len(saved) == 1
    assert f"The game will be saved to {saved[0]}" in out and f"Game saved to {saved[0]}" in out


class InterruptedKeyboard:
    """Types the given lines, then Ctrl-C, then answers the question that follows (or Ctrl-C again)."""

    def __init__(self, lines: list[str], answer: str | None):
        self.lines, self.answer, self.interrupted = list(lines), answer, False

    def readline(self) -> str:
        if self.lines:
            return self.lines.pop(0)
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        if self.answer is None:
            raise KeyboardInterrupt
        return self.answer


@pytest.mark.parametrize("answer,saved", [("\n", True), ("y\n", True), ("n\n", False), (None, False)])
def test_ctrl_c_offers_to_save_the_game(engine, tmp_path, answer, saved):
    # Before: Ctrl-C ended the program and the game was lost.
    from play.engine import Budget
    from play.session import HumanGame
    from play.terminal import TerminalGame

    out = io.StringIO()
    ui = TerminalGame(HumanGame(engine, True, Budget(simulations=2)), tmp_path / "game.pdn", out)
    ui.loop(InterruptedKeyboard(["11-15\n"], answer))
    assert f"Save the game to {tmp_path / 'game.pdn'}? [Y/n]" in out.getvalue()
    assert (tmp_path / "game.pdn").exists() == saved
    if saved:
        assert [str(m) for m in saved_game(tmp_path).moves] == [str(m) for m in ui.session.game.moves]


class ChangesLevel:
    """A player who types the first legal move, changes the engine's level after it, then a move again."""

    def __init__(self, ui):
        self.ui = ui
        self.lines = iter(["move", "level beginner", "move", "quit"])

    def readline(self) -> str:
        line = next(self.lines)
        return f"{self.ui.session.game.legal_moves()[0]}\n" if line == "move" else f"{line}\n"


def test_the_saved_game_names_every_level_the_engine_played_at(engine, tmp_path):
    # Before: the record named only the last level ("White": "checkers-zero tiny (beginner)").
    from play.engine import Budget
    from play.session import HumanGame
    from play.terminal import TerminalGame

    ui = TerminalGame(HumanGame(engine, True, Budget(simulations=2)), tmp_path / "levels.pdn", io.StringIO())
    ui.loop(ChangesLevel(ui))
    game = saved_game(tmp_path, "levels.pdn")
    assert game.tags["White"] == f"{engine.name} (2 simulations, beginner)" and game.tags["Black"] == "Human"
    text = " ".join((tmp_path / "levels.pdn").read_text().split())
    first, second = (str(m) for m in game.moves[1:4:2])
    assert f"1. {game.moves[0]} {first} {{engine at 2 simulations from here}}" in text
    assert f"{second} {{engine at beginner from here}}" in text
    # One level all game: no comments, the name as before.
    assert "{" not in HumanGame(engine, True, Budget(simulations=2), level="club").pdn()


def test_the_engine_plays_the_opening_books_move_unsearched(monkeypatch, capsys, tiny_checkpoint, tmp_path):
    from zero.corpus.opening_book import build_book, save_book
    from zero.corpus.pdn import read_pdn_text

    # Ten games in which White answered 11-15 with 23-19: the book's move there.
    book = tmp_path / "book.npz"
    save_book(build_book(read_pdn_text('[Result "1/2-1/2"]\n1. 11-15 23-19 1/2-1/2\n\n' * 10), "test"), book)
    monkeypatch.setenv("CHECKERS_ZERO_BOOK", str(book))
    monkeypatch.setattr("sys.stdin", io.StringIO("11-15\nquit\n"))
    assert main(["play", "--checkpoint", str(tiny_checkpoint), "--sims", "4", "--analysis",
                 "--save", str(tmp_path / "game.pdn")]) == 0
    out = capsys.readouterr().out
    assert "Engine plays 23-19 (the opening book's move)" in out and "simulations;" not in out
    # --no-book: the engine searches the same move.
    code, out = play(monkeypatch, capsys, tiny_checkpoint, tmp_path, "11-15\nquit\n", "--analysis")
    assert code == 0 and "opening book" not in out and "simulations;" in out

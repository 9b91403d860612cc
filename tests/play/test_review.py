"""`checkers-zero review`: every move judged by the fall in expected score, written back as PDN."""

from __future__ import annotations

import pytest

from play.cli.main import main
from play.review import ReviewSettings, move_accuracy, plan, review_game
from zero.corpus.pdn import PdnError, PdnGame, read_pdn, read_pdn_text
from zero.rules.game import RulesConfig

GAMES = """[Event "a"]
[Black "Ann"]
[White "Bob"]
[Result "1-0"]
1. 11-15 24-20 2. 8-11 28-24 3. 9-13 22-18 4. 15x22 25x18 5. 4-8 26-22 1-0

[Event "b"]
[Result "*"]
1. 11-15 23-19 2. 8-11 22-17 3. 9-13 17-14 4. 10x17 21x14 *

"""
BROKEN = """[Event "broken"]
[Result "*"]
1. 11-15 24-20 2. 15-11 *
"""

RULES = RulesConfig(max_plies=0)


def test_review_writes_every_game_back_with_a_comment_per_move(tiny_checkpoint, tmp_path, capsys):
    source = tmp_path / "games.pdn"
    source.write_text(GAMES + BROKEN)
    out = tmp_path / "reviewed.pdn"
    code = main(["review", str(source), "--out", str(out), "--checkpoint", str(tiny_checkpoint), "--sims", "8",
                 "--slots", "4", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "2 games reviewed" in printed and "(20 positions" in printed
    assert "skipped:     1" in printed and "game 3" in printed and "15-11" in printed
    for player in ("Ann", "Bob", "Black", "White"):
        assert player in printed
    originals = list(read_pdn_text(GAMES))
    reviewed = list(read_pdn(out))
    assert [g.moves for g in reviewed] == [g.moves for g in originals]
    assert [g.result for g in reviewed] == [g.result for g in originals]
    text = " ".join(out.read_text().split())  # comments wrap across lines
    assert text.count("{Black win") == sum(g.plies for g in originals)  # one evaluation per move
    assert reviewed[0].tags["Annotator"].startswith("checkers-zero review (tiny, simulations 8")
    assert "BlackAccuracy" in reviewed[0].tags


def _answer(ply: int, black_to_move: bool, score: float, move: str, proven: str | None = None) -> dict:
    draw = 0.0
    return {"ply": ply, "side": "black" if black_to_move else "white", "move": move, "score": score,
            "wdl": {"win": score, "draw": draw, "loss": 1 - score},
            "proven": None if proven is None else {"value": proven, "plies": 3}}


def _game(text: str) -> PdnGame:
    (game,) = read_pdn_text(text)
    assert not isinstance(game, PdnError)
    return game


def test_a_fall_in_expected_score_marks_mistakes_and_blunders():
    # 11-15 keeps Black level; 24-20 throws White's half point away (White had 0.5, keeps 0.2);
    # 8-11 costs Black 0.15 (0.8 -> 0.65); 28-24 is fine.
    game = _game('[Result "*"]\n1. 11-15 24-20 2. 8-11 28-24 *\n')
    scores = [0.5, 0.5, 0.8, 0.35, 0.65]  # for the side to move at each ply
    best = ["11-15", "22-18", "9-13", "28-24", "4-8"]
    p = plan(game, RULES)
    answers = {ply: _answer(ply, ply % 2 == 0, s, best[ply]) for ply, s in enumerate(scores)}
    review = review_game(p, answers, ReviewSettings(mistake=0.1, blunder=0.25))
    assert [m.mark for m in review.moves] == ["", "??", "?", ""]
    assert [round(m.fall, 2) for m in review.moves] == [0.0, 0.3, 0.15, 0.0]
    assert "best 22-18" in review.moves[1].comment and "blunder" in review.moves[1].comment
    assert "best" not in review.moves[0].comment and "best" not in review.moves[3].comment
    # after 24-20 Black (to move) has 0.8: the comment gives Black's view
    assert "Black win 80%" in review.moves[1].comment
    # after 8-11 White is to move with 0.35: Black's view is 0.65
    assert "Black win 65%" in review.moves[2].comment
    assert review.accuracy(True) == pytest.approx((move_accuracy(0.0) + move_accuracy(0.15)) / 2)
    assert review.accuracy(False) == pytest.approx((move_accuracy(0.3) + move_accuracy(0.0)) / 2)


def test_proven_values_replace_the_estimate_and_forced_moves_are_not_judged():
    # White's 24-19 is answered by the forced 15x24 (Black's only move).
    game = _game('[Result "*"]\n1. 11-15 24-19 2. 15x24 *\n')
    p = plan(game, RULES)
    assert [len(pos.legal_moves()) for pos in p.replay.positions[:3]][2] == 1
    answers = {0: _answer(0, True, 0.5, "11-15"), 1: _answer(1, False, 0.5, "22-18"),
               2: _answer(2, True, 0.5, "15x24", proven="win"), 3: _answer(3, False, 0.9, "28x19", proven="loss")}
    review = review_game(p, answers, ReviewSettings())
    # 24-19 left Black a proven win: White falls from 0.5 to 0
    assert review.moves[1].mark == "??" and review.moves[1].fall == pytest.approx(0.5)
    assert "Black: proven win in 3 plies" in review.moves[1].comment
    assert review.moves[2].forced and review.moves[2].mark == "" and review.judged(True) == [review.moves[0]]


def test_a_game_ended_by_the_rules_is_scored_exactly_there():
    # Kings shuffle until the position repeats a third time; the players went on for one more move.
    moves = "1. 32-27 5-1 2. 27-32 1-5 3. 32-27 5-1 4. 27-32 1-5 5. 32-27"
    game = _game(f'[FEN "B:WK5:BK32"]\n[Result "1/2-1/2"]\n{moves} 1/2-1/2\n')
    p = plan(game, RULES)
    assert p.replay.ply == 8 and p.plies == list(range(8))
    answers = {ply: _answer(ply, ply % 2 == 0, 0.5, "x") for ply in p.plies}
    review = review_game(p, answers, ReviewSettings())
    assert review.ended_by_rule is not None
    assert "draw by threefold repetition" in review.moves[7].comment
    assert "the game went on after this" in review.moves[7].comment
    assert review.moves[8].fall is None and review.moves[8].comment == ""


def test_the_ballot_opening_of_a_match_game_is_not_judged(tmp_path):
    # Before: review judged the ballot's forced first moves as if the players had chosen them.
    from train.arena.match import play_match
    from zero.corpus.openings import load_openings
    from zero.yardsticks.players import RandomPlayer

    ballot = tmp_path / "ballot.tsv"
    ballot.write_text("moves\tremove_black\tremove_white\n9-13 21-17 5-9\t\t\n8-11 24-19\t11\t28\n")
    match = play_match(RandomPlayer(1), RandomPlayer(2), load_openings(ballot), RULES, games=3)
    games = [_game(g.pdn()) for g in sorted(match.games, key=lambda g: g.round)]
    assert [plan(g, RULES).ballot for g in games] == [3, 3, 2]  # the 11-man opening starts from its FEN
    p = plan(games[0], RULES)
    assert p.plies[0] == 3  # the positions inside the ballot are not even analysed
    answers = {ply: _answer(ply, ply % 2 == 0, 0.9 if ply % 2 else 0.1, "x") for ply in p.plies}
    review = review_game(p, answers, ReviewSettings())
    assert [m.fall for m in review.moves[:3]] == [None, None, None] and review.ballot == 3
    assert "end of the ballot opening; Black win" in review.moves[2].comment
    assert all(m.mark == "" for m in review.moves[:3]) and review.moves[3].fall is not None
    assert all(m not in review.judged(True) + review.judged(False) for m in review.moves[:3])


def test_only_moves_an_opening_tag_names_are_ballot_moves():
    from zero.corpus.openings import ballot_plies
    from zero.rules.game import Position

    moves = _game('[Result "*"]\n1. 9-13 21-17 2. 5-9 25-21 *\n').moves
    assert ballot_plies("9-13 21-17 5-9", Position.initial(), moves) == 3
    assert ballot_plies("9-13 21-17 6-9", Position.initial(), moves) == 0  # another ballot's opening
    assert ballot_plies("Old Fourteenth", Position.initial(), moves) == 0
    assert ballot_plies("", Position.initial(), moves) == 0
    assert plan(_game('[Opening "Double Corner"]\n[Result "*"]\n1. 9-14 22-18 *\n'), RULES).ballot == 0


def test_review_says_how_many_ballot_moves_it_left_out(tiny_checkpoint, tmp_path, capsys):
    source = tmp_path / "match.pdn"
    source.write_text('[Opening "9-13 21-17 5-9"]\n[Result "*"]\n1. 9-13 21-17 2. 5-9 25-21 *\n\n' + GAMES)
    code = main(["review", str(source), "--out", str(tmp_path / "r.pdn"), "--checkpoint", str(tiny_checkpoint),
                 "--sims", "4", "--slots", "4", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "3 games reviewed" in printed and "3 moves of ballot openings in 1 games not judged" in printed


def test_review_makes_the_folder_of_its_output(tiny_checkpoint, tmp_path, capsys):
    # Before: a FileNotFoundError traceback, while `replay export --out` and `play --save` make the folder.
    source = tmp_path / "games.pdn"
    source.write_text(GAMES)
    out = tmp_path / "missing" / "dir" / "x.pdn"
    code = main(["review", str(source), "--out", str(out), "--checkpoint", str(tiny_checkpoint), "--sims", "4",
                 "--slots", "4", "--no-progress"])
    assert code == 0 and len(list(read_pdn(out))) == 2
    capsys.readouterr()
    (tmp_path / "file").write_text("")
    code = main(["review", str(source), "--out", str(tmp_path / "file" / "x.pdn"), "--checkpoint",
                 str(tiny_checkpoint), "--sims", "4", "--no-progress"])
    err = capsys.readouterr().err
    # One line of error, after the notices of what the engine loaded (issue 85, item 10).
    assert code == 2 and "Traceback" not in err, err
    assert err.splitlines()[-1].endswith(f"cannot make the folder {tmp_path / 'file'} for x.pdn: File exists"), err


def test_review_fails_when_no_game_could_be_reviewed(tiny_checkpoint, tmp_path, capsys):
    # Before: it printed "0 games reviewed" and an empty table, and exited 0.
    source = tmp_path / "broken.pdn"
    source.write_text(BROKEN)
    out = tmp_path / "r.pdn"
    code = main(["review", str(source), "--out", str(out), "--checkpoint", str(tiny_checkpoint), "--no-progress"])
    assert code != 0 and not out.exists()
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last == f"checkers-zero review: no game in {source} could be reviewed (1 skipped)"
    assert "15-11" in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize("flags, message", [(["--sims", "-2"], "--sims -2: must be at least 1"),
                                            (["--time", "nan"], "--time nan: must be a finite number")])
def test_review_keeps_an_earlier_review_when_it_refuses_its_limits(tiny_checkpoint, tmp_path, capsys, flags,
                                                                    message):
    # Before: the earlier GAMES.reviewed.pdn was truncated, then deleted when every game was refused.
    source = tmp_path / "games.pdn"
    source.write_text(GAMES)
    out = tmp_path / "games.reviewed.pdn"
    out.write_text("an earlier review\n")
    code = main(["review", str(source), "--out", str(out), "--checkpoint", str(tiny_checkpoint), "--no-progress",
                 *flags])
    assert code == 2 and out.read_text() == "an earlier review\n"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["games.pdn", "games.reviewed.pdn"]

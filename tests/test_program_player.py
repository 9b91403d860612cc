"""A program speaking the JSON engine protocol as a match player (train.arena.program_player): the match keeps its
game clock and tells it at each move, forced moves' increments included; what the program does wrong is one
line naming it. The programs here are small scripts; tests/play/test_engine_protocol.py plays the engine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from selfplay.tree_search.time_manager import GameClock
from train.arena.match import play_match
from train.arena.program_player import ProgramError, ProgramPlayer
from zero.corpus.openings import Opening
from zero.yardsticks.players import RandomPlayer

REPO = Path(__file__).resolve().parents[1]

# A program that plays the first legal move, writes each query's ply, clock and increment to the file it is
# given, and misbehaves as its second argument says.
PROGRAM = '''
import json, sys
log, fault = open(sys.argv[1], "a"), sys.argv[2]
for line in sys.stdin:
    query = json.loads(line)
    if query.get("query") == "version":
        print(json.dumps({"id": query["id"], "engine": "first-move"}), flush=True)
    elif fault == "exit":
        sys.exit("out of memory")
    elif fault == "hang":
        sys.stdin.read()
    elif fault == "error":
        print(json.dumps({"id": query["id"], "error": "no network"}), flush=True)
    elif fault == "illegal":
        print(json.dumps({"id": query["id"], "move": "1-5"}), flush=True)
    else:
        from zero.rules.game import Game  # (the rules, only where a move is played: they take a while to load)
        from zero.rules.notation import fen_to_position, resolve_move

        game = Game(start=fen_to_position(query["fen"]))
        for text in query["moves"]:
            game.play(resolve_move(text, game.legal_moves()))
        log.write(json.dumps([game.ply, query.get("clock"), query.get("increment"), query.get("time")]) + "\\n")
        log.flush()
        print(json.dumps({"id": query["id"], "move": str(game.legal_moves()[0])}), flush=True)
'''


def _program(tmp_path: Path, fault: str = "none") -> tuple[str, Path]:
    script, log = tmp_path / "first_move.py", tmp_path / f"queries-{fault}.jsonl"
    script.write_text(PROGRAM)
    return f"{sys.executable} {script} {log} {fault}", log


def test_a_program_on_a_game_clock_is_told_its_clock_with_every_increment(tmp_path):
    command, log = _program(tmp_path)
    player = ProgramPlayer("first-move", command, clock=GameClock(1.0, 0.5), cwd=REPO)
    try:
        # On a clock that never moves each move takes 0 s, so the program's clock holds the base and an
        # increment for every move it has made, this one included: the forced ones too, which the match plays
        # at once without asking it.
        result = play_match(player, RandomPlayer(0), [Opening("start", ())], games=1, clock=lambda: 0.0)
    finally:
        player.close()
    game = result.games[0]
    asked = [json.loads(line) for line in log.read_text().splitlines()]
    assert asked and game.black == "first-move"
    for ply, clock, increment, seconds in asked:
        assert (clock, increment, seconds) == (1.0 + 0.5 * (ply // 2 + 1), 0.5, None)
    forced = [ply for ply in range(0, len(game.moves), 2) if ply not in {entry[0] for entry in asked}]
    assert forced, "the test needs a forced move of the program's to count"


def test_a_program_with_a_time_a_move_is_sent_that_time(tmp_path):
    command, log = _program(tmp_path)
    player = ProgramPlayer("first-move", command, seconds=0.25, cwd=REPO)
    try:
        play_match(player, RandomPlayer(0), [Opening("start", ())], games=1)
    finally:
        player.close()
    assert {tuple(json.loads(line)[1:]) for line in log.read_text().splitlines()} == {(None, None, 0.25)}


@pytest.mark.parametrize("fault, message", [("error", "answered an error: no network"),
                                            ("illegal", "answered '1-5': illegal move 1-5"),
                                            ("exit", "ended with exit status 1: out of memory")])
def test_a_program_that_misbehaves_is_named_in_one_line(tmp_path, fault, message):
    command, _ = _program(tmp_path, fault)
    player = ProgramPlayer("first-move", command, seconds=0.1, cwd=REPO)
    try:
        with pytest.raises(ProgramError, match=message):
            play_match(player, RandomPlayer(0), [Opening("start", ())], games=1)
    finally:
        player.close()


def test_a_program_player_needs_one_budget():
    with pytest.raises(ValueError, match="a game clock or a time a move"):
        ProgramPlayer("p", "true")
    with pytest.raises(ValueError, match="a game clock or a time a move"):
        ProgramPlayer("p", "true", clock=GameClock(0, 0.1), seconds=0.1)
    with pytest.raises(ValueError, match="above 0"):
        ProgramPlayer("p", "true", seconds=0)
    with pytest.raises(ValueError, match="at most 3600"):
        ProgramPlayer("p", "true", seconds=3601)


def test_a_clock_over_what_the_protocol_takes_is_sent_as_its_most(tmp_path):
    # The engine refuses a clock over an hour: a longer one is told as an hour, not sent to be refused.
    command, log = _program(tmp_path)
    player = ProgramPlayer("first-move", command, clock=GameClock(3600.0, 1.0), cwd=REPO)
    try:
        play_match(player, RandomPlayer(0), [Opening("start", ())], games=1, clock=lambda: 0.0)
    finally:
        player.close()
    asked = [json.loads(line) for line in log.read_text().splitlines()]
    assert asked and {(clock, increment) for _ply, clock, increment, _seconds in asked} == {(3600.0, 1.0)}


def test_a_program_that_hangs_is_named_and_stopped(tmp_path):
    command, _ = _program(tmp_path, "hang")
    player = ProgramPlayer("first-move", command, seconds=0.1, cwd=REPO, patience=1.0)
    try:
        with pytest.raises(ProgramError, match=r"gave no answer in 1.1 s"):
            play_match(player, RandomPlayer(0), [Opening("start", ())], games=1)
    finally:
        player.close()


def test_a_program_that_cannot_be_run_is_named(tmp_path):
    player = ProgramPlayer("nothing", str(tmp_path / "no-such-program"), seconds=0.1)
    with pytest.raises(ProgramError, match="nothing: cannot run"):
        player.warm_up()

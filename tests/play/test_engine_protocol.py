"""The JSON-lines engine (`checkers-zero engine`) as a program drives it: a real subprocess, queries in,
answers out; and the Python API that is the same code."""

from __future__ import annotations

import json
import re
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from play.api import Engine
from processes import reaped
from play.queries import PROTOCOL_VERSION, EngineSettings, QueryError
from zero.rules.game import Game, Position
from zero.rules.notation import fen_to_position

REPO = Path(__file__).resolve().parents[2]
OPENING = ["11-15", "23-19", "8-11", "22-17"]


def run_engine(checkpoint: Path, lines: list[str | bytes], *extra: str, timeout: float = 120) -> list[dict]:
    """Feed the lines to a fresh engine process, close its input, and return its answers (it must exit 0
    with nothing on stderr but the lines saying what it loads (the network), derives (the checkpoint's int8
    model), builds (the endgame database) and compiles (the search), and which database it got; a notice may
    carry the log's time stamp)."""
    data = b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines)
    proc = subprocess.run([sys.executable, "-m", "play", "engine", "--checkpoint", str(checkpoint), "--slots", "8",
                           "--tree-nodes", "40000", "--sims", "4", *extra],
                          input=data, capture_output=True, cwd=REPO, timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode()
    notices = ("loading the network", "deriving the int8 model", "building the 4-piece endgame database",
               "using the 4-piece endgame database", "preparing the search")
    others = [line for line in proc.stderr.decode().splitlines()
              if not re.sub(r"^\d{4}-\d\d-\d\d [\d:,]+ ", "", line).startswith(notices)]
    assert others == [] and proc.stderr.count(b"\n") <= len(notices), proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def position_after(moves: list[str], fen: str | None = None) -> str:
    from zero.rules.notation import resolve_move

    pos = fen_to_position(fen) if fen else Position.initial()
    for text in moves:
        pos = pos.play(resolve_move(text, pos.legal_moves()))
    return pos.fen()


def test_subprocess_answers_a_batch_of_queries(tiny_checkpoint, multi_jump_fen):
    queries = [
        {"id": "start", "simulations": 16},
        {"id": 2, "moves": OPENING, "simulations": 16, "top": 3},
        {"id": "capture", "fen": multi_jump_fen, "nodes": 50},
        {"id": "timed", "moves": OPENING[:1], "time": 0.05, "pv": False, "wdl": False},
        {"id": "version", "query": "version"},
    ]
    answers = {a["id"]: a for a in run_engine(tiny_checkpoint, [json.dumps(q) for q in queries])}
    assert set(answers) == {q["id"] for q in queries}
    assert answers["version"]["protocol"] == PROTOCOL_VERSION
    assert answers["version"]["engine"] == "checkers-zero"
    for query in queries[:4]:
        a = answers[query["id"]]
        assert "error" not in a, a
        assert a["fen"] == position_after(query.get("moves", []), query.get("fen"))
        assert a["ply"] == len(query.get("moves", []))
        assert set(a["wdl"]) == {"win", "draw", "loss"} and abs(sum(a["wdl"].values()) - 1) < 1e-3
        assert a["move"] == a["moves"][0]["move"]
        assert a["proven"] is None or a["proven"]["value"] in ("win", "draw", "loss")
    assert answers["start"]["simulations"] == 16 and answers["start"]["side"] == "black"
    assert len(answers[2]["moves"]) == 3 and answers[2]["side"] == "black"
    assert answers[2]["pv"][0] == answers[2]["move"]
    for candidate in answers[2]["moves"]:
        assert {"move", "visits", "prior", "wdl", "pv", "proven"} <= set(candidate)
        assert candidate["pv"][0] == candidate["move"]
    capture = answers["capture"]
    assert {m["move"] for m in capture["moves"]} == {"9x18x25", "9x18x27"}
    assert capture["nodes"] >= 50
    timed = answers["timed"]
    assert "pv" not in timed and all(set(m) == {"move", "path", "visits", "share", "prior", "proven"}
                                     for m in timed["moves"])


def test_interleaved_ids_come_back_matched(tiny_checkpoint):
    """One long search and many short ones in flight together: the short ones are answered first (out of
    order), every answer carries its query's id and position."""
    rng = random.Random(7)
    queries = [{"id": "long", "moves": OPENING, "simulations": 3000}]
    for k in range(30):
        game = Game()
        for _ in range(rng.randrange(12)):
            game.play(rng.choice(game.legal_moves()))
        queries.append({"id": k, "moves": [str(m) for m in game.moves], "simulations": rng.randrange(1, 12)})
    queries.append({"id": "plies", "moves": OPENING, "analyze_plies": [4, 0, 2], "simulations": 8})
    answers = run_engine(tiny_checkpoint, [json.dumps(q) for q in queries])
    by_id: dict = {}
    for a in answers:
        assert "error" not in a, a
        by_id.setdefault(a["id"], []).append(a)
    for q in queries[:-1]:
        (a,) = by_id[q["id"]]
        assert a["fen"] == position_after(q["moves"]) and a["simulations"] == q["simulations"]
    assert sorted(a["ply"] for a in by_id["plies"]) == [0, 2, 4]
    for a in by_id["plies"]:
        assert a["fen"] == position_after(OPENING[: a["ply"]])
    assert answers[-1]["id"] == "long", "the long search should finish after the short ones"


GARBAGE = [
    ("not json at all", None, "not JSON"),
    ('{"id": 1, "moves": ["11-15"', None, "not JSON"),
    ("[1, 2, 3]", None, "a query is a JSON object"),
    ('{"id": [1], "simulations": 4}', None, "id must be a string or an integer"),
    ('{"id": "u", "simulatons": 4}', "u", "unknown field 'simulatons'"),
    ('{"id": "f", "fen": "X:W1:B2"}', "f", "bad fen"),
    ('{"id": "f2", "fen": 12}', "f2", "fen must be a string"),
    ('{"id": "m", "moves": ["11-15", "11-15"]}', "m", "move 2: illegal move 11-15"),
    ('{"id": "m2", "moves": "11-15"}', "m2", "moves must be a list"),
    ('{"id": "s", "simulations": 0}', "s", "simulations must be an integer from 1"),
    ('{"id": "s2", "simulations": true}', "s2", "simulations must be an integer"),
    ('{"id": "t", "time": -1}', "t", "time must be a number of seconds above 0"),
    ('{"id": "t2", "time": NaN}', "t2", "time must be a number"),
    ('{"id": "c", "increment": 0.1}', "c", "increment needs clock"),
    ('{"id": "c2", "clock": 0}', "c2", "clock must be a number of seconds above 0"),
    ('{"id": "c3", "clock": 1, "increment": 2}', "c3", "increment must be a number of seconds from 0"),
    ('{"id": "n", "nodes": 99999999}', "n", "nodes must be an integer from 1 to 40000"),
    ('{"id": "k", "top": 0}', "k", "top must be a positive integer"),
    ('{"id": "p", "pv": "yes"}', "p", "pv must be true or false"),
    ('{"id": "a", "moves": ["11-15"], "analyze_plies": [2]}', "a", "analyze_plies: 2 is not a ply"),
    ('{"id": "a2", "analyze_plies": [0, 0]}', "a2", "lists ply 0 twice"),
    ('{"id": "over", "fen": "B:WK1:B"}', "over", "the game is over"),
    ('{"id": "q", "query": "ponder"}', "q", "unknown query 'ponder'"),
    ('{"id": "st", "stop": false}', "st", "a stop request is"),
    (b'{"id": "\xff\xfe"}', None, "not UTF-8"),
    ("[" * 100_000, None, "not"),
    ("x" * (1 << 20 | 7), None, "line longer than"),
]


def test_garbage_lines_get_error_answers_and_the_engine_keeps_serving(tiny_checkpoint):
    lines = [line for line, _, _ in GARBAGE] + ["", "   ", json.dumps({"id": "after", "simulations": 2})]
    answers = run_engine(tiny_checkpoint, lines)
    assert len(answers) == len(GARBAGE) + 1  # blank lines get no answer
    for (line, query_id, message), a in zip(GARBAGE, answers):
        assert a["id"] == query_id, (line[:60], a)
        assert message in a["error"], (line[:60], a)
    assert answers[-1]["id"] == "after" and "error" not in answers[-1]


def test_stop_answers_what_was_read_and_ignores_the_rest(tiny_checkpoint):
    lines = [json.dumps({"id": k, "simulations": 50}) for k in range(5)]
    lines += [json.dumps({"stop": True}), json.dumps({"id": "late", "simulations": 2})]
    answers = run_engine(tiny_checkpoint, lines)
    assert sorted(a["id"] for a in answers) == list(range(5))


def _fuzzed_lines(count: int, seed: int) -> tuple[list[bytes], dict[str, int]]:
    """Seeded garbage and near-misses, with valid queries mixed in; returns the lines and, for each valid
    query's id, how many answers it must get."""
    rng = random.Random(seed)
    values = [None, True, False, -1, 0, 1, 2, 0.01, -0.5, 1e308, 10 ** 30, "", "11-15", "B:W21:B1", "x" * 50,
              [], [1, "a"], {}, {"id": 1}, [[[[]]]]]
    fields = ["id", "query", "fen", "moves", "simulations", "time", "clock", "increment", "nodes", "top", "pv", "wdl",
              "analyze_plies", "bogus", "Simulations", ""]
    lines: list[bytes] = []
    expected: dict[str, int] = {}

    def valid_query(k: int) -> dict:
        game = Game()
        for _ in range(rng.randrange(16)):
            if game.outcome is not None:
                break
            game.play(rng.choice(game.legal_moves()))
        query = {"id": f"v{k}", "moves": [str(m) for m in game.moves], "simulations": rng.randrange(1, 4),
                 "top": rng.randrange(1, 4)}
        if rng.random() < 0.2:
            query["analyze_plies"] = rng.sample(range(game.ply + 1), min(3, game.ply + 1))
        return query

    for k in range(count):
        kind = rng.random()
        if kind < 0.15:
            query = valid_query(k)
            expected[query["id"]] = len(query.get("analyze_plies", [0]))
            line = json.dumps(query).encode()
        elif kind < 0.45:  # a valid query with fields replaced or removed (never its simulations)
            query = valid_query(k)
            query["id"] = rng.choice([f"m{k}", k, None, [k], 1.5])
            for _ in range(rng.randrange(1, 3)):
                name = rng.choice(fields)
                if rng.random() < 0.3 and name != "simulations":
                    query.pop(name, None)
                else:
                    query[name] = rng.choice(values)
            line = json.dumps(query).encode()
        elif kind < 0.6:  # a valid query cut short
            text = json.dumps(valid_query(k)).encode()
            line = text[: rng.randrange(len(text))]
        elif kind < 0.8:  # random bytes
            line = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))).replace(b"\n", b" ")
        else:  # any JSON value, or a malformed stop request (a real one would end the session)
            line = json.dumps(rng.choice(values + [{"stop": rng.choice(values[2:])}])).encode()
        lines.append(line)
    return lines, expected


def test_the_engine_survives_ten_thousand_fuzzed_lines(tiny_checkpoint):
    lines, expected = _fuzzed_lines(10_000, seed=15)
    started = time.perf_counter()
    answers = run_engine(tiny_checkpoint, lines, timeout=300)
    assert time.perf_counter() - started < 120
    counts: dict = {}
    for a in answers:
        assert isinstance(a, dict) and "id" in a
        assert "internal error" not in a.get("error", ""), a
        if isinstance(a["id"], str) and a["id"].startswith("v"):
            assert "error" not in a, a
            counts[a["id"]] = counts.get(a["id"], 0) + 1
    assert counts == expected
    assert len(answers) >= sum(1 for line in lines if line.strip()) - 1  # the odd blank line gets none


# -------------------------------------------------------------------------------------------------- the API

@pytest.fixture(scope="module")
def api_engine(tiny_checkpoint):
    # A tree that the tiny network cannot fill within the 0.3 s search below on a fast machine (a full
    # tree ends a search before its time; ~130 bytes a node, touched only as the tree grows).
    return Engine(tiny_checkpoint, EngineSettings(slots=4, tree_nodes=1_000_000, default_simulations=8))


def test_api_answers_as_the_protocol_does(api_engine, tiny_checkpoint):
    query = {"id": 1, "moves": OPENING, "simulations": 24, "top": 4}
    (over_the_wire,) = run_engine(tiny_checkpoint, [json.dumps(query)])
    direct = api_engine.analyse(moves=OPENING, simulations=24, top=4)
    assert direct.keys() == over_the_wire.keys()
    for field in ("fen", "side", "move", "wdl", "score", "moves", "pv", "simulations"):
        assert direct[field] == over_the_wire[field], field


def shape(value):
    """A JSON value's keys and types all the way down (a list by its first item)."""
    if isinstance(value, dict):
        return {name: shape(item) for name, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


@pytest.mark.parametrize("fen", [None, "W:WK23,K28:B4,K20"])  # after the opening; a database win
def test_analyze_json_is_an_engine_answer(api_engine, tiny_checkpoint, capsys, fen):
    from play.cli.main import main

    fen = fen or position_after(OPENING)
    assert main(["analyze", "--checkpoint", str(tiny_checkpoint), "--fen", fen, "--sims", "24", "--json"]) == 0
    analyzed = json.loads(capsys.readouterr().out)
    answer = api_engine.analyse(fen, simulations=24)
    assert shape(analyzed) == shape(answer)
    for reply in (analyzed, answer):
        assert reply["move"] == reply["moves"][0]["move"] == reply["pv"][0] and reply["fen"] == fen
    assert analyzed["proven"] == answer["proven"]


def test_a_game_clock_is_read_as_the_time_left_and_the_increment():
    from play.queries import parse_query

    settings = EngineSettings()
    limits = parse_query({"clock": 60, "increment": 1}, settings).limits
    assert (limits.clock_left, limits.increment, limits.seconds) == (60.0, 1.0, None)
    assert limits.simulations is None and limits.clock_only  # the clock is the limit, not the default simulations
    both = parse_query({"clock": 60, "increment": 1, "time": 0.5}, settings).limits
    assert (both.clock_left, both.seconds) == (60.0, 0.5)
    assert parse_query({"clock": 0.2}, settings).limits.increment == 0.0


def test_a_moves_capture_mark_is_held_to_one_rule_in_every_front_end():
    # Before: the engine played "12x16" as the step 12-16 while the terminal and the browser refused it.
    from play.queries import parse_query

    settings = EngineSettings()
    for moves, said in ((["12x16"], "12x16 is not a capture: write 12-16"),
                        (["11-15", "22-18", "15-22"], "15-22 is a capture: write 15x22")):
        with pytest.raises(QueryError, match=f"move {len(moves)}: {said}"):
            parse_query({"moves": moves}, settings)
    assert parse_query({"moves": ["11-15", "22-18", "15x22"]}, settings).game.ply == 3


def _clock_answer(query: dict, evaluator, manager=None, moves=OPENING) -> dict:
    """The answer of one query to a pool of one tree whose time is `evaluator`'s fake clock."""
    from play.analysis_pool import AnalysisPool
    from play.queries import parse_query
    from selfplay.tree_search.search import warm_up
    from selfplay.tree_search.time_manager import TimeManager

    warm_up(evaluator.inner)  # the once-a-process warm-up, before the fake clock runs
    settings = EngineSettings(slots=1, tree_nodes=500_000, time_manager=manager or TimeManager())
    pool = AnalysisPool(evaluator, settings, clock=evaluator.clock)
    pool.submit(parse_query({"moves": moves, **query}, settings))
    answers = []
    while not answers:
        answers = pool.step()
    return answers[0]


@pytest.mark.parametrize("share, thinks_on", [(1.0, True), (0.0, False)])
def test_a_move_on_a_game_clock_takes_its_share_and_thinks_on_only_while_its_choice_is_unstable(share, thinks_on):
    from counting import ClockedEvaluator
    from selfplay.tree_search.time_manager import TimeManager

    # 2 s banked and 0.1 a move: a target of 0.1 + 2/10 s, and while unstable up to three times that but no
    # more than 0.1 + 0.3 of the bank, 0.7 s (share 1: every leader counts as late; share 0: never). Even
    # values and a uniform policy: no early stop.
    evaluator = ClockedEvaluator(seconds=0.01)
    answer = _clock_answer({"clock": 2.1, "increment": 0.1}, evaluator,
                           TimeManager(unstable_share=share, value_drop=2.0))
    expected = 0.7 if thinks_on else 0.3
    assert expected - 1e-3 <= answer["seconds"] <= expected + evaluator.seconds + 1e-3


@pytest.mark.parametrize("query, most", [({"clock": 0.05, "increment": 0.05}, 0.05),  # all that is left
                                         ({"clock": 20, "time": 0.1}, 0.1)])  # the time, when it comes first
def test_a_move_on_a_game_clock_never_takes_more_than_it_may(query, most):
    from counting import ClockedEvaluator
    from selfplay.tree_search.time_manager import TimeManager

    evaluator = ClockedEvaluator(seconds=0.01)
    always_unstable = TimeManager(unstable_share=1.0)
    assert _clock_answer(query, evaluator, always_unstable)["seconds"] <= most + evaluator.seconds + 1e-3


def test_a_move_on_a_game_clock_stops_once_it_cannot_change_and_a_forced_one_at_once():
    from counting import ClockedEvaluator
    from selfplay.tree_search.time_manager import TimeManager
    from zero.net.encoding import move_action
    from zero.rules.notation import resolve_move

    game = Game()
    for text in OPENING:
        game.play(resolve_move(text, game.legal_moves()))
    favourite = resolve_move("9-14", game.legal_moves())
    action = move_action(favourite, game.position.black_to_move)
    # 20 s left and 1 a move, the bank spread over 20 moves: a target of 1 + 19/20 s, of which the search
    # needs little.
    clocked = _clock_answer({"clock": 20, "increment": 1}, ClockedEvaluator(seconds=0.01, favourite=action),
                            TimeManager(moves_to_go=20))
    assert clocked["move"] == "9-14" and clocked["seconds"] < 1.5
    # Asked for the same time as analysis, it spends it all on the same move.
    timed = _clock_answer({"time": 1.95}, ClockedEvaluator(seconds=0.01, favourite=action))
    assert timed["move"] == "9-14" and timed["seconds"] >= 1.95 - 1e-3
    assert timed["simulations"] > clocked["simulations"]
    # The only legal move (the capture 15x22) is answered after the first network call.
    evaluator = ClockedEvaluator(seconds=0.01)
    forced = _clock_answer({"clock": 20, "increment": 1}, evaluator, moves=["11-15", "22-18"])
    assert forced["move"] == "15x22" and evaluator.calls == 1


def test_api_limits_and_errors(api_engine, king_routes_fen):
    started = time.perf_counter()
    timed = api_engine.analyse(moves=OPENING, time=0.3)
    assert 0.3 <= timed["seconds"] < 1.5 and time.perf_counter() - started < 3
    assert api_engine.analyse(fen=king_routes_fen, nodes=40)["nodes"] >= 40
    assert api_engine.analyse()["simulations"] == 8  # the default budget
    plies = api_engine.analyse_plies(None, OPENING, [3, 1], simulations=4)
    assert [a["ply"] for a in plies] == [3, 1]
    with pytest.raises(QueryError, match="illegal move 12-19"):
        api_engine.analyse(moves=["12-19"])
    with pytest.raises(QueryError, match="time must be"):
        api_engine.analyse(time=0)


def test_answers_stream_many_queries_batched(api_engine):
    queries = [{"id": k, "moves": OPENING[: k % 5], "simulations": 6} for k in range(20)] + [{"id": "bad", "top": -1}]
    answers = list(api_engine.answers(queries))
    assert sorted(a["id"] for a in answers if "error" not in a) == list(range(20))
    assert [a["id"] for a in answers if "error" in a] == ["bad"]


def test_proven_positions_are_answered_with_their_value(api_engine):
    # A shot the solver proves long before the budget (the search stops there, not at the limit), and a
    # 4-piece ending the database holds.
    shot = api_engine.analyse("B:W14,15:B2,6,25", simulations=200_000)
    assert shot["move"] == "6-10" and shot["proven"]["value"] == "win" and shot["proven"]["source"] == "search"
    assert shot["simulations"] < 200_000
    ending = api_engine.analyse("W:WK23,K28:B4,K20", simulations=50)
    assert ending["move"] == "23-19"
    assert ending["proven"] == {"value": "win", "plies": 61, "source": "database", "text": "database win in 61"}


def test_with_calls_in_flight_the_engine_answers_as_many_queries_with_their_budgets(tiny_checkpoint):
    from dataclasses import replace

    from selfplay.tree_search import mcts

    settings = EngineSettings(slots=4, tree_nodes=1_000_000, default_simulations=8)
    threaded = Engine(tiny_checkpoint, replace(settings, search=replace(settings.search, threads=2)))
    queries = [{"id": k, "moves": OPENING[: k % 5], "simulations": 40 + k} for k in range(12)]
    answers = sorted(threaded.answers(queries), key=lambda a: a["id"])
    assert [a["id"] for a in answers] == list(range(12))
    # Every answer counts exactly its budget: nothing still in flight was read, nothing counted twice.
    assert [a["simulations"] for a in answers] == [40 + k for k in range(12)]
    shot = threaded.analyse("B:W14,15:B2,6,25", simulations=200_000)
    assert shot["move"] == "6-10" and shot["proven"]["value"] == "win"
    # Searches ended by the clock, with calls in flight, and the trees given to the next positions: every
    # call was backed up into its own tree before the tree was read and reused.
    mixed = [{"id": k, "moves": OPENING[: k % 5], **({"time": 0.05} if k % 2 else {"simulations": 300})}
             for k in range(12)]
    answers = sorted(threaded.answers(mixed), key=lambda a: a["id"])
    assert [a["simulations"] for a in answers if a["id"] % 2 == 0] == [300] * 6
    forest = threaded.pool.search.forest
    for g in range(forest.trees.shape[0]):
        used = int(forest.trees[g, mcts.USED])
        assert not forest.stats[g, :used, mcts.VIRTUAL].any(), g


def test_a_move_on_the_clock_searches_on_in_the_tree_of_the_games_last_position(tiny_checkpoint):
    from selfplay.tree_search.analysis import SINGLE_GAME_LEAVES

    engine = Engine(tiny_checkpoint, EngineSettings(slots=2, tree_nodes=1_000_000))
    # A game's positions asked one at a time fill the network's batches as a game searched alone does.
    assert engine.settings.search.leaves_per_tree == SINGLE_GAME_LEAVES
    first = engine.analyse(moves=OPENING, simulations=4000)
    kept = first["moves"][0]["visits"]  # the most visited move's: at least 4000 over the legal moves
    # The engine's move played, the next position asked with a moment's time starts from the visits its
    # subtree holds, which one network call could never make; asked again, it keeps them and searches on.
    later = engine.analyse(moves=OPENING + [first["move"]], time=0.001)
    assert later["simulations"] >= kept > 4 * SINGLE_GAME_LEAVES
    again = engine.analyse(moves=OPENING + [first["move"]], time=0.001)
    assert again["simulations"] >= later["simulations"]
    # A budget of simulations is an analysis's: searched afresh, it counts exactly its budget; and a
    # position of another game never continues this one's tree.
    assert engine.analyse(moves=OPENING + [first["move"]], simulations=20)["simulations"] == 20
    other = engine.analyse(fen="B:W21,22,23,24,25,26,27,28,29,30,31:B1,2,3,4,5,6,7,8,9,10,11", time=0.001)
    assert other["simulations"] < kept


def test_a_match_plays_the_engine_as_a_program_on_a_game_clock(tiny_checkpoint):
    # What benchmarks/engine_match.py plays: the engine process asked for each move with its clock.
    from selfplay.tree_search.time_manager import GameClock
    from train.arena.match import play_match
    from train.arena.program_player import ProgramPlayer
    from zero.corpus.openings import Opening
    from zero.yardsticks.players import RandomPlayer

    command = f"{sys.executable} -m play engine --checkpoint {tiny_checkpoint} --no-egdb --slots 2 --tree-nodes 40000"
    engine = ProgramPlayer("engine", command, clock=GameClock(0.0, 0.05), cwd=REPO)
    try:
        result = play_match(engine, RandomPlayer(0), [Opening("start", ("11-15",))], games=2)
    finally:
        engine.close()
    assert len(result.games) == 2 and all(game.outcome is not None for game in result.games)
    assert result.games[0].black == result.games[1].white == "engine"
    # Every move after the opening is timed, the engine's included.
    assert all(len(game.move_seconds) == len(game.moves) - 1 for game in result.games)


def test_a_search_that_fills_its_tree_grows_it_unless_its_limit_is_nodes(tiny_checkpoint):
    # A game on the clock used to fill the engine's pool within a move or two of its endgame, and every
    # search after that ended at once, whatever its time: a search for simulations or time grows the pool.
    settings = EngineSettings(slots=2, tree_nodes=1_000)
    grown = Engine(tiny_checkpoint, settings).analyse(moves=OPENING, simulations=3_000)
    assert grown["simulations"] == 3_000 and grown["nodes"] > 1_000
    # A query's nodes counts in the pool as it began (at most its size), and stops when that is full.
    assert 900 <= Engine(tiny_checkpoint, settings).analyse(moves=OPENING, nodes=1_000)["nodes"] <= 1_000


@pytest.mark.parametrize("seconds, grows", [(0.45, False), (0.55, True)])
def test_a_full_tree_grows_only_for_a_search_that_goes_on(seconds, grows):
    # Growing copies every tree's nodes: a search whose time is up as its tree fills ends, and leaves the
    # pool as it is. (Each fake network call costs 0.1 s; the tree of 257 nodes is full after the fifth.)
    from counting import ClockedEvaluator
    from play.analysis_pool import AnalysisPool
    from play.queries import parse_query
    from selfplay.tree_search import mcts
    from selfplay.tree_search.search import warm_up

    evaluator = ClockedEvaluator(seconds=0.1)
    warm_up(evaluator.inner)
    settings = EngineSettings(slots=1, tree_nodes=257)
    pool = AnalysisPool(evaluator, settings, clock=evaluator.clock)
    pool.submit(parse_query({"moves": ["9-13", "21-17", "5-9"], "time": seconds}, settings))
    while not pool.step():
        pass
    assert int(pool.search.forest.trees[0, mcts.USED]) > 256 - 7  # full: the next expansion did not fit
    assert pool.search.forest.links.shape[1] == (514 if grows else 257)


def test_a_pool_of_many_trees_grows_within_its_share_of_memory():
    # Each tree's pool is as large as the largest's: the bound is shared by all of them, below the size a
    # single game's tree may reach.
    from counting import ClockedEvaluator
    from play.analysis_pool import AnalysisPool
    from selfplay.tree_search.analysis import SINGLE_GAME_MEMORY_SHARE
    from zero.run.machine import process_memory

    settings = EngineSettings(slots=4096, tree_nodes=257)
    pool = AnalysisPool(ClockedEvaluator(), settings)
    memory = process_memory()
    assert 257 <= pool.most_nodes
    assert pool.most_nodes * settings.slots * pool.search.node_bytes() <= SINGLE_GAME_MEMORY_SHARE * memory


def test_a_long_query_under_a_memory_limit_stops_at_the_bound_and_every_query_is_answered(tiny_checkpoint):
    # Issue 68: under a 6 GiB RLIMIT_AS a query on an hour's clock grew the trees, sized from the machine's
    # memory, until numpy could not allocate them; the MemoryError took the process and every query in
    # flight down, and with the client still holding the pipe the shutdown aborted (exit 134). The trees
    # now grow within a share of the memory the process may have, and a search that reaches it answers.
    import resource

    from selfplay.tree_search.analysis import SINGLE_GAME_MEMORY_SHARE
    from selfplay.tree_search.search import BatchedSearch

    limit, slots, tree_nodes = 6 << 30, 32, 250_000  # the engine needs about 3.5 GiB of addresses at rest

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.Popen([sys.executable, "-m", "play", "engine", "--checkpoint", str(tiny_checkpoint), "--no-egdb",
                             "--slots", str(slots), "--tree-nodes", str(tree_nodes)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                            preexec_fn=limited, text=True)
    with reaped(proc):
        proc.stdin.write(json.dumps({"id": "h", "clock": 3600, "increment": 3600}) + "\n"
                         + json.dumps({"id": "s", "moves": OPENING, "simulations": 50}) + "\n")
        proc.stdin.flush()
        answers = {}
        while len(answers) < 2:
            line = proc.stdout.readline()
            assert line, f"the engine ended (exit {proc.wait(timeout=60)}): {proc.stderr.read()[-2000:]}"
            answer = json.loads(line)
            answers[answer["id"]] = answer
        assert proc.poll() is None  # alive, with its client still there
        proc.stdin.write(json.dumps({"stop": True}) + "\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0  # the client still holds the pipe open
        err = proc.stderr.read()
    assert "Traceback" not in err and "Fatal" not in err, err
    assert "error" not in answers["h"] and "error" not in answers["s"], answers
    assert answers["s"]["simulations"] == 50
    node_bytes = BatchedSearch(1, capacity=1_000).node_bytes()
    assert tree_nodes < answers["h"]["nodes"] <= SINGLE_GAME_MEMORY_SHARE * limit // (slots * node_bytes)


def test_a_tree_that_cannot_get_the_memory_to_grow_answers_with_what_it_has(monkeypatch):
    from counting import ClockedEvaluator
    from play.analysis_pool import AnalysisPool
    from play.queries import parse_query
    from selfplay.tree_search import mcts

    evaluator = ClockedEvaluator(seconds=0.01)
    settings = EngineSettings(slots=2, tree_nodes=257)
    pool = AnalysisPool(evaluator, settings, clock=evaluator.clock)

    def no_memory(games, capacity, history):
        raise MemoryError(f"Unable to allocate {games * capacity * 136} bytes")

    monkeypatch.setattr(mcts, "new_forest", no_memory)
    pool.submit(parse_query({"id": "long", "moves": OPENING, "time": 3600}, settings))
    pool.submit(parse_query({"id": "short", "simulations": 5}, settings))
    answers = {}
    while not pool.idle:
        answers.update((a["id"], a) for a in pool.step())
    assert set(answers) == {"long", "short"} and not any("error" in a for a in answers.values()), answers
    assert 256 - 7 < answers["long"]["nodes"] <= 257 and evaluator.now < 3600  # full, and answered at once
    assert pool.search.forest.links.shape[1] == 257  # the pool as it was


def test_a_position_whose_answer_fails_costs_only_its_query(monkeypatch):
    import play.analysis_pool
    from counting import ClockedEvaluator
    from play.analysis_pool import AnalysisPool
    from play.queries import parse_query

    written = play.analysis_pool.analysis_json

    def failing_for_bad(analysis, position, ply, **fields):
        if fields["query_id"] == "bad":
            raise RuntimeError("no answer for you")
        return written(analysis, position, ply, **fields)

    monkeypatch.setattr(play.analysis_pool, "analysis_json", failing_for_bad)
    evaluator = ClockedEvaluator()
    settings = EngineSettings(slots=2, tree_nodes=1_000)
    pool = AnalysisPool(evaluator, settings, clock=evaluator.clock)
    for query in ({"id": "bad", "simulations": 8}, {"id": "good", "simulations": 30}, {"id": "next", "simulations": 8}):
        pool.submit(parse_query(query, settings))
    answers = {}
    while not pool.idle:
        answers.update((a["id"], a) for a in pool.step())
    assert answers["bad"] == {"id": "bad", "error": "internal error at ply 0: RuntimeError('no answer for you')"}
    assert answers["good"]["simulations"] == 30 and answers["next"]["simulations"] == 8


def test_a_failed_search_step_answers_the_positions_in_flight_and_the_engine_goes_on():
    from counting import ClockedEvaluator
    from play.analysis_pool import AnalysisPool
    from play.queries import parse_query

    class FailsOnce(ClockedEvaluator):
        def evaluate(self, planes):
            if self.calls == 3:
                self.calls += 1
                raise MemoryError("the network's batch")
            return super().evaluate(planes)

    evaluator = FailsOnce()
    settings = EngineSettings(slots=2, tree_nodes=1_000)
    pool = AnalysisPool(evaluator, settings, clock=evaluator.clock)
    evaluator.calls = 0  # the warm-up's calls
    for query in ({"id": 1, "simulations": 50}, {"id": 2, "simulations": 50}, {"id": 3, "simulations": 50}):
        pool.submit(parse_query(query, settings))
    answers = {}
    while not pool.idle:
        answers.update((a["id"], a) for a in pool.step())
    assert answers[1]["error"] == answers[2]["error"] == "internal error at ply 0: MemoryError(\"the network's batch\")"
    assert answers[3]["simulations"] == 50  # waiting when the step failed: searched in a fresh tree

"""The classical engine: kernels against their plain-Python twin, quiescence, the table and the ordering, the
weights file, the fit, the player spec."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zero.alphabeta import search as ab
from zero.alphabeta import classical_kernels as ck
from zero.alphabeta import reference as ref
from zero.endgames.egdb_build import ensure_built
from zero.rules.game import Game, Position
from zero.rules.notation import fen_to_position
from zero.yardsticks.classical import (
    DEFAULT_EVAL, ClassicalEval, ClassicalPlayer, EvalFileError, features_of, load_eval,
)
from positions import ENDGAMES as BASE_ENDGAMES, random_position

EVAL = load_eval()


def classical_leaf(pos: Position) -> int:
    return ref.evaluate(pos, EVAL.weights)


def player(depth: int, **kw) -> ClassicalPlayer:
    return ClassicalPlayer(depth, evaluation=kw.pop("evaluation", EVAL), tt_bits=12, **kw)


ENDGAMES = BASE_ENDGAMES + ["B:W18,K26,31:B9,K14,22"]


@pytest.fixture(scope="module")
def egdb4():
    return ensure_built(4)


# ---- evaluation ------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), plies=st.integers(0, 90))
def test_features_equal_their_definitions(seed, plies):
    pos = random_position(seed, plies)
    assert list(features_of(pos).values()) == ref.features(pos)
    assert EVAL.evaluate(pos) == ref.evaluate(pos, EVAL.weights)


@pytest.mark.parametrize("fen", ENDGAMES + ["B:W32:B28", "W:W32,K10:B28,1,3", "B:W5:B25,K30", "W:W9,K2:BK14,5"])
def test_features_on_constructed_positions(fen):
    pos = fen_to_position(fen)
    assert list(features_of(pos).values()) == ref.features(pos)


def test_features_are_the_movers_minus_the_opponents():
    # Black's man on 28 with White's on 32 is in the dog hole; turned round, White's man on 5 is.
    dog = fen_to_position("B:W32,K10:B28")
    assert features_of(dog)["dog_hole"] == 1
    assert features_of(dog.mirrored())["dog_hole"] == 1
    assert features_of(Position(dog.black, dog.white, dog.kings, False))["dog_hole"] == -1
    start = features_of(Position.initial())
    assert start["bridge"] == 0 and start["men"] == 0 and start["men_end"] == 0
    # A man up with 3 pieces on the board: END = 21.
    up = features_of(fen_to_position("B:W30:B1,3"))
    assert up["men"] == 1 and up["men_end"] == 21 and up["bridge"] == 1


# ---- search ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fen", ["W:WK10,K19:BK14,23", "B:W21,K30:BK6,K27", "W:W5,K30:BK6,3", "B:W18,K26:B9,K14"])
@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_database_values_are_exact_leaves(fen, depth, egdb4):
    pos = fen_to_position(fen)
    _, score, _ = player(depth, egdb=egdb4).search(pos)
    assert score == ref.minimax(pos, depth, classical_leaf, egdb4)
    # Where every child is a database leaf (neither side can capture there), the score is the database's
    # value of the position: its best child's, one ply further.
    value = egdb4.probe(pos)

    def quiet(p: Position) -> bool:
        other = Position(p.black, p.white, p.kings, not p.black_to_move)
        return not any(m.is_capture for side in (p, other) for m in side.legal_moves())

    if all(quiet(pos.play(m)) for m in pos.legal_moves()):
        expected = {1: ab.WIN_SCORE - value.distance, -1: -(ab.WIN_SCORE - value.distance), 0: 0}[value.value]
        assert score == expected


def test_quiescence_resolves_a_pending_exchange():
    # Black has just played 7-10: White must take (14x7 or 15x6) and Black then takes two back (2x11x18 or
    # 2x9x18). A depth-1 search plays the exchange out and scores the quiet position at its end.
    pos = fen_to_position("W:W12,14,15,29:B2,10,13")
    assert all(m.is_capture for m in pos.legal_moves())

    quiet = []

    def resolved(p: Position) -> int:
        moves = p.legal_moves()
        if not moves[0].is_capture:
            quiet.append(p)
            return EVAL.evaluate(p)
        return max(-resolved(p.play(m)) for m in moves)

    _, score, _ = player(1).search(pos)
    assert score == resolved(pos)
    # Every line of the exchange ends two against two: Black's two-for-one made.
    assert quiet and all((q.black.bit_count(), q.white.bit_count()) == (2, 2) for q in quiet)
    # Scored where the exchange is still pending, the position would read as a man up for Black.
    assert score != EVAL.evaluate(pos)
    # From Black's side before 7-10: the shot is seen at depth 1 (the exchange is the quiescence's).
    before = fen_to_position("B:W12,14,15,29:B2,7,13")
    move, score_before, _ = player(1).search(before)
    assert str(move) == "7-10" and score_before == -score


def test_a_search_keeps_its_table_and_gets_the_same_score_again():
    pos = random_position(11, 16)
    p = ClassicalPlayer(seconds=10.0, evaluation=EVAL, tt_bits=14)  # on the clock: the table is kept
    # Fixed-depth iterations through the player's own state, with the previous searches' entries in place.
    order = np.arange(len(pos.legal_moves()), dtype=np.int64)
    first = p._iteration(pos, 6, order, 1 << 40)
    again = p._iteration(pos, 6, order, 1 << 40)
    assert first[0] == again[0] == player(6).search(pos)[1]


def test_the_player_finds_the_quickest_win_and_plays_a_forced_move_at_once(egdb4):
    win = Game(start=fen_to_position("B:W5:BK6,K32"))
    for p in (player(4), player(4, egdb=egdb4), ClassicalPlayer(seconds=0.05, evaluation=EVAL, tt_bits=12)):
        move, score, _ = p.search(win)
        assert str(move) == "6-1" and score == ab.WIN_SCORE - 1
    forced = Game(start=fen_to_position("W:W21,28,32:BK4,17"))
    assert str(player(6).choose(forced)) == "21x14"


def test_a_move_back_to_a_position_of_the_game_scores_as_a_draw():
    from zero.alphabeta.player import repetitions

    game = Game(start=fen_to_position("B:W12,K29:BK1,K3"))
    for move in ("1-6", "29-25", "6-1", "25-29"):
        game.play(next(m for m in game.legal_moves() if str(m) == move))
    legal = game.legal_moves()
    flags = repetitions(game, legal)
    assert [str(m) for m, f in zip(legal, flags) if f] == ["1-6"]
    for depth in (1, 2, 3):
        _, score, _ = player(depth).search(game)
        expected = max(0 if f else -ref.minimax(game.position.play(m), depth - 1, classical_leaf, ply=1)
                       for m, f in zip(legal, flags))
        assert score == expected
        # A position alone has no history: the same move is searched.
        assert player(depth).search(game.position)[1] == ref.minimax(game.position, depth, classical_leaf)


def test_a_fixed_depth_player_is_reproducible_per_seed():
    game = Game(start=random_position(3, 10))
    a, b = player(5, seed=11), player(5, seed=11)
    a.choose(Game(start=random_position(4, 20)))  # a's table holds another search: it must not matter
    a.reset(5)
    b.reset(5)
    assert [str(a.choose(game)) for _ in range(4)] == [str(b.choose(game)) for _ in range(4)]


def test_a_search_stopped_by_its_node_budget_returns_a_finished_root_move():
    pos = random_position(5, 12)
    p = player(6)
    order = np.arange(len(pos.legal_moves()), dtype=np.int64)
    full_score, full_row, complete = p._iteration(pos, 6, order, 1 << 40)
    assert complete
    p._state["counters"][ab.C_NODES] = 0
    p._state["counters"][ab.C_GENERATION] += 1
    score, row, complete = p._iteration(pos, 6, order, 40)
    assert not complete
    if row >= 0:
        assert score == -ref.minimax(pos.play(pos.legal_moves()[row]), 5, classical_leaf, ply=1)


def test_on_the_clock_it_deepens_and_returns_a_legal_move():
    game = Game(start=random_position(8, 14))
    p = ClassicalPlayer(seconds=0.05, evaluation=EVAL, tt_bits=14)
    assert p.choose(game) in game.legal_moves()
    assert p.last_depth >= 1 and p.last_nodes > 0
    with pytest.raises(ValueError):
        ClassicalPlayer(4, seconds=0.1, evaluation=EVAL)
    with pytest.raises(ValueError):
        ClassicalPlayer(0, evaluation=EVAL)


# ---- the weights file ------------------------------------------------------------------------------


def test_the_shipped_weights_load():
    ev = load_eval()
    assert len(ev.weights) == ck.N_FEATURES and ev.scale > 0
    assert ev.meta["fit"]["log_loss"]["test"] < ev.meta["fit"]["material_log_loss"]["test"]
    assert ev.meta["command"].startswith("checkers-zero classical fit")
    # Material counts for the side to move: a man up is good.
    assert ev.evaluate(fen_to_position("B:W30:B1,3")) > 0 > ev.evaluate(fen_to_position("W:W30:B1,3"))
    assert 0.5 < ev.win_probability(fen_to_position("B:W30:B1,3")) < 1


def test_the_shipped_weights_were_fitted_on_the_data_folders_oca():
    from zero.run.config import file_sha256
    from zero.run.data import data_file

    oca = data_file("OCA_2.0.pdn")
    if oca is None:
        pytest.skip("OCA_2.0.pdn not found (set CHECKERS_ZERO_DATA)")
    assert load_eval().meta["data"]["sha256"] == file_sha256(oca)


def _damaged(doc: dict, change) -> dict:
    doc = json.loads(json.dumps(doc))
    change(doc)
    return doc


@pytest.mark.parametrize("damage", [
    lambda d: d["weights"].pop("men"),
    lambda d: d["weights"].update(men=1.5),
    lambda d: d["weights"].update(men="171"),
    lambda d: d["weights"].update(men=10**12),
    lambda d: d.update(weights=list(d["weights"].values())),
    lambda d: d.update(weights={"kings": d["weights"]["kings"], **d["weights"]}),
    lambda d: d.update(scale=0),
    lambda d: d.update(scale=-1000.0),
    lambda d: d.update(scale=True),
    lambda d: d.update(version=99),
    lambda d: d.update(format="something else"),
])
def test_a_damaged_weights_file_is_refused_with_one_line(tmp_path, damage):
    doc = json.loads(DEFAULT_EVAL.read_text())
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(_damaged(doc, damage)))
    with pytest.raises(EvalFileError) as info:
        load_eval(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_an_unreadable_or_missing_weights_file_is_refused_with_one_line(tmp_path):
    text = DEFAULT_EVAL.read_text()
    for name, content in (("cut.json", text[: len(text) // 2]), ("empty.json", ""), ("list.json", "[1, 2]")):
        path = tmp_path / name
        path.write_text(content)
        with pytest.raises(EvalFileError) as info:
            load_eval(path)
        assert "\n" not in str(info.value)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(EvalFileError):
        load_eval(tmp_path / "binary.json")
    with pytest.raises(EvalFileError, match="classical fit"):
        load_eval(tmp_path / "missing.json")


# ---- the fit ---------------------------------------------------------------------------------------


def _small_pdn(path, games: int = 40) -> None:
    """Games of two alpha-beta players from random openings, with their results, as PDN."""
    from zero.corpus.pdn import write_game
    from zero.yardsticks.players import AlphaBetaPlayer

    texts = []
    for k in range(games):
        rng = random.Random(k)
        game = Game()
        for _ in range(4):
            game.play(rng.choice(game.legal_moves()))
        players = (AlphaBetaPlayer(2, seed=k), AlphaBetaPlayer(1, seed=k))
        while game.outcome is None and game.ply < 120:
            game.play(players[game.ply % 2].choose(game))
        result = game.outcome.pdn_result if game.outcome else "1/2-1/2"
        texts.append(write_game(game.moves, result, {"Event": f"g{k}"}))
    path.write_text("\n".join(texts))


def test_the_fit_writes_a_file_the_engine_loads(tmp_path):
    from train.learner.classical_fit import accuracy, fit_and_write, fit_logistic, log_loss

    # The logistic fit recovers a known model.
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, size=(20000, 3)).astype(np.float64)
    truth = np.array([0.8, -0.3, 0.0])
    y = (rng.random(20000) < 1 / (1 + np.exp(-x @ truth))).astype(np.float64)
    assert np.allclose(fit_logistic(x, y, l2=0), truth, atol=0.06)
    assert log_loss(np.zeros(4), np.array([0, 0.5, 1, 1.0])) == pytest.approx(np.log(2))
    assert accuracy(np.array([1.0, -1.0, 0.0, 5.0]), np.array([1, 1, 0, 0.5])) == pytest.approx(0.5)

    pdn = tmp_path / "games.pdn"
    _small_pdn(pdn)
    out = tmp_path / "eval.json"
    doc = fit_and_write(pdn, out, command="test", progress=False)
    ev = load_eval(out)
    assert list(doc["weights"]) == list(ck.FEATURES) and ev.scale == doc["scale"]
    assert doc["data"]["sha256"] and doc["fit"]["positions"]["train"] > 0
    assert ClassicalPlayer(2, evaluation=ev, tt_bits=10).choose(Game()) in Game().legal_moves()


def test_the_fit_command(tmp_path, capsys):
    from play.cli.main import main

    pdn = tmp_path / "games.pdn"
    _small_pdn(pdn, 12)
    out = tmp_path / "eval.json"
    assert main(["classical", "fit", "--pdn", str(pdn), "--out", str(out), "--every", "2"]) == 0
    assert load_eval(out).meta["command"] == "checkers-zero classical fit --every 2"
    assert "log-loss" in capsys.readouterr().out
    assert main(["classical", "fit", "--data", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert main(["classical", "fit", "--pdn", str(pdn), "--every", "0"]) == 2


def test_the_fit_command_replaces_the_tracked_weights_only_when_told(tmp_path, capsys, monkeypatch):
    # Before: `checkers-zero classical fit`, as the docs listed it, overwrote checkpoints/classical_eval.json.
    from play.cli.main import main
    from zero.yardsticks import classical

    tracked = tmp_path / "checkpoints" / "classical_eval.json"
    tracked.parent.mkdir()
    tracked.write_bytes(classical.DEFAULT_EVAL.read_bytes())
    monkeypatch.setattr(classical, "DEFAULT_EVAL", tracked)
    pdn = tmp_path / "games.pdn"
    _small_pdn(pdn, 12)
    before = tracked.read_bytes()
    assert main(["classical", "fit", "--pdn", str(pdn), "--every", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give --out FILE to fit elsewhere, or --force" in err, err
    assert tracked.read_bytes() == before
    assert main(["classical", "fit", "--pdn", str(pdn), "--every", "2", "--force"]) == 0
    assert tracked.read_bytes() != before and load_eval(tracked).meta["command"].endswith("--every 2 --force")


# ---- the player spec -------------------------------------------------------------------------------


def test_the_spec_parses_and_plays_a_match():
    from train.arena.match import play_match
    from train.arena.player_specs import PlayerSpecError, make_player
    from zero.corpus.openings import Opening

    a = make_player("classical:2", seed=1)
    assert isinstance(a, ClassicalPlayer) and a.name == "classical:2" and a.egdb is not None
    timed = make_player("classical:t0.1")
    assert timed.name == "classical:t0.1" and timed.seconds == 0.1
    for bad in ("classical", "classical:0", "classical:x", "classical:t0", "classical:t-1", "classical:tnan",
                "classical:999"):
        with pytest.raises(PlayerSpecError) as info:
            make_player(bad)
        assert "\n" not in str(info.value)
    result = play_match(a, make_player("alphabeta:2"), [Opening("11-15 23-19", ("11-15", "23-19"))], parallel=2)
    assert len(result.games) == 2
    assert {g.black for g in result.games} == {"classical:2", "alphabeta:2"}

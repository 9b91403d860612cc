"""`checkers-zero analyze` and the engine layer under it: budgets, levels, time-limited search, draw rule."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from play.analysis_json import analysis_json
from play.cli.main import main
from play.engine import DRAW_ACCEPT_MAX_SCORE, LEVELS, Budget, Engine, EngineError, MctsEngine, budget_for
from play.session import HumanGame, PlayError, new_game
from training_data import negative_variances
from zero.corpus.pdn import write_game
from zero.net.checkpoint import save_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.rules.game import Game, Position
from zero.rules.notation import fen_to_position, resolve_move


def analyze(capsys, tiny_checkpoint, *args: str) -> tuple[int, str, str]:
    code = main(["analyze", "--checkpoint", str(tiny_checkpoint), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_output(multi_jump_fen, capsys, tiny_checkpoint):
    code, out, _ = analyze(capsys, tiny_checkpoint, "--fen", multi_jump_fen, "--sims", "40", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["fen"] == multi_jump_fen and result["side"] == "black"
    assert result["simulations"] == 40
    assert sorted(m["move"] for m in result["moves"]) == ["9x18x25", "9x18x27"]
    visits = [m["visits"] for m in result["moves"]]
    assert visits == sorted(visits, reverse=True) and sum(visits) == 39  # the root's first visit expands it
    assert set(result["wdl"]) == {"win", "draw", "loss"} and abs(sum(result["wdl"].values()) - 1) < 1e-3
    for m in result["moves"]:
        assert abs(m["share"] - m["visits"] / 39) < 1e-3 and 0 <= m["prior"] <= 1
        assert m["wdl"] is None or abs(sum(m["wdl"].values()) - 1) < 1e-3
    most = result["moves"][0]["visits"]
    assert result["pv"][0] in [m["move"] for m in result["moves"] if m["visits"] == most] and len(result["pv"]) >= 2
    # The moves-left head's estimate for the root, the same the network gives the position on its own.
    from zero.net.encoding import encode_game
    from zero.net.inference import Evaluator

    expected = Evaluator.from_checkpoint(tiny_checkpoint, device="cpu").predict(
        encode_game(new_game(fen_to_position(multi_jump_fen), []))[None])[2][0]
    assert result["plies_left"] == pytest.approx(expected, abs=0.06) and result["plies_left"] >= 0


def test_table_output_and_pdn_final_position(capsys, tiny_checkpoint, tmp_path):
    start = Position.initial()
    first = start.legal_moves()[0]
    (tmp_path / "g.pdn").write_text(write_game([first], "*"))
    code, out, _ = analyze(capsys, tiny_checkpoint, "--pdn", str(tmp_path / "g.pdn"), "--sims", "16")
    assert code == 0
    assert f"Position {start.play(first)} (White to move), 16 simulations" in out
    assert "Principal variation: " in out and "visits" in out
    assert "the network expects about" in out and "more plies" in out


def test_bad_input_is_a_clear_error(capsys, tiny_checkpoint, tmp_path):
    code, _, err = analyze(capsys, tiny_checkpoint, "--fen", "nonsense")
    assert code == 2 and "FEN must start with the side to move" in err
    code, _, err = analyze(capsys, tiny_checkpoint, "--fen", "B:W5:B")  # Black has no piece: game over
    assert code == 2 and "the game is over" in err
    code, _, err = analyze(capsys, tiny_checkpoint, "--pdn", str(tmp_path / "missing.pdn"))
    assert code == 2 and "cannot read" in err


def test_a_top_below_one_is_refused_in_one_line(capsys, tiny_checkpoint):
    # Before: accepted (and the table showed all but the last two moves).
    code, out, err = analyze(capsys, tiny_checkpoint, "--fen", "B:W21-32:B1-12", "--top", "-2")
    assert code == 2 and out == "" and err == "checkers-zero analyze: --top -2: must be at least 1\n"


def test_a_checkpoint_whose_answers_are_not_finite_is_refused_in_one_line(capsys, tmp_path):
    # Finite weights, checksums as the normal save writes them: the network answers NaN, and analyze used to
    # die in the int8 model's calibration with a traceback.
    cfg = NetworkConfig(blocks=1, channels=8, policy_channels=4, value_channels=2, value_hidden=16)
    net = PolicyValueNet(cfg)
    with torch.no_grad():
        negative_variances(net)
    bad = save_checkpoint(tmp_path / "bad.pt", net=net, net_config=cfg, step=1)
    code, out, err = analyze(capsys, bad, "--fen", "B:W21-32:B1-12", "--sims", "8")
    assert code == 2 and out == ""
    # The one line of the error, after the notice of what was being done.
    notice, error = err.splitlines()
    assert notice.endswith(f"loading the network {bad} ...")
    assert error == f"checkers-zero analyze: {bad}: the network's outputs are not finite on fixed positions " \
                    f"(policy, value, plies-left), though its weights are; it cannot be used"


def test_levels_and_budgets():
    assert [lv.simulations for lv in LEVELS.values()] == sorted(lv.simulations for lv in LEVELS.values())
    assert [lv.depth for lv in LEVELS.values()] == sorted(lv.depth for lv in LEVELS.values())
    # A level is the default player's depth, or an MCTS engine's simulations.
    assert budget_for() == Budget(depth=LEVELS["club"].depth)
    assert budget_for("master", kind="mcts") == Budget(simulations=LEVELS["master"].simulations)
    assert budget_for("beginner", simulations=7) == Budget(simulations=7)  # --sims wins over a level
    assert budget_for("beginner", depth=9) == Budget(depth=9)
    assert budget_for(seconds=0.5) == Budget(seconds=0.5)
    for bad in (lambda: budget_for("grandmaster"), lambda: budget_for(simulations=5, seconds=1.0),
                lambda: budget_for(depth=5, seconds=1.0), lambda: Budget(depth=0), lambda: Budget(seconds=float("inf")),
                lambda: Budget(simulations=0), lambda: Budget(seconds=-1.0), lambda: Budget()):
        with pytest.raises(EngineError):
            bad()


def test_time_limited_search_grows_one_tree_until_the_time_is_up(engine):
    game = Game()
    started = time.perf_counter()
    analysis = engine.analyse(game, Budget(seconds=0.3))
    elapsed = time.perf_counter() - started
    assert elapsed >= 0.3
    assert analysis.simulations >= 16 and sum(s.visits for s in analysis.moves) == analysis.simulations - 1
    result = analysis_json(analysis, game.position, game.ply)
    most = max(m["visits"] for m in result["moves"])
    assert result["pv"][0] in [m["move"] for m in result["moves"] if m["visits"] == most]


class FixedViewEngine(Engine):
    """An engine whose search always sees the same root win/draw/loss: isolates the draw rule."""

    def __init__(self, wdl):
        super().__init__(Path("fixed.pt"))
        self.wdl = wdl

    def analyse(self, game, budget):
        return SimpleNamespace(root_wdl=self.wdl)


@pytest.mark.parametrize(
    "wdl,engine_to_move,accepted",
    [
        ((0.1, 0.8, 0.1), True, True),  # level: 50%
        ((0.6, 0.3, 0.1), True, False),  # engine clearly better: 75%
        ((0.6, 0.3, 0.1), False, True),  # the offerer (to move) is better: the engine scores 25%
        ((0.2, 0.7, 0.1), True, True),  # 55%: at the limit, accepted
    ],
)
def test_draw_acceptance_rule(wdl, engine_to_move, accepted):
    # The engine's rule, whichever side is to move (a person offers only on their turn: the next test).
    got, score = FixedViewEngine(wdl).accepts_draw(Game(), Budget(simulations=1), engine_is_black=engine_to_move)
    assert got == accepted and (score <= DRAW_ACCEPT_MAX_SCORE + 1e-9) == accepted
    game = HumanGame(FixedViewEngine(wdl), human_black=True, budget=Budget(simulations=1))
    if not engine_to_move:
        assert game.offer_draw() == (got, score) and game.result == ("1/2-1/2" if accepted else "*")


def test_a_draw_is_offered_on_the_persons_turn_and_undo_reopens_the_game_as_it_was():
    # Before: a draw offered on the engine's turn (between the person's move and its reply) was accepted, and
    # the docs said undo takes back the person's move where it reopened the game.
    game = HumanGame(FixedViewEngine((0.1, 0.8, 0.1)), human_black=True, budget=Budget(simulations=1))
    game.play_text("11-15")
    with pytest.raises(PlayError, match="it is the engine's turn"):
        game.offer_draw()
    assert not game.over and game.engine_to_move
    game.game.play(resolve_move("23-19", game.game.legal_moves()))  # the engine's reply
    assert game.offer_draw()[0] and game.result == "1/2-1/2"
    assert game.undo() == [] and not game.over and game.human_to_move  # the draw alone is taken back
    assert [str(m) for m in game.game.moves] == ["11-15", "23-19"]
    assert [str(m) for m in game.undo()] == ["23-19", "11-15"]  # then the moves, as before any draw


def test_pdn_start_that_goes_on_after_the_game_ended_is_refused():
    kings = fen_to_position("B:WK32:BK1")
    shuffle = []
    pos = kings
    for text in ("1-5", "32-28", "5-1", "28-32") * 3:
        move = next(m for m in pos.legal_moves() if str(m) == text)
        shuffle.append(move)
        pos = pos.play(move)
    with pytest.raises(PlayError, match="repetition"):
        new_game(kings, shuffle)


class _CountingNetwork:
    """The tiny network's evaluator, its calls counted (search batches and the moves-left estimate)."""

    def __init__(self, evaluator) -> None:
        self.evaluator, self.calls = evaluator, 0

    def evaluate(self, planes):
        self.calls += 1
        return self.evaluator.evaluate(planes)

    def predict(self, planes):
        self.calls += 1
        return self.evaluator.predict(planes)


def test_the_engine_plays_a_forced_move_at_once_and_searches_on_from_its_tree(engine):
    network = _CountingNetwork(engine.evaluator)
    counted = MctsEngine(network, engine.checkpoint, egdb=engine.egdb)
    opening = resolve_move("11-15", Position.initial().legal_moves())
    game = HumanGame(counted, human_black=False, budget=Budget(simulations=300), moves=[opening])
    game.hint()  # the engine's tree, grown from White's position
    game.play_text("22-18")  # Black (the engine) must take: 15x22 is its only legal move
    calls = network.calls
    move = game.engine_move()
    assert str(move) == "15x22" and game.last_thinking is None and network.calls == calls
    game.play_text("25x18")
    assert counted._search._rooted_at(game.game).root_visits(0) > 0  # the tree followed the moves since
    game.engine_move()
    assert game.last_thinking is not None and game.last_thinking["simulations"] >= 300


def test_the_start_says_what_it_loads_as_it_begins(capsys, tiny_checkpoint):
    # Before (issue 85, item 10): `analyze`, `engine`, `review` and `play` sat 20-40 s silent on a busy
    # machine while the network, the database and the book loaded.
    code, out, err = analyze(capsys, tiny_checkpoint, "--fen", "B:W21-32:B1-12", "--sims", "8")
    assert code == 0 and out
    assert err.splitlines()[0].endswith(f"loading the network {tiny_checkpoint} ..."), err


def test_the_alpha_beta_engine_answers_with_its_depth_nodes_and_line(alphabeta_engine, engine):
    from play.engine import score_wdl
    from play.terminal import thinking_text

    game = Game()
    for text in ("11-15", "23-19", "8-11"):
        game.play(resolve_move(text, game.legal_moves()))
    result = analysis_json(alphabeta_engine.analyse(game, Budget(depth=6)), game.position, game.ply)
    assert result["depth"] == 6 and result["nodes"] > 0 and result["simulations"] == 0
    assert [m["move"] for m in result["moves"]] == [result["move"]] == result["pv"][:1]
    assert sum(result["wdl"].values()) == pytest.approx(1.0)
    assert len(result["pv"]) >= 3  # the table's best moves after the first
    position = game.position
    for text in result["pv"]:  # a legal line
        position = position.play(resolve_move(text, position.legal_moves()))
    shown = thinking_text(result, "engine's view")
    assert f"depth 6, {result['nodes']:,} nodes" in shown and "of visits" not in shown
    assert alphabeta_engine.analyse(game, Budget(seconds=0.05)).depth >= 1
    # Each engine refuses the other's measure in a line.
    with pytest.raises(EngineError, match="not simulations"):
        alphabeta_engine.analyse(game, Budget(simulations=8))
    with pytest.raises(EngineError, match="not a depth"):
        engine.analyse(game, Budget(depth=4))
    # The score's win/draw/loss keeps its expected score and draws the rest.
    assert score_wdl(0.5) == (0.0, 1.0, 0.0) and score_wdl(0.75) == (0.5, 0.5, 0.0)
    assert score_wdl(0.2) == pytest.approx((0.0, 0.4, 0.6))


def test_the_alpha_beta_engine_plays_a_forced_move_unsearched(alphabeta_engine):
    game = Game()
    for text in ("11-15", "22-18"):  # Black must take: 15x22 is its only move
        game.play(resolve_move(text, game.legal_moves()))
    move, analysis = alphabeta_engine.choose(game, Budget(depth=8))
    assert str(move) == "15x22" and analysis is None
    game.play(move)
    move, analysis = alphabeta_engine.choose(game, Budget(depth=4))
    assert analysis is not None and analysis.moves[0].move == move and analysis.depth == 4


def test_analyze_searches_the_default_player_by_depth(capsys):
    from play.cli.main import main

    assert main(["analyze", "--fen", "B:W18,24,27,28,30:B12,16,20,K22", "--depth", "6", "--no-egdb"]) == 0
    out = capsys.readouterr().out
    assert "depth 6," in out and "nodes" in out and "visits" not in out and "Principal variation: " in out
    assert main(["analyze", "--fen", "B:W18,24,27,28,30:B12,16,20,K22", "--sims", "8", "--no-egdb"]) == 2
    assert "the alpha-beta engine searches to a depth or for a time" in capsys.readouterr().err
    # play refuses it before the game begins, not at the engine's first move
    assert main(["play", "--sims", "8", "--no-egdb", "--no-book", "--color", "white"]) == 2
    out, err = capsys.readouterr()
    assert "the alpha-beta engine searches to a depth or for a time" in err and "Engine plays" not in out
    assert main(["play", "--depth", "65", "--no-egdb", "--no-book", "--color", "white"]) == 2
    assert "the depth must be at most 64 plies" in capsys.readouterr().err

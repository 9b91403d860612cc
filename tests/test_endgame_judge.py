"""The solved-endgame mistake rate (issue 12 part 5) and the database's other uses in the loop (part 4):
moves judged against the 4-piece database, in matches, the ratings table and `replay stats`; self-play
adjudication; exact value targets in training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from play.cli.main import main
from selfplay.replay.random_records import random_game_record
from selfplay.replay.replay_buffer import ReplayReader, ReplayWriter
from train.arena.ratings import PlayerInfo, RatingsTable, format_table
from train.learner.learning import Samples
from train.learner.pretrain_dataset import RESULT_OF_PDN
from zero.corpus.pdn import read_pdn
from zero.endgames.egdb import DRAW, LOSS, UNKNOWN, WIN
from zero.endgames.egdb_build import ensure_built
from zero.endgames.endgame_judge import EndgameMistakes, is_mistake, judge_game
from zero.net.checkpoint import save_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.rules.game import Position

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=16)


def _tiny_network(path: Path) -> Path:
    torch.manual_seed(0)
    return save_checkpoint(path, net=PolicyValueNet(TINY), net_config=TINY, step=1)


@pytest.fixture(scope="module")
def db():
    return ensure_built(4)  # in this test session's folder (conftest)


def _random_positions(rng: np.random.Generator, count: int, pieces: int = 4):
    """Random boards of `pieces` pieces (both colours, men and kings, no man on its crowning row)."""
    out = []
    while len(out) < count:
        squares = rng.choice(32, size=pieces, replace=False)
        black = white = kings = 0
        for i, sq in enumerate(squares):
            bit = 1 << int(sq)
            is_black = i < pieces // 2
            king = rng.random() < 0.5 or (is_black and sq >= 28) or (not is_black and sq < 4)
            black |= bit if is_black else 0
            white |= 0 if is_black else bit
            kings |= bit if king else 0
        out.append(Position(black, white, kings, bool(rng.random() < 0.5)))
    return out


def _find(db, value: int, worse: int) -> tuple[Position, object, object]:
    """A position of this value for the mover with a move that keeps it and one that falls to `worse`."""
    rng = np.random.default_rng(5)
    for position in _random_positions(rng, 20_000):
        if db.probe(position).value != value:
            continue
        values = db.move_values(position)
        keep = [m for m, p in values if p.value == value]
        fall = [m for m, p in values if p.value == worse]
        if keep and fall:
            return position, keep[0], fall[0]
    raise AssertionError("no such position among the random ones")


@pytest.mark.parametrize("value, worse", [(WIN, DRAW), (WIN, LOSS), (DRAW, LOSS)])
def test_a_move_that_gives_up_the_database_value_is_a_mistake(db, value, worse):
    position, keep, fall = _find(db, value, worse)
    assert is_mistake(db, position, keep) is False
    assert is_mistake(db, position, fall) is True


def test_forced_moves_and_positions_outside_the_database_are_not_judged(db):
    start = Position.initial()
    assert is_mistake(db, start, start.legal_moves()[0]) is None
    for position in _random_positions(np.random.default_rng(3), 2_000, pieces=3):
        legal = position.legal_moves()
        if len(legal) == 1:
            assert is_mistake(db, position, legal[0]) is None
            return
    raise AssertionError("no forced position among the random ones")


def test_a_game_is_judged_move_by_move_for_each_colour(db):
    position, _, fall = _find(db, WIN, LOSS)
    moves, p = [fall], position.play(fall)
    while len(moves) < 12 and p.legal_moves():
        reply = db.best_move(p)
        moves.append(reply)
        p = p.play(reply)
    black, white = judge_game(db, position, moves)
    expected = {True: EndgameMistakes(), False: EndgameMistakes()}
    p = position
    for move in moves:
        verdict = is_mistake(db, p, move)
        if verdict is not None:
            expected[p.black_to_move] += EndgameMistakes(1, int(verdict))
        p = p.play(move)
    assert (black, white) == (expected[True], expected[False])
    mover = black if position.black_to_move else white
    # the first move threw the win away; the database's own moves afterwards never do
    assert mover.mistakes == 1 and (white if position.black_to_move else black).mistakes == 0
    assert mover.moves + (white if position.black_to_move else black).moves > 1


def test_a_database_win_shuffled_into_a_draw_is_a_win_let_go(db):
    position, keep, fall = _find(db, WIN, LOSS)
    mover, other = (0, 1) if position.black_to_move else (1, 0)
    colour = 1 if position.black_to_move else -1
    # Kept and drawn (as by the no-progress count): no move gave the win up, yet the game was not won.
    drawn = judge_game(db, position, [keep], winner=0)
    assert drawn[mover].mistakes == 0
    assert (drawn[mover].wins_held, drawn[mover].wins_let_go) == (1, 1)
    assert (drawn[other].wins_held, drawn[other].wins_let_go) == (0, 0)
    assert "database wins let go in 1 of 1 games" in str(drawn[mover])
    won = judge_game(db, position, [keep], winner=colour)
    assert (won[mover].wins_held, won[mover].wins_let_go) == (1, 0)
    # Thrown away: the mover held a win and lost; the opponent was handed one and won it.
    thrown = judge_game(db, position, [fall], winner=-colour)
    assert (thrown[mover].mistakes, thrown[mover].wins_held, thrown[mover].wins_let_go) == (1, 1, 1)
    assert (thrown[other].wins_held, thrown[other].wins_let_go) == (1, 0)
    # Without the game's result only moves are judged.
    assert judge_game(db, position, [keep])[mover] == EndgameMistakes(1, 0)


def test_endgame_counts_read_back_from_a_table_written_before_wins_were_counted():
    assert EndgameMistakes.from_json([7, 2]) == EndgameMistakes(7, 2)
    assert EndgameMistakes.from_json(EndgameMistakes(7, 2, 3, 1).to_json()) == EndgameMistakes(7, 2, 3, 1)
    for bad in ([7], [7, 2, 3], [7, 8], [7, 2, 1, 3]):
        with pytest.raises(ValueError):
            EndgameMistakes.from_json(bad)


def test_the_ratings_table_counts_a_matchs_endgame_moves_once(tmp_path):
    table = RatingsTable()
    for name in ("c1", "alphabeta:4", "random"):
        table.add_player(PlayerInfo(name, "checkpoint"))
    table.record_match("anchor", "alphabeta:4", "random", 3, 0, 1)
    endgame = {"c1": EndgameMistakes(7, 2), "alphabeta:4": EndgameMistakes(5, 0)}
    assert table.record_match("gate-1", "c1", "alphabeta:4", 2, 1, 1, endgame)
    assert not table.record_match("gate-1", "c1", "alphabeta:4", 2, 1, 1, endgame)  # a replay after a stop
    assert table.record_match("rating-1", "c1", "alphabeta:4", 0, 2, 0, {"c1": EndgameMistakes(3, 1)})
    table.save(tmp_path / "ratings.json")
    again = RatingsTable.load(tmp_path / "ratings.json")
    assert again.endgame == {"c1": EndgameMistakes(10, 3), "alphabeta:4": EndgameMistakes(5, 0)}
    assert "3 of 10 moves (30.0 %)" in format_table(again)


def test_the_match_command_reports_each_players_endgame_mistakes(db, tmp_path, capsys):
    rng = np.random.default_rng(11)
    starts = [p for p in _random_positions(rng, 400, pieces=6) if len(p.legal_moves()) > 1][:6]
    ballot = tmp_path / "endings.pdn"
    ballot.write_text("".join(f'[FEN "{p.fen()}"]\n*\n\n' for p in starts))
    out = tmp_path / "games.pdn"
    assert main(["match", "random", "alphabeta:6", "--openings", str(ballot), "--out", str(out)]) == 0
    printed, err = capsys.readouterr()
    # Issue 85, item 10: the database's loading after the result (8 s on a busy machine) is said.
    assert "judging the games' endgame moves against the endgame database" in err, err
    per_player = {"random": EndgameMistakes(), "alphabeta:6": EndgameMistakes()}
    for game in read_pdn(out):
        black, white = judge_game(db, game.start, game.moves, RESULT_OF_PDN[game.result])
        per_player[game.tags["Black"]] += black
        per_player[game.tags["White"]] += white
    assert per_player["random"].moves > 0
    assert (f"solved-endgame mistakes (4-piece database): random: {per_player['random']}; "
            f"alphabeta:6: {per_player['alphabeta:6']}") in printed


def test_replay_stats_judge_every_game_and_checkpoint(db, tmp_path, capsys):
    records = [random_game_record(s, checkpoint=f"c{s % 2}", model_version=s % 2, max_plies=300) for s in range(12)]
    with ReplayWriter(tmp_path, 0) as writer:
        for r in records:
            writer.append_game(r)
    assert main(["replay", "stats", "--run", str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    per_version = {0: EndgameMistakes(), 1: EndgameMistakes()}
    for r in records:
        (game,) = read_pdn([line + "\n" for line in r.pdn.splitlines()])
        for side in judge_game(db, game.start, game.moves, r.winner):
            per_version[r.model_version] += side
    total = EndgameMistakes()
    for v in per_version.values():
        total += v
    assert total.mistakes > 0  # random play throws database values away
    assert figures["endgame"] == {"pieces": 4, "moves": total.moves, "mistakes": total.mistakes, "rate": total.rate,
                                  "wins_held": total.wins_held, "wins_let_go": total.wins_let_go}
    assert total.wins_held > 0
    assert {c["model_version"]: EndgameMistakes.from_json(c["endgame"]) for c in figures["checkpoints"]} == per_version
    assert main(["replay", "stats", "--run", str(tmp_path)]) == 0
    assert f"solved-endgame mistakes (4-piece database): {total}" in capsys.readouterr().out
    assert main(["replay", "stats", "--run", str(tmp_path), "--json", "--no-endgame-judge"]) == 0
    assert json.loads(capsys.readouterr().out)["endgame"] is None


def test_the_numba_probe_of_many_positions_equals_one_at_a_time(db):
    rng = np.random.default_rng(2)
    positions = _random_positions(rng, 300, pieces=4) + _random_positions(rng, 100, pieces=6)
    values = db.values(np.array([p.black for p in positions], np.uint32), np.array([p.white for p in positions], np.uint32),
                       np.array([p.kings for p in positions], np.uint32), np.array([p.black_to_move for p in positions]))
    assert list(values) == [db.probe(p).value for p in positions]
    assert (values[300:] == UNKNOWN).all() and (values[:300] != UNKNOWN).all()


def _value_samples(positions: list[Position], wdl: np.ndarray) -> Samples:
    n = len(positions)
    return Samples(
        black=np.array([p.black for p in positions], np.uint32), white=np.array([p.white for p in positions], np.uint32),
        kings=np.array([p.kings for p in positions], np.uint32),
        black_to_move=np.array([p.black_to_move for p in positions]), no_progress=np.zeros(n, np.int16),
        repetitions=np.ones(n, np.int8), policy_actions=np.full((n, 1), -1, np.int16),
        policy_probs=np.zeros((n, 1), np.float32), wdl=wdl,
        moves_left=np.zeros(n, np.float32), policy_weight=np.zeros(n, np.float32),
        value_weight=np.array([0.0, 1.0, 1.0], np.float32), moves_left_weight=np.ones(n, np.float32),
        source=np.zeros(n, np.int8))


def test_database_positions_get_exact_value_targets(db):
    won, _, _ = _find(db, WIN, LOSS)
    drawn, _, _ = _find(db, DRAW, LOSS)
    samples = _value_samples([won, drawn, Position.initial()],
                             np.array([2, 0, 1]))  # as the games went: the won one lost, the drawn one won
    exact, held = samples.with_database_values(db)
    assert held == 2
    assert list(exact.wdl) == [0, 1, 1]  # win, draw, and the start position as its game went
    assert list(exact.value_weight) == [1.0, 1.0, 1.0]
    assert list(samples.wdl) == [2, 0, 1]  # the input is left as it was


def test_database_values_replace_a_teachers_distribution_too(db):
    # Distillation's value targets are the teacher's probabilities; the database's exact value wins there.
    won, _, _ = _find(db, WIN, LOSS)
    drawn, _, _ = _find(db, DRAW, LOSS)
    teacher = np.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [0.3, 0.4, 0.3]], np.float32)
    exact, held = _value_samples([won, drawn, Position.initial()], teacher).with_database_values(db)
    assert held == 2
    np.testing.assert_array_equal(exact.wdl, np.array([[1, 0, 0], [0, 1, 0], [0.3, 0.4, 0.3]], np.float32))


def test_self_play_adjudicates_at_the_first_database_position(db, tmp_path):
    from selfplay.actors.actor import Actor, SelfPlayConfig

    net = _tiny_network(tmp_path / "checkpoints" / "tiny.pt")
    (tmp_path / "checkpoints" / "best.json").write_text(json.dumps({"path": str(net), "name": "tiny", "step": 1}))
    # Five pieces, Black's only move the capture 14x23: four are left, which the database holds.
    start = "B:W18,32:B1,2,14"
    ballot = tmp_path / "ending.pdn"
    ballot.write_text(f'[FEN "{start}"]\n*\n')
    config = SelfPlayConfig(games_in_flight=2, full_simulations=8, fast_simulations=4, openings=str(ballot),
                            opening_share=1.0, database_adjudication=True)
    Actor(tmp_path, 0, config, games=2).run()
    games = list(ReplayReader(tmp_path).iter_games(positions=True))
    assert len(games) == 2
    after = Position(black=(1 << 0) | (1 << 1) | (1 << 22), white=1 << 31, kings=0, black_to_move=False)
    value = db.probe(after).value
    for g in games:
        assert g.termination == "database" and g.length == 1 and bool(g.positions.forced[0])
        assert g.winner == -value  # White is to move there
        (replayed,) = read_pdn([line + "\n" for line in g.pdn.splitlines()])
        assert [str(m) for m in replayed.moves] == ["14x23"]


def test_a_match_player_with_the_database_plays_its_positions_from_it(db, tmp_path, capsys):
    net = _tiny_network(tmp_path / "tiny.pt")
    rng = np.random.default_rng(4)
    starts = [p for p in _random_positions(rng, 400, pieces=4) if len(p.legal_moves()) > 1][:8]
    ballot = tmp_path / "endings.pdn"
    ballot.write_text("".join(f'[FEN "{p.fen()}"]\n*\n\n' for p in starts))
    out = tmp_path / "games.pdn"
    # A random network with 4 simulations: before, only the leaves below its roots were exact, and it threw
    # database values away where its search had not reached the right move.
    assert main(["match", f"mcts:{net}:4:db", f"mcts:{net}:4", "--openings", str(ballot), "--out", str(out)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("solved-endgame"))
    with_db = EndgameMistakes()
    without = EndgameMistakes()
    for game in read_pdn(out):
        black, white = judge_game(db, game.start, game.moves, RESULT_OF_PDN[game.result])
        with_db += black if game.tags["Black"].endswith(":db") else white
        without += white if game.tags["Black"].endswith(":db") else black
    assert with_db.moves > 10 and with_db.mistakes == 0
    assert without.mistakes > 0  # the same network and search without the database
    assert f": {with_db};" in line

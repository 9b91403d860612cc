"""The distilled player's loop (train.loop.distilled_loop): its self-play actor, its labels, and a generation
trained and gated end to end after a kill -9 in the middle of its self-play."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from processes import reaped, wait_until
from selfplay.actors.alphabeta_actor import AlphaBetaActor, AlphaBetaSelfPlayConfig, expected_score_value
from selfplay.replay.replay_buffer import ReplayReader, ReplayWriter, check_store
from train.arena.gating import read_gating_log
from train.arena.generation_gate import GATE_ENTRY, generation_decisions, play_stage
from train.learner.distilled.own_games import own_game_labels
from train.loop.distilled_loop import DistilledLoopConfig, resolve_config, run_distilled_loop
from zero.alphabeta import search as ab
from zero.distilled.model import load_eval
from zero.endgames.egdb_build import largest_available
from zero.rules.game import Position
from zero.rules.movegen import can_capture
from zero.run.data import data_file
from zero.run.rundir import RunDir

pytestmark = pytest.mark.skipif(data_file("openings/acf_3move_144.txt") is None or data_file("OCA_2.0.pdn") is None,
                                reason="the ballot and OCA_2.0.pdn not found (set CHECKERS_ZERO_DATA)")

TINY = ["positions=240", "window=240", "actors=2", "status_seconds=1", "selfplay.depth=2",
        "selfplay.commit_positions=16", "training.steps=5", "training.batch=64", "gate.budget=2",
        "gate.confirm_budget=1", "gate.round_openings=4", "gate.processes=1", "gate.sprt.max_pairs=4",
        "gate.sprt.min_pairs=2", "gate.confirm_sprt.max_pairs=4", "gate.confirm_sprt.min_pairs=2"]


@pytest.fixture(scope="module")
def egdb4():
    return largest_available(most=4)


def test_search_scores_become_values_in_the_unit_interval():
    assert expected_score_value(0) == 0.0
    assert expected_score_value(ab.WIN_SCORE - 3) == 1.0 and expected_score_value(-ab.WIN_SCORE + 3) == -1.0
    assert 0 < expected_score_value(500) < 1 and expected_score_value(-500) == pytest.approx(-expected_score_value(500))


def test_a_selfplay_game_is_a_function_of_its_seed_and_ends_at_the_database(egdb4):
    cfg = AlphaBetaSelfPlayConfig(depth=2)
    actor = AlphaBetaActor(cfg, load_eval(), "distilled", 0, egdb4)
    first, again, other = actor.play_game(0, 5), actor.play_game(0, 5), actor.play_game(1, 5)
    assert first.pdn == again.pdn and first.seed == again.seed
    assert other.seed != first.seed
    rows = first.positions
    assert len(rows) == first.length and np.all(np.abs(rows.root_value) <= 1)
    # The move played is each row's one policy entry.
    assert np.all(rows.policy_actions[:, 1:] == -1) and np.all(rows.policy_visits[:, 0] == 1)
    for game in (first, other):
        if game.termination == "database":  # ended at its first position of at most 4 pieces
            pieces = [Position(int(b), int(w), int(k), bool(t)).piece_count() for b, w, k, t in
                      zip(game.positions.black, game.positions.white, game.positions.kings,
                          game.positions.black_to_move)]
            assert min(pieces) > 4


def test_own_game_labels_are_the_quiet_positions_with_their_search_and_result(tmp_path, egdb4):
    actor = AlphaBetaActor(AlphaBetaSelfPlayConfig(depth=2), load_eval(), "distilled", 0, egdb4)
    with ReplayWriter(tmp_path, 0) as writer:
        games = [actor.play_game(0, i) for i in range(6)]
        for game in games:
            writer.append_game(game)
    labels, searched, read = own_game_labels(ReplayReader(tmp_path), 10_000)
    assert read == 6 and searched is None
    quiet = [game for game in games for k in range(game.length)
             if not can_capture(int(game.positions.black[k]), int(game.positions.white[k]),
                                int(game.positions.kings[k]), bool(game.positions.black_to_move[k]))]
    assert 0 < len(labels["black"]) == len(quiet) < sum(g.length for g in games)
    for k in range(len(labels["black"])):
        assert not can_capture(int(labels["black"][k]), int(labels["white"][k]), int(labels["kings"][k]),
                               bool(labels["black_to_move"][k]))
    # A position may come up in several games (or twice in one), each time with its own search and result.
    expected: dict[tuple, set] = {}
    for g in games:
        for b, w, kg, t, v, r in zip(g.positions.black, g.positions.white, g.positions.kings,
                                     g.positions.black_to_move, g.positions.root_value, g.results_for_side_to_move()):
            expected.setdefault((int(b), int(w), int(kg), bool(t)), set()).add(((float(v) + 1) / 2, int(r)))
    for k in range(len(labels["black"])):
        key = (int(labels["black"][k]), int(labels["white"][k]), int(labels["kings"][k]),
               bool(labels["black_to_move"][k]))
        assert any(abs(labels["wdl"][k, 0] - value) < 1e-6 and labels["result"][k] == result
                   for value, result in expected[key])


def test_games_start_from_the_books_lines_or_the_ballot_with_random_plies_off_them(egdb4):
    from zero.corpus.opening_book import ensure_book

    book = ensure_book()
    for share in (0.0, 1.0):
        actor = AlphaBetaActor(AlphaBetaSelfPlayConfig(depth=1, book_share=share, random_plies=0), load_eval(),
                               "distilled", 0, egdb4)
        ballot = {" ".join(o.moves) for o in actor.openings}
        for index in range(8):
            opening = actor.play_game(0, index).opening
            if share == 0.0:
                assert opening in ballot
                continue
            pos = Position.initial()  # every move of the line is one the book holds there
            for word in opening.split():
                entry = {str(m): m for m in pos.legal_moves()}[word]
                assert any((e.move_from, e.move_to, e.captured) == (entry.from_square, entry.to_square, entry.captured)
                           for e in book.entries(pos))
                pos = pos.play(entry)


@pytest.mark.slow
@pytest.mark.filterwarnings("error::RuntimeWarning")  # a cycle of a few games holds none out: no figure, no warning
def test_a_generation_is_trained_and_gated_after_a_kill_9_in_its_selfplay(tmp_path, egdb4):
    run = RunDir(tmp_path / "run")
    command = [sys.executable, "-m", "play", "distilled", "loop", "--run", str(run.root), "--cycles", "1",
               *[a for setting in TINY for a in ("--set", setting)]]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    with reaped(proc):
        reader = ReplayReader(run.root)

        def some_committed() -> bool:
            reader.refresh()
            return reader.total_positions() >= 32

        wait_until(some_committed, 180, proc, "self-play positions committed")
        os.killpg(proc.pid, signal.SIGKILL)  # the loop and its actors, mid-game
        proc.wait()
    assert not read_gating_log(run.root)
    cfg = resolve_config(run, None, [])
    assert cfg.positions == 240  # the run's saved config is the one resumed
    lines = []
    assert run_distilled_loop(run.root, cfg, say=lines.append) == 0
    store = check_store(run.root)
    assert not store.problems and store.positions >= 240
    reader = ReplayReader(run.root)
    games = list(reader.iter_games())
    assert sum(g.length for g in games) == store.positions
    # Nothing played or counted twice: every (actor, seed index) and every game once.
    assert max(Counter((g.actor_id, g.seed_index) for g in games).values()) == 1
    assert len({g.game_id for g in games}) == len(games) and {g.actor_id for g in games} == {0, 1}
    decisions = generation_decisions(run.root)
    assert len(decisions) == 1 and decisions[0]["cycle"] == 0
    candidate = run.evaluation_candidate(0)
    made = load_eval(candidate).meta["made_from"]
    assert made["parent"] == run.initial_evaluation().name and made["parent_generation"] == 0
    best = run.read_best()
    if decisions[0]["decision"] == "promote":
        assert best.path == candidate.resolve() and best.step == 1 and len(decisions[0]["stages"]) == 2
    else:
        assert best.path == run.initial_evaluation().resolve() and best.step == 0
    assert any("gate:" in line for line in lines)
    # A gate's finished rounds are journalled: played again, the stage is decided from them alone, without
    # the candidate (gone now) ever being loaded.
    stage = decisions[0]["stages"][0]
    candidate.rename(candidate.with_suffix(".gone"))
    again = play_stage(run.root, "generation-gate-0000-bullet", candidate, best.path, stage["budget"], cfg.gate,
                       report=lambda _line: None)
    assert (again.decision, again.pairs, again.elo) == (stage["decision"], stage["pairs"], stage["elo"])


def test_bad_settings_and_a_second_loop_are_refused_in_one_line(tmp_path):
    bad = subprocess.run([sys.executable, "-m", "play", "distilled", "loop", "--run", str(tmp_path / "r"),
                          "--set", "selfplay.depth=0"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "depth" in bad.stderr
    run = RunDir(tmp_path / "busy")
    lock = run.take_loop_lock()
    try:
        busy = subprocess.run([sys.executable, "-m", "play", "distilled", "loop", "--run", str(run.root)],
                              capture_output=True, text=True)
    finally:
        lock.close()
    assert busy.returncode == 2 and busy.stderr.count("\n") == 1 and "in use by another loop" in busy.stderr
    assert DistilledLoopConfig().positions > 0


def test_with_a_teacher_its_values_are_the_labels_and_the_search_their_searched_scores(tmp_path, egdb4):
    from train.learner.distilled.labels import teacher_wdl
    from train.learner.distilled.training import DistilledTrainConfig, targets
    from zero.net.inference import Evaluator

    actor = AlphaBetaActor(AlphaBetaSelfPlayConfig(depth=2), load_eval(), "distilled", 0, egdb4)
    with ReplayWriter(tmp_path, 0) as writer:
        for i in range(3):
            writer.append_game(actor.play_game(0, i))
    alone, _, _ = own_game_labels(ReplayReader(tmp_path), 10_000)
    teacher = Evaluator.from_checkpoint(device="cpu", threads=1)
    labels, searched, _ = own_game_labels(ReplayReader(tmp_path), 10_000, teacher)
    assert np.array_equal(labels["black"], alone["black"])
    wdl = teacher_wdl(teacher, labels["black"], labels["white"], labels["kings"], labels["black_to_move"], 64)
    assert np.allclose(labels["wdl"], wdl) and not np.allclose(labels["wdl"], alone["wdl"])
    # The search scores, turned back into expected scores, are the search's values the labels alone hold.
    assert np.allclose(1 / (1 + np.exp(-searched / 1000)), alone["wdl"][:, 0], atol=1e-3)
    cfg = DistilledTrainConfig(result_weight=0.5, searched_weight=0.5)
    teacher_value, target = targets(labels, cfg, searched)
    result = (labels["result"] + 1) / 2
    assert np.allclose(target, 0.25 * teacher_value + 0.25 * result + 0.5 * alone["wdl"][:, 0], atol=1e-3)


def test_ship_copies_the_best_generation_over_the_evaluation_it_descends_from_and_nothing_else(tmp_path):
    from train.shipping.distilled import ShipError, ship_best
    from train.arena.gating import append_gating_log
    from zero.distilled.model import DEFAULT_DISTILLED
    from zero.run.config import save_config

    run = RunDir(tmp_path / "run")
    run.checkpoints.mkdir(parents=True)
    save_config(DistilledLoopConfig(), run.distilled_config_file)
    shipped = tmp_path / "shipped" / "distilled.npz"
    shipped.parent.mkdir()
    shipped.write_bytes(DEFAULT_DISTILLED.read_bytes())
    run.initial_evaluation().write_bytes(DEFAULT_DISTILLED.read_bytes())
    run.write_best(run.initial_evaluation(), 0, "generation 0")
    with pytest.raises(ShipError, match="generation 0"):
        ship_best(run.root, shipped)

    # Generation 1: another evaluation (the generation-0 file with one bias moved), promoted by its gate.
    weights = dict(np.load(DEFAULT_DISTILLED))
    weights["b4"] = weights["b4"] + 0.25
    candidate = run.checkpoints / "candidate-0001.npz"
    np.savez(candidate, **weights)
    load_eval(candidate)
    stages = [{"budget": "6", "decision": "promote", "pairs": 48, "elo": 73.4, "low": 26.6, "high": 123.1}]
    append_gating_log(run.root, {"kind": GATE_ENTRY, "cycle": 0, "candidate": str(candidate), "decision": "promote",
                                 "generation": 1, "best": str(run.initial_evaluation()), "stages": stages})
    run.write_best(candidate, 1, "won its gate")

    # A shipped evaluation the run did not start from: no gate played the two.
    other = dict(weights, b4=weights["b4"] - 0.5)
    np.savez(shipped, **other)
    before = shipped.read_bytes()
    with pytest.raises(ShipError, match="--force"):
        ship_best(run.root, shipped)
    assert shipped.read_bytes() == before

    shipped.write_bytes(DEFAULT_DISTILLED.read_bytes())
    lines = ship_best(run.root, shipped)
    assert shipped.read_bytes() == candidate.read_bytes()
    assert "generation 1" in lines[0] and lines[1].startswith("generation 1: candidate-0001.npz (cycle 0)")
    assert "+73 (+27 .. +123) after 48 pairs" in lines[1]
    with pytest.raises(ShipError, match="already"):
        ship_best(run.root, shipped)

    # A damaged best is refused before the shipped file is touched.
    candidate.write_bytes(b"not an archive")
    shipped.write_bytes(DEFAULT_DISTILLED.read_bytes())
    with pytest.raises(ValueError):
        ship_best(run.root, shipped, force=True)
    assert shipped.read_bytes() == DEFAULT_DISTILLED.read_bytes()


def test_a_gate_stage_says_which_endgame_database_once_not_for_every_player_of_every_round(tmp_path, capfd):
    from train.arena.generation_gate import GenerationGateConfig
    from zero.distilled.model import DEFAULT_DISTILLED
    from zero.run.config import load_config

    largest_available()  # built or loaded before the capture: its own first notices are not the gate's
    capfd.readouterr()
    cfg = load_config(GenerationGateConfig, None, ["round_openings=2", "processes=2", "sprt.max_pairs=4",
                                                   "sprt.min_pairs=4"])  # two rounds
    result = play_stage(tmp_path, "stage", DEFAULT_DISTILLED, DEFAULT_DISTILLED, "1", cfg, report=lambda _: None)
    assert result.pairs == 4
    said = capfd.readouterr().err
    # Before: each of the two rounds' two workers made two players, each saying it (eight lines).
    assert said.count("endgame database: the 6-piece one") <= 1, said


def test_a_candidate_of_another_size_learns_from_scratch_and_is_gated_on_the_clock_alone(tmp_path, egdb4):
    run = RunDir(tmp_path / "run")
    bigger = [s for s in TINY if not s.startswith(("gate.budget", "gate.confirm_budget"))] + ["training.accumulator=16"]
    at_depth = subprocess.run([sys.executable, "-m", "play", "distilled", "loop", "--run", str(run.root), "--cycles",
                               "1", *[a for s in bigger + ["gate.budget=2"] for a in ("--set", s)]],
                              capture_output=True, text=True)
    assert at_depth.returncode == 2 and at_depth.stderr.count("\n") == 1, at_depth.stderr
    assert "16/32/1 candidate against a 64/32/1 best is gated at equal time" in at_depth.stderr
    assert not read_gating_log(run.root)  # refused before any game

    cfg = resolve_config(run, None, bigger + ["gate.budget=t0+0.01", "gate.confirm_budget="])
    lines = []
    assert run_distilled_loop(run.root, cfg, say=lines.append) == 0
    assert any("a 16/32/1 evaluation, the best a 64/32/1 one: learnt from scratch" in line for line in lines), lines
    assert load_eval(run.evaluation_candidate(0)).shape.accumulator == 16
    decisions = generation_decisions(run.root)
    assert [s["budget"] for s in decisions[0]["stages"]] == ["t0+0.01"]


def test_the_confirmation_stage_asks_only_that_the_candidate_be_no_weaker(tmp_path, monkeypatch):
    # The bullet stage proves a gain (H1 +40); at the match budget a candidate at +12 (-9 .. +33) after the
    # whole ballot was rejected by that test, and no generation's gain accumulated (cycles 3 to 5).
    import train.arena.generation_gate as gg

    asked = []

    def stage(run_dir, name, candidate, best, budget, config, report, stopping, sprt_config):
        asked.append((budget, sprt_config))
        return gg.StageResult(budget, "promote", 144, 12.0, -9.0, 33.0)

    monkeypatch.setattr(gg, "play_stage", stage)
    config = gg.GenerationGateConfig()
    assert [r.decision for r in gg.gate(tmp_path, 0, tmp_path / "c.npz", tmp_path / "b.npz", config)] == ["promote"] * 2
    assert [(budget, s.elo0, s.elo1) for budget, s in asked] == [("6", 0.0, 40.0), ("t0+0.1", -20.0, 10.0)]
    confirm = gg.PairSprt(config.confirm_sprt)
    for points in [1.0] * 130 + [1.5] * 10 + [0.5] * 4:  # about +7, undecided at the cap
        confirm.add_pair(points)
    bullet = gg.PairSprt(config.sprt)
    bullet.pair_scores = list(confirm.pair_scores)
    assert confirm.final_decision() == "promote" and bullet.final_decision() == "reject"

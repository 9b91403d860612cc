"""The gatekeeper's records: a stop at any point of a gating step, then a resume, counts every match once."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
import torch

from train.arena.gating import Gatekeeper, GatingConfig, GatingInterrupted, read_gating_log
from train.arena.ratings import YARDSTICKS, RatingsTable
from train.arena.sprt import PairSprt, SprtConfig
from zero.endgames import egdb
from zero.endgames.egdb import built
from zero.net.checkpoint import save_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.run.rundir import RunDir
from match_starts import StartLog, long_first_pair

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=16)


@pytest.fixture
def setup(tmp_path):
    run = RunDir(tmp_path / "run")
    paths = []
    for step, seed in ((100, 0), (200, 1)):
        torch.manual_seed(seed)
        paths.append(save_checkpoint(run.candidate(step), net=PolicyValueNet(TINY), net_config=TINY, step=step))
    ballot = tmp_path / "ballot.txt"
    ballot.write_text("9-13 21-17 5-9\n11-15 23-19 8-11\n10-14 22-18 6-10\n")
    cfg = GatingConfig(simulations=2, parallel_games=6, openings=str(ballot), rating_games=2,
                       rating_yardsticks=["alphabeta:2", "random"], calibration_games=2,
                       sprt=SprtConfig(max_pairs=3, min_pairs=1), torch_threads=1)
    return run, cfg, paths


def test_a_stop_during_the_rating_phase_counts_nothing_twice(setup):
    # The gate's decision is logged before its rating games (issue 76, item 11): a stop during them leaves the
    # rest owed, and they are played between gates, before any other rating work, each match counted once.
    run, cfg, (best, candidate) = setup
    run.write_best(best, 100, "test")
    stop = {"now": False}
    keeper = Gatekeeper(run.root, cfg, should_stop=lambda: stop["now"])
    rate = keeper.rate
    yardsticks = list(cfg.rating_yardsticks)
    calls = []

    def rate_then_stop(checkpoint, step):
        # The first rating match is played and recorded; the stop comes during the second.
        calls.append(step)
        keeper.cfg.rating_yardsticks = yardsticks[:1]
        rate(checkpoint, step)
        keeper.cfg.rating_yardsticks = yardsticks
        stop["now"] = True
        rate(checkpoint, step)

    keeper.rate = rate_then_stop
    assert keeper.next_candidate() == (200, candidate)  # the best, candidate-100, is skipped
    with pytest.raises(GatingInterrupted):
        keeper.gate(candidate, 200, best)
    entry = read_gating_log(run.root)[-1]
    assert entry["candidate"] == str(candidate) and calls == [200]
    assert entry["rating_yardsticks"] == yardsticks
    first = RatingsTable.load(run.ratings)

    resumed = Gatekeeper(run.root, cfg)
    assert resumed.next_candidate() is None  # decided: never gated again
    resumed.prune_candidates()
    assert candidate.exists()  # even if rejected: its rating games are owed
    assert resumed.owed_ratings() == [(candidate, 200, yardsticks[1:])]
    assert resumed.turn()  # the owed match, before the calibration ladder
    assert resumed.owed_ratings() == []
    assert candidate.exists() == (entry["decision"] == "promote")
    table = RatingsTable.load(run.ratings)
    pair = table.results["|".join(sorted(("candidate-0000200", "candidate-0000100")))]
    assert sum(pair) == entry["games"] == sum(first.results["|".join(sorted(("candidate-0000200",
                                                                           "candidate-0000100")))])
    for spec in cfg.rating_yardsticks:
        rated = table.results["|".join(sorted(("candidate-0000200", spec)))]
        assert sum(rated) == cfg.rating_games, spec
    assert len(table.recorded) == len(set(table.recorded)) == 3
    # Every recorded match's endgame moves were judged against the database, for both of its players.
    assert set(table.endgame) == {"candidate-0000200", "candidate-0000100", *cfg.rating_yardsticks}
    assert [e["candidate"] for e in read_gating_log(run.root) if e["decision"] != "skipped"] == [str(candidate)]


def test_a_gate_is_decided_logged_and_promoted_before_its_rating_games(setup, monkeypatch, caplog):
    # Issue 76, item 11: the gate's last game ended at 8.3 min and its decision came at 10.6, after the
    # candidate's rating games; meanwhile the console said "rating candidate-0100200 vs alphabeta:2" only.
    run, cfg, (best, candidate) = setup
    run.write_best(best, 100, "test")
    monkeypatch.setattr(PairSprt, "final_decision", lambda self: "promote")
    keeper = Gatekeeper(run.root, cfg)
    rate, seen = keeper.rate, {}

    def rate_after_looking(checkpoint, step, *args):
        seen.update(log=read_gating_log(run.root), best=run.read_best().path,
                    lines=[r.getMessage() for r in caplog.records])
        return rate(checkpoint, step, *args)

    keeper.rate = rate_after_looking
    with caplog.at_level(logging.INFO, logger="train.arena.gating"):
        entry = keeper.gate(candidate, 200, best)
    assert entry["decision"] == "promote" and seen["log"] == [entry] and seen["best"] == candidate
    assert Gatekeeper.decision_line(entry) in seen["lines"]
    recorded = RatingsTable.load(run.ratings).recorded
    assert {f"rating-{candidate.stem}-vs-{spec}" for spec in cfg.rating_yardsticks} <= set(recorded)
    assert keeper.owed_ratings() == []


def test_candidates_skipped_together_are_one_line(setup, caplog):
    # Issue 76, item 11: 20 lines "skipped, a newer candidate came before its turn" in one second.
    from train.loop.driver import show_new_decisions

    run, cfg, (best, second) = setup
    run.write_best(best, 100, "test")
    newer = [run.candidate(step) for step in range(300, 2300, 100)]
    for path in newer:
        path.write_bytes(second.read_bytes())
    keeper = Gatekeeper(run.root, cfg)
    with caplog.at_level(logging.INFO, logger="train.arena.gating"):
        assert keeper.next_candidate() == (2200, newer[-1])
    line = "gate: skipped 21 candidates (candidate-0000100 .. candidate-0002100): a newer one came before their turn"
    assert [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()] == [line]
    assert [e["decision"] for e in read_gating_log(run.root)] == ["skipped"] * 21  # still one entry each
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="checkers_zero.loop"):
        assert show_new_decisions(run.root, 0) == 21
    assert [r.getMessage() for r in caplog.records] == [line]
    # A single skip keeps its own line; skips apart from each other are not folded together.
    gate = {"candidate": "/r/candidate-0000500.pt", "best": "/r/candidate-0000100.pt", "decision": "reject",
            "games": 20, "wins": 4, "draws": 8, "losses": 8, "llr": -3.0, "elo": -70.0, "elo_ci95": [-140.0, -5.0]}
    skip = [{"candidate": f"/r/candidate-{step:07d}.pt", "decision": "skipped"} for step in (200, 300, 600)]
    assert Gatekeeper.decision_lines([skip[0], skip[1], gate, skip[2]]) == [
        "gate: skipped 2 candidates (candidate-0000200 .. candidate-0000300): a newer one came before their turn",
        Gatekeeper.decision_line(gate),
        "gate candidate-0000600: skipped, a newer candidate came before its turn"]


# The ladder's lower rungs: what these tests ask of calibration (its order against the gates, its resumption) does
# not depend on how high the ladder goes, and its top rungs (alphabeta:12, classical:10) took minutes on 2 cores.
SHORT_LADDER = YARDSTICKS[:3]


@pytest.fixture
def short_ladder(monkeypatch):
    monkeypatch.setattr("train.arena.gating.YARDSTICKS", SHORT_LADDER)
    return SHORT_LADDER


def test_an_interrupted_gate_resumes_game_by_game_and_is_taken_before_newer_candidates(setup, tmp_path,
                                                                                         short_ladder):
    # Before: a stop threw the match away ("will be replayed on resume") and the resumed gatekeeper took the
    # newest candidate instead, so under repeated stops no match ever finished.
    run, cfg, (best, candidate) = setup
    cfg.sprt = SprtConfig(max_pairs=3, min_pairs=3)  # all 6 games: the stop must fall inside the match
    cfg.parallel_games = 1  # one game at a time, so that the stop leaves finished games behind
    uninterrupted = Gatekeeper(RunDir(tmp_path / "reference").root, cfg)
    for path in (best, candidate):
        save_path = RunDir(tmp_path / "reference").candidate(int(path.stem.split("-")[1]))
        save_path.parent.mkdir(parents=True, exist_ok=True)
        save_path.write_bytes(path.read_bytes())
    reference = uninterrupted.gate(RunDir(tmp_path / "reference").candidate(200), 200,
                                   RunDir(tmp_path / "reference").candidate(100))

    journal = run.match_journal(Gatekeeper.gate_name(candidate, best))
    stop = {"now": False}

    def stop_after_three_games() -> bool:
        lines = journal.read_text().splitlines() if journal.exists() else []
        stop["now"] = stop["now"] or len(lines) >= 3
        return stop["now"]

    run.write_best(best, 100, "test")
    keeper = Gatekeeper(run.root, cfg, should_stop=stop_after_three_games)
    keeper.calibrate_yardsticks()
    keeper.rate(best, 100)
    with pytest.raises(GatingInterrupted):
        keeper.gate(candidate, 200, best)
    assert len(journal.read_text().splitlines()) == 3 and read_gating_log(run.root) == []

    # A newer candidate arrives meanwhile: the interrupted match is still the one taken.
    newer = run.candidate(300)
    newer.write_bytes(candidate.read_bytes())
    resumed = Gatekeeper(run.root, cfg)
    assert resumed.next_candidate() == (200, candidate)
    played = []
    original = resumed._match

    def counting_match(name, a, b, *args, **kwargs):
        on_game = kwargs.get("on_game")
        if name.startswith("gate-"):
            kwargs["on_game"] = lambda g, r: (played.append(g.round), on_game and on_game(g, r))
        return original(name, a, b, *args, **kwargs)

    resumed._match = counting_match
    entry = resumed.gate(candidate, 200, best)
    assert played == [4, 5, 6]  # the three games the stop did not reach, and no other
    assert (entry["wins"], entry["draws"], entry["losses"], entry["games"]) == (
        reference["wins"], reference["draws"], reference["losses"], reference["games"])
    assert not journal.exists()
    assert resumed.next_candidate() == (300, newer)


def _interrupted_gate(setup, pairs: int, games: int) -> tuple[Gatekeeper, str]:
    """The gatekeeper of a gate capped at `pairs` pairs, stopped after `games` games, and the status then."""
    from train.loop.driver import format_status, status_snapshot

    run, cfg, (best, candidate) = setup
    run.write_best(best, 100, "test")
    journal = run.match_journal(Gatekeeper.gate_name(candidate, best))
    cfg.parallel_games = 1
    cfg.sprt = SprtConfig(max_pairs=pairs, min_pairs=pairs)
    keeper = Gatekeeper(run.root, cfg, should_stop=lambda: journal.exists()
                        and len(journal.read_text().splitlines()) >= games)
    with pytest.raises(GatingInterrupted):
        keeper.gate(candidate, 200, best)
    return keeper, format_status(status_snapshot(run.root), 60.0)


def test_the_status_line_shows_the_match_in_progress(setup):
    # Before: the status line said nothing of a match until it was decided, minutes later.
    from train.loop.driver import format_status, status_snapshot

    run = setup[0]
    keeper, line = _interrupted_gate(setup, pairs=3, games=2)
    assert "gate candidate-0000200 vs candidate-0000100: game 2/6 +" in line, line
    # Before: the SPRT's progress was not shown while a gate ran. One pair counted of the 3 it needs.
    assert ", pairs counted 1 of the 3 the SPRT needs" in line, line
    # Issue 76, item 11: "pairs counted 0 of the 10" at game 38 read as broken; it says what the count waits for.
    _, line = _interrupted_gate(setup, pairs=3, games=3)
    assert ", pairs counted 1 of the 3 the SPRT needs\n[1.0 min]   a pair counts once both its games and all " \
           "earlier pairs are done: pair 2 has 1 of 2, 0 later games wait" in line, line
    keeper.show_phase("waiting for a candidate")
    assert "gatekeeper: waiting for a candidate" in format_status(status_snapshot(run.root), 60.0)
    run.write_status("trainer", {"step": 0, "phase": "building the OCA expert dataset (first start only, ~40 s)"})
    assert "trainer: building the OCA expert dataset" in format_status(status_snapshot(run.root), 60.0)


def test_the_status_line_counts_the_games_a_capped_gate_can_play(setup):
    # Before: a gate capped at 2 pairs over a 3-opening ballot showed "game N/6", the whole ballot (with
    # the ACF ballot under a 6-pair cap, "game N/288").
    _, line = _interrupted_gate(setup, pairs=2, games=1)
    assert "gate candidate-0000200 vs candidate-0000100: game 1/4 +" in line, line


def test_a_long_game_of_the_pair_the_sprt_counts_next_holds_back_the_games_beyond_the_window(setup, monkeypatch):
    # Issue 85, item 8: the first gate of a fresh run had finished 119 games and counted 3 pairs at 10.3 min,
    # undecided: one game of pair 4 went on at the pace of 48 games in flight while 112 later games finished
    # and waited. Now no game starts more than the window ahead of the pair the SPRT counts next.
    from train.loop.driver import format_status

    run, cfg, (best, candidate) = setup
    run.write_best(best, 100, "test")
    cfg.device, cfg.parallel_games = "cpu", 4  # the window, pairs_ahead unset: half of them, 2 pairs
    cfg.sprt = SprtConfig(max_pairs=6, min_pairs=6)  # every game of the ballot
    cfg.rating_yardsticks, cfg.judge_endgames = [], False  # the gate alone
    keeper = Gatekeeper(run.root, cfg)
    keeper.openings = long_first_pair(6)
    log = StartLog(monkeypatch)
    original = keeper._match

    def logged_match(name, a, b, *args, **kwargs):
        on_game = kwargs["on_game"]
        kwargs["on_game"] = lambda g, r: (log.finished(g), on_game(g, r))
        return original(name, a, b, *args, **kwargs)

    statuses = []
    write_status = RunDir.write_status

    def recorded_status(rundir, role, status):
        statuses.append(dict(status))
        return write_status(rundir, role, status)

    monkeypatch.setattr(RunDir, "write_status", recorded_status)
    keeper._match = logged_match
    entry = keeper.gate(candidate, 200, best)
    assert entry["games"] == 12 and entry["pairs"] == 6
    ahead = log.pairs_ahead(keeper.openings)
    assert len(ahead) == 12 and max(ahead) == 1, ahead  # the first pair's long games held the rest back
    # The status says how far games may start while the count waits, where that is short of the gate's end.
    shown = [(s["pairs"], s.get("last_pair_to_start")) for s in statuses if "pairs" in s]
    assert shown and all(last == (pairs + 2 if pairs + 2 < 6 else None) for pairs, last in shown), shown
    first = next(s for s in statuses if "pairs" in s)
    line = format_status({"games": 0, "positions": 0, "gatekeeper": first}, 60.0).splitlines()[-1]
    assert line == "[1.0 min]   no game starts past pair 2 until pair 1 is done (gating.pairs_ahead), so that its " \
                   "games go faster", line


def test_the_gate_window_is_half_the_games_in_flight_unless_set():
    # Half of them: the batch fills from the start as it did before the window. On a GPU that is the whole gate.
    cfg = GatingConfig()
    assert cfg.gate_window(cuda=False) == 24 and cfg.gate_window(cuda=True) == cfg.sprt.max_pairs
    assert GatingConfig(parallel_games=5).gate_window(cuda=False) == 3
    chosen = GatingConfig(pairs_ahead=10)
    assert chosen.gate_window(cuda=False) == chosen.gate_window(cuda=True) == 10


def test_a_waiting_candidate_is_gated_before_the_yardsticks_are_calibrated(setup, short_ladder):
    # Before: a first loop played the whole calibration ladder and the first best's rating games (more than
    # 12 minutes on 2 cores) before its first gate. Now the gate comes first and the rating work waits.
    run, cfg, (best, candidate) = setup
    run.write_best(best, 100, "test")
    keeper = Gatekeeper(run.root, cfg)
    assert keeper.turn()
    assert [e["candidate"] for e in read_gating_log(run.root) if e["decision"] != "skipped"] == [str(candidate)]
    assert not any(name.startswith("calibration-") for name in RatingsTable.load(run.ratings).recorded)
    # With no candidate waiting, a turn is one match of the rating work, until there is none.
    recorded = set(RatingsTable.load(run.ratings).recorded)
    assert keeper.turn()
    new = set(RatingsTable.load(run.ratings).recorded) - recorded
    assert len(new) == 1 and new.pop().startswith("calibration-"), new
    while keeper.turn():
        pass
    table = RatingsTable.load(run.ratings)
    assert sum(name.startswith("calibration-") for name in table.recorded) == len(short_ladder) - 1
    best_now = run.read_best()
    assert {f"rating-{best_now.path.stem}-vs-{spec}" for spec in cfg.rating_yardsticks} <= set(table.recorded)


def test_a_match_between_gates_yields_to_a_candidate_and_resumes_after_the_gate(setup):
    run, cfg, (best, candidate) = setup
    run.write_best(best, 100, "test")
    cfg.calibration_games = 4  # 4 games in flight: the first to end meets the waiting candidate
    keeper = Gatekeeper(run.root, cfg)
    assert keeper.calibrate_yardsticks(most=1) == 0  # candidate-200 waits: the match stops at once
    journal = run.match_journal(f"calibration-{YARDSTICKS[1]}-vs-{YARDSTICKS[0]}")
    kept = len(journal.read_text().splitlines()) if journal.exists() else 0
    assert kept < 4 and not RatingsTable.load(run.ratings).recorded
    keeper.turn()  # the gate
    assert [e["candidate"] for e in read_gating_log(run.root) if e["decision"] != "skipped"] == [str(candidate)]
    played = []
    original = keeper._match

    def counting_match(name, a, b, *args, **kwargs):
        on_game = kwargs.get("on_game")
        kwargs["on_game"] = lambda g, r: (played.append(g.round), on_game and on_game(g, r))
        return original(name, a, b, *args, **kwargs)

    keeper._match = counting_match
    assert keeper.turn()
    assert len(played) == 4 - kept and not journal.exists()
    assert f"calibration-{YARDSTICKS[1]}-vs-{YARDSTICKS[0]}" in RatingsTable.load(run.ratings).recorded


def test_a_candidate_breaks_off_the_databases_first_build_and_calibration_is_on_the_console(setup, tmp_path,
                                                                                            monkeypatch, capsys):
    # Before (issue 85, item 8): a finished calibration match built the 4-piece database (about 3.5 min on a
    # busy machine) before it was recorded, whatever waited, and its result went to the log alone.
    run, cfg, (best, candidate) = setup
    run.write_best(best, 100, "test")
    database = tmp_path / "egdb"
    monkeypatch.setenv(egdb.ENV_VAR, str(database))
    keeper = Gatekeeper(run.root, cfg)
    pending = keeper.pending_candidates
    came, builds = [], []  # the trainer's candidate comes once the match is over, as the first build begins
    keeper.pending_candidates = lambda: pending() if came else []
    show_phase = keeper.show_phase

    def phase_shown(phase: str) -> None:
        if "endgame database" in phase and not builds:
            builds.append(phase)
            came.append(True)
        show_phase(phase)

    keeper.show_phase = phase_shown
    name = f"calibration-{YARDSTICKS[1]}-vs-{YARDSTICKS[0]}"
    assert keeper.calibrate_yardsticks(most=1) == 0
    assert not built(4, database) and name not in RatingsTable.load(run.ratings).recorded
    assert len(run.match_journal(name).read_text().splitlines()) == cfg.calibration_games  # kept, whole
    came.clear()  # the gate is played: the ladder goes on, the finished match recorded, none of it replayed
    assert keeper.calibrate_yardsticks(most=1) == 1
    assert built(4, database) and name in RatingsTable.load(run.ratings).recorded
    assert not run.match_journal(name).exists()
    assert f"calibration {YARDSTICKS[1]} vs {YARDSTICKS[0]}: +" in capsys.readouterr().err


def test_a_gating_decision_is_a_log_line_of_its_own():
    # Before: the decision showed only inside a status line of about 300 characters.
    entry = {"candidate": "/run/checkpoints/candidate-0004000.pt", "best": "/run/checkpoints/candidate-0003000.pt",
             "decision": "promote", "games": 58, "wins": 20, "draws": 30, "losses": 8, "llr": 2.97, "elo": 72.4,
             "elo_ci95": [18.1, 131.0]}
    assert Gatekeeper.decision_line(entry) == ("gate candidate-0004000 vs candidate-0003000: +20 =30 -8 in 58 games, "
                                               "Elo +72 (+18 .. +131), LLR 2.97: PROMOTE")


def test_a_shut_out_gate_prints_no_infinite_elo():
    # Before (issue 76, item 5): "Elo +inf (+inf .. +inf)" for a candidate that won every game.
    entry = {"candidate": "/run/checkpoints/candidate-0004000.pt", "best": "/run/checkpoints/candidate-0003000.pt",
             "decision": "promote", "games": 20, "wins": 20, "draws": 0, "losses": 0, "llr": 2.97,
             "elo": float("inf"), "elo_ci95": [275.4, float("inf")]}
    line = Gatekeeper.decision_line(entry)
    assert "Elo no finite estimate (from +275 up)" in line and "inf " not in line, line


def test_status_lines_stay_short_with_everything_going_on():
    # Before: one line of about 300 characters.
    from train.loop.driver import format_status

    snap = {"games": 123456, "positions": 12345678,
            "trainer": {"step": 1234567, "loss": 2.3456, "reanalysed_share": 0.4375},
            "best": "candidate-1234567", "best_elo": 1523.4, "best_vs_reference": 312.3,
            "best_vs_reference_ci95": 45.2, "promotions": 123,
            "gatekeeper": {"match": "gate-candidate-1240000-vs-candidate-1234567", "games": 137, "of": 288,
                           "wins": 52, "draws": 60, "losses": 25, "pairs": 61, "min_pairs": 10, "llr": -1.23,
                           "llr_bounds": [-2.94, 2.94]}}
    lines = format_status(snap | {"games_per_hour": 12345.4, "steps_per_second": 12.34}, 12345 * 60.0).splitlines()
    assert len(lines) == 3 and all(len(line) <= 120 for line in lines), lines
    assert all(line.startswith("[12345.0 min] ") for line in lines)
    assert "reanalysed 44% of a batch" in lines[0]


def test_the_status_line_gives_games_an_hour_and_trainer_steps_a_second():
    # Issue 76, item 11: the console showed no rate.
    from train.loop.driver import StatusRates, format_status

    def snap(games: int, step: int, training: bool = True) -> dict:
        trainer = {"step": step, "loss": 2.0} if training else {"step": step, "phase": "waiting"}
        return {"games": games, "positions": 90 * games, "trainer": trainer}

    rates = StatusRates(window=600.0, least=60.0)
    assert rates.update(snap(100, 1000), 0.0) == {}
    assert rates.update(snap(110, 1010), 30.0) == {}  # too short a span to say
    measured = rates.update(snap(200, 1120), 120.0)
    assert measured == pytest.approx({"games_per_hour": 3000.0, "steps_per_second": 1.0})
    line = format_status(snap(200, 1120) | measured, 600.0).splitlines()[0]
    assert line.startswith("[10.0 min] games 200 (3000/h) | positions 18000 | step 1120 (1.0/s) loss 2.000"), line
    # The last 600 s only; a trainer not training has no step rate.
    later = rates.update(snap(1000, 1120, training=False), 900.0)
    assert later == pytest.approx({"games_per_hour": 800 * 3600 / 780})
    assert rates.update({"games": "?", "positions": "?"}, 915.0) == {}  # a replay store it could not read
    slow = StatusRates(least=60.0)
    slow.update(snap(0, 0), 0.0)
    assert "step 30 (0.50/s)" in format_status(snap(5, 30) | slow.update(snap(5, 30), 60.0), 60.0)


def test_a_loop_with_no_local_actor_says_what_it_waits_for():
    # Before: "the first games are being played", forever, with no actor to play them.
    from train.loop.driver import format_status

    lines = format_status({"games": 0, "positions": 0, "local_actors": 0}, 60.0).splitlines()
    assert lines[0].startswith("[1.0 min] games 0 (--actors 0: waiting for `checkers-zero selfplay --first-actor N`")
    assert all(len(line) <= 120 for line in lines), lines
    assert "first games are being played" in format_status({"games": 0, "positions": 0, "local_actors": 2}, 60.0)


def test_the_status_line_gives_the_pairs_the_sprt_has_counted_and_no_llr_before_it_judges():
    # Before: "game 70/288 +22=26-22, LLR 270.14 in (-2.94, 2.94)": an LLR from 3 pairs (the rest waiting for
    # an early opening's game, pairs count in ballot order), far outside bounds it was not yet judged by.
    from train.loop.driver import format_status

    gate = {"match": "gate-candidate-0040600-vs-candidate-0039400", "games": 70, "of": 288, "wins": 22,
            "draws": 26, "losses": 22, "pairs": 3, "min_pairs": 10, "llr": 270.14, "llr_bounds": [-2.94, 2.94]}
    waiting = format_status({"games": 10, "positions": 900, "gatekeeper": gate}, 60.0)
    assert "+22=26-22, pairs counted 3 of the 10 the SPRT needs" in waiting and "LLR" not in waiting
    # Issue 76, item 11: why 3 pairs of 70 games: the 4th pair's second game goes on, 63 games wait behind it.
    waiting = format_status({"games": 10, "positions": 900, "gatekeeper": {**gate, "next_pair_games": 1,
                                                                           "games_waiting": 63}}, 12345 * 60.0)
    why = waiting.splitlines()[-1]
    assert why == ("[12345.0 min]   a pair counts once both its games and all earlier pairs are done: pair 4 has "
                   "1 of 2, 63 later games wait") and len(why) <= 120, why
    judging = format_status({"games": 10, "positions": 900, "gatekeeper": {**gate, "pairs": 31, "llr": 1.5}}, 60.0)
    assert "+22=26-22, LLR 1.50 in (-2.94, 2.94), 31 pairs" in judging
    without_pairs = {k: v for k, v in gate.items() if k not in ("pairs", "min_pairs")}  # an older gatekeeper's
    assert "+22=26-22, LLR 270.14 in (-2.94, 2.94)\n" in format_status(
        {"games": 10, "positions": 900, "gatekeeper": without_pairs}, 60.0) + "\n"


def test_candidates_gating_is_done_with_are_removed(setup):
    # Before: every candidate (8.6 MB) stayed in the run for good, a thousand of them in a long run.
    run, cfg, (best, skipped) = setup
    run.write_best(best, 100, "test")
    newest = run.candidate(300)
    torch.manual_seed(2)
    save_checkpoint(newest, net=PolicyValueNet(TINY), net_config=TINY, step=300)
    keeper = Gatekeeper(run.root, cfg)
    assert keeper.next_candidate() == (300, newest)  # skips 100 (the best, kept) and 200 (removed)
    assert best.exists() and not skipped.exists() and newest.exists()
    entry = keeper.gate(newest, 300, best)
    assert newest.exists() == (entry["decision"] == "promote") and best.exists()
    # What the records need is kept: the skip and the decision, and the candidate's ratings.
    assert [e["decision"] for e in read_gating_log(run.root)][-1] == entry["decision"]
    assert "candidate-0000300" in RatingsTable.load(run.ratings).players
    # A promoted candidate stays (the chain of best networks), even once another one is best.
    if entry["decision"] == "promote":
        run.write_best(best, 100, "test")
        keeper.prune_candidates()
        assert newest.exists()


def test_only_rejected_and_skipped_candidates_are_pruned(setup):
    from train.arena.gating import append_gating_log
    from zero.net.quantized import cache_path

    run, cfg, (first, second) = setup
    paths = {step: run.candidate(step) for step in (300, 400, 500)}
    for path in paths.values():
        path.write_bytes(first.read_bytes())
        cache_path(path).write_bytes(b"an int8 model derived from it")
    run.write_best(paths[400], 400, "test")
    for path, decision in ((first, "promote"), (second, "reject"), (paths[300], "skipped"), (paths[400], "promote")):
        append_gating_log(run.root, {"candidate": str(path), "decision": decision})
    removed = Gatekeeper(run.root, cfg).prune_candidates()
    assert sorted(removed) == sorted([second, paths[300]])
    assert [p.exists() for p in (first, second, paths[300], paths[400], paths[500])] == [True, False, False, True, True]
    assert [cache_path(paths[s]).exists() for s in (300, 400, 500)] == [False, True, True]  # no orphaned cache


def test_a_candidate_whose_network_answers_nan_is_refused_never_promoted(setup):
    # Before: its finite weights passed, and the match died on "Probabilities contain NaN".
    run, cfg, (best, _) = setup
    run.write_best(best, 100, "test")
    net = PolicyValueNet(TINY)
    with torch.no_grad():
        for name, buffer in net.named_buffers():
            if name.endswith("running_var"):
                buffer.fill_(-1.0)
    bad = save_checkpoint(run.candidate(300), net=net, net_config=TINY, step=300)
    keeper = Gatekeeper(run.root, cfg)
    assert keeper.next_candidate() == (300, bad)
    entry = keeper.gate(bad, 300, best)
    assert entry["decision"] == "refused" and "outputs are not finite" in entry["reason"]
    assert keeper.decision_line(entry) == f"gate candidate-0000300: REFUSED, never promoted: {entry['reason']}"
    assert run.read_best().path == best and not bad.exists()
    assert read_gating_log(run.root)[-1] == entry and keeper.next_candidate() is None
    assert "candidate-0000300" not in RatingsTable.load(run.ratings).players


def test_a_gate_on_a_gpu_plays_the_whole_ballot_at_once():
    # On a GPU each network batch is a round trip shared with the actors: 48 games in flight left a gate
    # undecided after 6 minutes of a lease.
    cfg = GatingConfig()
    assert cfg.games_in_flight(cuda=True) == cfg.gpu_parallel_games == 2 * cfg.sprt.max_pairs
    assert cfg.games_in_flight(cuda=False) == cfg.parallel_games == 48
    assert GatingConfig(device="cpu").games_in_flight(cuda=True) == 48
    assert GatingConfig(device="cuda").games_in_flight(cuda=False) == cfg.gpu_parallel_games


def test_the_gatekeeper_yields_the_cores_on_a_cpu_but_keeps_its_share_beside_a_gpu():
    cfg = GatingConfig(niceness=12, gpu_niceness=2)
    assert cfg.process_niceness(cuda=False) == 12
    assert cfg.process_niceness(cuda=True) == 2
    assert replace(cfg, device="cpu").process_niceness(cuda=True) == 12  # its networks stay on the CPU
    assert replace(cfg, device="cuda").process_niceness(cuda=False) == 2

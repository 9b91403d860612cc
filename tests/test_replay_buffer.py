"""Replay store: round trip, commit visibility, sampling window, concurrent reading, SIGKILL safety, CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from selfplay.replay import replay_buffer
from selfplay.replay.random_records import random_game_record
from selfplay.replay.records import POLICY_SLOTS, GameRecord
from selfplay.replay.replay_buffer import (
    ReplayDamage,
    ReplayError,
    ReplayReader,
    ReplayWriter,
    game_id_of,
    split_game_id,
)
from selfplay.replay.records import GAME_FIELDS, POSITION_FIELDS
from zero.run.rundir import RunDir
SHORT = 40  # plies: short random games keep the tests quick


def record(seed: int, **kwargs) -> GameRecord:
    return random_game_record(seed, max_plies=kwargs.pop("max_plies", SHORT), **kwargs)


def assert_same_game(stored, expected: GameRecord, actor_id: int, index: int) -> None:
    for name in POSITION_FIELDS:
        np.testing.assert_array_equal(getattr(stored.positions, name), getattr(expected.positions, name),
                                      err_msg=name)
    for field in GAME_FIELDS:
        assert getattr(stored, field) == getattr(expected, field), field
    assert stored.game_id == game_id_of(actor_id, index) and stored.actor_id == actor_id
    rows = stored.rows
    np.testing.assert_array_equal(rows["result"], expected.results_for_side_to_move())
    assert (rows["game_id"] == stored.game_id).all() and (rows["actor_id"] == actor_id).all()
    assert (rows["seed"] == expected.seed).all() and (rows["model_version"] == expected.model_version).all()


def test_round_trip_across_chunks_actors_and_restarts(tmp_path):
    records = {0: [record(s, model_version=3, checkpoint="ckpt-3") for s in range(12)],
               7: [record(100 + s, max_plies=120) for s in range(6)]}
    # Tiny chunks: games straddle chunk boundaries and arrays grow many times.
    with ReplayWriter(tmp_path, 0, commit_positions=1, chunk_rows=16, chunk_games=3) as w:
        ids = [w.append_game(r) for r in records[0][:5]]
    assert ids == [game_id_of(0, k) for k in range(5)]
    with ReplayWriter(tmp_path, 7, commit_positions=150) as w:
        for r in records[7]:
            w.append_game(r)
    with ReplayWriter(tmp_path, 0, commit_positions=70) as w:  # reopened: continues after game 5
        assert w.committed_games == 5
        assert [w.append_game(r) for r in records[0][5:]] == [game_id_of(0, k) for k in range(5, 12)]

    reader = ReplayReader(tmp_path)
    assert reader.actor_ids() == [0, 7]
    assert reader.total_games() == 18
    assert reader.total_positions() == sum(r.length for rs in records.values() for r in rs)
    seen = {0: 0, 7: 0}
    for stored in reader.iter_games(positions=True):
        k = seen[stored.actor_id]
        assert_same_game(stored, records[stored.actor_id][k], stored.actor_id, k)
        seen[stored.actor_id] += 1
    assert seen == {0: 12, 7: 6}


def test_game_ids_encode_actor_and_index():
    assert split_game_id(game_id_of(12345, 987654321)) == (12345, 987654321)


def test_queued_games_are_invisible_until_committed(tmp_path):
    writer = ReplayWriter(tmp_path, 1, commit_positions=10**9, commit_seconds=3600)
    for s in range(3):
        writer.append_game(record(s))
    reader = ReplayReader(tmp_path)
    assert reader.total_games() == 0 and writer.pending_games == 3 and writer.committed_games == 0
    writer.flush()
    reader.refresh()
    assert reader.total_games() == 3
    assert reader.positions_committed() == writer.committed_positions
    writer.append_game(record(3))
    writer.close()  # close commits the queue
    reader.refresh()
    assert reader.total_games() == 4


def test_refuses_bad_records_with_a_clear_error(tmp_path):
    good = record(5)
    n = good.length
    with ReplayWriter(tmp_path, 0, commit_positions=1) as w:
        wide = np.full((n, POLICY_SLOTS + 6), -1, np.int16)
        wide[0, :POLICY_SLOTS + 1] = np.arange(POLICY_SLOTS + 1)
        too_many = dataclasses.replace(good, positions=dataclasses.replace(
            good.positions, policy_actions=wide, policy_visits=np.zeros(wide.shape, np.float32)))
        with pytest.raises(ReplayError, match="more than POLICY_SLOTS"):
            w.append_game(too_many)
        with pytest.raises(ReplayError, match="length"):
            w.append_game(dataclasses.replace(good, length=n + 1))
        # Wider arrays whose extra slots are padding are accepted; used slots are kept wherever they were.
        wide = np.full((n, POLICY_SLOTS + 6), -1, np.int16)
        wide_visits = np.zeros(wide.shape, np.float32)
        wide[:, 3], wide[:, POLICY_SLOTS + 2] = 10, 20
        wide_visits[:, 3], wide_visits[:, POLICY_SLOTS + 2] = 0.25, 0.75
        w.append_game(dataclasses.replace(good, positions=dataclasses.replace(
            good.positions, policy_actions=wide, policy_visits=wide_visits)))
        assert w.committed_games == 1
    stored = next(ReplayReader(tmp_path).iter_games(positions=True))
    assert (stored.positions.policy_actions[:, :2] == [10, 20]).all()
    assert (stored.positions.policy_visits[:, :2] == [0.25, 0.75]).all()
    assert (stored.positions.policy_actions[:, 2:] == -1).all()


def test_one_writer_per_actor(tmp_path):
    with ReplayWriter(tmp_path, 2):
        with pytest.raises(ReplayError, match="another process"):
            ReplayWriter(tmp_path, 2)
        ReplayWriter(tmp_path, 3).close()  # other actors are fine
    ReplayWriter(tmp_path, 2).close()  # and the actor is free again once closed


def test_sampling_is_uniform_over_the_newest_window(tmp_path):
    writers = {a: ReplayWriter(tmp_path, a, commit_positions=1) for a in (0, 1, 2)}
    for k in range(18):  # actors take turns, so the newest positions mix all of them
        writers[k % 3].append_game(record(500 + k))
    for w in writers.values():
        w.close()
    reader = ReplayReader(tmp_path)
    games = sorted(reader.iter_games(), key=lambda g: (g.commit_time, g.actor_id, g.index))
    window = 300
    expected: list[tuple[int, int]] = []  # (game id, ply) of the newest `window` positions
    for game in reversed(games):
        for ply in reversed(range(game.length)):
            if len(expected) < window:
                expected.append((game.game_id, ply))
    assert len(expected) == window < reader.total_positions()

    draws = 300_000
    batch = reader.sample(draws, window, np.random.default_rng(7))
    keys = batch["game_id"] * 1000 + batch["ply"]
    allowed = np.array([g * 1000 + p for g, p in expected])
    assert np.isin(keys, allowed).all(), "sampled a position outside the window"
    counts = np.array([np.count_nonzero(keys == key) for key in allowed])
    mean = draws / window
    chi2 = ((counts - mean) ** 2 / mean).sum()
    # Chi-square with 299 degrees of freedom: mean 299, sd 24.5; 450 is six sd out.
    assert chi2 < 450, chi2
    assert counts.min() > 0
    # Rows are whole: each sampled row is the stored row of that game and ply.
    by_id = {g.game_id: g for g in reader.iter_games(positions=True)}
    for i in range(0, draws, 9973):
        rows = by_id[int(batch["game_id"][i])].rows
        ply = int(batch["ply"][i])
        for name in ("black", "white", "kings", "policy_actions", "policy_visits", "result"):
            np.testing.assert_array_equal(batch[name][i], rows[name][ply])
        assert batch["moves_left"][i] == by_id[int(batch["game_id"][i])].length - ply

    whole = reader.sample(20_000, 10**9, np.random.default_rng(1))  # a window beyond the store: everything
    assert len(np.unique(whole["game_id"])) == 18


def test_samples_match_stored_rows_as_the_window_moves(tmp_path):
    writers = {a: ReplayWriter(tmp_path, a, commit_positions=1, chunk_rows=32) for a in (0, 1)}
    reader = ReplayReader(tmp_path)
    rng = np.random.default_rng(5)
    for k in range(10):
        writers[k % 2].append_game(record(800 + k))
        reader.refresh()
        # Windows that grow backwards, shrink and jump, so the reader's row cache extends, trims and reloads.
        for window in (10, 400, 60, 10**6, 25):
            batch = reader.sample(200, window, rng)
            for i in range(0, 200, 7):
                actor, index = split_game_id(int(batch["game_id"][i]))
                expected = expected_record(800 + 2 * index + actor).positions
                ply = int(batch["ply"][i])
                assert batch["black"][i] == expected.black[ply] and batch["kings"][i] == expected.kings[ply]
                np.testing.assert_array_equal(batch["policy_actions"][i], expected.policy_actions[ply])
    for w in writers.values():
        w.close()


def test_sample_on_an_empty_store_says_so(tmp_path):
    reader = ReplayReader(tmp_path)
    assert reader.total_games() == 0 and reader.positions_committed() == 0
    with pytest.raises(ReplayError, match="no committed positions"):
        reader.sample(4, 100, np.random.default_rng(0))


# A writer process: appends the games of seeds BASE, BASE+1, ... (continuing after what is committed), one
# commit per game, and prints the committed count after each commit. Tiny chunks make it resize and rewrite
# chunks all the time, so a kill lands in every phase of the protocol.
WRITER_SCRIPT = """
import sys
from selfplay.replay.random_records import random_game_record
from selfplay.replay.replay_buffer import ReplayWriter
run, actor, base, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
writer = ReplayWriter(run, actor, commit_positions=1, chunk_rows=32, chunk_games=4)
print("ready", writer.committed_games, flush=True)
while writer.committed_games < limit:
    writer.append_game(random_game_record(base + writer.committed_games, max_plies=%d))
    print("committed", writer.committed_games, flush=True)
writer.close()
""" % SHORT


def run_script(script: str, *args, **popen) -> subprocess.Popen:
    """A Python process running `script` with `args`, importing this checkout's packages."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], text=True, env=env, **popen)


def start_writer(run: Path, actor: int, base: int, limit: int = 10**6) -> subprocess.Popen:
    return run_script(WRITER_SCRIPT, run, actor, base, limit, stdout=subprocess.PIPE)


def read_line(proc: subprocess.Popen) -> str:
    line = proc.stdout.readline()
    assert line, f"writer process ended early (exit {proc.wait()})"
    return line


_expected_records: dict[int, GameRecord] = {}


def expected_record(seed: int) -> GameRecord:
    if seed not in _expected_records:
        _expected_records[seed] = record(seed)
    return _expected_records[seed]


def check_store(run: Path, actor: int, base: int, at_least: int) -> int:
    """Every committed game equals the game its seed gives, and nothing uncommitted is visible."""
    reader = ReplayReader(run)
    games = list(reader.iter_games(positions=True))
    assert len(games) == reader.total_games() >= at_least
    for k, stored in enumerate(games):
        assert_same_game(stored, expected_record(base + k), actor, k)
    assert reader.total_positions() == sum(g.length for g in games)
    if games:
        batch = reader.sample(512, 10**9, np.random.default_rng(0))
        assert (batch["game_id"] < game_id_of(actor, len(games))).all()
    return len(games)


def kill_restart_chain(run: Path, delays: tuple[float, ...]) -> None:
    """SIGKILL a writer after each delay (and at least two commits); after each kill the store is whole and
    a restarted writer for the same actor continues where the commits stopped."""
    actor, base = 4, 9000
    committed = 0
    rng = np.random.default_rng(len(delays))
    for delay in delays:
        proc = start_writer(run, actor, base)
        try:
            assert read_line(proc) == f"ready {committed}\n"  # a restart picks up at the last commit
            logged = committed
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline or logged < committed + 2:
                logged = int(read_line(proc).split()[1])
            time.sleep(rng.uniform(0, 0.08))  # land anywhere in the next commit
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL
        committed = check_store(run, actor, base, at_least=logged)

    proc = start_writer(run, actor, base, limit=committed + 3)
    assert read_line(proc) == f"ready {committed}\n"
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert check_store(run, actor, base, at_least=committed + 3) == committed + 3
    leftovers = list(RunDir(run).replay_store.rglob("*.partial"))
    assert not leftovers, leftovers


def test_sigkill_while_writing_leaves_committed_games_intact(tmp_path):
    kill_restart_chain(tmp_path, delays=(0.3,))


@pytest.mark.slow
def test_repeated_sigkills_at_different_moments(tmp_path):
    kill_restart_chain(tmp_path, delays=(0.0, 0.1, 0.25, 0.5, 0.8, 1.2))


def test_reader_follows_writer_processes(tmp_path):
    """Two actors start on a fresh store at once; a reader samples while they append."""
    bases, limit = {1: 300, 2: 700}, 6
    procs = [start_writer(tmp_path, actor, base, limit=limit) for actor, base in bases.items()]
    reader = ReplayReader(tmp_path)
    rng = np.random.default_rng(3)
    last_total = samples = 0
    try:
        while any(p.poll() is None for p in procs):
            reader.refresh()
            total = reader.positions_committed()
            assert total >= last_total
            last_total = total
            if reader.total_games():
                batch = reader.sample(64, 200, rng)
                samples += 1
                for gid, ply, black, visits in zip(batch["game_id"], batch["ply"], batch["black"],
                                                   batch["policy_visits"]):
                    actor, index = split_game_id(int(gid))
                    expected = expected_record(bases[actor] + index)
                    assert black == expected.positions.black[ply]
                    np.testing.assert_array_equal(visits, expected.positions.policy_visits[ply])
            time.sleep(0.02)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    assert [p.returncode for p in procs] == [0, 0] and samples > 0
    reader.refresh()
    assert reader.actor_ids() == [1, 2] and reader.total_games() == 2 * limit


# Opens a writer and stores one game the moment the file GO appears, so that all the processes open a
# fresh store together.
OPEN_SCRIPT = """
import os, sys, time
from selfplay.replay.random_records import random_game_record
from selfplay.replay.replay_buffer import ReplayWriter
run, actor, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
while not os.path.exists(go):
    time.sleep(0.001)
with ReplayWriter(run, actor, commit_positions=1) as writer:
    writer.append_game(random_game_record(actor, max_plies=%d))
""" % SHORT


def test_writers_opening_a_fresh_store_together(tmp_path):
    """Actors started at once race to create the root and its actors group; none may fail for it."""
    for attempt in range(4):
        run, go = tmp_path / f"run{attempt}", tmp_path / f"go{attempt}"
        procs = [run_script(OPEN_SCRIPT, run, actor, go, stderr=subprocess.PIPE) for actor in range(4)]
        time.sleep(2.0)  # every process imported and waiting
        go.touch()
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, "\n".join(errors)
        reader = ReplayReader(run)
        assert reader.actor_ids() == [0, 1, 2, 3] and reader.total_games() == 4


def test_stats_and_export(tmp_path, capsys):
    from play.cli.main import main

    records = [record(s, checkpoint=f"c{s % 2}", model_version=s % 2, max_plies=120) for s in range(16)]
    with ReplayWriter(tmp_path, 0, commit_positions=200) as w:
        for r in records:
            w.append_game(r)
    assert main(["replay", "stats", "--run", str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["games"] == 16 and figures["positions"] == sum(r.length for r in records)
    assert sum(figures["results"].values()) == 16
    assert figures["results"]["draw (1/2-1/2)"] == sum(r.winner == 0 for r in records)
    assert figures["length"]["max"] == max(r.length for r in records)
    assert figures["resignations"] == sum(r.termination == "resignation" for r in records)
    played_on = [r for r in records if r.would_resign_side and r.termination != "resignation"]
    assert figures["played_on_past_resignation"] == len(played_on) > 0
    assert figures["wrong_resignations"] == sum(r.winner != -r.would_resign_side for r in played_on)
    assert {(c["model_version"], c["positions"]) for c in figures["checkpoints"]} == {
        (v, sum(r.length for r in records if r.model_version == v)) for v in (0, 1)}
    assert figures["duplicate_games"] == 0
    assert main(["replay", "stats", "--run", str(tmp_path)]) == 0
    assert "wrong-resignation rate" in capsys.readouterr().out

    out = tmp_path / "games.pdn"
    assert main(["replay", "export", "--run", str(tmp_path), "--out", str(out), "--no-progress"]) == 0
    from zero.corpus.pdn import PdnError, read_pdn

    games = list(read_pdn(out))
    assert not [g for g in games if isinstance(g, PdnError)]
    assert [len(g.moves) for g in games] == [r.length for r in records]
    assert [g.result for g in games] == [{1: "1-0", -1: "0-1", 0: "1/2-1/2"}[r.winner] for r in records]
    assert main(["pdn", "check", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    # A game written twice (as a restarted actor that reused a seed did) shows as a duplicate.
    with ReplayWriter(tmp_path, 0) as w:
        w.append_game(records[3])
    assert main(["replay", "stats", "--run", str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["duplicate_games"] == 1 and figures["duplicate_positions"] == records[3].length



def test_stats_count_repeated_games_replayed_seeds_and_distinct_openings(tmp_path, capsys):
    # Issue 76: `replay export` of a stopped and resumed loop held one pair of identical games, and nothing said
    # whether an actor had played a seed twice or two seeds had met on one game. Now `replay stats` tells them apart.
    from play.cli.main import main
    from zero.corpus.pdn import read_pdn_text, write_game
    from zero.rules.game import Position

    records = [record(s, max_plies=60) for s in range(8)]
    # Another seed that happened to play game 3's moves: a repeated game, no replayed seed.
    chance = dataclasses.replace(records[3], seed=1311, seed_index=11,
                                 pdn=records[3].pdn.replace('[Round "3"]', '[Round "1311"]'))
    # ... and one that met game 5 after a ballot of its first 3 moves: its PDN starts after them.
    (five,) = read_pdn_text(records[5].pdn)
    start = Position.initial()
    for move in five.moves[:3]:
        start = start.play(move)
    ballot = dataclasses.replace(records[5], seed=1400, seed_index=12, opening=" ".join(map(str, five.moves[:3])),
                                 pdn=write_game(five.moves[3:], five.result, start=start))
    # An actor that played its seed index 2 again (a resume that went back): another game, the same seed.
    replayed = dataclasses.replace(record(9, max_plies=60), seed=records[2].seed, seed_index=records[2].seed_index)
    with ReplayWriter(tmp_path, 0, commit_positions=1) as w:
        for r in (*records, chance, ballot, replayed):
            w.append_game(r)
    with ReplayWriter(tmp_path, 1, commit_positions=1) as w:  # another actor's seed index 2 is its own
        w.append_game(dataclasses.replace(record(10, max_plies=60), seed_index=2))
    assert main(["replay", "stats", "--run", str(tmp_path), "--json", "--no-endgame-judge"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["games"] == 12 and figures["duplicate_games"] == 0
    assert figures["repeated_games"] == 2 and figures["repeated_positions"] == records[3].length + records[5].length
    assert sorted(figures["repeated_examples"]) == [[[0, 3], [0, 11]], [[0, 5], [0, 12]]]
    assert figures["replayed_seeds"] == 1
    moves = [[str(m) for m in g.moves] for r in (*records, replayed, record(10, max_plies=60))
             for g in read_pdn_text(r.pdn)]
    assert figures["distinct_openings"] == {str(k): len({" ".join(m[:k]) for m in moves if len(m) >= k})
                                            for k in (4, 8, 16)}
    assert figures["distinct_openings"]["4"] > 1
    assert main(["replay", "stats", "--run", str(tmp_path), "--no-endgame-judge"]) == 0
    out = capsys.readouterr().out
    assert "replayed seeds: 1 games" in out and "repeated games: 2 games (16.67 %)" in out, out
    assert "played by actor 0 seed index 3, actor 0 seed index 11" in out, out
    assert f"distinct openings: {figures['distinct_openings']['4']} after 4 plies" in out, out

def test_cli_without_a_store(tmp_path, capsys):
    from play.cli.main import main

    assert main(["replay", "stats", "--run", str(tmp_path)]) == 2
    assert "no replay store" in capsys.readouterr().err


def _actor_zarr_json(run, actor: int) -> Path:
    return RunDir(run).replay_store / "actors" / str(actor) / "zarr.json"


@pytest.mark.parametrize("damage", ["deleted", "a string", "negative", "a float", "no positions"])
def test_a_missing_or_damaged_commit_record_is_refused_not_overwritten(tmp_path, damage):
    with ReplayWriter(tmp_path, 0, commit_positions=1) as writer:
        for seed in range(3):
            writer.append_game(record(seed))
    meta_path = _actor_zarr_json(tmp_path, 0)
    meta = json.loads(meta_path.read_text())
    commit = meta["attributes"]["commit"]
    if damage == "deleted":
        del meta["attributes"]["commit"]
    else:
        meta["attributes"]["commit"] = {"a string": "3 games", "negative": {**commit, "games": -1},
                                        "a float": {**commit, "games": 2.5},
                                        "no positions": {"games": 3}}[damage]
    meta_path.write_text(json.dumps(meta))
    def chunks() -> dict:
        return {p: p.read_bytes() for p in meta_path.parent.rglob("*") if p.is_file() and "c" in p.parts}

    before = chunks()
    assert before
    with pytest.raises(ReplayError, match=f"{meta_path}.*(missing|damaged)"):
        ReplayWriter(tmp_path, 0)
    with pytest.raises(ReplayError, match=str(meta_path)):
        ReplayReader(tmp_path)
    # Nothing of the committed games was touched.
    assert chunks() == before


def test_a_new_actor_has_a_commit_record_before_its_first_row(tmp_path):
    writer = ReplayWriter(tmp_path, 4)
    assert json.loads(_actor_zarr_json(tmp_path, 4).read_text())["attributes"]["commit"]["games"] == 0
    writer.close()
    assert ReplayReader(tmp_path).total_games() == 0


def test_an_actor_stopped_while_creating_its_columns_checks_clean_and_resumes(tmp_path):
    # A full disk or a kill while a new actor creates its columns leaves its commit record (no games) with
    # some columns missing: nothing was committed, so that is no damage, and the actor's next start
    # creates the rest.
    ReplayWriter(tmp_path, 2).close()
    group = RunDir(tmp_path).replay_store / "actors" / "2"
    for column in ("games/first_row", "positions/ply"):
        shutil.rmtree(group / column)
    checked = replay_buffer.check_store(tmp_path)
    assert (checked.problems, checked.actors, checked.games) == ([], 1, 0)
    assert ReplayReader(tmp_path).total_games() == 0
    with ReplayWriter(tmp_path, 2, commit_positions=1) as writer:
        writer.append_game(record(5))
    checked = replay_buffer.check_store(tmp_path)
    assert (checked.problems, checked.games) == ([], 1)
    assert_same_game(next(ReplayReader(tmp_path).iter_games(positions=True)), record(5), 2, 0)


def _store_with_games(run: Path, games: int = 6) -> None:
    with ReplayWriter(run, 0, commit_positions=1, chunk_rows=64, chunk_games=4) as writer:
        for seed in range(games):
            writer.append_game(record(seed))


def _damage_store(run: Path, damage: str) -> Path:
    """Damage one file of a store as a crash, a full disk or a hand edit would; the damaged file."""
    actor = RunDir(run).replay_store / "actors" / "0"
    if damage == "truncated chunk":
        target = actor / "positions" / "black" / "c" / "1"
        target.write_bytes(target.read_bytes()[:20])
    elif damage == "garbage actor metadata":
        target = actor / "zarr.json"
        target.write_text("garbage{")
    elif damage == "garbage column metadata":
        target = actor / "positions" / "ply" / "zarr.json"
        target.write_text('{"zarr_format": 3')
    elif damage == "deleted column":
        target = actor / "games" / "length"
        shutil.rmtree(target)
    elif damage == "commit record of the wrong type":
        target = actor / "zarr.json"
        meta = json.loads(target.read_text())
        meta["attributes"]["commit"] = ["games", 6]
        target.write_text(json.dumps(meta))
    else:
        raise AssertionError(damage)
    return target


DAMAGES = ["truncated chunk", "garbage actor metadata", "garbage column metadata", "deleted column",
           "commit record of the wrong type"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_store_is_one_clear_error_naming_the_file(tmp_path, damage):
    # Before: zstd RuntimeError, JSONDecodeError or TypeError tracebacks naming no file, and a trainer that
    # restarted every 10 s on them.
    _store_with_games(tmp_path)
    damaged = _damage_store(tmp_path, damage)
    with pytest.raises(ReplayDamage, match=f"^{damaged}: .*replay check --run {tmp_path}"):
        reader = ReplayReader(tmp_path)
        reader.sample(64, 10_000, np.random.default_rng(0))
        list(reader.iter_games(positions=True))
    if damage != "truncated chunk":  # a writer reads no committed chunk of another column than its tail
        with pytest.raises(ReplayDamage, match=f"^{damaged}: "):
            ReplayWriter(tmp_path, 0)


@pytest.mark.parametrize("damage", DAMAGES)
def test_replay_check_names_every_damaged_file(tmp_path, damage):
    from play.cli.main import main

    _store_with_games(tmp_path)
    assert replay_buffer.check_store(tmp_path).problems == []
    assert replay_buffer.check_store(tmp_path).games == 6
    damaged = _damage_store(tmp_path, damage)
    report = replay_buffer.check_store(tmp_path)
    assert len(report.problems) == 1 and report.problems[0].startswith(f"{damaged}: ")
    assert main(["replay", "check", "--run", str(tmp_path)]) == 1


def test_replay_check_finds_games_that_do_not_tile_the_rows(tmp_path, capsys):
    from play.cli.main import main

    _store_with_games(tmp_path)
    assert main(["replay", "check", "--run", str(tmp_path)]) == 0
    assert "ok: every committed row is readable" in capsys.readouterr().out
    # A game table whose lengths no longer add up to the committed rows (a lost chunk reads as zeros).
    lengths = RunDir(tmp_path).replay_store / "actors" / "0" / "games" / "length" / "c" / "1"
    lengths.unlink()
    report = replay_buffer.check_store(tmp_path)
    assert any("do not tile" in p for p in report.problems), report.problems


def test_replay_check_counts_duplicate_games(tmp_path, capsys):
    from play.cli.main import main

    with ReplayWriter(tmp_path, 0, commit_positions=1) as writer:
        writer.append_game(record(1))
        writer.append_game(record(1))
    assert main(["replay", "check", "--run", str(tmp_path)]) == 1
    assert "1 duplicate games" in capsys.readouterr().out


def test_an_actor_on_a_damaged_store_stops_for_good(tmp_path, monkeypatch):
    # A restart would meet the same file: the role exits with the code the supervisor does not restart.
    from train.loop.driver import LoopConfig, actor_role
    from train.loop.supervisor import FATAL_EXIT_CODE

    _store_with_games(tmp_path)
    _damage_store(tmp_path, "garbage actor metadata")
    with pytest.raises(SystemExit) as stop:
        actor_role(str(tmp_path), LoopConfig(), 0)
    assert stop.value.code == FATAL_EXIT_CODE


def _store_files(run: Path) -> dict:
    return {p: p.read_bytes() for p in (RunDir(run).replay_store / "actors").rglob("*") if p.is_file()}


def _edit_json(path: Path, edit) -> None:
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))


def _assert_refused_everywhere(run: Path, damaged: Path, capsys) -> None:
    """Writer, reader, `replay stats` and `replay check` all refuse the store, naming the damaged file,
    and nothing of it was written to."""
    from play.cli.main import main

    before = _store_files(run)
    with pytest.raises(ReplayDamage, match=f"^{damaged}: "):
        ReplayWriter(run, 0)
    with pytest.raises(ReplayDamage, match=f"^{damaged}: "):
        ReplayReader(run)
    capsys.readouterr()
    assert main(["replay", "stats", "--run", str(run), "--no-endgame-judge"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {damaged}: ") and "Traceback" not in err
    report = replay_buffer.check_store(run)
    assert any(p.startswith(f"{damaged}: ") for p in report.problems), report.problems
    assert main(["replay", "check", "--run", str(run)]) == 1
    assert _store_files(run) == before


@pytest.mark.parametrize("counts, damaged", [
    ({"games": 9}, "games/game_id/zarr.json"),  # more games than the game table holds
    ({"positions": 500_000}, "positions/black/zarr.json"),
    ({"games": 500, "positions": 500_000}, "games/game_id/zarr.json"),
    ({"games": 7}, "zarr.json"),  # within the arrays' shape: a game of fill values
    ({"positions": 1}, "zarr.json"),  # fewer rows than the games hold
])
def test_a_commit_record_that_overstates_the_data_is_refused(tmp_path, counts, damaged, capsys):
    # Before: `replay stats` ended in a traceback, and the loop appended after the real rows and trained on
    # the fill values of the rows the record claimed.
    _store_with_games(tmp_path)
    _edit_json(_actor_zarr_json(tmp_path, 0), lambda m: m["attributes"]["commit"].update(counts))
    _assert_refused_everywhere(tmp_path, RunDir(tmp_path).replay_store / "actors" / "0" / damaged, capsys)


def _two_actors_store(run: Path, chunk_games: int) -> Path:
    """A store of two actors' 8 games each, committed one at a time in chunks of 16 rows; checks clean."""
    for actor, seeds in ((0, range(8)), (1, range(100, 108))):
        with ReplayWriter(run, actor, commit_positions=1, chunk_rows=16, chunk_games=chunk_games) as writer:
            for seed in seeds:
                writer.append_game(record(seed))
    assert replay_buffer.check_store(run).problems == []
    return RunDir(run).replay_store


@pytest.mark.parametrize("column, chunk", [("positions/root_value", "c/3"), ("positions/policy_actions", "c/1/0"),
                                           ("games/pdn", "c/0")])
def test_a_valid_chunk_copied_over_another_is_damage(tmp_path, column, chunk, capsys):
    # Before: actors/1/positions/root_value/c/3 copied over actors/0/... decoded, and `replay check` said ok.
    store = _two_actors_store(tmp_path, chunk_games=2)
    damaged = store / "actors" / "0" / column / chunk
    shutil.copyfile(store / "actors" / "1" / column / chunk, damaged)
    report = replay_buffer.check_store(tmp_path)
    assert report.problems == [f"{damaged}: committed rows are not the ones written: their checksum differs from "
                               f"the commit record's (a chunk copied or moved from elsewhere)"], report.problems
    assert main_check(tmp_path, capsys) == 1
    # A writer goes on from the record's checksums: its next commits keep them, and the store checks clean.
    shutil.rmtree(store / "actors" / "1")
    with ReplayWriter(tmp_path, 1, commit_positions=1, chunk_rows=16, chunk_games=2) as writer:
        for seed in range(200, 206):
            writer.append_game(record(seed))
    with ReplayWriter(tmp_path, 1) as writer:
        writer.append_game(record(300))
    assert [p for p in replay_buffer.check_store(tmp_path).problems if "/actors/1/" in p] == []


def test_a_partly_filled_chunk_copied_over_another_is_damage(tmp_path, capsys):
    # Before: actor 1's last, partly filled chunk copied over actor 0's (the newest rows, which the trainer
    # samples), or its game table's chunk (all its games, in one chunk), and `replay check` said ok.
    store = _two_actors_store(tmp_path, chunk_games=64)
    commit = json.loads(_actor_zarr_json(tmp_path, 0).read_text())["attributes"]["commit"]
    for column in ("positions/black", "games/seed", "games/pdn", "games/winner"):
        table = column.split("/")[0]
        rows = 16 if table == "positions" else 64
        assert commit[table] % rows  # the last chunk is partly filled
        chunk = f"c/{commit[table] // rows}"
        damaged = store / "actors" / "0" / column / chunk
        sound = damaged.read_bytes()
        shutil.copyfile(store / "actors" / "1" / column / chunk, damaged)
        report = replay_buffer.check_store(tmp_path)
        assert report.problems == [f"{damaged}: committed rows are not the ones written: their checksum differs "
                                   f"from the commit record's (a chunk copied or moved from elsewhere)"], report.problems
        if table == "positions":
            assert main_check(tmp_path, capsys) == 1
        with pytest.raises(ReplayDamage, match=f"^{damaged}: "):  # what the loop and `selfplay` run first
            replay_buffer.refuse_damaged_store(tmp_path)
        damaged.write_bytes(sound)
    assert replay_buffer.check_store(tmp_path).problems == []


def test_a_store_written_before_checksums_checks_clean_and_gets_them(tmp_path):
    # A commit record without checksums (written by the code before them) is no damage; its writer's next
    # commit records those of every complete chunk, taken from the rows as they stand.
    _store_with_games(tmp_path, games=8)
    meta = _actor_zarr_json(tmp_path, 0)
    _edit_json(meta, lambda m: m["attributes"]["commit"].pop("checksums"))
    assert replay_buffer.check_store(tmp_path).problems == []
    with ReplayWriter(tmp_path, 0, commit_positions=1) as writer:
        writer.append_game(record(50))
    sums = json.loads(meta.read_text())["attributes"]["commit"]["checksums"]
    assert len(sums["positions"]["black"]) >= 1 and len(sums["games"]["pdn"]) >= 2
    assert replay_buffer.check_store(tmp_path).problems == []


def main_check(run: Path, capsys) -> int:
    from play.cli.main import main

    capsys.readouterr()
    return main(["replay", "check", "--run", str(run)])


@pytest.mark.parametrize("column, chunk", [("positions/policy_actions", "c/0/0"), ("positions/result", "c/1"),
                                           ("games/pdn", "c/1")])
def test_a_deleted_chunk_of_committed_rows_is_damage(tmp_path, column, chunk, capsys):
    # Before: `replay check` said every committed row was readable, and the rows read back as fill values
    # and were trained on. (result holds draws only in some chunks: a chunk of fill values is stored too.)
    _store_with_games(tmp_path)
    damaged = RunDir(tmp_path).replay_store / "actors" / "0" / column / chunk
    damaged.unlink()
    _assert_refused_everywhere(tmp_path, damaged, capsys)


@pytest.mark.parametrize("column", ["positions/ply", "positions/policy_actions", "games/length"])
def test_a_column_shape_that_disagrees_with_the_commit_record_is_refused(tmp_path, column, capsys):
    # Before: with "shape": [10] the writer grew the column from 10 rows, misaligned it and overwrote
    # committed rows, and `replay check` then said ok.
    _store_with_games(tmp_path)
    damaged = RunDir(tmp_path).replay_store / "actors" / "0" / column / "zarr.json"
    _edit_json(damaged, lambda m: m.update(shape=[10] + m["shape"][1:]))
    _assert_refused_everywhere(tmp_path, damaged, capsys)


@pytest.mark.parametrize("table, damage", [("games", "truncated mid-JSON"), ("positions", "truncated mid-JSON"),
                                           ("games", "an array's metadata"), ("positions", "deleted")])
def test_a_tables_own_metadata_is_held_to_the_schema(tmp_path, table, damage, capsys):
    # Before: zarr opens a table's columns without the table's own zarr.json, so with it truncated mid-JSON
    # `replay check` said ok and the reader trained on; only the writer stumbled on it.
    _store_with_games(tmp_path)
    actor = RunDir(tmp_path).replay_store / "actors" / "0"
    damaged = actor / table / "zarr.json"
    if damage == "truncated mid-JSON":
        damaged.write_text(damaged.read_text()[:20])
    elif damage == "an array's metadata":
        damaged.write_text((actor / table / "game_id" / "zarr.json").read_text())
    else:
        damaged.unlink()
    _assert_refused_everywhere(tmp_path, damaged, capsys)


def test_a_next_seed_index_below_a_committed_game_is_refused(tmp_path, capsys):
    # Before: a lowered `next_seed_index` went unnoticed, and the actor played the (seed, seed index) pairs of
    # committed games again.
    _store_with_games(tmp_path)  # seed indices 0 .. 5
    meta = _actor_zarr_json(tmp_path, 0)
    _edit_json(meta, lambda m: m["attributes"]["commit"].update(next_seed_index=5))
    _assert_refused_everywhere(tmp_path, meta, capsys)
    # One above the highest committed seed index is what the writer itself leaves: intact, and it goes on there.
    _edit_json(meta, lambda m: m["attributes"]["commit"].update(next_seed_index=6))
    assert replay_buffer.check_store(tmp_path).problems == []
    with ReplayWriter(tmp_path, 0) as writer:
        assert writer.next_seed_index == 6

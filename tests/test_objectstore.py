"""The replay store on an object store: the writer lease (create-if-absent, heartbeat, generation fencing)
and a replay round trip, against moto's S3 server on 127.0.0.1 as a stand-in for S3 (no other address)."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
import uuid

import numpy as np
import pytest

pytest.importorskip("obstore", reason="the object-store tests need the cluster extra: pip install -e \".[cluster]\"")
moto_server = pytest.importorskip("moto.server", reason="the object-store tests need moto: pip install -e \".[dev]\"")

from selfplay.replay.random_records import random_game_record  # noqa: E402
from selfplay.replay.replay_buffer import (
    ReplayDamage, ReplayError, ReplayReader, ReplayWriter, check_store  # noqa: E402,
)
from zero.run.objectstore import Lease, LeaseError, ObjectPath  # noqa: E402
from zero.run.rundir import RunDir  # noqa: E402

BUCKET = "checkers-zero-test"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 server on a free loopback port, with the environment obstore reads its endpoint from."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    patch = pytest.MonkeyPatch()
    for name, value in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ALLOW_HTTP": "true",
                        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                        "AWS_REGION": "us-east-1"}.items():
        patch.setenv(name, value)
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/{BUCKET}", method="PUT"))
    yield
    patch.undo()
    server.stop()


@pytest.fixture
def url(s3):
    return f"s3://{BUCKET}/{uuid.uuid4().hex}"  # a fresh prefix per test


def test_lease_is_exclusive_renewed_released_and_taken_over_with_a_higher_generation(url):
    path = ObjectPath(url) / "locks" / "a.lock"
    first = Lease(path, ttl=2.0, margin=0.5).acquire()
    assert first.generation == 1
    with pytest.raises(LeaseError, match="held by"):
        Lease(path, ttl=2.0, margin=0.5).acquire()
    time.sleep(3.0)  # longer than the time to live: only the heartbeat keeps it
    first.check()
    with pytest.raises(LeaseError, match="held by"):
        Lease(path, ttl=2.0, margin=0.5).acquire()
    first.close()
    second = Lease(path, ttl=2.0, margin=0.5).acquire()
    assert second.generation == 2  # released, not deleted: the count goes on
    # A holder that stalls (its heartbeat stops) loses the lease once it expires; the next one takes it over.
    second._stop.set()
    second._thread.join()
    time.sleep(2.2)
    with pytest.raises(LeaseError, match="not renewed"):
        second.check()
    third = Lease(path, ttl=2.0, margin=0.5).acquire()
    assert third.generation == 3
    assert json.loads(path.read_bytes())["generation"] == 3
    third.close()


def test_replay_round_trip_and_one_writer_per_actor_on_an_object_store(tmp_path, url):
    run = RunDir(tmp_path)
    run.set_replay_storage(url)
    assert str(run.replay_store) == f"{url}/replay.zarr"
    records = [random_game_record(seed, max_plies=40) for seed in range(7)]
    with ReplayWriter(tmp_path, 3, commit_positions=1, chunk_rows=16, chunk_games=2) as writer:
        for r in records[:4]:
            writer.append_game(r)
        with pytest.raises(ReplayError, match="another process is writing replay actor 3"):
            ReplayWriter(tmp_path, 3)
    with ReplayWriter(tmp_path, 3, commit_positions=100) as writer:  # resumes after the committed games
        assert writer.committed_games == 4
        for r in records[4:]:
            writer.append_game(r)
    reader = ReplayReader(tmp_path)
    assert reader.total_games() == 7 and reader.total_positions() == sum(r.length for r in records)
    for stored, expected in zip(reader.iter_games(positions=True), records):
        np.testing.assert_array_equal(stored.positions.black, expected.positions.black)
        assert stored.pdn == expected.pdn and stored.seed == expected.seed
    sample = reader.sample(32, 100, np.random.default_rng(0))
    assert (sample["actor_id"] == 3).all()
    assert check_store(tmp_path).problems == []
    assert not (tmp_path / "replay.zarr").exists()  # nothing of the store went to the run directory


def test_a_writer_whose_lease_was_taken_over_is_fenced_off_before_it_writes(tmp_path, url):
    RunDir(tmp_path).set_replay_storage(url)
    stale = ReplayWriter(tmp_path, 0, commit_positions=1)
    stale.append_game(random_game_record(1, max_plies=40))
    # The stale writer stalls past its lease (as a paused or cut-off process would): the lease expires and
    # a new writer takes the actor over, one generation higher.
    stale._lock._stop.set()
    stale._lock._thread.join()
    lease = RunDir(tmp_path).replay_lock(0)
    expired = dict(json.loads(lease.read_bytes()), expires=time.time() - 1)
    import obstore

    from zero.run.objectstore import _store
    obstore.put(_store(lease.url), lease.key, json.dumps(expired).encode())
    with ReplayWriter(tmp_path, 0, commit_positions=1) as fresh:
        assert fresh._lock.generation == 2
        fresh.append_game(random_game_record(2, max_plies=40))
        # The stale writer still thinks its lease is valid; the generation in the commit record stops it.
        with pytest.raises(ReplayError, match="fenced off"):
            stale.append_game(random_game_record(3, max_plies=40))
    reader = ReplayReader(tmp_path)
    assert [g.seed for g in reader.iter_games()] == [random_game_record(s, max_plies=40).seed for s in (1, 2)]


def test_damaged_metadata_on_an_object_store_is_refused_naming_the_object(tmp_path, url):
    RunDir(tmp_path).set_replay_storage(url)
    with ReplayWriter(tmp_path, 0, commit_positions=1) as writer:
        writer.append_game(random_game_record(1, max_plies=40))
    import obstore

    from zero.run.objectstore import _store
    meta = RunDir(tmp_path).replay_store / "actors" / "0" / "zarr.json"
    obstore.put(_store(meta.url), meta.key, b"not json")
    with pytest.raises(ReplayDamage, match=f"{url}/replay.zarr/actors/0/zarr.json"):
        ReplayReader(tmp_path)


def test_a_self_play_actor_plays_into_the_object_store_and_lets_go_of_its_lease(tmp_path, url):
    from selfplay.actors.actor import Actor
    from test_actor import _checkpoint, _config, _promote

    _promote(tmp_path, _checkpoint(tmp_path, "first", 10, seed=0), 10)
    RunDir(tmp_path).set_replay_storage(url)
    stats = Actor(tmp_path, 2, _config(), games=3).run()
    assert stats.games == ReplayReader(tmp_path).total_games() == 3
    with ReplayWriter(tmp_path, 2) as writer:  # free at once (released, not expired), one generation on
        assert writer._lock.generation == 2 and writer.committed_games == 3

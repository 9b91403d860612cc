"""The int8 model: it plays the float32 network's moves, and its cache beside the checkpoint is used only
while it matches the checkpoint and the code (rebuilt, with a message, when either changed or it is
damaged)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
import time

import numpy as np
import pytest
import torch

import zero.net.quantized as quantized
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint, save_checkpoint
from zero.net.encoding import encode_game, legal_logit_gaps, move_action
from zero.net.inference import NEAR_TIE_LOGITS, Evaluator
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.rules.game import Game

pytest.importorskip("onnxruntime")

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=16)


def sampled_positions(evaluator: Evaluator, count: int, seed: int) -> list[Game]:
    """Positions of games whose moves are drawn from the evaluator's raw policy (copies of the games)."""
    rng = np.random.default_rng(seed)
    games, game = [], Game()
    while len(games) < count:
        legal = game.legal_moves()
        if len(legal) > 1:
            games.append(Game(moves=list(game.moves)))
        logits, _ = evaluator.evaluate(encode_game(game)[None])
        scores = logits[0, [move_action(m, game.position.black_to_move) for m in legal]]
        probs = np.exp(scores - scores.max())
        game.play(legal[rng.choice(len(legal), p=probs / probs.sum())])
        if game.outcome is not None:
            game = Game()
    return games


def best_moves(evaluator: Evaluator, games: list[Game]) -> tuple[list, np.ndarray]:
    logits, wdl = evaluator.evaluate(np.stack([encode_game(g) for g in games]))
    moves = []
    for row, game in zip(logits, games):
        legal = game.legal_moves()
        moves.append(legal[int(np.argmax([row[move_action(m, game.position.black_to_move)] for m in legal]))])
    return moves, wdl


def test_the_int8_model_plays_the_float32_networks_move(tmp_path):
    """On positions with a choice from the shipped network's own games (others than its calibration
    games), int8 alone plays float32's move in nearly all of them (benchmarks/int8_bench.py measures about
    98 % on the OCA test split) and moves the win/draw/loss little; with its near ties answered in float32
    (the default) it plays float32's move in at least 99 % of them."""
    path = tmp_path / "shipped.pt"
    path.write_bytes(DEFAULT_CHECKPOINT.read_bytes())
    float32 = Evaluator.from_checkpoint(path, "cpu", precision="float32")
    raw = Evaluator.from_checkpoint(path, "cpu", precision="int8-raw")
    int8 = Evaluator.from_checkpoint(path, "cpu")
    assert (float32.precision, raw.precision, int8.precision) == ("float32", "int8-raw", "int8")
    games = sampled_positions(float32, 600, seed=7)
    moves32, wdl32 = best_moves(float32, games)
    for evaluator, least in ((raw, 0.97), (int8, 0.99)):
        moves8, wdl8 = best_moves(evaluator, games)
        agreement = np.mean([a == b for a, b in zip(moves32, moves8)])
        assert agreement >= least, (evaluator.precision, agreement)
        assert np.abs(wdl8 - wdl32).mean() < 0.02
        assert np.abs(wdl8 - wdl32).max() < 0.25
    assert 0 < int8.near_ties < 0.25 * int8.positions  # most positions keep the int8 answer


def test_near_ties_are_answered_in_float32_and_the_rest_in_int8(tmp_path):
    path = tmp_path / "shipped.pt"
    path.write_bytes(DEFAULT_CHECKPOINT.read_bytes())
    float32 = Evaluator.from_checkpoint(path, "cpu", precision="float32")
    raw = Evaluator.from_checkpoint(path, "cpu", precision="int8-raw")
    int8 = Evaluator.from_checkpoint(path, "cpu")
    planes = np.stack([encode_game(g) for g in sampled_positions(float32, 300, seed=11)])
    (raw_logits, raw_wdl), (f32_logits, f32_wdl) = raw.evaluate(planes), float32.evaluate(planes)
    logits, wdl = int8.evaluate(planes)
    gaps = np.empty(len(planes), dtype=np.float32)
    legal_logit_gaps(planes, raw_logits, gaps)
    near = gaps < NEAR_TIE_LOGITS
    assert 0 < near.sum() == int8.near_ties < len(planes) == int8.positions
    np.testing.assert_array_equal(logits[near], f32_logits[near])
    np.testing.assert_array_equal(wdl[near], f32_wdl[near])
    np.testing.assert_array_equal(logits[~near], raw_logits[~near])
    np.testing.assert_array_equal(wdl[~near], raw_wdl[~near])


@pytest.fixture
def tiny(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "tiny.pt"
    save_checkpoint(path, net=PolicyValueNet(TINY), net_config=TINY, step=1)
    return path


def derive(path, capsys) -> tuple[Evaluator, str]:
    evaluator = Evaluator.from_checkpoint(path, "cpu")
    assert evaluator.precision == "int8"
    return evaluator, capsys.readouterr().err


def test_the_int8_model_is_derived_once_and_then_read_from_beside_the_checkpoint(tiny, capsys, monkeypatch):
    first, said = derive(tiny, capsys)
    assert "deriving the int8 model" in said
    cached = quantized.cache_path(tiny)
    assert cached.exists()
    graph = cached.read_bytes().split(b"\n", 1)[1]
    assert b"QuantizeLinear" in graph and b"DequantizeLinear" in graph  # really quantized

    def no_quantizing(net):
        raise AssertionError("the cached model should have been used")

    monkeypatch.setattr(quantized, "quantize", no_quantizing)
    second, said = derive(tiny, capsys)
    assert said == ""
    planes = np.stack([encode_game(Game())] * 3)
    np.testing.assert_array_equal(first.evaluate(planes)[0], second.evaluate(planes)[0])


def test_processes_asking_at_once_for_a_new_checkpoints_int8_model_derive_it_once(tiny, monkeypatch):
    # Every actor asks for a new candidate's model as soon as the trainer writes it. The lock is an flock,
    # which two threads holding their own descriptors contend for as two processes do.
    derivations = []
    real_quantize = quantized.quantize

    def slow_quantize(net):
        derivations.append(threading.get_ident())
        time.sleep(0.5)  # long enough for the other caller to find no cache and wait
        return real_quantize(net)

    monkeypatch.setattr(quantized, "quantize", slow_quantize)
    checkpoint = load_checkpoint(tiny)
    start = threading.Barrier(2)
    graphs = []

    def ask() -> None:
        start.wait()
        graphs.append(quantized.int8_graph(checkpoint))

    callers = [threading.Thread(target=ask) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert len(derivations) == 1
    assert len(graphs) == 2 and graphs[0] == graphs[1]


def test_a_new_checkpoint_at_the_same_path_gets_a_new_int8_model(tiny, capsys):
    derive(tiny, capsys)
    header_before = json.loads(quantized.cache_path(tiny).read_bytes().split(b"\n", 1)[0])
    torch.manual_seed(1)
    save_checkpoint(tiny, net=PolicyValueNet(TINY), net_config=TINY, step=2)
    _, said = derive(tiny, capsys)
    assert "stale (weights_sha256 changed): rebuilding it" in said
    header_after = json.loads(quantized.cache_path(tiny).read_bytes().split(b"\n", 1)[0])
    assert header_after["weights_sha256"] != header_before["weights_sha256"]
    _, said = derive(tiny, capsys)
    assert said == ""


def test_a_new_encoding_version_rebuilds_the_int8_model(tiny, capsys, monkeypatch):
    derive(tiny, capsys)
    monkeypatch.setattr(quantized, "ENCODING_VERSION", quantized.ENCODING_VERSION + 1)
    _, said = derive(tiny, capsys)
    assert "stale (encoding_version changed): rebuilding it" in said
    assert json.loads(quantized.cache_path(tiny).read_bytes().split(b"\n", 1)[0])["encoding_version"] == \
        quantized.ENCODING_VERSION


@pytest.mark.parametrize("damage, reason", [
    (lambda data: data[:-100] + bytes(100), "damaged (the graph does not match its sha256)"),
    (lambda data: data[: len(data) // 2], "damaged (the graph does not match its sha256)"),
    (lambda data: b"garbage" + data, "damaged (no valid header)"),
    (lambda data: b"", "damaged (no valid header)"),
])
def test_a_damaged_int8_model_is_rebuilt_never_used(tiny, capsys, damage, reason):
    reference, _ = derive(tiny, capsys)
    cached = quantized.cache_path(tiny)
    intact = cached.read_bytes()
    cached.write_bytes(damage(intact))
    rebuilt, said = derive(tiny, capsys)
    assert f"{cached} is {reason}: rebuilding it" in said
    assert cached.read_bytes() == intact  # the recipe is deterministic
    planes = np.stack([encode_game(Game())] * 2)
    np.testing.assert_array_equal(reference.evaluate(planes)[1], rebuilt.evaluate(planes)[1])


def derive_in_time(path, capsys, seconds: float = 60) -> tuple[Evaluator, str]:
    """derive(), failing rather than hanging when it does not return in time (a FIFO's reader waits for a
    writer forever: it is given one then, so that the thread ends)."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["evaluator"] = Evaluator.from_checkpoint(path, "cpu")
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        cached = quantized.cache_path(path)
        if cached.is_fifo():
            os.close(os.open(cached, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(seconds)
        pytest.fail(f"reading the int8 cache did not return in {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    assert outcome["evaluator"].precision == "int8"
    return outcome["evaluator"], capsys.readouterr().err


def forged(tiny, graph: bytes) -> bytes:
    """A cache of `graph` under a header that names the checkpoint at `tiny`, with the graph's true sha256."""
    header = {**quantized.cache_key(load_checkpoint(tiny)), "graph_sha256": hashlib.sha256(graph).hexdigest()}
    return json.dumps(header, sort_keys=True).encode() + b"\n" + graph


def another_networks_graph() -> bytes:
    torch.manual_seed(1)
    return quantized.quantize(PolicyValueNet(TINY))


@pytest.mark.parametrize("plant, reason", [
    (lambda cached, intact, tiny: os.mkfifo(cached), "not a regular file"),
    (lambda cached, intact, tiny: cached.symlink_to("/dev/zero"), "a symbolic link, not a file"),
    (lambda cached, intact, tiny: (cached.with_name("elsewhere").write_bytes(intact),
                                   cached.symlink_to(cached.with_name("elsewhere"))), "a symbolic link, not a file"),
    (lambda cached, intact, tiny: cached.write_bytes(intact + bytes(quantized.cache_size_limit(load_checkpoint(tiny)))),
     "larger than any int8 model of this network can be"),
    (lambda cached, intact, tiny: cached.write_bytes(forged(tiny, b"not an ONNX graph" * 100)),
     "a graph that does not load or run (InvalidProtobuf)"),
    (lambda cached, intact, tiny: cached.write_bytes(forged(tiny, another_networks_graph())),
     "a graph that answers unlike its checkpoint on fixed positions (policy off by"),
], ids=["fifo", "link-to-dev-zero", "link-to-a-good-cache", "oversized", "junk-graph", "another-networks-graph"])
def test_an_int8_cache_that_is_no_file_or_no_model_of_its_checkpoint_is_rebuilt(tiny, capsys, plant, reason):
    # Before: a FIFO hung every consumer, a link to /dev/zero was read until the memory ran out, a junk graph
    # under a consistent header was a traceback in every consumer, and another network's graph under a forged
    # header was used without a word.
    reference, _ = derive(tiny, capsys)
    cached = quantized.cache_path(tiny)
    intact = cached.read_bytes()
    cached.unlink()
    plant(cached, intact, tiny)
    rebuilt, said = derive_in_time(tiny, capsys)
    assert f"the cached int8 model {cached} is {reason}" in said and said.count("rebuilding it") == 1
    assert not cached.is_symlink() and cached.read_bytes() == intact  # a regular file again, the model rebuilt
    planes = np.stack([encode_game(Game())] * 2)
    for answer, expected in zip(rebuilt.predict(planes), reference.predict(planes)):
        np.testing.assert_array_equal(answer, expected)


@pytest.mark.parametrize("full_disk", [False, True])
def test_an_int8_model_that_cannot_be_cached_is_kept_in_memory(tiny, capsys, monkeypatch, full_disk):
    def unwritable(path, data):
        if full_disk:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(quantized, "atomic_write_bytes", unwritable)
    evaluator, said = derive(tiny, capsys)
    # A full disk is said in the form every disk error has ("cannot write FILE: ..."), which the loop's
    # full-disk test holds every line about it to.
    reason = (f"cannot write {quantized.cache_path(tiny)}: No space left on device" if full_disk
              else "Permission denied")
    assert "cannot cache the int8 model, so it is kept for this process only" in said and reason in said
    assert not quantized.cache_path(tiny).exists()
    logits, wdl = evaluator.evaluate(encode_game(Game())[None])
    assert np.isfinite(logits).all() and np.allclose(wdl.sum(), 1, atol=1e-5)


def test_float32_is_there_when_asked_for(tiny):
    assert Evaluator.from_checkpoint(tiny, "cpu", precision="float32").precision == "float32"
    assert not quantized.cache_path(tiny).exists()
    with pytest.raises(ValueError, match="precision"):
        Evaluator.from_checkpoint(tiny, "cpu", precision="int4")


def test_a_directory_at_the_int8_cache_path_is_named_as_one(tiny, capsys):
    # Before: "the cached int8 model ... is [Errno 21] Is a directory: 6: rebuilding it", the 6 a file descriptor.
    reference, _ = derive(tiny, capsys)
    cached = quantized.cache_path(tiny)
    cached.unlink()
    cached.mkdir()
    rebuilt, said = derive_in_time(tiny, capsys)
    assert f"the cached int8 model {cached} is not a regular file: rebuilding it" in said, said
    assert "Errno" not in said, said
    planes = np.stack([encode_game(Game())] * 2)
    np.testing.assert_array_equal(reference.evaluate(planes)[1], rebuilt.evaluate(planes)[1])


def test_a_notice_in_a_process_that_logs_is_time_stamped_like_its_log_lines(capsys):
    # Before: the loop's console showed "deriving the int8 model ..." among time-stamped lines, without one.
    import logging
    import re

    handler = logging.NullHandler()
    logging.getLogger().addHandler(handler)
    try:
        quantized.notify("deriving the int8 model of c.pt")
    finally:
        logging.getLogger().removeHandler(handler)
    said = capsys.readouterr().err
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} deriving the int8 model of c\.pt\n", said), said

"""The distilled evaluation: its kernels against their plain-Python twin and the torch twin, the accumulator
updated move by move against one recomputed, and its file."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from zero.distilled import kernels as dk
from zero.distilled import reference
from zero.distilled.model import DistilledFileError, DistilledShape, load_eval, random_eval, save_eval
from zero.distilled.network import DistilledNet, batch_inputs
from zero.rules.game import Position
from zero.rules.notation import fen_to_position
from positions import random_position

FENS = ("B:W21-32:B1-12", "W:W18,19,21,22,23,25,26,27,28,29,31,32:B1,2,3,4,6,7,9,10,11,13,14,15",
        "W:W17,20,22,24,26,28,30,31:B1,3,6,7,9,11,12,16", "B:W12,14,15,29:B2,7,13", "B:W21,28,32:BK4,14",
        "W:WK10,K19,27:BK14,23", "W:W5,K30:BK6,K27,3", "B:W18,K26,31:B9,K14,22")
SHAPES = (DistilledShape(), DistilledShape(accumulator=16, hidden=8, buckets=3))


def _arrays(positions):
    return ([p.black for p in positions], [p.white for p in positions], [p.kings for p in positions],
            [p.black_to_move for p in positions])


def _random_positions(count: int, seed: int) -> list[Position]:
    """Positions of random games, captures, multi-jumps and crownings among them."""
    rng = np.random.default_rng(seed)
    return [random_position(int(rng.integers(1 << 30)), int(rng.integers(0, 120))) for _ in range(count)]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_kernels_answer_as_their_plain_python_twin(shape):
    evaluation = random_eval(shape, seed=1)
    positions = [fen_to_position(f) for f in FENS] + _random_positions(40, seed=2)
    got = evaluation.logits(*_arrays(positions))
    want = [reference.logit(evaluation, p) for p in positions]
    assert np.allclose(got, want, atol=1e-4)
    assert len(set(np.round(got, 4))) > len(positions) // 2  # the positions are told apart


@pytest.mark.parametrize("shape", SHAPES)
def test_the_kernels_answer_as_the_torch_forward_pass(shape):
    evaluation = random_eval(shape, seed=3)
    positions = [fen_to_position(f) for f in FENS] + _random_positions(40, seed=4)
    net = DistilledNet.from_eval(evaluation)
    with torch.no_grad():
        torch_logits = net(*batch_inputs(*_arrays(positions), shape.buckets)).numpy()
    assert np.allclose(evaluation.logits(*_arrays(positions)), torch_logits, atol=1e-4)
    # and the module's weights come back out unchanged
    again = net.to_eval()
    assert all(np.array_equal(again.weights[n], evaluation.weights[n]) for n in evaluation.weights)


def test_the_updated_accumulator_equals_one_recomputed_after_random_games():
    evaluation = random_eval(DistilledShape(accumulator=32), seed=5)
    w1, b1 = evaluation.arrays[0], evaluation.arrays[1]
    rng = np.random.default_rng(6)
    acc = np.zeros((2, 32), np.int16)
    child = np.zeros_like(acc)
    fresh = np.zeros_like(acc)
    seen = {"capture": 0, "multi-jump": 0, "crowning": 0}
    for _ in range(30):
        pos = Position.initial()
        dk.refresh(pos.black, pos.white, pos.kings, w1, b1, acc)
        while True:
            legal = pos.legal_moves()
            if not legal:
                break
            move = legal[int(rng.integers(len(legal)))]
            nxt = pos.play(move)
            seen["capture"] += move.is_capture
            seen["multi-jump"] += len(move.path) > 2
            seen["crowning"] += bin(nxt.kings).count("1") > bin(pos.kings & ~move.captured).count("1")
            dk.update(pos.black, pos.white, pos.kings, nxt.black, nxt.white, nxt.kings, w1, acc, child)
            dk.refresh(nxt.black, nxt.white, nxt.kings, w1, b1, fresh)
            assert np.array_equal(child, fresh), f"after {move} from {pos.fen()}"
            acc[:] = child
            pos = nxt
        # the same, by the twin's definition
        assert acc[0].tolist() == reference.accumulator(evaluation, pos, True)
        assert acc[1].tolist() == reference.accumulator(evaluation, pos, False)
    assert min(seen.values()) > 10, seen


def test_a_saved_evaluation_loads_as_it_was_and_damage_is_refused(tmp_path):
    evaluation = random_eval(SHAPES[1], seed=7)
    path = tmp_path / "eval.npz"
    save_eval(type(evaluation)(evaluation.shape, evaluation.weights, {"teacher": "abc"}), path)
    loaded = load_eval(path)
    assert loaded.shape == evaluation.shape and loaded.meta == {"teacher": "abc"}
    assert all(np.array_equal(loaded.weights[n], evaluation.weights[n]) for n in evaluation.weights)
    cases = {"missing": None, "junk": b"not an archive", "truncated": path.read_bytes()[:500]}
    for name, data in cases.items():
        bad = tmp_path / f"{name}.npz"
        if data is not None:
            bad.write_bytes(data)
        with pytest.raises(DistilledFileError, match=str(bad)) as info:
            load_eval(bad)
        assert "\n" not in str(info.value)
    weights = dict(evaluation.weights, w2=np.full_like(evaluation.weights["w2"], np.nan))
    save_eval(type(evaluation)(evaluation.shape, weights), tmp_path / "nan.npz")
    with pytest.raises(DistilledFileError, match="not finite"):
        load_eval(tmp_path / "nan.npz")
    weights = dict(evaluation.weights, w1=evaluation.weights["w1"] * 100)
    save_eval(type(evaluation)(evaluation.shape, weights), tmp_path / "big.npz")
    with pytest.raises(DistilledFileError, match="accumulator"):
        load_eval(tmp_path / "big.npz")


def _archive_with(path, evaluation, name: str, *parts: bytes) -> None:
    """An evaluation file whose `name` member is the given .npy bytes (deflated), the rest as save_eval writes."""
    import zipfile

    save_eval(evaluation, path.with_name("sound.npz"))
    with zipfile.ZipFile(path.with_name("sound.npz")) as sound, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in sound.infolist():
            if info.filename != f"{name}.npy":
                out.writestr(info.filename, sound.read(info))
        with out.open(f"{name}.npy", "w", force_zip64=True) as member:
            for part in parts:
                member.write(part)


def test_an_evaluation_file_that_is_no_file_or_a_zip_bomb_is_refused_in_one_line_without_reading_it(tmp_path):
    import os
    import threading
    import tracemalloc

    evaluation = random_eval(SHAPES[0], seed=1)
    os.mkfifo(tmp_path / "fifo.npz")
    (tmp_path / "zero.npz").symlink_to("/dev/zero")
    cases = {"fifo.npz": "not a regular file", "zero.npz": "a symbolic link, not a file",
             "/etc/passwd": "not a numpy archive"}
    for name, said in cases.items():
        outcome = []
        # a FIFO read blocks for ever: the load runs beside the test, which fails rather than hangs
        worker = threading.Thread(target=lambda: outcome.append(_refusal(tmp_path / name)), daemon=True)
        worker.start()
        worker.join(10)
        assert outcome, f"{name}: load_eval still reading after 10 s"
        assert said in outcome[0] and "unsafely" not in outcome[0] and "\n" not in outcome[0], outcome[0]
    # w1's header declares 4 TiB in a file of a few hundred bytes
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 40,)})
    _archive_with(tmp_path / "huge.npz", evaluation, "w1", header.getvalue())
    assert "declares" in _refusal(tmp_path / "huge.npz")
    # w2 unpacks to 256 MB (of zeros) from a file under 1 MB: refused before it is decompressed
    sound_w2 = io.BytesIO()
    np.save(sound_w2, evaluation.weights["w2"])
    _archive_with(tmp_path / "bomb.npz", evaluation, "w2", sound_w2.getvalue(), *[bytes(1 << 20)] * 256)
    assert (tmp_path / "bomb.npz").stat().st_size < 1 << 20
    tracemalloc.start()
    said = _refusal(tmp_path / "bomb.npz")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "declares" in said and peak < 32 << 20, (said, peak)


def _refusal(path) -> str:
    with pytest.raises(DistilledFileError) as info:
        load_eval(path)
    return str(info.value)


@pytest.mark.parametrize("name, scale", [("w4", 1e30), ("b3", 1e30), ("w2", 0.0), ("w4", 0.0)])
def test_every_layers_weights_are_bounded_and_none_all_zero(tmp_path, name, scale):
    evaluation = random_eval(SHAPES[0], seed=2)
    weights = dict(evaluation.weights, **{name: (evaluation.weights[name] * scale).astype(np.float32)})
    save_eval(type(evaluation)(evaluation.shape, weights), tmp_path / "odd.npz")
    said = _refusal(tmp_path / "odd.npz")
    assert f"weight {name}" in said and ("all zeros" in said if scale == 0 else "exceeds" in said), said

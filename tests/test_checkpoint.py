"""Checkpoint files: round trip, atomic write, and a clear refusal for every kind of bad file."""

from __future__ import annotations

import pytest
import torch

from training_data import negative_variances
from zero.net.checkpoint import CheckpointError, load_checkpoint, save_checkpoint, weights_sha256
from zero.net.inference import Evaluator
from zero.net.network import NetworkConfig, PolicyValueNet

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=4, value_channels=2, value_hidden=16)


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    net = PolicyValueNet(TINY)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    net(torch.randn(4, TINY.input_planes, 8, 8)).policy_logits.sum().backward()
    opt.step()
    path = save_checkpoint(
        tmp_path / "ck.pt", net=net, net_config=TINY, step=17, optimizer_state=opt.state_dict(),
        parent="runs/a/step-10.pt", ratings={"elo": 12.5}, metrics={"top1": 0.5},
        provenance={"data": "OCA_2.0.pdn"}, extra={"epoch": 2},
    )
    return net, opt, path


def test_round_trip(saved):
    net, opt, path = saved
    ck = load_checkpoint(path)
    assert ck.net_config == TINY and ck.step == 17 and ck.parent == "runs/a/step-10.pt"
    assert ck.ratings == {"elo": 12.5} and ck.metrics == {"top1": 0.5}
    assert ck.provenance == {"data": "OCA_2.0.pdn"} and ck.extra == {"epoch": 2}
    rebuilt = ck.build_network()
    assert not rebuilt.training
    for k, v in net.state_dict().items():
        assert torch.equal(rebuilt.state_dict()[k], v)
    opt2 = torch.optim.AdamW(rebuilt.parameters(), lr=1e-3)
    opt2.load_state_dict(ck.optimizer_state)
    assert opt2.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]
    assert weights_sha256(ck.state_dict) == weights_sha256(net.state_dict())
    # No temporary file is left beside it.
    assert [p.name for p in path.parent.iterdir()] == ["ck.pt"]


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "absent.pt")


def test_not_a_checkpoint(tmp_path):
    path = tmp_path / "x.pt"
    path.write_bytes(b"hello world\n" * 10)
    with pytest.raises(CheckpointError, match="not a checkers-zero checkpoint"):
        load_checkpoint(path)


def test_truncated(saved):
    _, _, path = saved
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(path)


@pytest.mark.parametrize("where", [0.3, 0.6, 0.95])
def test_flipped_byte(saved, where):
    _, _, path = saved
    data = bytearray(path.read_bytes())
    data[int(len(data) * where)] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(path)


def test_other_format_version(saved):
    _, _, path = saved
    data = path.read_bytes()
    path.write_bytes(data.replace(b"checkers-zero-checkpoint 1 ", b"checkers-zero-checkpoint 9 ", 1))
    with pytest.raises(CheckpointError, match="format version 9"):
        load_checkpoint(path)


def test_weights_that_do_not_fit_the_config(tmp_path):
    net = PolicyValueNet(TINY)
    wrong = NetworkConfig(**{**TINY.to_dict(), "channels": 16})
    path = save_checkpoint(tmp_path / "bad.pt", net=net, net_config=wrong, step=0)
    with pytest.raises(CheckpointError, match="do not fit the network config.*shape"):
        load_checkpoint(path)


def test_expected_config_mismatch(saved):
    _, _, path = saved
    with pytest.raises(CheckpointError, match="blocks: expected 2, checkpoint has 1"):
        load_checkpoint(path, expect_config=NetworkConfig(**{**TINY.to_dict(), "blocks": 2}))


def test_evaluator_from_checkpoint(saved):
    _, _, path = saved
    ev = Evaluator.from_checkpoint(path, device="cpu")
    assert ev.device.type == "cpu" and ev.config == TINY


def test_a_checkpoint_of_another_encoding_is_refused(tmp_path):
    from zero.net.encoding import ENCODING_VERSION

    other = NetworkConfig(**{**TINY.to_dict(), "encoding_version": ENCODING_VERSION + 1})
    path = save_checkpoint(tmp_path / "other.pt", net=PolicyValueNet(other), net_config=other, step=0)
    with pytest.raises(CheckpointError, match=f"encoding version {ENCODING_VERSION + 1}, this code encodes "
                                              f"positions as version {ENCODING_VERSION}"):
        load_checkpoint(path)


def test_checkpoints_from_before_the_encoding_version_are_version_1(tmp_path):
    # The shipped network was saved before configs recorded the version; its encoding is version 1.
    from zero.net.checkpoint import DEFAULT_CHECKPOINT

    stored = TINY.to_dict()
    del stored["encoding_version"]
    assert NetworkConfig.from_dict(stored).encoding_version == 1
    if DEFAULT_CHECKPOINT.exists():
        assert load_checkpoint(DEFAULT_CHECKPOINT).net_config.encoding_version == 1


def _write_payload(path, obj) -> None:
    import hashlib
    import io

    from zero.net.checkpoint import FORMAT_NAME, FORMAT_VERSION

    buf = io.BytesIO()
    torch.save(obj, buf)
    payload = buf.getvalue()
    path.write_bytes(b"%s %d %d %s\n" % (FORMAT_NAME, FORMAT_VERSION, len(payload),
                                        hashlib.sha256(payload).hexdigest().encode()) + payload)


@pytest.mark.parametrize("contents", [
    [1, 2, 3],
    {"net_config": TINY.to_dict(), "state_dict": "weights"},
    {"net_config": TINY.to_dict()},
    {"net_config": [1], "state_dict": {}},
])
def test_a_valid_file_with_odd_contents_is_a_one_line_error(tmp_path, contents):
    path = tmp_path / "odd.pt"
    _write_payload(path, contents)
    with pytest.raises(CheckpointError, match="odd.pt: ") as error:
        load_checkpoint(path)
    assert "\n" not in str(error.value)


def test_odd_steps_are_refused(saved, tmp_path):
    from zero.net.checkpoint import weights_sha256

    net, _, _ = saved
    state = {k: v.clone() for k, v in net.state_dict().items()}
    path = tmp_path / "odd-step.pt"
    _write_payload(path, {"net_config": TINY.to_dict(), "state_dict": state, "weights_sha256": weights_sha256(state),
                          "step": "soon"})
    with pytest.raises(CheckpointError, match="not a checkers-zero checkpoint's"):
        load_checkpoint(path)


def test_a_fifo_or_a_directory_is_not_read(tmp_path):
    import os

    fifo = tmp_path / "pipe.pt"
    os.mkfifo(fifo)
    with pytest.raises(CheckpointError, match="not a regular file"):
        load_checkpoint(fifo)  # reading it would wait forever for a writer
    with pytest.raises(CheckpointError, match="is a directory"):
        load_checkpoint(tmp_path)


def test_weights_that_are_not_finite_are_refused(saved, tmp_path, monkeypatch):
    # NaN weights hash like any others; a network made of them answers NaN everywhere, and the search used to
    # spin forever on that. Such weights are neither written nor, when other code wrote them, loaded.
    net, _, _ = saved
    with torch.no_grad():
        next(net.parameters()).fill_(float("nan"))
    with pytest.raises(CheckpointError, match="not finite"):
        save_checkpoint(tmp_path / "nan.pt", net=net, net_config=TINY, step=1)
    assert not (tmp_path / "nan.pt").exists()
    monkeypatch.setattr("zero.net.checkpoint._check_finite", lambda *args: None, raising=False)
    path = save_checkpoint(tmp_path / "nan.pt", net=net, net_config=TINY, step=1)
    monkeypatch.undo()
    with pytest.raises(CheckpointError, match="nan.pt: the network's weights are not finite"):
        load_checkpoint(path)


def _overflowing_weights(net: PolicyValueNet) -> None:
    for parameter in net.parameters():
        parameter.mul_(1e30)


@pytest.mark.parametrize("spoil", [negative_variances, _overflowing_weights])
def test_finite_weights_whose_answers_are_not_finite_are_refused_on_load(saved, tmp_path, spoil):
    # Such weights hash and save like any others (the checksums are the normal save's); the network they make
    # answers NaN or infinity, which every consumer used to meet far from the file (a traceback in the int8
    # calibration, "Probabilities contain NaN" in a match, an actor restarting forever).
    net, _, _ = saved
    with torch.no_grad():
        spoil(net)
    path = save_checkpoint(tmp_path / "bad.pt", net=net, net_config=TINY, step=1)
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: the network's outputs are not finite on fixed positions (")
    assert "\n" not in message

"""The policy-value network: shapes, heads, presets, and the evaluator/raw-policy player built on it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zero.net.encoding import NUM_ACTIONS, NUM_PLANES, encode, legal_actions
from zero.net.inference import Evaluator, PolicyPlayer
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.rules.bitboard import square_rc
from zero.rules.game import Game, Position

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=4, value_channels=2, value_hidden=16)


def test_output_shapes():
    torch.manual_seed(0)
    net = PolicyValueNet(TINY).eval()
    out = net(torch.randn(5, NUM_PLANES, 8, 8))
    assert out.policy_logits.shape == (5, NUM_ACTIONS)
    assert out.wdl_logits.shape == (5, 3)
    assert out.moves_left.shape == (5,) and bool((out.moves_left >= 0).all())


def test_moves_left_head_is_optional():
    net = PolicyValueNet(NetworkConfig(**{**TINY.to_dict(), "moves_left_head": False})).eval()
    assert net(torch.zeros(2, NUM_PLANES, 8, 8)).moves_left is None


def test_the_evaluator_says_whether_it_answers_the_plies_left():
    # A search that weighs the plies left (SearchConfig.moves_left_weight) asks only an evaluator that says
    # it has the head (selfplay.tree_search.evaluators.gives_plies_left), through `predict`.
    from selfplay.tree_search.evaluators import CachedEvaluator, gives_plies_left

    planes = np.stack([encode(Position.initial())])
    for head in (True, False):
        net = PolicyValueNet(NetworkConfig(**{**TINY.to_dict(), "moves_left_head": head}))
        evaluator = Evaluator(net, device="cpu", precision="float32")
        assert gives_plies_left(evaluator) == head == gives_plies_left(CachedEvaluator(evaluator))
        plies = evaluator.predict(planes)[2]
        assert (plies is not None) == head
        cached = CachedEvaluator(evaluator).predict(planes)[2]
        assert cached is None if not head else np.array_equal(cached, plies)


def test_presets_differ_in_size():
    small, large = NetworkConfig.small(), NetworkConfig.large()
    assert large.blocks > small.blocks and large.channels > small.channels
    assert NetworkConfig.from_dict(small.to_dict()) == small
    with pytest.raises(ValueError, match="unknown network setting"):
        NetworkConfig.from_dict({**small.to_dict(), "heads": 3})


def test_heads_read_exactly_the_playable_squares_in_bit_order():
    net = PolicyValueNet(TINY)
    rows, cols = divmod(net.squares.numpy(), 8)
    assert [(int(r), int(c)) for r, c in zip(rows, cols)] == [square_rc(b + 1) for b in range(32)]


def test_evaluator_returns_probabilities():
    net = PolicyValueNet(TINY)
    ev = Evaluator(net, device="cpu")
    planes = np.stack([encode(Position.initial()), encode(Position.initial().mirrored())])
    policy, wdl = ev.evaluate(planes)
    assert policy.shape == (2, NUM_ACTIONS) and policy.dtype == np.float32
    assert wdl.shape == (2, 3) and np.allclose(wdl.sum(axis=1), 1.0, atol=1e-5)
    # The initial position and its mirror encode the same, so they evaluate the same.
    assert np.allclose(policy[0], policy[1]) and np.allclose(wdl[0], wdl[1])
    with pytest.raises(ValueError, match="shape"):
        ev.evaluate(np.zeros((1, 3, 8, 8), dtype=np.float32))


def test_policy_player_plays_the_argmax_legal_move():
    torch.manual_seed(1)
    net = PolicyValueNet(TINY)
    player = PolicyPlayer(Evaluator(net, device="cpu"))
    game = Game()
    for _ in range(12):
        move = player.choose(game)
        assert move in game.legal_moves()
        logits, _ = player.evaluator.evaluate(encode(game.position, game.no_progress[-1], game.repetitions())[None])
        actions = legal_actions(game.position)
        chosen = actions[game.legal_moves().index(move)]
        assert logits[0, chosen] == logits[0, actions].max()
        game.play(move)


def test_onnxruntime_answers_as_torch_does_on_the_shipped_network():
    # The CPU backend chosen by default must not change a single search: its outputs equal torch eager's.
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    from selfplay.replay.random_records import random_game_record
    from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
    from zero.net.encoding import encode_batch

    net = load_checkpoint(DEFAULT_CHECKPOINT).build_network()
    fast, eager = Evaluator(net, "cpu"), Evaluator(net, "cpu", backend="torch")
    assert (fast.backend, eager.backend) == ("onnxruntime", "torch")
    rows = random_game_record(3, max_plies=120).positions
    n = len(rows.ply)
    planes = np.empty((n, NUM_PLANES, 8, 8), dtype=np.float32)
    encode_batch(np.asarray(rows.black), np.asarray(rows.white), np.asarray(rows.kings),
                 np.asarray(rows.black_to_move), np.asarray(rows.no_progress), np.asarray(rows.repetitions), planes)
    for batch in (planes[:1], planes[:8], planes):
        for got, want in zip(fast.predict(batch), eager.predict(batch)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="backend"):
        Evaluator(net, "cpu", backend="tensorrt")


def test_bfloat16_runs_torch_under_autocast_on_the_cpu_close_to_float32():
    # The GPU's arithmetic, rehearsed on the CPU: torch under bf16 autocast, near float32's answers.
    from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
    from zero.rules.notation import fen_to_position

    net = load_checkpoint(DEFAULT_CHECKPOINT).build_network()
    bf16, f32 = Evaluator(net, "cpu", precision="bfloat16"), Evaluator(net, "cpu", backend="torch")
    assert (bf16.backend, bf16.precision, f32.precision) == ("torch", "bfloat16", "float32")
    planes = np.stack([encode(Position.initial()), encode(fen_to_position("W:WK10,K22:BK1,K3"))])
    (logits, wdl), (want_logits, want_wdl) = bf16.evaluate(planes), f32.evaluate(planes)
    assert not np.array_equal(logits, want_logits)  # rounded as bf16 rounds, so not float32 itself
    np.testing.assert_allclose(wdl, want_wdl, atol=0.05)
    assert (logits.argmax(axis=1) == want_logits.argmax(axis=1)).all()
    with pytest.raises(ValueError, match="onnxruntime"):
        Evaluator(net, "cpu", backend="onnxruntime", precision="bfloat16")

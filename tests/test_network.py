"""The policy-value network: shapes, heads, presets, and the evaluator/raw-policy player built on it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zero.net.encoding import NUM_ACTIONS, NUM_PLANES, encode, legal_actions
from zero.net.inference import Evaluator, PolicyPlayer
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.rules.bitboard import rc_square, square_rc
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
    rows, cols = divmod(net.playable[0].squares.numpy(), 8)
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


SQUARES = NetworkConfig(blocks=2, channels=8, policy_channels=4, value_channels=2, value_hidden=16, tower="squares",
                        squeeze_excitation=4)


def test_the_square_towers_gather_equals_its_plain_python_twin():
    from zero.net.diagonals import gather_reference
    from zero.net.network import SquareConv

    torch.manual_seed(3)
    features = torch.randn(32, 3)
    gathered = SquareConv(3, 1).gather(features[None])[0]
    assert gathered.tolist() == gather_reference(features.tolist())


def test_a_square_convolution_mixes_each_square_with_its_diagonal_neighbours_only():
    # A change on one square reaches, through one square convolution, that square and the squares one
    # diagonal step away, and no other: the 3x3 convolution's reach on the playable squares.
    from zero.net.network import SquareConv

    torch.manual_seed(4)
    conv = SquareConv(2, 3)
    x = torch.randn(1, 32, 2)
    for square in (1, 5, 14, 32):  # a corner, an edge, the middle, the last square
        changed = x.clone()
        changed[0, square - 1] += 1.0
        moved = (conv(changed) - conv(x)).abs().sum(dim=(0, 2)) > 1e-6
        r, c = square_rc(square)
        near = {square} | {rc_square(r + dr, c + dc) for dr in (-1, 1) for dc in (-1, 1)} - {0}
        assert {b + 1 for b in range(32) if moved[b]} == near


def test_the_square_tower_answers_in_the_board_towers_shapes_and_keeps_its_config():
    torch.manual_seed(5)
    net = PolicyValueNet(SQUARES).eval()
    out = net(torch.randn(4, NUM_PLANES, 8, 8))
    assert out.policy_logits.shape == (4, NUM_ACTIONS) and out.wdl_logits.shape == (4, 3)
    assert out.moves_left.shape == (4,)
    assert NetworkConfig.from_dict(SQUARES.to_dict()) == SQUARES
    board = PolicyValueNet(TINY)
    # A board checkpoint written before the square tower existed has no such keys: it loads as the board tower.
    old = {k: v for k, v in TINY.to_dict().items() if k not in ("tower", "squeeze_excitation")}
    assert NetworkConfig.from_dict(old) == TINY
    assert "stem.0.weight" in board.state_dict() and "tower.0.conv1.weight" in board.state_dict()
    with pytest.raises(Exception, match="tower"):
        from zero.run.config import check_settings
        check_settings(NetworkConfig(tower="hexes"))


def test_the_square_towers_onnx_and_int8_models_answer_as_its_torch_forward_pass(tmp_path):
    """On the fixed probe positions: the float32 ONNX graph as torch to rounding, the int8 model within the
    tolerance a cached int8 model is held to (zero.net.quantized.check_answers)."""
    pytest.importorskip("onnxruntime")
    from zero.net import quantized
    from zero.net.checkpoint import load_checkpoint, probe_answers, probe_planes, save_checkpoint
    from zero.net.onnx_model import export_onnx, onnx_session

    torch.manual_seed(6)
    net = PolicyValueNet(SQUARES)
    for module in net.modules():  # batch norms with statistics of their own, as a trained network has
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    net.eval()
    path = tmp_path / "squares.pt"
    save_checkpoint(path, net=net, net_config=SQUARES, step=1)
    checkpoint = load_checkpoint(path)
    answers = onnx_session(export_onnx(checkpoint.build_network()), threads=1).run(None, {"planes": probe_planes()})
    for got, want in zip(answers, probe_answers(checkpoint.build_network())):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    graph = quantized.quantize(checkpoint.build_network())
    assert graph.count(b"QuantizeLinear") > 3
    quantized.check_answers(graph, checkpoint)  # raises when the int8 answers lie beyond the tolerance

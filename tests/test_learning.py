"""The one training pipeline: samples from any source, one batch, one loss with a weight per head, one step."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from selfplay.replay.random_records import random_game_record
from selfplay.replay.replay_buffer import ReplayReader, ReplayWriter
from train.learner import learning
from train.learner.learning import (
    HeadWeights, Learner, OptimConfig, Samples, losses, make_optimizer, samples_from_replay, uses_bf16,
)
from train.learner.pretrain_dataset import build_dataset, open_dataset
from training_data import EXPERT_PDN, TINY
from zero.net.checkpoint import load_checkpoint, save_checkpoint, weights_sha256
from zero.net.network import PolicyValueNet


@pytest.fixture
def mixed(tmp_path) -> Samples:
    """One batch of expert positions (an OCA-style dataset) and self-play positions (a replay store)."""
    (tmp_path / "expert.pdn").write_text(EXPERT_PDN)
    build_dataset(tmp_path / "expert.pdn", tmp_path / "expert", progress=False)
    expert = open_dataset(tmp_path / "expert")
    with ReplayWriter(tmp_path / "run", 0) as writer:
        for seed in range(2):
            writer.append_game(random_game_record(seed, max_plies=30))
    rows = ReplayReader(tmp_path / "run").sample(48, 1000, np.random.default_rng(0))
    return Samples.concat([expert.samples(np.arange(len(expert))), samples_from_replay(rows)])


def test_one_step_trains_every_head_on_a_mixed_batch(mixed):
    torch.manual_seed(0)
    learner = Learner(PolicyValueNet(TINY), OptimConfig(lr=3e-3, schedule="constant"), HeadWeights(),
                      torch.device("cpu"))
    first = learner.step(mixed, 3e-3)
    assert {"expert/policy_loss", "selfplay/policy_loss", "expert/value_loss", "selfplay/moves_left_loss"} <= set(first)
    for _ in range(60):
        last = learner.step(mixed, 3e-3)
    for head in ("policy", "value", "moves_left"):
        assert last[head] < 0.7 * first[head], (head, first[head], last[head])
    assert last["loss"] < first["loss"]


def test_training_computes_in_bf16_by_default_on_a_gpu_and_on_a_cpu_that_multiplies_bf16(monkeypatch, mixed):
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(learning, "cpu_multiplies_bf16", lambda: False)
    assert not uses_bf16(cpu) and uses_bf16(gpu)
    assert uses_bf16(cpu, True) and not uses_bf16(gpu, False)
    monkeypatch.setattr(learning, "cpu_multiplies_bf16", lambda: True)
    assert uses_bf16(cpu) and not uses_bf16(cpu, False)
    learner = Learner(PolicyValueNet(TINY), OptimConfig(lr=3e-3, schedule="constant"), HeadWeights(), cpu)
    assert learner.bf16
    assert np.isfinite(learner.step(mixed, 3e-3)["loss"])  # the autocast step runs on any CPU when asked


def test_the_cpu_trainer_steps_channels_last_as_it_would_contiguous_and_its_checkpoint_reads_back(mixed, tmp_path):
    torch.manual_seed(0)
    net = PolicyValueNet(TINY)
    twin = copy.deepcopy(net)
    optim = OptimConfig(lr=3e-3, schedule="constant")
    # float32 on every CPU: on one with AMX the default is bf16 autocast, whose rounding depends on the layout's
    # kernels, and this test is of the layout, not of bf16 (test_training_computes_in_bf16_by_default_... runs that path).
    learner = Learner(net, optim, HeadWeights(), torch.device("cpu"), bf16=False)
    convolutions = [p for p in learner.net.parameters() if p.ndim == 4]
    assert all(p.is_contiguous(memory_format=torch.channels_last) for p in convolutions)
    assert not all(p.is_contiguous() for p in convolutions)  # a 1x1 kernel is both; the 3x3 ones are not
    reference = Learner(twin, optim, HeadWeights(), torch.device("cpu"), bf16=False)
    reference.net.to(memory_format=torch.contiguous_format)  # in place: the optimizer keeps its parameters
    assert all(p.is_contiguous() for p in reference.net.parameters())
    for _ in range(3):
        assert learner.step(mixed, 3e-3)["loss"] == pytest.approx(reference.step(mixed, 3e-3)["loss"], rel=1e-4)
    trained, expected = learner.net.state_dict(), reference.net.state_dict()
    for name in expected:
        torch.testing.assert_close(trained[name], expected[name], rtol=1e-4, atol=1e-5)
    path = save_checkpoint(tmp_path / "trained.pt", net=learner.net, net_config=TINY, step=3)
    written = load_checkpoint(path)
    assert written.state_dict.keys() == trained.keys()
    assert weights_sha256(written.build_network().state_dict()) == weights_sha256(trained)


def test_a_quantization_aware_step_learns_in_the_rounded_pass_too(mixed):
    torch.manual_seed(0)
    learner = Learner(PolicyValueNet(TINY), OptimConfig(lr=3e-3, schedule="constant"), HeadWeights(),
                      torch.device("cpu"), quantization_aware=True)
    first = learner.step(mixed, 3e-3)
    float_loss = sum(getattr(HeadWeights(), head) * first[head] for head in ("policy", "value", "moves_left"))
    assert first["rounded_loss"] != pytest.approx(float_loss, rel=1e-6)  # the rounding changes the outputs
    assert first["loss"] == pytest.approx((float_loss + first["rounded_loss"]) / 2, rel=1e-5)
    for _ in range(60):
        last = learner.step(mixed, 3e-3)
    assert last["rounded_loss"] < 0.7 * first["rounded_loss"] and last["policy"] < 0.7 * first["policy"]


def test_a_step_makes_one_forward_pass_over_the_whole_batch(mixed):
    net = PolicyValueNet(TINY)
    seen = []
    net.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape[0]))
    Learner(net, OptimConfig(), HeadWeights(), torch.device("cpu")).step(mixed, 1e-3)
    assert seen == [len(mixed)]


def test_the_batch_builder_puts_targets_on_legal_actions_only(mixed):
    batch = mixed.to_batch(torch.device("cpu"))
    policy, legal = batch.policy.numpy(), batch.legal.numpy()
    weighted = batch.policy_weight.numpy() > 0
    assert np.allclose(policy[weighted].sum(axis=1), 1.0, atol=1e-5)
    assert not (policy[~legal] > 0).any()
    assert set(np.unique(batch.wdl.numpy())) <= {0, 1, 2} and (batch.moves_left.numpy() >= 1).all()


def test_head_weights_and_label_smoothing():
    torch.manual_seed(1)
    net = PolicyValueNet(TINY)
    samples = Samples(
        black=np.array([0xFFF], np.uint32), white=np.array([0xFFF00000], np.uint32), kings=np.zeros(1, np.uint32),
        black_to_move=np.ones(1, bool), no_progress=np.zeros(1, np.int64), repetitions=np.ones(1, np.int64),
        policy_actions=np.array([[-1]], np.int16), policy_probs=np.zeros((1, 1), np.float32),
        wdl=np.array([1]), moves_left=np.array([40.0], np.float32), policy_weight=np.zeros(1, np.float32),
        value_weight=np.ones(1, np.float32), moves_left_weight=np.zeros(1, np.float32), source=np.zeros(1, np.int8))
    batch = samples.to_batch(torch.device("cpu"))
    parts = losses(net(batch.planes), batch)
    # A head without weight contributes nothing, whatever its error.
    assert parts["policy"].item() == 0 and parts["moves_left"].item() == 0 and parts["value"].item() > 0
    # Smoothing spreads the target over the legal actions only: with no target mass it is the mean
    # cross-entropy of the uniform distribution over the 7 legal moves, which stays finite.
    samples.policy_weight[:] = 1
    smoothed = losses(net(samples.to_batch(torch.device("cpu")).planes), samples.to_batch(torch.device("cpu")),
                      label_smoothing=1.0)["policy"].item()
    assert np.isfinite(smoothed) and smoothed > 0


def test_no_weight_decay_on_biases_and_batch_norm():
    net = PolicyValueNet(TINY)
    optimizer = make_optimizer(net, OptimConfig(weight_decay=0.1))
    for group in optimizer.param_groups:
        assert all(p.ndim > 1 for p in group["params"]) == (group["weight_decay"] == 0.1)
    with pytest.raises(ValueError, match="unknown optimizer"):
        make_optimizer(net, OptimConfig(name="bogus"))


def test_a_share_of_the_value_target_comes_from_the_search(tmp_path):
    with ReplayWriter(tmp_path / "run", 0) as writer:
        for seed in range(3):
            writer.append_game(random_game_record(seed, max_plies=30))
    rows = ReplayReader(tmp_path / "run").sample(40, 1000, np.random.default_rng(0))
    rows["root_value"] = np.linspace(-1, 1, len(rows["black"])).astype(np.float32)
    result = rows["result"].astype(np.float32)
    assert np.array_equal(samples_from_replay(rows).wdl, 1 - rows["result"])  # by default the result alone
    wdl = samples_from_replay(rows, search_value_share=0.25).wdl
    assert wdl.shape == (len(result), 3) and np.allclose(wdl.sum(axis=1), 1) and (wdl >= 0).all()
    # The target's expectation W - L is the mix of the two values.
    assert np.allclose(wdl[:, 0] - wdl[:, 2], 0.75 * result + 0.25 * rows["root_value"], atol=1e-6)
    only_search = samples_from_replay(rows, search_value_share=1.0).wdl
    assert np.allclose(only_search[:, 1], 1 - np.abs(rows["root_value"]))  # the rest of the mass a draw

"""What the training tests share: a tiny network shape, two short expert games as PDN, and scripted games."""

import numpy as np

from zero.net.encoding import move_action
from zero.net.network import NetworkConfig
from zero.rules.game import Game

TINY = NetworkConfig(blocks=1, channels=16, policy_channels=4, value_channels=2, value_hidden=16)

EXPERT_PDN = """[Event "a"]
[Result "1-0"]
1. 11-15 24-20 2. 8-11 28-24 3. 9-13 22-18 4. 15x22 25x18 5. 4-8 26-22 1-0

[Event "b"]
[Result "1/2-1/2"]
1. 11-15 23-19 2. 8-11 22-17 3. 9-13 17x10 4. 7x14 1/2-1/2
"""


def negative_variances(net) -> None:
    """Spoil a network the way an attacker would: every BatchNorm variance -1, so its weights stay finite and
    save with sound checksums while every answer is NaN."""
    for name, buffer in net.named_buffers():
        if name.endswith("running_var"):
            buffer.fill_(-1.0)


def scripted_game(seed: int, plies: int = 50) -> tuple[list, str]:
    """Four random opening plies, then always the legal move with the smallest action index: a policy a
    small network can learn. The result is decided by material when the moves stop."""
    rng = np.random.default_rng(seed)
    game = Game()
    while game.ply < plies and game.outcome is None:
        legal = game.legal_moves()
        if game.ply < 4:
            move = legal[int(rng.integers(len(legal)))]
        else:
            move = min(legal, key=lambda m: move_action(m, game.position.black_to_move))
        game.play(move)
    pos = game.position
    black, white = bin(pos.black).count("1"), bin(pos.white).count("1")
    result = "1-0" if black > white else "0-1" if white > black else "1/2-1/2"
    return list(game.moves), result


def save_tiny_network(path, seed: int):
    """A checkpoint of a TINY network with seeded random weights (a teacher for labelling tests)."""
    import torch

    from zero.net.checkpoint import save_checkpoint
    from zero.net.network import PolicyValueNet

    torch.manual_seed(seed)
    save_checkpoint(path, net=PolicyValueNet(TINY), net_config=TINY, step=0)
    return path


def scripted_dataset(directory, games: int, plies: int):
    """A pretraining dataset of `games` scripted games (20 % validation, 20 % test) in directory/data."""
    from train.learner.pretrain_dataset import DatasetConfig, PretrainDataset, build_dataset
    from zero.corpus.pdn import write_game

    pdn = directory / "games.pdn"
    pdn.write_text("".join(write_game(*scripted_game(seed, plies=plies), {"Event": f"g{seed}"})
                           for seed in range(games)))
    build_dataset(pdn, directory / "data", DatasetConfig(val_fraction=0.2, test_fraction=0.2), progress=False)
    return PretrainDataset.open(directory / "data")

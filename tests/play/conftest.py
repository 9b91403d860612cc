"""Fixtures for the play front ends: a tiny random-init checkpoint (fast to search, plays legal moves) and
the engine over it."""

from __future__ import annotations

import pytest
import torch

from play.engine import AlphaBetaEngine, Engine
from zero.net.checkpoint import save_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet

@pytest.fixture(scope="session")
def multi_jump_fen():
    """Black must capture and has two double jumps through square 18: 9x18x25 and 9x18x27."""
    return "B:W14,22,23:B1,2,3,9"


@pytest.fixture(scope="session")
def king_routes_fen():
    """Black's king on 3 has three captures: 3x10x17, 3x12x19x10x17 (the same ends: '3x17' is ambiguous)
    and 3x10x19x12x3 (a round trip back to its start)."""
    return "B:W7,8,14,15,16,30:BK3"


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    cfg = NetworkConfig(blocks=1, channels=8, policy_channels=4, value_channels=2, value_hidden=16)
    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    save_checkpoint(path, net=PolicyValueNet(cfg), net_config=cfg, step=0)
    return path


@pytest.fixture(scope="session")
def engine(tiny_checkpoint):
    return Engine.load(tiny_checkpoint, opening_book=False)


@pytest.fixture(scope="session")
def alphabeta_engine():
    """The default player's kind of engine over a random distilled evaluation (no file, no database, no book)."""
    from pathlib import Path

    from zero.distilled.model import random_eval

    return AlphaBetaEngine(random_eval(seed=1), Path("random.npz"))

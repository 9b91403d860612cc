"""The policy-value network: a residual tower over the 8x8 planes with policy, win/draw/loss and optional
moves-left heads. Its size is configuration (NetworkConfig), stored in every checkpoint.

The heads read only the 32 playable squares of the tower's output (the light squares carry nothing but
padding echoes), which keeps the fully connected layers small: policy 32 * policy_channels -> 1024.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from zero.net.encoding import ENCODING_VERSION, NUM_ACTIONS, NUM_PLANES, SQUARE_COL, SQUARE_ROW
from zero.run.config import setting


@dataclass(frozen=True)
class NetworkConfig:
    """Shape of a PolicyValueNet. Two presets: small() for CPU play, large() for GPU training."""

    # Sizes far above the large preset's: a tower of 128 blocks of 1,024 channels has some 2 billion weights.
    blocks: int = setting(4, low=1, high=128)  # residual blocks in the tower
    channels: int = setting(48, low=1, high=1024)  # width of the tower
    # 1x1 conv features per square feeding the policy layer.
    policy_channels: int = setting(16, low=1, high=1024)
    value_channels: int = setting(4, low=1, high=1024)  # 1x1 conv features per square feeding the value layers
    value_hidden: int = setting(128, low=1, high=8192)  # hidden units of the value (and moves-left) head
    moves_left_head: bool = True  # predict the plies left in the game (an auxiliary target)
    # What the encoding gives: a new network has the planes and actions of this version.
    input_planes: int = setting(NUM_PLANES, low=NUM_PLANES, high=NUM_PLANES)
    num_actions: int = setting(NUM_ACTIONS, low=NUM_ACTIONS, high=NUM_ACTIONS)
    # zero.net.encoding's version the network was trained with.
    encoding_version: int = setting(ENCODING_VERSION, low=1, high=ENCODING_VERSION)

    @classmethod
    def small(cls) -> "NetworkConfig":
        """CPU default: 4 blocks x 48 channels, about 0.7 M parameters (2.9 MB). Sized by measurement on a
        shared 2-core CPU: it trains at ~300 samples/s (6 x 64 managed ~90), so it sees the whole OCA
        train split more than once in an hour, and a raw-policy move costs a few milliseconds."""
        return cls()

    @classmethod
    def large(cls) -> "NetworkConfig":
        """GPU size: 12 blocks x 128 channels, about 4.7 M parameters."""
        return cls(blocks=12, channels=128, policy_channels=32, value_channels=8, value_hidden=256)

    @classmethod
    def from_dict(cls, data: dict) -> "NetworkConfig":
        """Build from a stored dict; unknown keys are an error (they mean a different network)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown network setting(s) {sorted(unknown)}; known: {sorted(known)}")
        # Checkpoints written before the version was recorded were all trained on version 1.
        return cls(**{"encoding_version": 1, **data})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class NetOutput(NamedTuple):
    policy_logits: torch.Tensor  # [N, NUM_ACTIONS], unmasked: mask to the legal actions before softmax
    wdl_logits: torch.Tensor  # [N, 3]: win, draw, loss for the side to move
    moves_left: torch.Tensor | None  # [N] plies left in the game (>= 0), or None without that head


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(x + y)


class PolicyValueNet(nn.Module):
    def __init__(self, cfg: NetworkConfig) -> None:
        super().__init__()
        self.config = cfg
        c = cfg.channels
        self.stem = nn.Sequential(
            nn.Conv2d(cfg.input_planes, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU()
        )
        self.tower = nn.Sequential(*[ResidualBlock(c) for _ in range(cfg.blocks)])
        self.policy_conv = nn.Sequential(nn.Conv2d(c, cfg.policy_channels, 1, bias=False),
                                         nn.BatchNorm2d(cfg.policy_channels), nn.ReLU())
        self.policy_fc = nn.Linear(32 * cfg.policy_channels, cfg.num_actions)
        self.value_conv = nn.Sequential(nn.Conv2d(c, cfg.value_channels, 1, bias=False),
                                        nn.BatchNorm2d(cfg.value_channels), nn.ReLU())
        self.value_fc = nn.Linear(32 * cfg.value_channels, cfg.value_hidden)
        self.wdl_fc = nn.Linear(cfg.value_hidden, 3)
        self.moves_left_fc = nn.Linear(cfg.value_hidden, 1) if cfg.moves_left_head else None
        # Flat index (row * 8 + col) of bit b's square, to gather the playable squares in bit order.
        self.register_buffer("squares", torch.as_tensor(SQUARE_ROW * 8 + SQUARE_COL), persistent=False)

    def _playable(self, x: torch.Tensor) -> torch.Tensor:
        """[N, C, 8, 8] -> [N, C * 32]: the features of the playable squares, in bit order."""
        return x.flatten(2).index_select(2, self.squares).flatten(1)

    def forward(self, planes: torch.Tensor) -> NetOutput:
        x = self.tower(self.stem(planes))
        policy = self.policy_fc(self._playable(self.policy_conv(x)))
        hidden = F.relu(self.value_fc(self._playable(self.value_conv(x))))
        wdl = self.wdl_fc(hidden)
        moves_left = None
        if self.moves_left_fc is not None:
            moves_left = F.softplus(self.moves_left_fc(hidden).squeeze(1))
        return NetOutput(policy, wdl, moves_left)


def parameter_count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())

"""The policy-value network: a residual tower with policy, win/draw/loss and optional moves-left heads. Its
shape is configuration (NetworkConfig), stored in every checkpoint.

Two towers read the same planes:
  * "board": 3x3 convolutions over the 8x8 board (every network up to link 12);
  * "squares": the 32 playable squares only, each mixing itself and its diagonal neighbours (SquareConv,
    zero.net.diagonals), 5/18 of the board tower's multiply-adds at the same width.
Either may give every block a view of the whole board (squeeze-excitation, as lc0's: the block's output
pooled over the squares sets a scale and a shift per channel), which a local convolution needs many blocks
to see: material, kings and tempo at once.

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

from zero.net.diagonals import DIRECTIONS, NEIGHBOURS
from zero.net.encoding import ENCODING_VERSION, NUM_ACTIONS, NUM_PLANES, SQUARE_COL, SQUARE_ROW
from zero.run.config import setting


TOWERS = ("board", "squares")


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
    tower: str = setting("board", choices=TOWERS)  # see the module doc
    # Hidden units of each block's squeeze-excitation (the whole board's view); 0: none.
    squeeze_excitation: int = setting(0, low=0, high=1024)
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


class SquareConv(nn.Module):
    """The square tower's counterpart of a 3x3 convolution: [N, 32, C] -> [N, 32, out], each square's output a
    linear map of its own features and its four diagonal neighbours' (zero off the board): a gather of whole
    rows and a matrix product, so that the ONNX graph and its int8 model are plain Pad, Gather and Gemm nodes."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.mix = nn.Linear(len(DIRECTIONS) * in_channels, out_channels, bias=False)
        self.register_buffer("neighbours", torch.as_tensor(NEIGHBOURS.reshape(-1)), persistent=False)

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """[N, 32, C] -> [N, 32, 5C]: value d * C + c of a square is channel c of its neighbour in direction d."""
        padded = F.pad(x, (0, 0, 0, 1))  # the zero square a missing neighbour reads (diagonals.MISSING)
        # A shape of constants: the graph then computes no shapes at run time.
        return padded.index_select(1, self.neighbours).reshape(-1, 32, self.mix.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # As rows of a matrix the product is a Gemm, whose bias (a batch norm folded in, at export) costs no
        # Add of its own.
        return self.mix(self.gather(x).reshape(-1, self.mix.in_features)).reshape(-1, 32, self.mix.out_features)


class SquareNorm(nn.BatchNorm1d):
    """Batch normalisation of [N, 32, C] activations, per channel."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class PlayableSquares(nn.Module):
    """[N, C, 8, 8] -> [N, C, 32]: the playable squares in bit order."""

    def __init__(self) -> None:
        super().__init__()
        # Flat index (row * 8 + col) of bit b's square.
        self.register_buffer("squares", torch.as_tensor(SQUARE_ROW * 8 + SQUARE_COL), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(2).index_select(2, self.squares)


class SquaresFirst(nn.Module):
    """[N, C, 32] -> [N, 32, C]: the square tower's layout."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2)


def board_conv(in_channels: int, out_channels: int) -> nn.Module:
    return nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)


def point_conv(in_channels: int, out_channels: int) -> nn.Module:
    """A 1x1 convolution of the board tower's layout [N, C, 8, 8]."""
    return nn.Conv2d(in_channels, out_channels, 1, bias=False)


def square_point_conv(in_channels: int, out_channels: int) -> nn.Module:
    """A 1x1 convolution of the square tower's layout [N, 32, C]."""
    return nn.Linear(in_channels, out_channels, bias=False)


class SqueezeExcitation(nn.Module):
    """A scale (through a sigmoid) and a shift per channel from the channels' means over the squares."""

    def __init__(self, channels: int, hidden: int, squares_first: bool) -> None:
        super().__init__()
        self.squeeze = nn.Linear(channels, hidden)
        self.excite = nn.Linear(hidden, 2 * channels)
        self.squares_first = squares_first

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        if self.squares_first:  # [N, 32, C]
            scale, shift = self.excite(F.relu(self.squeeze(y.mean(1)))).unsqueeze(1).chunk(2, 2)
        else:  # [N, C, 8, 8]
            scale, shift = self.excite(F.relu(self.squeeze(y.mean((2, 3))))).unsqueeze(2).unsqueeze(3).chunk(2, 1)
        return y * torch.sigmoid(scale) + shift


class ResidualBlock(nn.Module):
    def __init__(self, channels: int, on_squares: bool = False, squeeze_excitation: int = 0) -> None:
        super().__init__()
        conv, norm = (SquareConv, SquareNorm) if on_squares else (board_conv, nn.BatchNorm2d)
        self.conv1 = conv(channels, channels)
        self.bn1 = norm(channels)
        self.conv2 = conv(channels, channels)
        self.bn2 = norm(channels)
        self.excitation = (SqueezeExcitation(channels, squeeze_excitation, on_squares) if squeeze_excitation
                           else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        if self.excitation is not None:
            y = self.excitation(y)
        return F.relu(x + y)


class PolicyValueNet(nn.Module):
    def __init__(self, cfg: NetworkConfig) -> None:
        super().__init__()
        self.config = cfg
        c = cfg.channels
        on_squares = cfg.tower == "squares"
        conv, point, norm = ((SquareConv, square_point_conv, SquareNorm) if on_squares
                             else (board_conv, point_conv, nn.BatchNorm2d))
        # The square tower takes the playable squares first; the board tower's heads take them last.
        self.stem = nn.Sequential(*([PlayableSquares(), SquaresFirst()] if on_squares else []),
                                  conv(cfg.input_planes, c), norm(c), nn.ReLU())
        self.tower = nn.Sequential(*[ResidualBlock(c, on_squares, cfg.squeeze_excitation) for _ in range(cfg.blocks)])
        self.playable = nn.Flatten(1) if on_squares else nn.Sequential(PlayableSquares(), nn.Flatten(1))
        self.policy_conv = nn.Sequential(point(c, cfg.policy_channels), norm(cfg.policy_channels), nn.ReLU())
        self.policy_fc = nn.Linear(32 * cfg.policy_channels, cfg.num_actions)
        self.value_conv = nn.Sequential(point(c, cfg.value_channels), norm(cfg.value_channels), nn.ReLU())
        self.value_fc = nn.Linear(32 * cfg.value_channels, cfg.value_hidden)
        self.wdl_fc = nn.Linear(cfg.value_hidden, 3)
        self.moves_left_fc = nn.Linear(cfg.value_hidden, 1) if cfg.moves_left_head else None

    def forward(self, planes: torch.Tensor) -> NetOutput:
        x = self.tower(self.stem(planes))
        policy = self.policy_fc(self.playable(self.policy_conv(x)))
        hidden = F.relu(self.value_fc(self.playable(self.value_conv(x))))
        wdl = self.wdl_fc(hidden)
        moves_left = None
        if self.moves_left_fc is not None:
            moves_left = F.softplus(self.moves_left_fc(hidden).squeeze(1))
        return NetOutput(policy, wdl, moves_left)


def parameter_count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())

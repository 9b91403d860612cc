"""What the training tests share: a tiny network shape and two short expert games as PDN."""

from zero.net.network import NetworkConfig

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

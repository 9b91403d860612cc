"""wandb, an optional extra: logging goes to it only when it is installed and asked for (offline by default)."""

from __future__ import annotations

import os
from types import ModuleType

INSTALL_HINT = "wandb is an optional extra: pip install -e '.[wandb]'"


class WandbMissing(RuntimeError):
    """wandb was asked for but is not installed."""


def import_wandb() -> ModuleType:
    """The wandb module, quiet; WandbMissing with the install command when it is not installed."""
    os.environ.setdefault("WANDB_SILENT", "true")
    try:
        import wandb
    except ImportError:
        raise WandbMissing(f"wandb logging was asked for, but wandb is not installed ({INSTALL_HINT})") from None
    return wandb

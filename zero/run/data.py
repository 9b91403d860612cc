"""Where the reference data lives: $CHECKERS_ZERO_DATA, else ../shared/data beside the checkout or the
current directory. The data files are never copied into the repository."""

from __future__ import annotations

import os
from pathlib import Path

# The folder holding the packages (a checkout, or the installed tree): three levels above this file.
REPOSITORY = Path(__file__).resolve().parents[2]
ENV_VAR = "CHECKERS_ZERO_DATA"
OCA_FILE = "OCA_2.0.pdn"  # the Open Checkers Archive's games, in the data folder


def data_dir() -> Path | None:
    """The data folder, or None when none is found."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    for candidate in (REPOSITORY.parent / "shared" / "data", Path.cwd().parent / "shared" / "data", Path.cwd() / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    return None


def data_file(relative: str) -> Path | None:
    """Path of a file under the data folder, or None when it is absent."""
    base = data_dir()
    if base is None:
        return None
    path = base / relative
    return path if path.exists() else None


def require_data_file(relative: str) -> Path:
    """Path of a data file, or a clear error saying where it was looked for."""
    path = data_file(relative)
    if path is None:
        raise FileNotFoundError(
            f"data file {relative!r} not found: set {ENV_VAR} to the folder holding it "
            f"(looked in {data_dir() or '../shared/data'})"
        )
    return path

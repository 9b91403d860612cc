"""Where the reference data lives: $CHECKERS_ZERO_DATA, else ../shared/data beside the checkout or the
current directory. The data files are never copied into the repository."""

from __future__ import annotations

import os
from pathlib import Path

# The folder holding the packages (a checkout, or the installed tree): three levels above this file.
REPOSITORY = Path(__file__).resolve().parents[2]
ENV_VAR = "CHECKERS_ZERO_DATA"
OCA_FILE = "OCA_2.0.pdn"  # the Open Checkers Archive's games, in the data folder


def _candidates() -> list[Path]:
    """The folders taken for the data folder when $CHECKERS_ZERO_DATA is not set, in order, each once."""
    folders = (REPOSITORY.parent / "shared" / "data", Path.cwd().parent / "shared" / "data",
               Path.cwd() / "shared" / "data")
    return list(dict.fromkeys(folder.resolve() for folder in folders))


def data_dir() -> Path | None:
    """The data folder, or None when none is found."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return next((candidate for candidate in _candidates() if candidate.is_dir()), None)


def data_file(relative: str) -> Path | None:
    """Path of a file under the data folder, or None when it is absent."""
    base = data_dir()
    if base is None:
        return None
    path = base / relative
    return path if path.exists() else None


def require_data_file(relative: str) -> Path:
    """Path of a data file, or FileNotFoundError naming the path it was looked for at (or the folders, when
    there is no data folder)."""
    path = data_file(relative)
    if path is None:
        base = data_dir()
        if os.environ.get(ENV_VAR):
            where = f"{base / relative} is missing (the data folder is ${ENV_VAR})"
        elif base is not None:
            where = f"{base / relative} is missing (or set {ENV_VAR} to the folder holding it)"
        else:
            where = (f"there is no data folder (looked for {', '.join(map(str, _candidates()))}): set {ENV_VAR} to "
                     f"the folder holding it")
        raise FileNotFoundError(f"data file {relative!r} not found: {where}")
    return path

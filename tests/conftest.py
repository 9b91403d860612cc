"""Test-wide settings: the endgame databases and the opening book the tests build live in a folder of this
session's, so that what an engine finds there (the 4-piece database, built on first use) is the same on every
machine, and the user's own are never written."""

from __future__ import annotations

import os
import shutil
import tempfile

from zero.corpus import opening_book

from zero.endgames import egdb

# Where this machine keeps its databases (a 5-piece one, if built, serves test_egdb's key endings).
USER_EGDB_VARIABLE = "CHECKERS_ZERO_EGDB_USER"


def pytest_configure(config) -> None:
    os.environ.setdefault(USER_EGDB_VARIABLE, str(egdb.default_dir()))
    folder = tempfile.mkdtemp(prefix="checkers-zero-egdb-")
    config._test_egdb_folder = folder
    os.environ[egdb.ENV_VAR] = folder
    os.environ[opening_book.ENV_VAR] = os.path.join(folder, "book.npz")


def pytest_unconfigure(config) -> None:
    folder = getattr(config, "_test_egdb_folder", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)

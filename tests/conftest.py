"""Test-wide settings: the endgame databases the tests build live in a folder of this session's, so that
what an engine finds there (the 4-piece database, built on first use) is the same on every machine."""

from __future__ import annotations

import os
import shutil
import tempfile

from zero import egdb

# Where this machine keeps its databases (a 5-piece one, if built, serves test_egdb's key endings).
USER_EGDB_VARIABLE = "CHECKERS_ZERO_EGDB_USER"


def pytest_configure(config) -> None:
    os.environ.setdefault(USER_EGDB_VARIABLE, str(egdb.default_dir()))
    folder = tempfile.mkdtemp(prefix="checkers-zero-egdb-")
    config._test_egdb_folder = folder
    os.environ[egdb.ENV_VAR] = folder


def pytest_unconfigure(config) -> None:
    folder = getattr(config, "_test_egdb_folder", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)

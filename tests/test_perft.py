"""The numba move generator reproduces the perft series in ../shared/data/perft.txt (both counting rules)."""

from __future__ import annotations

import pytest

from play.cli.main import main
from zero.rules.game import Position
from zero.rules.notation import INITIAL_FEN, fen_to_position
from zero.rules.perft import perft, read_perft_table
from zero.rules.reference import reference_perft
from zero.run.data import data_file

# Deeper counts take seconds each on a shared 2-core box; benchmarks/perft_bench.py runs them.
MAX_TESTED_NODES = 20_000_000


def _table():
    path = data_file("perft.txt")
    if path is None:
        pytest.skip("perft.txt not found (set CHECKERS_ZERO_DATA)")
    return read_perft_table(path)


def test_table_parses_as_expected():
    start, extra = _table()
    assert set(range(1, 14)) <= set(start)
    assert start[12] == (388623673, 388617999)
    assert sorted(extra) == ["P1", "P2", "P3", "P4", "P5"]
    assert extra["P1"][1][1] == (2, 1)


@pytest.mark.parametrize("depth", range(1, 10))
@pytest.mark.parametrize("count_paths", [False, True], ids=["dedup", "paths"])
def test_start_position(depth, count_paths):
    start, _ = _table()
    expected = start[depth][0 if count_paths else 1]
    assert perft(Position.initial(), depth, count_paths) == expected


def test_start_position_without_bulk_counting():
    start, _ = _table()
    assert perft(Position.initial(), 7, bulk=False) == start[7][1]


@pytest.mark.parametrize("name", ["P1", "P2", "P3", "P4", "P5"])
@pytest.mark.parametrize("count_paths", [False, True], ids=["dedup", "paths"])
def test_extra_positions(name, count_paths):
    _, extra = _table()
    fen, counts = extra[name]
    pos = fen_to_position(fen)
    checked = 0
    for depth, pair in sorted(counts.items()):
        expected = pair[0 if count_paths else 1]
        if expected > MAX_TESTED_NODES:
            continue
        assert perft(pos, depth, count_paths) == expected, f"{name} depth {depth}"
        checked += 1
    assert checked >= 9


def test_extra_positions_without_bulk_counting():
    _, extra = _table()
    fen, counts = extra["P2"]
    assert perft(fen_to_position(fen), 8, count_paths=True, bulk=False) == counts[8][0]


@pytest.mark.parametrize(
    "fen, depth",
    [
        (INITIAL_FEN, 5),
        ("B:W6,7,14,15,24,28:BK2,4", 6),
        ("B:W6,7,14,15,20,27,28,32:BK2,4,K29", 5),
        ("W:WK19,K23:B12,K28", 6),
        ("W:WK3,18,19,21,22,23,24,27:B1,6,7,9,10,12,14,20,K31", 4),
    ],
)
@pytest.mark.parametrize("count_paths", [False, True], ids=["dedup", "paths"])
def test_reference_agrees_with_numba_perft(fen, depth, count_paths):
    pos = fen_to_position(fen)
    expected = reference_perft(pos.black, pos.white, pos.kings, pos.black_to_move, depth, count_paths)
    assert perft(pos, depth, count_paths) == expected


def test_cli_divide(capsys):
    assert main(["perft", "--depth", "4", "--divide"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    rows = dict(line.split() for line in lines[:-2])
    assert set(rows) == {"9-13", "9-14", "10-14", "10-15", "11-15", "11-16", "12-16"}
    start = Position.initial()
    for move in start.legal_moves():
        assert int(rows[str(move)]) == perft(start.play(move), 3)
    assert sum(int(n) for n in rows.values()) == 1469
    assert lines[-2].startswith("perft(4) = 1469 ") and lines[-1].startswith("matches the published count")


def test_cli_count_paths_on_a_king_loop(capsys):
    fen = "B:W6,7,14,15,24,28:BK2,4"
    assert main(["perft", "--depth", "3", "--fen", fen, "--count-paths"]) == 0
    assert capsys.readouterr().out.startswith("perft(3) = 12 ")
    assert main(["perft", "--depth", "3", "--fen", fen]) == 0
    assert capsys.readouterr().out.startswith("perft(3) = 6 ")


@pytest.mark.parametrize("argv, message", [
    (["--depth", "-1"], "--depth -1: must be 0 or more"),
    (["--depth", "2", "--fen", "bad fen"], "--fen 'bad fen' is not a position in FEN"),
])
def test_cli_refuses_bad_input_in_one_line(capsys, argv, message):
    # Before: a traceback for each.
    assert main(["perft", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_cli_says_whether_the_count_matches_the_published_table(capsys, monkeypatch):
    _table()  # skips without perft.txt
    assert main(["perft", "--depth", "6"]) == 0
    assert "matches the published count in perft.txt (duplicate king paths merged)" in capsys.readouterr().out
    assert main(["perft", "--depth", "2", "--fen", "B:W6,7,14:BK2"]) == 0
    assert "no published count" in capsys.readouterr().out
    # A generator that miscounts is told so, with a failing exit code.
    monkeypatch.setattr("zero.cli.perft.perft", lambda pos, depth, count_paths=False, bulk=True: 12345)
    assert main(["perft", "--depth", "6"]) == 1
    assert "MISMATCH: perft.txt gives 36768" in capsys.readouterr().out


def test_cli_names_a_missing_perft_txt_rather_than_a_missing_count(capsys, monkeypatch, tmp_path):
    # Before: without the file it said "no published count for this position and depth", as if the table
    # had been read.
    monkeypatch.setenv("CHECKERS_ZERO_DATA", str(tmp_path))
    assert main(["perft", "--depth", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("perft(3) = 302 ") and "no published count" not in out
    assert out.splitlines()[1] == (f"cannot compare with the published count: data file 'perft.txt' not found: "
                                   f"{tmp_path / 'perft.txt'} is missing (the data folder is $CHECKERS_ZERO_DATA)")

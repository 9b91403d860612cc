"""Endgame databases: every position of at most 3 pieces against a brute-force solve over the plain-Python
reference rules, the index against its definition, the files' checks, and the key endings (N = 5, when built)."""

from __future__ import annotations

import csv
import itertools
import math
import os
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from play.cli.main import main
from zero.endgames import egdb
from zero.endgames.egdb import DRAW, LOSS, WIN, EgdbFileError, Probe, layout, load, position_index, slice_path
from zero.endgames.egdb_build import build, count_disagreements, decode_position, ensure_built
from zero.rules.game import Game, Move, Position, RulesConfig, Termination
from zero.rules.notation import fen_to_position, resolve_move
from zero.rules.reference import reference_moves, reference_play
from zero.run.data import data_file

BRUTE_PIECES = 3


@pytest.fixture(scope="module")
def db3(tmp_path_factory):
    return build(BRUTE_PIECES, tmp_path_factory.mktemp("egdb"), progress=False)


# ---- the definition, written out ---------------------------------------------------------------------


def _positions(pieces: int):
    """Every position with 2..pieces pieces, at least one per side: (black, white, kings)."""
    kinds = ("b", "B", "w", "W")  # man or king of each colour
    for n in range(2, pieces + 1):
        for squares in itertools.combinations(range(32), n):
            for kind in itertools.product(kinds, repeat=n):
                if not ({"b", "B"} & set(kind) and {"w", "W"} & set(kind)):
                    continue
                if any(k == "b" and sq >= 28 or k == "w" and sq < 4 for sq, k in zip(squares, kind)):
                    continue  # a man on its crowning row
                black = sum(1 << sq for sq, k in zip(squares, kind) if k in "bB")
                white = sum(1 << sq for sq, k in zip(squares, kind) if k in "wW")
                kings = sum(1 << sq for sq, k in zip(squares, kind) if k in "BW")
                yield black, white, kings


def _brute_force(pieces: int) -> dict[tuple[int, int, int, bool], tuple[int, int]]:
    """(value, distance) of every position, both sides to move, by the rules of zero.rules.reference: a position
    with no move is lost in 0; settled one ply at a time, a position wins at d when a child is lost at d-1
    and loses at d when every child is won and the last was settled at d-1; never settled is a draw."""
    nodes = [(b, w, k, btm) for btm in (True, False) for b, w, k in _positions(pieces)]
    children = {}
    for node in nodes:
        b, w, k, btm = node
        children[node] = [reference_play(b, w, k, btm, path) + (not btm,)
                          for path, _ in reference_moves(b, w, k, btm)]
    parents: dict[tuple, list] = {}
    for node, kids in children.items():
        for kid in kids:
            parents.setdefault(kid, []).append(node)
    result = {node: (LOSS, 0) for node, kids in children.items() if not kids}
    # A child where the side to move has lost its last piece: no move, lost in 0.
    for kid in parents:
        if kid not in children:
            result[kid] = (LOSS, 0)
    frontier = list(result)
    d = 0
    while frontier:
        d += 1
        settled = []
        for node in {p for kid in frontier for p in parents.get(kid, ())}:
            if node in result:
                continue
            kid_results = [result.get(kid) for kid in children[node]]
            if (LOSS, d - 1) in kid_results:
                settled.append((node, (WIN, d)))
            elif all(r is not None and r[0] == WIN for r in kid_results):
                settled.append((node, (LOSS, d)))
        result.update(settled)
        frontier = [node for node, _ in settled]
    return {node: result.get(node, (DRAW, -1)) for node in nodes}


def test_every_position_matches_a_brute_force_solve(db3):
    expected = _brute_force(BRUTE_PIECES)
    assert len(expected) == 2 * layout(BRUTE_PIECES).total
    wrong = [(Position(b, w, k, btm).fen(), want, tuple(db3.probe(Position(b, w, k, btm))))
             for (b, w, k, btm), want in expected.items() if tuple(db3.probe(Position(b, w, k, btm))) != want]
    assert not wrong, f"{len(wrong)} positions differ, e.g. {wrong[:5]}"


def _rank(bits: list[int]) -> int:
    """Colex rank of a set of positions: its place among the sets of its size ordered by their largest
    element, then the next largest..."""
    return sum(math.comb(b, i + 1) for i, b in enumerate(sorted(bits)))


def _index_by_definition(black: int, white: int, kings: int) -> tuple[tuple[int, ...], int, int]:
    """The key the module doc orders a slice by: men configuration (most advanced first, then Black's men's
    rank, then White's), then the kings' ranks among the squares left free."""
    bmen = [b for b in range(32) if (black & ~kings) >> b & 1]
    wmen = [b for b in range(32) if (white & ~kings) >> b & 1]
    advance = sum(b // 4 for b in bmen) + sum(7 - b // 4 for b in wmen)
    free = [b for b in range(32) if b not in bmen and b not in wmen]
    bkings = [free.index(b) for b in range(32) if (black & kings) >> b & 1]
    free2 = [b for b in free if not (black & kings) >> b & 1]
    wkings = [free2.index(b) for b in range(32) if (white & kings) >> b & 1]
    return (-advance, _rank(bmen), _rank([b - 4 for b in wmen])), _rank(bkings), _rank(wkings)


def test_index_is_perfect_and_follows_its_definition(db3):
    lay = layout(BRUTE_PIECES)
    by_slice: dict[tuple, list] = {}
    for b, w, k in _positions(BRUTE_PIECES):
        s = ((b & ~k).bit_count(), (b & k).bit_count(), (w & ~k).bit_count(), (w & k).bit_count())
        by_slice.setdefault(s, []).append((b, w, k))
    assert set(by_slice) == set(lay.slices)
    for s, members in by_slice.items():
        assert len(members) == lay.sizes[s]
        members.sort(key=lambda p: _index_by_definition(*p))
        got = [position_index(db3.tables, b, w, k) - lay.offsets[s] for b, w, k in members]
        assert got == list(range(lay.sizes[s])), s
        k_count = egdb.kings_count(s)
        for j in range(0, len(members), max(1, len(members) // 50)):
            assert decode_position(db3.tables, s, j // k_count, j % k_count) == members[j]


def test_flip_matches_the_python_mirror():
    rng = np.random.default_rng(1)
    for x in rng.integers(0, 1 << 32, size=200):
        p = Position(int(x), 0, int(x) & 0xF0F0F0F0, True)
        assert egdb.flip(int(x)) == p.mirrored().white


# ---- probe and best move -----------------------------------------------------------------------------


@njit
def _probe_from_a_kernel(t, black, white, kings, black_to_move):
    value, distance = egdb.probe(t, black, white, kings, black_to_move)
    return value * 1000 + distance


def test_probe_works_inside_numba_kernels(db3):
    pos = fen_to_position("W:WK6,K9:BK15")  # 2 kings against 1: a win in 27 plies
    assert db3.probe(pos) == Probe(WIN, 27)
    assert _probe_from_a_kernel(db3.tables, pos.black, pos.white, pos.kings, pos.black_to_move) == 1027
    assert str(db3.probe(pos)) == "database win in 27"


def test_positions_outside_the_database_are_unknown(db3):
    assert db3.probe(Position.initial()) == Probe(egdb.UNKNOWN, -1)
    assert db3.probe(fen_to_position("B:W21:B")) == Probe(LOSS, 0)  # no piece left: lost


def _position_at(db, i: int) -> Position:
    """The Black-to-move position stored at index i of the codes."""
    rows, local = layout(db.max_pieces).locate(np.array([i]))
    s = tuple(int(x) for x in rows[0])
    k_count = egdb.kings_count(s)
    b, w, k = decode_position(db.tables, s, int(local[0]) // k_count, int(local[0]) % k_count)
    return Position(int(b), int(w), int(k), True)


def _answer_of(db, pos: Position, move: Move | None) -> Probe:
    return dict(db.move_values(pos))[move] if move is not None else Probe(LOSS, 0)


def test_best_move_keeps_the_value_and_hurries(db3):
    for i in np.random.default_rng(2).integers(0, layout(BRUTE_PIECES).total, size=300):
        pos = _position_at(db3, int(i))
        assert db3.probe(pos) == egdb.decode(int(db3.tables.codes[i]))
        # the best move's value is the position's, at the same distance: a win hurries, a loss delays; so
        # does the move played in a game that has just begun (no repetition or count to claim a draw by)
        assert _answer_of(db3, pos, db3.best_move(pos)) == db3.probe(pos)
        assert _answer_of(db3, pos, db3.move_in_game(Game(pos))) == db3.probe(pos)


def _losing_replies(db, pos: Position, move: Move) -> int:
    after = pos.play(move)
    return sum(db.probe(after.play(reply)).value == WIN for reply in after.legal_moves())


def test_a_drawn_game_goes_on_where_the_opponent_can_go_wrong(db3):
    # King against king: 1-6 leaves White two replies that walk into a capture; 1-5, the first drawing
    # move, none
    pos = fen_to_position("B:WK15:BK1")
    assert db3.probe(pos).value == DRAW and str(db3.best_move(pos)) == "1-5"
    move = db3.move_in_game(Game(pos))
    assert str(move) == "1-6" and _answer_of(db3, pos, move).value == DRAW
    assert _losing_replies(db3, pos, move) == 2 and _losing_replies(db3, pos, db3.best_move(pos)) == 0
    # Both sides playing the first drawing move, Black's 17-13 at ply 17 repeats a position a third time;
    # the move played in the game keeps it going, still drawn
    game = Game(fen_to_position("B:WK9:BK1"))
    for _ in range(16):
        game.play(db3.best_move(game.position))
    first = db3.best_move(game.position)
    game.play(first)
    assert game.outcome is not None and game.outcome.termination == Termination.REPETITION
    game.undo()
    move = db3.move_in_game(game)
    game.play(move)
    assert game.outcome is None and db3.probe(game.position).value == DRAW


def test_a_lost_game_is_drawn_by_repetition_where_a_move_can_claim_it(db3):
    # Black's king, lost to two, has shuffled 1-6 and back twice while White shuffled 9-13 and back
    lost = fen_to_position("B:WK2,K9:BK1")
    assert db3.probe(lost) == Probe(LOSS, 22)
    game = Game(lost.play(resolve_move("1-6", lost.legal_moves())))
    for text in ("9-13", "6-1", "13-9", "1-6", "9-13", "6-1", "13-9"):
        game.play(resolve_move(text, game.legal_moves()))
    assert game.position == lost and game.outcome is None
    assert str(db3.best_move(lost)) == "1-5"  # the slowest loss
    move = db3.move_in_game(game)
    assert str(move) == "1-6"
    game.play(move)
    assert game.outcome.winner == 0 and game.outcome.termination == Termination.REPETITION


def test_where_every_move_draws_by_the_count_the_one_played_keeps_the_databases_draw(db3):
    # A count of one ply: every king move ends the game drawn by the rules. 15-18, the first move, loses by
    # the database; played, it would be judged a mistake and the opponent's win let go.
    pos = fen_to_position("B:WK3,K4:BK15")
    values = dict((str(m), p.value) for m, p in db3.move_values(pos))
    assert db3.probe(pos).value == DRAW and values["15-18"] == LOSS and values["15-11"] == DRAW
    game = Game(pos, rules=RulesConfig(no_progress_plies=1))
    move = db3.move_in_game(game)
    assert str(move) == "15-11"
    game.play(move)
    assert game.outcome.termination == Termination.NO_PROGRESS


def test_every_stored_value_is_the_best_over_its_children(db3):
    lay = layout(BRUTE_PIECES)
    rows, local = lay.locate(np.arange(lay.total))
    assert count_disagreements(db3.tables, rows, local) == 0
    tampered = db3.tables._replace(codes=db3.tables.codes.copy())
    tampered.codes[[10, 5000, 100_000]] ^= 2
    assert count_disagreements(tampered, rows, local) >= 3


def test_four_pieces_are_consistent_with_their_children(tmp_path):
    db = build(4, tmp_path, progress=False)
    lay = layout(4)
    sample = np.random.default_rng(3).integers(0, lay.total, size=200_000)
    rows, local = lay.locate(sample)
    assert count_disagreements(db.tables, rows, local) == 0
    # The same judgement in Python (Egdb.move_values), on a few.
    for i in sample[:200]:
        pos = _position_at(db, int(i))
        assert _answer_of(db, pos, db.best_move(pos)) == db.probe(pos)


# ---- files ------------------------------------------------------------------------------------------


def test_corrupt_truncated_or_missing_files_give_a_clear_error(tmp_path):
    build(2, tmp_path, progress=False)
    target = slice_path(tmp_path, (1, 0, 1, 0))
    good = target.read_bytes()
    target.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(EgdbFileError, match=f"{target.name}.*checksum"):
        load(2, tmp_path)
    target.write_bytes(good[:100])
    with pytest.raises(EgdbFileError, match=target.name):
        load(2, tmp_path)
    target.write_bytes(good[:8] + b"\x09\x00" + good[10:])
    with pytest.raises(EgdbFileError, match=f"{target.name}.*version"):
        load(2, tmp_path)
    target.unlink()
    with pytest.raises(EgdbFileError, match=f"{target.name}.*missing"):
        load(2, tmp_path)
    assert main(["egdb", "probe", "W:W21:B1", "--dir", str(tmp_path)]) == 2


def _in_time(call, fifo: Path, seconds: float = 60.0):
    """call() in a thread, failing the test when it does not return in time (a FIFO's reader waits for a
    writer for ever: it is given one then, so that the thread ends)."""
    import threading

    outcome: dict = {}
    worker = threading.Thread(target=lambda: outcome.update(value=call()), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        if fifo.is_fifo():
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(seconds)
        pytest.fail(f"reading {fifo} did not return in {seconds:g} s")
    return outcome["value"]


@pytest.mark.parametrize("plant, reason", [
    (lambda path: path.symlink_to("/dev/zero"), "a symbolic link, not a file"),
    (lambda path: os.mkfifo(path), "not a regular file"),
], ids=["link-to-dev-zero", "fifo"])
def test_a_slice_that_is_no_file_is_named_never_read_and_solved_again(tmp_path, capsys, monkeypatch, plant, reason):
    # Before: `egdb probe` said the database "is not in DIR; build it", players fell back to a smaller database
    # without a word, and `egdb build` read a link to /dev/zero until the memory ran out (a FIFO: for ever).
    from zero.endgames import egdb_build

    build(3, tmp_path, progress=False)
    intact = load(3, tmp_path).tables.codes.copy()
    bad = slice_path(tmp_path, (1, 0, 1, 1))
    bad.unlink()
    plant(bad)
    assert _in_time(lambda: main(["egdb", "probe", "W:WK6,K9:BK15", "--dir", str(tmp_path)]), bad) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}: {reason}" in err
    assert "rebuild it: checkers-zero egdb build --pieces 3" in err
    # A player asking for the largest database says that it plays with a smaller one, and why.
    monkeypatch.setattr(egdb_build, "QUICK_PIECES", 2)
    db = _in_time(lambda: egdb_build.largest_available(tmp_path, most=3), bad)
    err = capsys.readouterr().err
    assert db.max_pieces == 2
    assert err.index(f"loading the 3-piece endgame database from {tmp_path} ...\n") < err.index("unusable"), err
    assert err.count("\n") == 2 and "the 3-piece endgame database is unusable" in err and reason in err, err
    monkeypatch.undo()
    assert _in_time(lambda: main(["egdb", "build", "--pieces", "3", "--out", str(tmp_path), "--no-progress"]),
                    bad) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(f"{bad}: {reason}: solving it again\n"), err
    assert bad.is_file() and not bad.is_symlink()
    assert np.array_equal(load(3, tmp_path).tables.codes, intact)


def test_a_database_there_in_part_is_not_dropped_without_a_word(tmp_path, capsys, monkeypatch):
    # Before: a larger database with a slice missing was passed over for a smaller one in silence.
    from zero.endgames import egdb_build

    build(3, tmp_path, progress=False)
    slice_path(tmp_path, (1, 0, 1, 1)).unlink()
    monkeypatch.setattr(egdb_build, "QUICK_PIECES", 2)
    assert egdb_build.largest_available(tmp_path, most=3).max_pieces == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the 3-piece endgame database" in err and "incomplete" in err, err


def test_the_largest_database_is_found_by_its_files_and_its_loading_said(tmp_path, capsys, monkeypatch):
    # Before (issue 85, item 10): every front end's start computed the 6- and 5-piece databases' index
    # tables (6.6 s on a busy machine) only to look for their files, and loaded the database it found in
    # silence (the 6-piece one: 17 s).
    from zero.endgames import egdb_build

    build(3, tmp_path, progress=False)
    computed = []
    monkeypatch.setattr(egdb_build, "layout", lambda pieces: computed.append(pieces) or layout(pieces))
    monkeypatch.setattr(egdb_build, "QUICK_PIECES", 2)
    assert egdb_build.largest_available(tmp_path, most=6).max_pieces == 3
    assert not computed, computed
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(f"loading the 3-piece endgame database from {tmp_path} ...\n"), err


def test_build_resumes_by_slice(tmp_path):
    first = build(3, tmp_path, progress=False)
    removed = slice_path(tmp_path, (1, 0, 1, 1))
    kept = slice_path(tmp_path, (0, 1, 2, 0))
    kept_mtime = kept.stat().st_mtime_ns
    removed.unlink()
    again = build(3, tmp_path, progress=False)
    assert removed.exists() and kept.stat().st_mtime_ns == kept_mtime
    assert np.array_equal(first.tables.codes, again.tables.codes)
    assert np.array_equal(load(3, tmp_path).tables.codes, first.tables.codes)


def test_default_dir_and_ensure_built(tmp_path, monkeypatch):
    monkeypatch.setenv(egdb.ENV_VAR, str(tmp_path))
    assert egdb.default_dir() == tmp_path
    db = ensure_built(3)
    assert db.max_pieces == 3 and slice_path(tmp_path, (0, 2, 0, 1)).exists()
    with pytest.raises(ValueError, match="egdb build"):
        ensure_built(5)


def test_a_built_database_loads_while_a_larger_build_holds_the_lock(tmp_path):
    # Before: ensure_built always took the directory's build lock, so while `egdb build --pieces 6` ran (half an
    # hour) every player and gatekeeper asking for the 4-piece database waited silently for it.
    import fcntl
    import threading

    build(3, tmp_path, progress=False)
    answer = {}
    with open(tmp_path / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a running build holds it
        loader = threading.Thread(target=lambda: answer.update(db=ensure_built(3, tmp_path)), daemon=True)
        loader.start()
        loader.join(120)
        assert not loader.is_alive(), "ensure_built waited for the build lock"
    assert answer["db"].max_pieces == 3
    # A damaged file is still rebuilt, under the lock (free again here).
    damaged = slice_path(tmp_path, (1, 0, 1, 0))
    damaged.write_bytes(damaged.read_bytes()[:100])
    assert ensure_built(3, tmp_path).max_pieces == 3 and load(3, tmp_path).max_pieces == 3


def test_cli_build_and_probe(tmp_path, capsys):
    assert main(["egdb", "build", "--pieces", "2", "--out", str(tmp_path), "--no-progress"]) == 0
    assert main(["egdb", "probe", "B:WK6:B1", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "positions with at most 2 pieces" in out and "database" in out and "best move" in out


# ---- key endings (N = 5) -----------------------------------------------------------------------------


def _key_endings() -> list[dict[str, str]]:
    path = data_file("endgames/key_endings_solved.tsv")
    if path is None:
        pytest.skip("endgames/key_endings_solved.tsv not found (set CHECKERS_ZERO_DATA)")
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_key_endings_agree_with_the_five_piece_database():
    rows = _key_endings()
    # The machine's own databases (tests/conftest.py points the default at a folder of the test session's)
    directory = Path(os.environ.get("CHECKERS_ZERO_EGDB_USER") or egdb.default_dir())
    try:
        db = load(5, directory)
    except EgdbFileError as exc:
        pytest.skip(f"no 5-piece database in {directory} (checkers-zero egdb build --pieces 5): {exc}")
    assert len(rows) == 17
    for row in rows:
        pos = fen_to_position(row["fen"])
        value = {"win": WIN, "draw": DRAW, "loss": LOSS}[row["value_for_side_to_move"]]
        plies = int(row["plies_to_win"]) if row["plies_to_win"] else -1
        assert db.probe(pos) == Probe(value, plies), row["name"]
        assert str(db.best_move(pos)) in row["fastest_moves"].split(), row["name"]
        moves = {str(m): p for m, p in db.move_values(pos)}
        for item in row["all_moves(move:value_for_mover:plies)"].split():
            move, mover_value, mover_plies = item.split(":")
            want = Probe({"win": WIN, "draw": DRAW, "loss": LOSS}[mover_value], int(mover_plies or -1))
            assert moves[move] == want, (row["name"], move)


def test_cli_errors_are_one_line_and_say_what_to_do(tmp_path, capsys):
    # Before: a traceback for a FEN that is no FEN and for a position with more pieces than the database
    # built, and "built in 0.0 s" for a database already there.
    assert main(["egdb", "build", "--pieces", "2", "--out", str(tmp_path), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["egdb", "build", "--pieces", "2", "--out", str(tmp_path), "--no-progress"]) == 0
    assert "already built" in capsys.readouterr().out
    for fen, message in [("nonsense", "'nonsense' is not a position in FEN"),
                         ("W:WK6,K9:BK15", "build it: checkers-zero egdb build --pieces 3"),
                         ("W:WK6,K9:BK15,K20", "build it: checkers-zero egdb build --pieces 4")]:
        assert main(["egdb", "probe", fen, "--dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert main(["egdb", "probe", "W:WK6,K9:BK15", "--pieces", "2", "--dir", str(tmp_path)]) == 2
    assert "has 3 pieces, more than the 2-piece database holds" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["build", "--pieces", "-1"], "--pieces -1: endgame databases hold 2 to 8 pieces"),
    (["build", "--pieces", "40"], "--pieces 40: endgame databases hold 2 to 8 pieces"),
    (["probe", "B:W21,22,23,24,25:B1,2,3,4,5"], "has 10 pieces; endgame databases hold at most 8"),
])
def test_cli_refuses_sizes_no_database_has_in_one_line(tmp_path, capsys, argv, message):
    # Before: tracebacks (a ValueError from the index's layout).
    assert main(["egdb", *argv, *(["--out"] if argv[0] == "build" else ["--dir"]), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err

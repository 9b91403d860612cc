"""The JSON-lines engine protocol's front end: queries on an input stream, answers on an output stream
(`play/ENGINE_PROTOCOL.md` is the reference).

A reader thread only reads lines and hands them over through a bounded queue (a client that writes faster
than the engine answers is held back by the pipe). The main thread turns each line into a query for the
API's engine (`play.api.Engine.submit`), steps the batched search over everything in flight and writes each
answer when it is ready. While positions are searched, new lines are taken only when a tree would
otherwise wait for work, so a flood of queries costs queue space, not memory per query.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import traceback
from typing import IO, Any

from play.api import Engine
from play.queries import error_answer

MAX_LINE_BYTES = 1 << 20  # a longer line is answered with an error and skipped without being held
LINES_QUEUED = 256  # lines read ahead of the engine


class _LineTooLong:
    """Stands in the queue for a line that was over MAX_LINE_BYTES."""


class _EndOfInput:
    """Stands in the queue for the end of the input."""


def serve(engine: Engine, source: IO[bytes], sink: IO[str]) -> None:
    """Answer every query read from `source` until a stop request or the end of the input, then answer
    everything already read (in flight and waiting) and return."""
    lines: queue.Queue[bytes | _LineTooLong | _EndOfInput] = queue.Queue(LINES_QUEUED)
    threading.Thread(target=_read_lines, args=(source, lines), name="engine-input", daemon=True).start()
    stopping = False
    while True:
        while not stopping and engine.wants_more:
            try:
                line = lines.get(block=engine.idle)  # wait for input only when there is nothing to search
            except queue.Empty:
                break
            if isinstance(line, _EndOfInput):
                stopping = True
            elif isinstance(line, _LineTooLong):
                _write(sink, error_answer(f"line longer than {MAX_LINE_BYTES} bytes"))
            else:
                answers, stopping = _handle(engine, line)
                for reply in answers:
                    _write(sink, reply)
        if stopping and engine.idle:
            return
        for reply in engine.step():
            _write(sink, reply)


def _handle(engine: Engine, line: bytes) -> tuple[list[dict[str, Any]], bool]:
    """The immediate answers to one line, and whether it asks the engine to stop."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [error_answer(f"not UTF-8 text ({exc.reason} at byte {exc.start})")], False
    if not text.strip():
        return [], False
    try:
        obj = json.loads(text)
    except RecursionError:
        return [error_answer("not a query: JSON nested too deeply")], False
    except ValueError as exc:  # JSONDecodeError, and integers too long to read
        return [error_answer(f"not JSON: {exc}")], False
    if isinstance(obj, dict) and "stop" in obj:
        return _stop_request(obj)
    try:
        return engine.submit(obj), False
    except Exception as exc:  # a bug must cost one query, not the session of every other query in flight
        traceback.print_exc(file=sys.stderr)
        query_id = obj.get("id") if isinstance(obj, dict) else None
        return [error_answer(f"internal error: {exc!r}", query_id if isinstance(query_id, (str, int)) else None)], False


def _stop_request(obj: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    extra = [name for name in obj if name not in ("stop", "id")]
    query_id = obj.get("id") if isinstance(obj.get("id"), (str, int)) else None
    if obj["stop"] is not True or extra:
        return [error_answer('a stop request is {"stop": true} (with an id at most)', query_id)], False
    return [], True


def _read_lines(source: IO[bytes], lines: queue.Queue) -> None:
    while True:
        line = source.readline(MAX_LINE_BYTES + 1)
        if not line:
            lines.put(_EndOfInput())
            return
        if len(line) > MAX_LINE_BYTES:
            while line and not line.endswith(b"\n"):  # skip the rest of the line
                line = source.readline(MAX_LINE_BYTES)
            lines.put(_LineTooLong())
        else:
            lines.put(line)


def _write(sink: IO[str], reply: dict[str, Any]) -> None:
    sink.write(json.dumps(reply) + "\n")
    sink.flush()

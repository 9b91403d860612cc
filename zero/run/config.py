"""Settings as dataclasses: documented defaults, loaded from TOML, overridden from the command line.

Every settings class in the project is a (possibly nested) dataclass of scalars, strings, lists and other
dataclasses. `load_config` builds one from its defaults, then a TOML file, then `section.key=value`
overrides, and checks it (`check_settings`): every float must be finite, and a field declared with
`setting(default, ...)` must lie in its range (declared once, beside the field); relations between fields
stay in the classes' own `validate()`. `write_run_record` stores the resolved config, the code version and
the seeds beside a run's outputs so the run can be reproduced and resumed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import hashlib
import io
import json
import logging
import math
import os
import platform
import stat
import subprocess
import sys
import time
import tomllib
import typing
import zipfile
import zlib
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import tomli_w

from zero.run.data import REPOSITORY

T = TypeVar("T")

# What a setting may ask the CPU's network evaluations to run in (zero.net.inference): "auto" is the
# checkpoint's int8 model where it runs (the CPU with onnxruntime), else float32 (bf16 autocast on a GPU);
# "int8" answers the positions it nearly ties in float32, "int8-raw" does not; "bfloat16" is torch under
# bf16 autocast on any device (a GPU's arithmetic, rehearsed on the CPU).
INFERENCE_PRECISIONS = ("auto", "float32", "bfloat16", "int8", "int8-raw")


# Upper bounds that settings of many kinds share. Every whole-number setting has one (`setting` refuses a field
# without), so that a count no machine can hold is refused in one line when it is read, not met by a process
# that tries to hold it (an actor count of 10^23 was saved in a run's config and hung every resume).
MOST_SEED = 2**63 - 1  # a seed is stored in a run's config, and TOML's integers are 64-bit
MOST_PROCESSES = 1024  # processes of a kind, one core each: far above any machine or cluster a run uses
MOST_THREADS = 1024  # threads of one process: likewise
MOST_STEPS = 10**9  # training steps: past any run's time on any machine
MOST_GAMES = 10**6  # games or pairs of one match or tuning run, whose schedule and results are held in memory
MOST_POSITIONS = 10**9  # positions a replay window holds or a run waits for: past any replay store
# Seconds a player may be given for a move, or a game clock at its start or as its increment: an hour, past
# any match a machine plays, and finite (a match of players on a clock of 1e308 s never ends).
MOST_MOVE_SECONDS = 3600.0


class ConfigError(ValueError):
    """A config file or override that does not fit the settings class (the message says where)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """The values a setting allows: a range (inclusive `low` / `high`, exclusive `above` / `below`) or, for a
    string, its `choices`."""

    low: float | None = None
    high: float | None = None
    above: float | None = None
    below: float | None = None
    choices: tuple[str, ...] = ()

    def allows(self, value: Any) -> bool:
        if self.choices:
            return value in self.choices
        return ((self.low is None or value >= self.low) and (self.high is None or value <= self.high)
                and (self.above is None or value > self.above) and (self.below is None or value < self.below))

    def describe(self) -> str:
        """What the setting must be, to follow "must be": "at least 1", "in [0, 1]", "one of 'a', 'b'"."""
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        lo = f"[{self.low:,}" if self.low is not None else f"({self.above:,}" if self.above is not None else None
        hi = f"{self.high:,}]" if self.high is not None else f"{self.below:,})" if self.below is not None else None
        if lo and hi:
            text = f"in {lo}, {hi}"
        elif lo:
            text = f"at least {self.low:,}" if self.low is not None else f"above {self.above:,}"
        else:
            text = f"at most {self.high:,}" if self.high is not None else f"below {self.below:,}"
        return text


def setting(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING, **limits) -> Any:
    """A settings field with the values it allows (the keyword arguments of Limits). A whole number must have
    an upper bound (`high` or `below`): a field declared without one fails where it is defined."""
    if isinstance(default, int) and not isinstance(default, bool) and "high" not in limits and "below" not in limits:
        raise TypeError(f"the whole-number setting of default {default} needs an upper bound (high=...): a count "
                        f"no machine can hold must be refused when it is read")
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"limits": Limits(**limits)})


def check_settings(cfg: Any, prefix: str = "") -> None:
    """Refuse, with a ConfigError naming the setting and what it allows, a float that is not finite (no
    setting means NaN or infinity, and either passes every comparison a range check makes, or none) and a
    value outside its field's Limits; nested settings are checked as `prefix.section.key`, and the tables of
    a list of settings as `prefix.key[i].field`."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        where = f"{prefix}.{f.name}" if prefix else f.name
        if dataclasses.is_dataclass(value):
            check_settings(value, where)
            continue
        if isinstance(value, list) and value and all(dataclasses.is_dataclass(item) for item in value):
            for i, item in enumerate(value):  # a TOML array of tables
                check_settings(item, f"{where}[{i}]")
            continue
        limits = f.metadata.get("limits")
        if isinstance(value, float) and not math.isfinite(value):
            range_ = f" {limits.describe()}" if limits else ""
            raise ConfigError(f"{where} = {value}: must be a finite number{range_}")
        if limits is not None and value is not None and not limits.allows(value):
            raise ConfigError(f"{where} = {value!r}: must be {limits.describe()}")


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(value: Any, typ: Any, where: str) -> Any:
    origin = typing.get_origin(typ)
    if dataclasses.is_dataclass(typ):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {value!r}")
        return _from_dict(typ, value, where)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if value is None or value == "none":
            return None
        return _coerce(value, args[0], where)
    if origin in (list, tuple):
        (item,) = typing.get_args(typ)[:1] or (Any,)
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        return [_coerce(v, item, where) for v in value]
    if typ is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{where}: expected true/false, got {value!r}")
    if typ is int and (isinstance(value, bool) or (isinstance(value, float) and not value.is_integer())):
        # int(2.7) would quietly run 2 of something
        raise ConfigError(f"{where}: expected a whole number, got {value!r}")
    if typ in (int, float, str):
        try:
            return typ(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected {typ.__name__}, got {value!r}") from None
    return value


def _from_dict(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    types_ = _field_types(cls)
    unknown = set(data) - set(types_)
    if unknown:
        raise ConfigError(f"unknown setting(s) {sorted(unknown)} in [{where or cls.__name__}]; known: {sorted(types_)}")
    base = cls()
    kwargs = {}
    for name, typ in types_.items():
        if name in data:
            kwargs[name] = _coerce(data[name], typ, f"{where}.{name}" if where else name)
        else:
            kwargs[name] = getattr(base, name)
    return cls(**kwargs)


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain dict of a settings dataclass (None values dropped, as TOML has no null)."""

    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if v is not None}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return clean(dataclasses.asdict(cfg))


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply 'a.b=value' strings onto a nested dict (values parsed as TOML when they can be)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form section.key=value")
        key, raw = item.split("=", 1)
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = data
        parts = key.strip().split(".")
        for depth, p in enumerate(parts[:-1]):
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {'.'.join(parts[:depth + 1])} is a setting, not a section "
                                  f"with keys below it")
        node[parts[-1]] = value
    return data


def with_overrides(cfg: T, overrides: list[str]) -> T:
    """A copy of the settings `cfg` with 'a.b=value' overrides applied, validated."""
    changed = _from_dict(type(cfg), apply_overrides(to_dict(cfg), overrides))
    check_settings(changed)
    return changed


def load_config(cls: type[T], path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> T:
    """Defaults, then the TOML file (if any), then the overrides."""
    data: dict[str, Any] = to_dict(cls())
    if path is not None:
        try:
            with open(path, "rb") as fh:
                file_data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"cannot read config {path}: not UTF-8 text, as TOML must be ({exc.reason} at "
                              f"byte {exc.start})") from None
        _merge(data, file_data)
    apply_overrides(data, overrides or [])
    cfg = _from_dict(cls, data)
    check_settings(cfg)
    return cfg


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v


def save_config(cfg: Any, path: str | os.PathLike) -> None:
    atomic_write_bytes(Path(path), tomli_w.dumps(to_dict(cfg)).encode())


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """--config FILE and repeatable --set section.key=value on a subcommand."""
    parser.add_argument("--config", metavar="FILE", help="TOML settings file (defaults are built in)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override one setting, SECTION.KEY=VALUE as in the config file (repeatable)",
    )


def code_version() -> str:
    """The git commit of the code (with '-dirty' for local changes), or the package version outside git."""
    root = REPOSITORY
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if rev.returncode == 0:
            dirty = subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True, text=True, timeout=5,
            ).stdout.strip()
            return rev.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return "checkers-zero " + version("checkers-zero")
    except PackageNotFoundError:
        return "unknown"


def write_run_record(out_dir: str | os.PathLike, cfg: Any, seeds: dict[str, int], name: str = "run") -> Path:
    """Store the resolved config, code version, seeds and machine beside a run's outputs."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out / f"{name}-config.toml")
    record = {
        "code_version": code_version(),
        "seeds": seeds,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "argv": sys.argv,
    }
    path = out / f"{name}-record.json"
    atomic_write_bytes(path, json.dumps(record, indent=2).encode())
    return path


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# What atomic_write_bytes adds to a temporary file's name (".NAME.tmp-PID").
TEMP_MARK = ".tmp-"


def remove_leftover_temp_files(root: Path) -> list[Path]:
    """Delete the temporary files of atomic writes below `root` that a killed process left (call it only
    while no process writes there); returns what was removed."""
    removed = []
    for path in Path(root).rglob(f".*{TEMP_MARK}*"):
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


@contextlib.contextmanager
def naming_write_errors(path: Path) -> typing.Iterator[None]:
    """An OSError inside names `path` when it names no file: a write() or close() that meets a full disk
    names none, and disk_problem's one line must say which file could not be written."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


def append_line_durably(path: Path, line: str) -> None:
    """Append one line to a text journal and fsync it, so that what was appended survives a kill; an error of the
    disk names the file (naming_write_errors)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming_write_errors(path), open(path, "a") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary name beside the target, fsync, then rename: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{TEMP_MARK}{os.getpid()}")
    try:
        with naming_write_errors(path):
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
    except BaseException:
        # Left behind, a partial file keeps its disk space (one more per restarted process, as the name
        # carries the pid) on the very disk that is full, and litters the run directory.
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def notify(message: str) -> None:
    """One line to the user on stderr (stdout may carry a protocol, as the engine's does); in a process that
    logs (the loop's roles, whose stderr reaches the loop's console) time-stamped like its log lines."""
    if logging.getLogger().handlers:
        message = f"{logging.Formatter().formatTime(logging.makeLogRecord({}))} {message}"
    print(message, file=sys.stderr, flush=True)


class UnusableFile(Exception):
    """A file that is there but must not be read (a link, a FIFO, a device, a directory, too large); the
    message says why."""


def open_regular(path: Path) -> typing.BinaryIO:
    """The regular file at path, opened for reading with no link followed: a derived or downloaded file is
    anyone's file, and so no FIFO blocks the read and no /dev/zero fills the memory. Raises FileNotFoundError
    when there is none, UnusableFile otherwise."""
    try:
        # O_NONBLOCK: opening a FIFO waits for a writer otherwise, before fstat could refuse it.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnusableFile("a symbolic link, not a file") from None
        raise
    # fstat before fdopen: fdopen refuses a directory itself, naming the descriptor's number as the file
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnusableFile("not a regular file")
    return os.fdopen(fd, "rb")


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of the regular file at path (open_regular), at most `limit` of them (the most that `what`, the
    file's kind, can hold). Raises FileNotFoundError when there is none, UnusableFile otherwise."""
    with open_regular(path) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise UnusableFile(f"larger than {what} can be ({limit} bytes)")
    return data


class BoundedArchive:
    """A numpy archive (.npz, as np.savez writes it) of anyone's, read an array at a time within a bound the
    reader gives: np.load decompresses a member whatever size it declares (8 GiB from an 8 MB zip bomb) and
    reads pickles' hints into its messages. Raises UnusableFile for what is no such archive."""

    def __init__(self, file: typing.BinaryIO) -> None:
        try:
            self._zip = zipfile.ZipFile(file)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            raise UnusableFile("not a numpy archive (no zip directory)") from None
        self.names = [n[:-4] for n in self._zip.namelist() if n.endswith(".npy")]

    def array(self, name: str, most_bytes: int) -> np.ndarray:
        """Member `name`, refused unless it is a plain array (no objects) of at most `most_bytes` of data; the
        bound is checked on the sizes the archive and the array's header declare, before any data is read."""
        try:
            info = self._zip.getinfo(f"{name}.npy")
        except KeyError:
            raise UnusableFile(f"no array {name!r} in it") from None
        # The header is a few hundred bytes; the zip stops decompressing a member at its declared size.
        if info.file_size > most_bytes + 4096:
            raise UnusableFile(f"its {name} declares {info.file_size:,} bytes, more than {most_bytes:,}")
        try:
            with self._zip.open(info) as member:
                version = np.lib.format.read_magic(member)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = read_header(member)
                if dtype.hasobject:
                    raise UnusableFile(f"its {name} holds objects, not numbers")
                size = math.prod(shape) * dtype.itemsize
                if size > most_bytes:
                    raise UnusableFile(f"its {name} declares {size:,} bytes, more than {most_bytes:,}")
                data = member.read(size)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as exc:
            raise UnusableFile(f"its {name} does not read ({type(exc).__name__})") from None
        if len(data) != size:
            raise UnusableFile(f"its {name} is cut short")
        return np.frombuffer(bytearray(data), dtype).reshape(shape, order="F" if fortran else "C")


def append_whole(out: io.RawIOBase, data: bytes) -> None:
    """Append all of `data` to an unbuffered file or, when the disk fills on the way, none of it: a record
    cut in half would read as a damaged one, and the records before it stay whole."""
    end = out.tell()
    rest = memoryview(data)
    try:
        while rest:
            rest = rest[out.write(rest):]
    except OSError:
        out.truncate(end)
        raise


# Errors of the disk, not of the program: they recur until someone frees space, picks a writable place or
# moves the directory that stands where a file is to be written.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
                         errno.EISDIR})


def disk_problem(exc: BaseException) -> str | None:
    """The one line a user needs about an error of the disk ("cannot write F: No space left on device"), or
    None when `exc` is not one."""
    if not isinstance(exc, OSError) or exc.errno not in DISK_ERRNOS:
        return None
    if exc.errno in (errno.EACCES, errno.EPERM) and not exc.filename:
        return None  # refused something other than a file (a signal, a socket): not the disk
    verb = "use" if exc.errno in (errno.EACCES, errno.EPERM) else "write"
    # A rename names its temporary source first; the file the user knows is its target.
    target = exc.filename2 or exc.filename
    where = f" {target}" if target else ""
    return f"cannot {verb}{where}: {exc.strerror}"

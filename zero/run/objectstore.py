"""A run's replay store on an object store (S3, GCS, Azure, or any S3-compatible server), through obstore.

Actors on several machines need storage every one of them sees. A shared filesystem needs nothing from
here; an object store needs two things a filesystem gives for free:

* `ObjectPath`: a key under an object-store URL with the handful of path operations the replay store
  uses (join, name, parents, exists, read, list), so that one piece of code reads, writes and
  names damaged objects on both storages, and `zarr_store()` to hand it to zarr (`zarr.storage.ObjectStore`).
* `Lease`: the writer lock where flock cannot work. It is an object created with a create-if-absent put;
  its holder renews it (a heartbeat, a put conditional on the version it last wrote) well before it
  expires. A writer that stops renewing (killed, stalled, cut off) loses it once it has expired: the next
  writer takes it over with a put conditional on the stale version and a generation one higher. The old
  holder learns it has lost the lease at its next renewal or check (its conditional put fails, or its
  last renewal is older than the lease's time to live) and must write nothing more: `check()` raises. The
  replay writer checks before every commit and records its generation in the commit record, so a writer
  of an older generation also finds itself fenced off by the record (see selfplay.replay.replay_buffer).

Credentials and endpoints come from the environment, as obstore reads them (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP for an S3-compatible server over
http; GOOGLE_*, AZURE_* likewise). obstore is the optional `cluster` extra.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import socket
import threading
import time
from dataclasses import dataclass

OBJECT_STORE_SCHEMES = ("s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "memory://")


class LeaseError(RuntimeError):
    """A lease another writer holds, or one this writer has lost."""


def is_object_store_url(text: str) -> bool:
    return text.startswith(OBJECT_STORE_SCHEMES)


def _obstore():
    try:
        import obstore
    except ImportError:
        raise LeaseError("an object-store URL needs obstore: pip install -e \".[cluster]\"") from None
    return obstore


@functools.lru_cache(maxsize=None)
def _store(url: str):
    """One obstore store per URL for the life of the process (a store holds a connection pool)."""
    _obstore()
    from obstore.store import from_url

    return from_url(url)


@functools.lru_cache(maxsize=None)
def _zarr_store(url: str):
    from zarr.storage import ObjectStore

    store = ObjectStore(_store(url))
    _URL_OF[id(store.store)] = url
    return store


_URL_OF: dict[int, str] = {}  # id of an obstore store made here -> its URL


@dataclass(frozen=True, order=True)
class ObjectPath:
    """The object (or prefix) `key` below the object-store URL `url`."""

    url: str
    key: str = ""

    @classmethod
    def of_zarr(cls, store, path: str) -> "ObjectPath":
        """Where a zarr node on a store opened here lives."""
        return cls(_URL_OF[id(store.store)], path)

    def __truediv__(self, part: str) -> "ObjectPath":
        return ObjectPath(self.url, f"{self.key}/{part}".strip("/"))

    def __str__(self) -> str:
        return f"{self.url.rstrip('/')}/{self.key}" if self.key else self.url

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.key.split("/")) if self.key else ()

    @property
    def name(self) -> str:
        return self.parts[-1] if self.key else ""

    @property
    def parent(self) -> "ObjectPath":
        return ObjectPath(self.url, self.key.rpartition("/")[0])

    @property
    def parents(self) -> list["ObjectPath"]:
        found, path = [], self
        while path.key:
            path = path.parent
            found.append(path)
        return found

    def zarr_store(self):
        """What zarr opens this node through (`zarr.open_group(path.zarr_store(), ...)`)."""
        from zarr.storage import StorePath

        return StorePath(_zarr_store(self.url), self.key)

    def read_bytes(self) -> bytes:
        return bytes(_obstore().get(_store(self.url), self.key).bytes())

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def is_file(self) -> bool:
        try:
            _obstore().head(_store(self.url), self.key)
        except FileNotFoundError:
            return False
        return True

    def is_dir(self) -> bool:
        listing = _obstore().list(_store(self.url), prefix=self.key + "/" if self.key else None, chunk_size=1)
        return any(len(batch) for batch in listing)

    def rglob(self, pattern: str) -> list["ObjectPath"]:
        found = []
        for batch in _obstore().list(_store(self.url), prefix=self.key + "/" if self.key else None):
            for meta in batch:
                if fnmatch.fnmatch(meta["path"].rpartition("/")[2], pattern):
                    found.append(ObjectPath(self.url, meta["path"]))
        return found


class Lease:
    """The lease object at `path` (see the module doc), taken by `acquire()`, renewed by a thread until
    `close()`. `generation` counts the holders the lease has had; `check()` raises LeaseError once this
    holder may have lost it."""

    def __init__(self, path: ObjectPath, ttl: float = 30.0, margin: float = 5.0):
        if not ttl > 2 * margin > 0:
            raise ValueError("a lease needs ttl > 2 x margin > 0")
        self.path = path
        self.ttl = ttl
        self.margin = margin  # stop writing this long before the lease could be taken over
        self.owner = f"process {os.getpid()} on host {socket.gethostname()}"
        self.generation = 0
        self._etag: str | None = None
        self._valid_until = 0.0  # time.monotonic() up to which no other writer can hold it
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self, expires: float) -> bytes:
        return json.dumps({"owner": self.owner, "generation": self.generation, "expires": expires}).encode()

    def _put(self, mode, expires: float) -> None:
        started = time.monotonic()
        result = _obstore().put(_store(self.path.url), self.path.key, self._record(expires), mode=mode)
        self._etag = result["e_tag"]
        # Counted from before the put: the store may have applied it at any moment after.
        self._valid_until = started + self.ttl

    def acquire(self) -> "Lease":
        """Take the lease, or raise LeaseError naming its live holder."""
        obstore = _obstore()
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            self.generation = 1
            self._put("create", time.time() + self.ttl)
        except AlreadyExistsError:
            found = obstore.get(_store(self.path.url), self.path.key)
            record = json.loads(bytes(found.bytes()))
            if record["expires"] > time.time():
                raise LeaseError(f"{self.path} is held by {record['owner']} (generation {record['generation']}, "
                                 f"expires in {record['expires'] - time.time():.0f} s)") from None
            self.generation = int(record["generation"]) + 1
            try:
                self._put({"e_tag": found.meta["e_tag"]}, time.time() + self.ttl)
            except PreconditionError:
                raise LeaseError(f"{self.path} was taken by another writer at the same moment") from None
        self._thread = threading.Thread(target=self._heartbeat, name=f"lease {self.path.key}", daemon=True)
        self._thread.start()
        return self

    def _heartbeat(self) -> None:
        from obstore.exceptions import PreconditionError

        while not self._stop.wait(self.ttl / 4):
            try:
                self._put({"e_tag": self._etag}, time.time() + self.ttl)
            except PreconditionError:
                self._lost = f"{self.path} was taken over by another writer after it expired"
                return
            except Exception:  # noqa: BLE001 -- a store that does not answer: try again; check() decides
                continue

    def check(self) -> None:
        """Raise LeaseError unless this holder still holds the lease for at least `margin` seconds more."""
        if self._lost:
            raise LeaseError(self._lost)
        if time.monotonic() > self._valid_until - self.margin:
            raise LeaseError(f"{self.path} was not renewed within {self.ttl - self.margin:g} s (generation "
                             f"{self.generation}); another writer may hold it now")

    def close(self) -> None:
        """Stop renewing and free the lease for the next writer (it keeps the generation count)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._lost is None and self._etag is not None:
            from obstore.exceptions import PreconditionError

            try:
                self._put({"e_tag": self._etag}, 0.0)
            except PreconditionError:
                pass
        self._etag = None

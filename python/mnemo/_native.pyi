"""Type stubs for the native module ``mnemo._native`` (re-exported by ``mnemo``)."""

from __future__ import annotations

import os
import pathlib
from types import TracebackType
from typing import Any, Dict, List, Literal, Optional, Tuple, Type, Union

__version__: str
DEFAULT_MAX_FILE_BYTES: int

Durability = Literal["fsync", "flush", "buffered"]
ProfileName = Literal["spec", "python-sdk", "typescript-sdk"]
AccessName = Literal["read", "read-write"]

class MnemoError(Exception):
    """Base class of every error Mnemo raises; the message says what to do."""

class StoreLockedError(MnemoError):
    """The store is open in another process."""

class StoreNotFoundError(MnemoError):
    """A store that must exist does not."""

class NewerFormatError(MnemoError):
    """The store was written by a newer Mnemo."""

class CorruptStoreError(MnemoError):
    """The store's bytes are damaged, the log was rolled back under the recorded head, or a store
    file is a link, pipe, device or socket instead of a regular file."""

class StorePoisonedError(MnemoError):
    """An earlier storage failure poisoned the store; reopen it to recover."""

class StorageError(MnemoError):
    """The disk or the store's writer failed."""

class InvalidArgumentError(MnemoError):
    """An argument given to the library (not by the model) was not valid."""

class ClosedError(MnemoError):
    """The store was closed."""

class ServerError(MnemoError):
    """The server a RemoteClient talks to could not be reached, refused the request, or answered in a way the client cannot read."""

class MemoryRecord:
    """A memory file: its canonical path, content, tags, and the seqs that created and last changed it."""

    @property
    def path(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def tags(self) -> List[str]:
        """``memorytool`` and ``path:{path}``."""
    @property
    def created(self) -> int: ...
    @property
    def updated(self) -> int: ...

class Event:
    """One logged event, as ``mnemo log --json`` shows it, plus its chain hashes."""

    @property
    def seq(self) -> int: ...
    @property
    def time(self) -> str:
        """``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC)."""
    @property
    def time_ms(self) -> int: ...
    @property
    def agent(self) -> str: ...
    @property
    def tool_use_id(self) -> Optional[str]: ...
    @property
    def command(self) -> str:
        """``view``, ``create``, ..., ``rejected``, ``acl-grant``, ``acl-revoke``."""
    @property
    def paths(self) -> List[str]: ...
    @property
    def is_error(self) -> bool: ...
    @property
    def result_hash(self) -> str:
        """The hash of the exact result text the model was given, hex: keyed by the event's salt
        (format 4, ``mnemo log --json`` shows it), plain blake3 for older events."""
    @property
    def hash(self) -> str: ...
    @property
    def prev_hash(self) -> str: ...
    @property
    def semantics(self) -> int:
        """The version of the semantics that answered the call (1 to 5)."""

class Grant:
    """One access grant: an agent (or ``*``), a path prefix, and ``read`` or ``read-write``."""

    @property
    def agent(self) -> str: ...
    @property
    def prefix(self) -> str: ...
    @property
    def access(self) -> AccessName: ...

class Receipt:
    """What the store answered to a recorded call."""

    @property
    def seq(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def is_error(self) -> bool: ...
    @property
    def retried(self) -> bool: ...

class Head:
    """The last event's seq and hash; ``str(head)`` is the checkpoint ``SEQ:HASH``."""

    @property
    def seq(self) -> int: ...
    @property
    def hash(self) -> str: ...

class Violation:
    """One broken invariant found by ``verify``."""

    @property
    def seq(self) -> int: ...
    @property
    def kind(self) -> str:
        """``missing``, ``hash``, ``broken-link``, ``outcome``, ``index``, ``head``, ..."""
    @property
    def detail(self) -> str: ...

class VerifyReport:
    """What ``verify()`` found: the whole log replayed from event 1."""

    @property
    def status(self) -> Literal["intact", "empty", "violation"]: ...
    @property
    def events(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def head(self) -> Head: ...
    @property
    def checkpoint(self) -> str | None:
        """``SEQ:HASH``, to keep outside the store (``mnemo verify --expect``); ``None`` unless intact."""
    @property
    def index_applied(self) -> int: ...
    @property
    def violations(self) -> List[Violation]: ...
    @property
    def redacted(self) -> List[Tuple[int, int]]:
        """The events a redaction erased, as ``(seq, redaction's seq)``: not violations."""
    @property
    def elapsed_ms(self) -> float: ...
    def is_intact(self) -> bool:
        """True when no invariant is broken."""

class RemoteClient:
    """A store that a ``mnemo serve`` holds, reached over HTTP (``MnemoClient.connect``)."""

    @property
    def url(self) -> str: ...
    @property
    def agent_id(self) -> Optional[str]: ...
    def with_agent(self, agent_id: str) -> RemoteClient: ...
    def handle(self, block: Any) -> Dict[str, Any]:
        """Answers a ``tool_use`` block or a bare input with a ``tool_result`` dict, recorded by the server."""
    def records_by_tag(self, tag: str) -> List[MemoryRecord]: ...
    def record(self, path: str) -> Optional[MemoryRecord]: ...
    def head(self) -> Head: ...
    def verify(self) -> Dict[str, Any]:
        """The server's verify of the store, as ``mnemo verify --json`` prints it."""

class MnemoClient:
    """An open Mnemo store acting as one agent.

    Opening creates the store if it does not exist. A store a live ``mnemo serve`` holds (one
    that ``mnemo mcp`` or ``mnemo tool`` started, too) is connected to instead, found through its
    server file: every call below works the same and is answered by the server (``server_url``
    names it; a server that goes away raises ``ServerError``). Any other process holding the
    store raises ``StoreLockedError``; opening it again in the same process shares the store
    already open. Every call releases the GIL; one client may be shared by
    Python threads. ``close()`` (or leaving a ``with`` block) closes the store for this client and
    every client and server opened with it.
    """

    @staticmethod
    def connect(
        url: str,
        token: str,
        agent_id: Optional[str] = None,
        store: Optional[str] = None,
    ) -> RemoteClient:
        """A client of the ``mnemo serve`` at ``url`` presenting the bearer ``token``; with
        ``store``, of that store of a ``mnemo serve --data`` server (``ValueError`` for a name
        that is not a store name)."""
    def __init__(
        self,
        db_path: Union[str, os.PathLike[str]],
        agent_id: str = "agent",
        durability: Durability = "fsync",
    ) -> None: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def db_path(self) -> pathlib.Path: ...
    @property
    def durability(self) -> Durability: ...
    @property
    def closed(self) -> bool: ...
    @property
    def server_url(self) -> Optional[str]:
        """The URL of the ``mnemo serve`` this client reaches its store through, or ``None``."""
    def with_agent(self, agent_id: str) -> MnemoClient:
        """A client for another agent over the same store and writer."""
    def verify(self) -> VerifyReport:
        """Replays the whole log and checks every invariant; writes pause while it runs."""
    def head(self) -> Head:
        """The last event's seq and hash."""
    def records_by_tag(self, tag: str) -> List[MemoryRecord]:
        """Memory files carrying ``tag`` that this agent may read (``memorytool``: all of them)."""
    def record(self, path: str) -> Optional[MemoryRecord]:
        """The file at canonical ``path``, if it exists and this agent may read it."""
    def records_at(self, seq: int) -> List[MemoryRecord]:
        """The files as they were right after event ``seq``, replayed from the log."""
    def log(
        self,
        agent: Optional[str] = None,
        path: Optional[str] = None,
        from_seq: int = 1,
        limit: Optional[int] = None,
    ) -> List[Event]:
        """Logged events in order, filtered like ``mnemo log``."""
    def history(self, path: str) -> List[Event]:
        """Every event of every file that lived at ``path``, file by file, followed through renames."""
    def trace(self, seq: int, path: Optional[str] = None) -> Dict[str, Any]:
        """Where the content event ``seq`` wrote went (or all ``path`` held right after it), as ``mnemo trace --json``."""
    def revert(
        self,
        *,
        to: Optional[int] = None,
        path: Optional[str] = None,
        agent: Optional[str] = None,
        since: Optional[int] = None,
        dry_run: bool = True,
        force: bool = False,
    ) -> Dict[str, Any]:
        """Put files back as after ``to`` (under ``path``), or undo ``agent``'s writes since ``since``, as ``mnemo revert``; a dry run by default."""
    def redact(
        self,
        reason: str,
        *,
        seqs: List[int] = [],
        paths: List[str] = [],
        texts: List[str] = [],
        dry_run: bool = False,
    ) -> Dict[str, Any]:
        """Erases the chosen events' content as ``mnemo.redact`` does, recorded as a redaction by
        this client's agent; the store stays open (its calls wait meanwhile). Returns
        ``{"seqs": [...], "kept": [...], "live": [...], "paths": [...], "unsearched": [...], "seq": N}``
        (``None`` with ``dry_run=True``); ``kept`` names the erased events that keep what they did
        (a redaction by seq alone), ``live`` the live files such a redaction would change."""
    def show(self, seq: int) -> Dict[str, Any]:
        """Event ``seq`` whole, as ``mnemo show --json``: ``input``, the re-derived ``answer``, ``verified``, ``change``."""
    def diff(self, start: int, end: int, path: str = "/memories") -> List[Dict[str, Any]]:
        """The files changed under ``path`` between two events, as ``mnemo diff --json``."""
    def configure(self, name: str, value: str) -> Receipt:
        """Sets a store setting: ``configure("delete", "erase")`` makes the memory tool's delete
        erase the files it deletes, with their whole history; ``"keep"`` (the default) keeps it.
        A setting or value that is not one raises ``InvalidArgumentError`` (and is logged)."""
    def settings(self) -> Dict[str, str]:
        """Every store setting with the value in force, such as ``{"delete": "keep"}``."""
    def grant(self, agent: str, prefix: str, access: AccessName = "read-write") -> Receipt:
        """Gives ``agent`` (or ``*``) access on ``prefix``; a refused change raises ``InvalidArgumentError``."""
    def revoke(self, agent: str, prefix: str) -> Receipt:
        """Removes ``agent``'s grant on exactly ``prefix``."""
    def policy(self) -> List[Grant]:
        """The grants in force."""
    def close(self) -> None: ...
    def __enter__(self) -> MnemoClient: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]] = None,
        exc: Optional[BaseException] = None,
        tb: Optional[TracebackType] = None,
    ) -> bool: ...

class MnemoMemoryToolServer:
    """Answers memory-tool calls from a Mnemo store; every call, valid or not, is one logged event."""

    def __init__(
        self,
        client: MnemoClient,
        root: str = "/memories",
        profile: ProfileName = "spec",
        managed_agents_beta: bool = False,
        max_file_bytes: Optional[int] = None,
        view_max_chars: Optional[int] = None,
        max_request_bytes: Optional[int] = None,
    ) -> None: ...
    @property
    def client(self) -> MnemoClient: ...
    @property
    def root(self) -> str: ...
    @property
    def profile(self) -> ProfileName: ...
    @property
    def managed_agents_beta(self) -> bool: ...
    @property
    def max_file_bytes(self) -> int: ...
    @property
    def view_max_chars(self) -> Optional[int]: ...
    @property
    def max_request_bytes(self) -> int:
        """The largest request, in bytes of the call's JSON text (default 64 MiB)."""
    @property
    def store_failures(self) -> int:
        """Calls that could not be recorded because the store failed (each got an error result)."""
    def tool_schema(self) -> dict[str, Any]:
        """The tool definition for the request's ``tools``: ``{"type": "memory_20250818", "name": "memory"}``."""
    def beta_header(self) -> Optional[str]:
        """The ``anthropic-beta`` header to send, or None."""
    def handle(self, block: Any) -> dict[str, Any]:
        """Answers a ``tool_use`` block (or a bare ``input``) with a ``tool_result`` dict.

        Never raises for anything the model sent: bad input gets an error result
        (``is_error: True``) and is logged. Raises ``ClosedError`` after ``close()``.
        """

def redact(
    db_path: Union[str, "os.PathLike[str]"],
    reason: str,
    *,
    seqs: List[int] = [],
    paths: List[str] = [],
    texts: List[str] = [],
    dry_run: bool = False,
    operator: str = "operator",
) -> dict[str, Any]:
    """Erases the content of the chosen events (by seq, by path: a file's history or a directory's
    subtree, by text: every event whose input or answer held it) and of every event whose answer
    depended on them, for real: no byte of it is left in the store's directory, and the rest of
    the history still verifies. Recorded as a redaction by ``operator`` for ``reason``.

    Returns ``{"seqs": [...], "kept": [...], "live": [...], "paths": [...], "unsearched": [...], "seq": N}``:
    what was erased (``kept``: the events whose records keep what they did, a redaction by seq
    alone; ``live``: the live files such a redaction would change, which refuse it) and the redaction's
    seq (``None`` with ``dry_run=True``, which changes nothing). A store a ``mnemo serve`` holds
    is redacted by that server, and one open in this process through its open handle (whose
    calls wait meanwhile); ``MnemoClient.redact`` does the same for a client already open.
    """

"""Mnemo: an audited memory store for Anthropic's memory tool (``memory_20250818``).

Every memory-tool call becomes an immutable, blake3-chained event in an embedded log; ``verify()``
replays the log and proves the chain, the index and every answer the model was given.

Quick start::

    from mnemo import MnemoClient, MnemoMemoryToolServer

    client = MnemoClient(db_path="memory.mnemo.db", agent_id="agent-1")
    server = MnemoMemoryToolServer(client=client)
    tools = [server.tool_schema()]; header = server.beta_header()
    result = server.handle({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})

The SDK tool-runner adapter, ``mnemo.anthropic.MnemoMemoryTool``, needs the extra:
``pip install './python[anthropic-memory-tool]'`` from a clone. This package itself never imports ``anthropic``.
"""

from __future__ import annotations

from typing import Any

from ._native import (
    DEFAULT_MAX_FILE_BYTES,
    ClosedError,
    CorruptStoreError,
    Event,
    Grant,
    Head,
    InvalidArgumentError,
    MemoryRecord,
    MnemoClient,
    MnemoError,
    MnemoMemoryToolServer,
    NewerFormatError,
    Receipt,
    RemoteClient,
    ServerError,
    StorageError,
    StoreLockedError,
    StoreNotFoundError,
    StorePoisonedError,
    VerifyReport,
    Violation,
    __version__,
    redact,
)

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "ClosedError",
    "CorruptStoreError",
    "Event",
    "Grant",
    "Head",
    "InvalidArgumentError",
    "MemoryRecord",
    "MnemoClient",
    "MnemoError",
    "MnemoMemoryToolServer",
    "NewerFormatError",
    "Receipt",
    "RemoteClient",
    "ServerError",
    "StorageError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StorePoisonedError",
    "VerifyReport",
    "Violation",
    "__version__",
    "redact",
]


def __getattr__(name: str) -> Any:
    # `from mnemo import MnemoMemoryTool` works when the extra is installed, and otherwise fails
    # with the ImportError that names the extra (raised by mnemo.anthropic).
    if name == "MnemoMemoryTool":
        from .anthropic import MnemoMemoryTool

        return MnemoMemoryTool
    raise AttributeError(f"module 'mnemo' has no attribute {name!r}")

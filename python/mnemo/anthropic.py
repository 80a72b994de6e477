"""Mnemo behind the Anthropic SDK's tool runner.

``MnemoMemoryTool`` is a ``BetaAbstractMemoryTool`` backed by a Mnemo store, so a program that runs
the SDK's tool runner with ``BetaLocalFilesystemMemoryTool`` can swap in Mnemo and change nothing
else::

    from anthropic import Anthropic
    from mnemo import MnemoClient
    from mnemo.anthropic import MnemoMemoryTool

    memory = MnemoMemoryTool(MnemoClient(db_path="memory.mnemo.db", agent_id="agent-1"))
    runner = Anthropic().beta.messages.tool_runner(
        model="claude-opus-4-8", max_tokens=1024, tools=[memory],
        messages=[{"role": "user", "content": "Remember that I like tea."}],
    )
    final = runner.until_done()

Its default profile is ``python-sdk``: the model sees the strings ``BetaLocalFilesystemMemoryTool``
gives, byte for byte (pass ``profile="spec"`` for the documented ones). A success is returned as
the result text; an error is raised as the SDK's ``ToolError`` carrying the exact text, which the
runner sends as ``content`` with ``is_error: true``.

This module needs the extra: ``pip install './python[anthropic-memory-tool]'`` from a clone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

try:
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
except ImportError as exc:  # the extra is not installed, or the SDK predates the memory helpers
    raise ImportError(
        "mnemo.anthropic needs the Anthropic SDK with its memory-tool helpers "
        "(anthropic.lib.tools.BetaAbstractMemoryTool). Install the extra: "
        "pip install './python[anthropic-memory-tool]' from a clone of the repository, "
        "or pip install 'anthropic>=0.84,<3'."
    ) from exc

from ._native import MnemoClient, MnemoMemoryToolServer

if TYPE_CHECKING:
    from ._native import ProfileName

__all__ = ["AsyncMnemoMemoryTool", "MnemoMemoryTool"]


def _server(
    client: Optional[MnemoClient],
    server: Optional[MnemoMemoryToolServer],
    root: str,
    profile: ProfileName,
    max_file_bytes: Optional[int],
    view_max_chars: Optional[int],
) -> MnemoMemoryToolServer:
    if server is not None:
        if client is not None:
            raise TypeError("pass either a MnemoClient or a MnemoMemoryToolServer, not both")
        return server
    if client is None:
        raise TypeError("MnemoMemoryTool needs a MnemoClient (or server=MnemoMemoryToolServer)")
    return MnemoMemoryToolServer(
        client,
        root=root,
        profile=profile,
        max_file_bytes=max_file_bytes,
        view_max_chars=view_max_chars,
    )


def _answer(server: MnemoMemoryToolServer, input: object) -> str:
    """One logged call: the result text, or ``ToolError`` with the text for an error result."""
    result = server.handle(input)
    content: str = result["content"]
    if result.get("is_error"):
        raise ToolError(content)
    return content


class _Setup:
    """The constructor both adapters share."""

    server: MnemoMemoryToolServer

    def __init__(
        self,
        client: Optional[MnemoClient] = None,
        *,
        server: Optional[MnemoMemoryToolServer] = None,
        root: str = "/memories",
        profile: ProfileName = "python-sdk",
        max_file_bytes: Optional[int] = None,
        view_max_chars: Optional[int] = None,
        cache_control: Any = None,
    ) -> None:
        super().__init__(cache_control=cache_control)  # type: ignore[call-arg]
        self.server = _server(client, server, root, profile, max_file_bytes, view_max_chars)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(server={self.server!r})"


class MnemoMemoryTool(_Setup, BetaAbstractMemoryTool):
    """The SDK's memory tool interface, answered and logged by Mnemo.

    Args:
        client: the store to use, acting as its agent.
        server: instead of ``client``, a configured ``MnemoMemoryToolServer``.
        root, profile, max_file_bytes, view_max_chars: as for ``MnemoMemoryToolServer`` (here the
            profile defaults to ``python-sdk``).
        cache_control: passed to the SDK's tool definition.
    """

    def call(self, input: object) -> str:
        """Answers one memory command: the runner's raw ``input`` dict, or an SDK command object.

        The runner hands over the model's input as sent; Mnemo parses it itself (and logs it as
        sent) instead of after the SDK's coercion into a command model.
        """
        return _answer(self.server, input)

    # The typed entry points (``execute`` dispatches to them) take the SDK's command objects.
    view = create = str_replace = insert = delete = rename = call  # type: ignore[assignment]


class AsyncMnemoMemoryTool(_Setup, BetaAsyncAbstractMemoryTool):
    """``MnemoMemoryTool`` for the async tool runner: each call runs in a worker thread (the store
    call releases the GIL), so the event loop never waits on a disk sync."""

    async def call(self, input: object) -> str:
        """Answers one memory command, as ``MnemoMemoryTool.call`` does, in a worker thread."""
        from anyio.to_thread import run_sync

        return await run_sync(_answer, self.server, input)

    view = create = str_replace = insert = delete = rename = call  # type: ignore[assignment]

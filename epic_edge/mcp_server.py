"""A memory as an MCP server (stdio): the tools an agent uses to remember and recall."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from epic_edge.errors import EpicEdgeError
from epic_edge.optional import optional_import
from epic_edge.types import BatchStats

if TYPE_CHECKING:
    from epic_edge.memory import Memory

SERVER_NAME = "epic-edge"
INSTRUCTIONS = (
    "The user's on-device preference memory. Store the user's stated preferences with "
    "add_preference, content worth remembering with remember (only what bears on a stated "
    "preference is kept), and call recall with the user's question before answering: put "
    "its `context` in your prompt when `used_memory` is true.")


def hit_record(hit: Any) -> dict[str, Any]:
    """A Hit as plain JSON: instruction, item, preference and score."""
    record = asdict(hit)
    record["score"] = round(float(hit.score), 6)
    return record


def recall_result(memory: Memory, question: str, k: int | None = None,
           regime: str | None = None) -> dict[str, Any]:
    """The hits of Memory.lookup (what Memory.retrieve returns), the reason memory is (not)
    used, and the context block Memory.context builds under `regime` (default conservative)."""
    found = memory.lookup(question, k)
    context = memory.context(question, k, regime=regime or "conservative")
    return {
        "hits": [hit_record(h) for h in found.hits],
        "used_memory": found.used_memory,
        "reason": found.reason,
        "closest_preference": asdict(found.preference) if found.preference else None,
        "similarity": round(float(found.similarity), 6),
        "context": context,
    }


def _tool_errors(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Bad input comes back to the client as a tool error with a one-line message."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except (EpicEdgeError, ValueError, TypeError) as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None

    return wrapper


def build_server(memory: Memory) -> Any:
    """An MCPServer exposing `memory` through seven tools."""
    MCPServer = optional_import("mcp.server.mcpserver", "mcp", "the MCP server").MCPServer
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    def tool(fn: Callable[..., dict[str, Any]]) -> None:
        server.tool()(_tool_errors(fn))

    @tool
    def add_preference(text: str) -> dict[str, Any]:
        """Store a preference the user stated (e.g. "I follow a vegan diet")."""
        return asdict(memory.add_preference(text))

    @tool
    def remove_preference(text_or_id: int | str) -> dict[str, Any]:
        """Remove a preference (its id, or its exact text) and every entry kept for it."""
        return {"removed_entries": memory.remove_preference(text_or_id)}

    @tool
    def list_preferences() -> dict[str, Any]:
        """The user's stated preferences with their ids."""
        return {"preferences": [asdict(p) for p in memory.preferences()]}

    @tool
    def remember(text: str, id: str | None = None, source: str | None = None) -> dict[str, Any]:
        """Offer content to the memory; it is kept only where it bears on a preference. An
        item that comes again under the same `id` with new text replaces the old one."""
        total = BatchStats()
        for batch in memory.ingest_batches([{"text": text, "id": id or "",
                                             "source": source or ""}]):
            total.merge(batch)
        return {k: v for k, v in asdict(total).items() if k != "seconds"}

    @tool
    def recall(question: str, k: int | None = None, regime: str | None = None) -> dict[str, Any]:
        """Memory for the user's question: hits (instruction, item, preference, score),
        whether memory should be used and why, and a `context` block for the prompt.
        regime: conservative (default), ordinary or aggressive."""
        return recall_result(memory, question, k, regime)

    @tool
    def forget(id: int | str) -> dict[str, Any]:
        """Delete one item: its number (`entry.item_id`) or the id it was remembered with."""
        return {"removed_entries": memory.forget(id)}

    @tool
    def stats() -> dict[str, Any]:
        """Counts, footprint on disk, budget and profile of the memory."""
        return memory.info()

    return server


"""A memory as an MCP server (stdio): the tools an agent uses to remember and recall."""

# no `from __future__ import annotations`: the tools' annotations (bounds, enums) are built
# in build_server, where pydantic is imported, and the SDK reads them as objects
import functools
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any, Literal

from epic_edge import __version__
from epic_edge.context import REGIMES
from epic_edge.errors import EpicEdgeError
from epic_edge.inspection import MAX_PAGE
from epic_edge.limits import MAX_K
from epic_edge.optional import optional_import

if TYPE_CHECKING:
    from epic_edge.memory import Memory

SERVER_NAME = "epic-edge"
INSTRUCTIONS = (
    "The user's on-device preference memory. Store the user's stated preferences with "
    "add_preference, content worth remembering with remember (only what bears on a stated "
    "preference is kept; the answer says where it was filed or why it was dropped), and call "
    "recall with the user's question before answering: put its `context` in your prompt when "
    "`used_memory` is true. Every hit and entry carries its `item_id`: pass it to forget. "
    "list_entries pages through what is stored; explain says why a text would (not) be kept.")
Regime = Literal[tuple(REGIMES)]  # type: ignore[valid-type]


def hit_record(hit: Any) -> dict[str, Any]:
    """A Hit as plain JSON: ids, instruction, item, preference, score (what it was ranked by)
    and similarity (its vector score)."""
    record = asdict(hit)
    record["score"] = round(float(hit.score), 6)
    record["similarity"] = round(float(hit.similarity), 6)
    return record


def recall_result(memory: "Memory", question: str, k: int | None = None,
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


def argument_problems(error: Any) -> str:
    """A pydantic ValidationError of a tool's arguments as one line: each argument once, with
    the first thing wrong with it (no input echoed, no documentation URL)."""
    problems: dict[str, str] = {}
    for detail in error.errors(include_url=False, include_input=False):
        name = str(detail["loc"][0]) if detail["loc"] else "arguments"
        problems.setdefault(name, str(detail["msg"]).split("\n")[0])
    return "; ".join(f"argument {name!r}: {msg}" for name, msg in problems.items())


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


def _server_class(base: type) -> type:
    """The SDK's MCPServer, with argument errors on one line."""
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from pydantic import ValidationError

    class Server(base):  # type: ignore[misc, valid-type]
        async def call_tool(self, name: str, arguments: dict[str, Any],
                            context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                cause = exc.__cause__
                if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                    raise
                raise ToolError(f"Error executing tool {name}: {argument_problems(cause)}"
                                ) from cause

    return Server


def build_server(memory: "Memory") -> Any:
    """An MCPServer exposing `memory` through nine tools."""
    MCPServer = optional_import("mcp.server.mcpserver", "mcp", "the MCP server").MCPServer
    from pydantic import Field  # the MCP SDK's own dependency

    server = _server_class(MCPServer)(SERVER_NAME, instructions=INSTRUCTIONS,
                                      version=__version__, log_level="WARNING")
    K = Annotated[int, Field(ge=1, le=MAX_K, description=f"hits wanted, 1 to {MAX_K}")]
    Offset = Annotated[int, Field(ge=0, description="entries to skip")]
    Limit = Annotated[int, Field(ge=1, le=MAX_PAGE, description=f"entries, 1 to {MAX_PAGE}")]

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
    def remember(text: str, id: str | None = None, source: str | None = None,
                 allow_forgotten: bool = False) -> dict[str, Any]:
        """Offer content to the memory; it is kept only where it bears on a preference. The
        answer says whether it was kept, as which item_id under which preference, or at which
        stage it was dropped and why. An item that comes again under the same `id` with new
        text replaces the old one; an item once forgotten is stored again only with
        allow_forgotten."""
        return memory.remember({"text": text, "id": id or "", "source": source or ""},
                               allow_forgotten=allow_forgotten).as_dict()

    @tool
    def recall(question: str, k: K | None = None, regime: Regime | None = None
               ) -> dict[str, Any]:
        """Memory for the user's question: hits (item_id, external_id, instruction, item,
        preference, score), whether memory should be used and why, and a `context` block for
        the prompt. regime: conservative (default), ordinary or aggressive."""
        return recall_result(memory, question, k, regime)

    @tool
    def forget(id: int | str) -> dict[str, Any]:
        """Delete one item: the `item_id` (a number) of a hit or entry, or the id it was
        remembered with. It is not stored again when the same text is offered later."""
        return {"removed_entries": memory.forget(id)}

    @tool
    def list_entries(offset: Offset = 0, limit: Limit = 50,
                     preference: int | str | None = None) -> dict[str, Any]:
        """A page of stored entries, oldest first (item_id, external_id, item, preference,
        instruction, confidence); only one preference's (its id or text) when given."""
        entries = memory.entries(offset, limit, preference)
        more = offset + len(entries) if len(entries) == limit else None
        return {"entries": [e.as_dict() for e in entries], "next_offset": more}

    @tool
    def explain(text: str) -> dict[str, Any]:
        """Why a text would (not) be kept now, stage by stage: similarity to each preference
        against tau, the verifier's P(Keep) and threshold, and why. Stores nothing."""
        return memory.explain(text).as_dict()

    @tool
    def stats() -> dict[str, Any]:
        """Counts, footprint on disk, budget and profile of the memory."""
        return memory.info()

    return server

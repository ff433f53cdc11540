"""The prompt block an app hands its LLM: each hit as reading guidance plus its content."""

from __future__ import annotations

from collections.abc import Sequence

from epic_edge.types import Hit

HEADER = (
    "Notes from the user's own memory. Each note says which of the user's preferences it "
    "concerns and how to read it. Use a note only where it bears on the question; "
    "ignore the rest."
)


def format_context(hits: Sequence[Hit], max_chars_per_item: int = 1200) -> str:
    """Render hits as numbered notes; an empty list renders as an empty string."""
    if not hits:
        return ""
    lines = [HEADER, ""]
    for n, hit in enumerate(hits, 1):
        content = hit.item_text
        if len(content) > max_chars_per_item:
            content = content[:max_chars_per_item].rsplit(" ", 1)[0] + " ..."
        lines.append(f"[{n}] Preference: {hit.preference.text}")
        lines.append(f"    How to use it: {hit.instruction}")
        lines.append(f"    Content: {content}")
        if hit.source:
            lines.append(f"    Source: {hit.source}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"

"""epic-edge: on-device preference-aligned memory (EPIC) for personal AI agents."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# privacy first: it switches telemetry off before any dependency is imported
from epic_edge import privacy  # noqa: F401
from epic_edge.errors import EpicEdgeError
from epic_edge.types import BatchStats, Hit, Item, Preference, Verdict

if TYPE_CHECKING:
    from epic_edge.memory import Memory
    from epic_edge.settings import MemorySettings

__version__ = "0.1.0"
__all__ = ["BatchStats", "EpicEdgeError", "Hit", "Item", "Memory", "MemorySettings",
           "Preference", "Verdict", "__version__"]


def __getattr__(name: str) -> Any:
    """`Memory` and `MemorySettings` are imported on first use, so `import epic_edge` stays
    light (PEP 562)."""
    if name == "Memory":
        from epic_edge.memory import Memory

        return Memory
    if name == "MemorySettings":
        from epic_edge.settings import MemorySettings

        return MemorySettings
    raise AttributeError(f"module 'epic_edge' has no attribute {name!r}")

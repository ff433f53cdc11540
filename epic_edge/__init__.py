"""epic-edge: on-device preference-aligned memory (EPIC) for personal AI agents."""

# privacy first: it switches telemetry off before any dependency is imported
from epic_edge import privacy  # noqa: F401
from epic_edge.errors import EpicEdgeError
from epic_edge.types import BatchStats, Hit, Item, Preference, Verdict

__version__ = "0.1.0"
__all__ = ["BatchStats", "EpicEdgeError", "Hit", "Item", "Preference", "Verdict", "__version__"]

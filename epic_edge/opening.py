"""Memory.open's assembly: the profile's backends (or the app's own) around one memory file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from epic_edge import registry
from epic_edge.maintenance import Budget
from epic_edge.models import model_dir as default_model_dir
from epic_edge.profiles import Profile, load_profile
from epic_edge.protocols import Embedder, VectorIndex, Verifier
from epic_edge.stages import PAPER_STEER_BY, PAPER_STEER_WEIGHT
from epic_edge.store import MemoryStore
from epic_edge.vectors import LEGACY_ENTRY_VECTOR

if TYPE_CHECKING:
    from epic_edge.memory import Memory


def retrieval_settings(retrieval: Mapping[str, Any]) -> dict[str, Any]:
    """Memory's keyword arguments from a profile's [retrieval]: the memory-use gate, the score
    floor and how hits are ranked (steering, lexical, confidence and brevity evidence); unset:
    off."""
    return {"gate": retrieval.get("gate"), "item_gate": retrieval.get("item_gate"),
            "item_gate_quantile": retrieval.get("item_gate_quantile"),
            "min_score": retrieval.get("min_score"), "hedge": retrieval.get("hedge"),
            "steer_weight": retrieval.get("steer_weight", PAPER_STEER_WEIGHT),
            "steer_by": retrieval.get("steer_by", PAPER_STEER_BY),
            "lexical": retrieval.get("lexical"), "confidence": retrieval.get("confidence"),
            "brevity": retrieval.get("brevity")}


def open_memory(cls: type[Memory], path: str | Path, profile: str | Path | Profile, *,
                embedder: Embedder | None, verifier: Verifier | None,
                index: VectorIndex | None, tau: float | None, k: int | None,
                model_dir: str | Path | None, key: bytes | None, vector_format: str | None,
                entry_vector: str | None, read_only: bool) -> Memory:
    """See Memory.open; an explicit instance (even an empty index) overrides the profile."""
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    models = Path(model_dir) if model_dir else default_model_dir()
    store = MemoryStore(path, key=key, read_only=read_only)
    try:
        created = store.get_meta("embedder") is None
        emb = embedder or registry.create("embedder", prof.embedder, models)
        stored_tau = store.get_meta("tau")
        if tau is None:
            tau = float(stored_tau) if stored_tau is not None else prof.tau
        idx = index if index is not None else registry.create(
            "index", prof.index or {"backend": "numpy"}, models, dim=emb.dim
        )
        verifier_config = prof.verifier or {"backend": "template"}
        factory = verifier or (lambda: registry.create("verifier", verifier_config, models))
        fmt = vector_format or str(prof.index.get("vectors", "float32"))
        kind = entry_vector or str(prof.index.get("entry_vector", LEGACY_ENTRY_VECTOR))
        # gate, floor and ranking are calibrated for the profile's embedder, like tau
        calibrated = retrieval_settings(prof.retrieval if embedder is None else {})
        memory = cls(store, emb, idx, tau=tau, k=k or int(prof.retrieval.get("k", 5)),
                     verifier=factory, profile=prof, vector_format=fmt, entry_vector=kind,
                     **calibrated)
        if created and prof.budget and not read_only:
            # a new memory starts with the profile's budget; an existing one keeps its own
            Budget(**prof.budget).save(store)
        return memory
    except BaseException:
        store.close()
        raise

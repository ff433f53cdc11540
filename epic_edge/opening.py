"""Memory.open's assembly: the profile's backends (or the app's own) around one memory file."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from epic_edge import registry
from epic_edge.maintenance import Budget
from epic_edge.models import model_dir as default_model_dir
from epic_edge.profiles import Profile, load_profile
from epic_edge.protocols import Embedder, VectorIndex, Verifier
from epic_edge.settings import MemorySettings
from epic_edge.store import MemoryStore
from epic_edge.vectors import LEGACY_ENTRY_VECTOR

Opened = TypeVar("Opened")  # the class Memory.open builds (epic_edge.memory.Memory)


def embedder_model(fingerprint: str) -> str:
    """The model a fingerprint names, without its precision: "all-MiniLM-L6-v2:mean:384" for
    "all-MiniLM-L6-v2:mean:384:int8" (int8, fp16 and fp32 copies share one calibration)."""
    parts = str(fingerprint).split(":")
    return ":".join(parts[:3]) if len(parts) == 4 else str(fingerprint)


def is_calibrated(retrieval: Mapping[str, Any], embedder: Embedder, explicit: bool) -> bool:
    """Whether a profile's gate, floor and ranking hold for `embedder`: they were calibrated
    for one model (`[retrieval] calibrated_for`), so any instance of it keeps them, the
    profile's own or the app's; without that key, only the profile's own embedder does."""
    model = retrieval.get("calibrated_for")
    if model is None:
        return not explicit
    return embedder_model(getattr(embedder, "fingerprint", "")) == model


def _warn_uncalibrated(prof: Profile, embedder: Embedder, tau: float | None) -> None:
    """Say that the profile's calibration does not hold for this embedder (and its tau, when
    a new memory takes it anyway)."""
    also = (f", and its tau {tau} may not suit this embedder (pass tau=; `epic-edge calibrate` "
            "picks one)" if tau is not None else "")
    warnings.warn(f"profile {prof.name!r} was calibrated for {prof.retrieval['calibrated_for']!r}"
                  f", not {embedder.fingerprint!r}: its gate and ranking evidence are off{also}",
                  RuntimeWarning, stacklevel=4)


def open_memory(cls: Callable[..., Opened], path: str | Path, profile: str | Path | Profile, *,
                embedder: Embedder | None, verifier: Verifier | None,
                index: VectorIndex | None, tau: float | None, k: int | None,
                model_dir: str | Path | None, key: bytes | None, vector_format: str | None,
                entry_vector: str | None, read_only: bool) -> Opened:
    """See Memory.open; an explicit instance (even an empty index) overrides the profile."""
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    models = Path(model_dir) if model_dir else default_model_dir()
    store = MemoryStore(path, key=key, read_only=read_only)
    try:
        created = store.get_meta("embedder") is None
        emb = embedder or registry.create("embedder", prof.embedder, models)
        # tau, the gate and the ranking are calibrated for one embedder model
        calibrated = is_calibrated(prof.retrieval, emb, embedder is not None)
        stored_tau = store.get_meta("tau")
        profile_tau = tau is None and stored_tau is None  # a new memory takes the profile's
        if tau is None:
            tau = float(stored_tau) if stored_tau is not None else prof.tau
        if not calibrated and "calibrated_for" in prof.retrieval and (
                embedder is None or profile_tau):
            _warn_uncalibrated(prof, emb, tau if profile_tau else None)
        idx = index if index is not None else registry.create(
            "index", prof.index or {"backend": "numpy"}, models, dim=emb.dim
        )
        verifier_config = prof.verifier or {"backend": "template"}
        if not calibrated:  # the keep score was trained on this embedder model's vectors
            verifier_config = {**verifier_config, "keep_score": None}
        factory = verifier or (lambda: registry.create("verifier", verifier_config, models))
        fmt = vector_format or str(prof.index.get("vectors", "float32"))
        kind = entry_vector or str(prof.index.get("entry_vector", LEGACY_ENTRY_VECTOR))
        settings = MemorySettings.from_profile(prof, calibrated, k)
        memory = cls(store, emb, idx, tau=tau, settings=settings, verifier=factory,
                     profile=prof, vector_format=fmt, entry_vector=kind, model_dir=models)
        if created and prof.budget and not read_only:
            # a new memory starts with the profile's budget; an existing one keeps its own
            Budget(**prof.budget).save(store)
        return memory
    except BaseException:
        store.close()
        raise

"""What a bench on this machine shares: backends from a profile, the machine it ran on, peak
memory, timing summaries, tables and JSON (the latency bench here, the lab's benches too)."""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge import registry
from epic_edge.profiles import Profile, load_profile


def profile_and_models(profile: str | Profile,
                       models: Path | None) -> tuple[Profile, Path]:
    from epic_edge.models import model_dir

    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    return prof, Path(models) if models else model_dir()


def make_embedder(prof: Profile, models: Path) -> Any:
    return registry.create("embedder", prof.embedder, models)


def make_verifier(prof: Profile, models: Path, name: str | None,
                  instructions: str | None = None) -> Any:
    """The verifier `name` (default: the profile's) with the profile's verifier settings;
    `instructions` ("template" or "llm") overrides who writes a learned verifier's instructions."""
    config = dict(prof.verifier or {"backend": "template"})
    if name:
        config["backend"] = name
    if instructions:
        config["instructions"] = instructions
    return registry.create("verifier", config, models)


def verifier_name(prof: Profile, name: str | None) -> str:
    """The backend a bench will use: `name`, else the profile's, else the template verifier."""
    return name or str((prof.verifier or {}).get("backend", "template"))


def machine() -> dict[str, Any]:
    """The machine the figures come from (CPU model, cores, load, versions)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    return {"cpu": cpu, "cores": os.cpu_count(), "load_avg": load,
            "system": f"{platform.system()} {platform.release()}",
            "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d %H:%M")}


def machine_line(m: dict[str, Any]) -> str:
    """`machine()` in words, as BENCHMARKS.md prints it."""
    load = ", ".join(f"{x:.1f}" for x in m.get("load_avg", []))
    return (f"{m['cpu']}, {m['cores']} cores, {m['system']}, Python {m['python']}, "
            f"load average {load} at {m['date']}")


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def write_json(result: dict[str, Any], path: Path | None) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1, default=float) + "\n", encoding="utf-8")


def table(rows: list[list[str]], header: list[str]) -> str:
    """A GitHub-markdown table (also readable in a terminal)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *map(line, rows)])


def summarize(seconds: Sequence[float]) -> dict[str, float]:
    """Median, p95, mean (milliseconds) and count of a list of durations in seconds."""
    if not seconds:
        return {"median_ms": float("nan"), "p95_ms": float("nan"), "mean_ms": float("nan"),
                "n": 0}
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {"median_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95)),
            "mean_ms": float(ms.mean()), "n": int(ms.size)}

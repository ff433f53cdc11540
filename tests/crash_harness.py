"""SIGKILL an ingest at random moments and check what survives (used by tests and reports)."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PREFERENCES = ["I follow a vegan diet and cook plant foods",
               "I only drive electric vehicles with a battery"]
WORDS = ("vegan tofu lentils plant cooking electric battery charging motor range "
         "history treaty river mountain tax law opera").split()
BATCHES, BATCH_SIZE = 30, 16

# The writer: ingests BATCHES batches and prints "committed N" after each commit.
WRITER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from crash_harness import batch_items, open_fake_memory, PREFERENCES, BATCHES
memory = open_fake_memory(sys.argv[1])
memory.add_preferences(PREFERENCES)  # one transaction; a no-op when they are there
for n in range(BATCHES):
    memory.ingest(batch_items(n))
    print("committed", n, flush=True)
memory.close()
"""


def batch_items(n: int) -> list[str]:
    rng = random.Random(n)
    return [f"batch {n} item {j}: " + " ".join(rng.choices(WORDS, k=12))
            for j in range(BATCH_SIZE)]


def open_fake_memory(path: str, **options):  # type: ignore[no-untyped-def]
    """A memory over the fake embedder and verifier; `options` go to Memory.open (key...)."""
    from epic_edge.backends.numpy_index import NumpyIndex
    from epic_edge.memory import Memory
    from fakes import BagOfWordsEmbedder, KeywordVerifier

    embedder = BagOfWordsEmbedder()
    return Memory.open(path, embedder=embedder, verifier=KeywordVerifier(),
                       index=NumpyIndex(embedder.dim), tau=0.1, **options)


def run_writer(path: Path, kill_after: float | None = None) -> list[int]:
    """Run the writer; SIGKILL it after `kill_after` seconds. Returns batches it reported."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.communicate(timeout=kill_after if kill_after is not None else 300)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
    if kill_after is None and proc.returncode != 0:
        raise RuntimeError(f"writer failed: {err[-2000:]}")
    # a kill can cut the last line short: count only complete reports
    return [int(m[1]) for m in re.finditer(r"^committed (\d+)$", out, re.MULTILINE)]


def kept_texts(path: Path) -> list[str]:
    memory = open_fake_memory(str(path))
    try:
        report = memory.check()
        if not report.ok:
            raise AssertionError(f"check failed after kill: {report.problems}")
        rows = memory.store.query("SELECT text FROM items")
        return [memory.store.sealer.open(r[0]) for r in rows]
    finally:
        memory.close()


@dataclass
class KillStats:
    tried: int = 0
    survived: int = 0
    committed_batches: int = 0
    lost_batches: int = 0
    duplicates_after_rerun: int = 0
    kill_moments: list[float] = field(default_factory=list)


def run_kill_trials(n: int, workdir: Path, seed: int = 0, max_delay: float = 2.5) -> KillStats:
    """n runs: kill at a random moment, check, verify committed batches, re-run to the end."""
    reference = workdir / "reference.epic"
    run_writer(reference)
    expected = sorted(kept_texts(reference))
    per_batch = {b: {t for t in expected if t.startswith(f"batch {b} ")} for b in range(BATCHES)}
    rng = random.Random(seed)
    stats = KillStats()
    for trial in range(n):
        path = workdir / f"trial{trial}.epic"
        moment = rng.uniform(0.05, max_delay)
        stats.kill_moments.append(moment)
        stats.tried += 1
        reported = run_writer(path, kill_after=moment)
        present = set(kept_texts(path))  # raises if the file does not open or check
        stats.committed_batches += len(reported)
        stats.lost_batches += sum(1 for b in reported if not per_batch[b] <= present)
        run_writer(path)  # re-run the whole ingest: must complete without duplicates
        final = kept_texts(path)
        stats.duplicates_after_rerun += len(final) - len(set(final))
        if sorted(final) != expected:
            raise AssertionError(f"trial {trial}: re-run did not reach the reference state")
        stats.survived += 1
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return stats


if __name__ == "__main__":  # quick manual run: python tests/crash_harness.py 10
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        start = time.time()
        print(run_kill_trials(int(sys.argv[1]) if len(sys.argv) > 1 else 5, Path(tmp)),
              f"{time.time() - start:.1f}s")

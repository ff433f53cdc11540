"""The committed artifacts (artifacts/ in the checkout): where each is and how it unpacks."""

from __future__ import annotations

import tarfile
from pathlib import Path

from epic_edge.errors import ModelNotFoundError

# The shipped learned decision and embedder weights, trained once by the lab (epic-edge-lab
# train-verifier / train-embedder, deterministic for their seed) and committed beside the code:
# setup unpacks them, never retrains.
LEARNED_ARTIFACT = Path("artifacts") / "epic-verifier-minilm.tar.xz"
EMBEDDER_ARTIFACT = Path("artifacts") / "epic-minilm.tar.xz"


def committed_artifact(relative: Path, what: str, trainer: str) -> Path:
    """A committed artifact (`relative` to the checkout epic-edge runs from)."""
    from epic_edge.export.python_package import source_root

    root = source_root()
    path = root / relative if root else relative
    if not path.is_file():
        raise ModelNotFoundError(
            f"{what} ({relative}) is not here: run `epic-edge setup` from the epic-edge "
            f"checkout, or retrain it with the lab: epic-edge-lab {trainer}")
    return path


def learned_artifact() -> Path:
    """The committed learned decision in the checkout epic-edge runs from."""
    return committed_artifact(LEARNED_ARTIFACT, "the learned decision", "train-verifier")


def embedder_artifact() -> Path:
    """The committed embedder weights in the checkout epic-edge runs from."""
    return committed_artifact(EMBEDDER_ARTIFACT, "the embedder's weights", "train-embedder")


def unpack_artifact(artifact: Path, folder: Path) -> None:
    """Unpack a committed artifact's files (flat, no folders) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(artifact, "r:xz") as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if not member.isfile() or name != member.name:
                raise ModelNotFoundError(f"{artifact}: unexpected entry {member.name!r}")
            source = tar.extractfile(member)
            assert source is not None  # a regular file
            part = folder / f"{name}.part"
            part.write_bytes(source.read())
            part.replace(folder / name)

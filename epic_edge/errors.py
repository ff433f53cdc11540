"""Exceptions the public API raises; each carries a message a user can act on."""


class EpicEdgeError(Exception):
    """Base class of every error epic-edge raises on purpose."""


class InvalidInputError(EpicEdgeError, ValueError):
    """An item, preference or question the runtime cannot take (empty, not text, ...)."""


class MemoryFileError(EpicEdgeError):
    """The memory file is missing, corrupt, from a newer schema, or locked."""


class DamagedRowError(MemoryFileError):
    """One stored row does not read back as written (a flipped bit, a cut value): reads skip
    it and `epic-edge check` reports it; the rest of the memory stays readable."""


class VerdictError(EpicEdgeError):
    """A verifier answered, but not with a probability (NaN, no Keep/Discard word): a fault
    on that item, which is not recorded as judged."""


class EmbedderMismatchError(MemoryFileError):
    """The memory was built by a different embedder than the one given to open it."""


class ModelNotFoundError(EpicEdgeError, FileNotFoundError):
    """A model file a backend needs is missing; the message says how to get it."""


class MissingExtraError(EpicEdgeError, ImportError):
    """An optional dependency is not installed; the message names the extra."""


class ProfileError(EpicEdgeError):
    """A device profile is unknown or malformed."""

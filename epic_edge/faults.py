"""The fault policy of ingest, in one place: what a verifier error does to an item and a batch.

- A verifier that cannot be built or loaded (missing model or extra, bad profile) fails every
  item alike: the error propagates and the ingest stops before its batch is written.
- Any other error on one item (a server down, a model fault, a bug) is logged by type only
  (never the item, which may be personal); the item is not recorded as judged, so the next
  ingest of it verifies it again. Verifiers do not catch such errors themselves.
- After MAX_FAILURES_WITHOUT_SUCCESS failures and no success in a batch, its other items are
  not tried (a server that is down fails each one only after its retries); they count as
  failed and are retried later too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from epic_edge.errors import MissingExtraError, ModelNotFoundError, ProfileError

log = logging.getLogger(__name__)

MAX_FAILURES_WITHOUT_SUCCESS = 3
SETUP_ERRORS = (ModelNotFoundError, MissingExtraError, ProfileError)
T = TypeVar("T")


def worth_trying(failed: int, succeeded: int) -> bool:
    """Whether the batch's next item is tried, given its failures and successes so far."""
    return failed < MAX_FAILURES_WITHOUT_SUCCESS or succeeded > 0


def judge(verify: Callable[[], T]) -> T | None:
    """verify()'s result; None when it failed on this item (not judged: retried next time).
    A setup error propagates: every item would fail the same way."""
    try:
        return verify()
    except SETUP_ERRORS:
        raise
    except Exception as exc:
        log.warning("the verifier failed on an item (%s); it is not recorded as judged",
                    type(exc).__name__)
        return None

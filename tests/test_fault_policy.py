"""The fault policy (epic_edge.faults), in one place: not judged and retried, or stop."""

from __future__ import annotations

import logging

import pytest

from epic_edge.errors import MissingExtraError, ModelNotFoundError, ProfileError
from epic_edge.faults import MAX_FAILURES_WITHOUT_SUCCESS, judge, worth_trying


def test_a_fault_on_one_item_is_not_judged_and_logs_only_its_type(caplog):
    def broken() -> None:
        raise RuntimeError("my PIN is 4921")

    with caplog.at_level(logging.WARNING):
        assert judge(broken) is None
    assert "RuntimeError" in caplog.text and "4921" not in caplog.text
    assert judge(lambda: "verdict") == "verdict"


@pytest.mark.parametrize("error", [ModelNotFoundError, MissingExtraError, ProfileError])
def test_a_verifier_that_cannot_be_built_stops_the_ingest(error):
    def setup_fault() -> None:
        raise error("install it")

    with pytest.raises(error):
        judge(setup_fault)


def test_a_batch_stops_trying_after_failures_without_success():
    assert worth_trying(MAX_FAILURES_WITHOUT_SUCCESS - 1, 0)
    assert not worth_trying(MAX_FAILURES_WITHOUT_SUCCESS, 0)
    assert worth_trying(MAX_FAILURES_WITHOUT_SUCCESS + 5, 1)  # the verifier works: keep going

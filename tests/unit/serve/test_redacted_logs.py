"""serve's log handlers mask the settings' secrets: a traceback uvicorn logs, and a library's line
quoting the cluster's answer, show no form of the password."""

from __future__ import annotations

import io
import logging

import pytest

from loader.serve.redacted_logs import redacted_logs
from tests.hostile_upstream import PASSWORD, TOKEN, assert_no_credential, echo_of


@pytest.fixture
def uvicorn_error_log():
    """A handler on uvicorn's error logger, as uvicorn's own configuration makes one."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)


def _log_a_failure() -> None:
    try:
        raise RuntimeError(f"the cluster said {echo_of('Basic ' + TOKEN)}")
    except RuntimeError:
        logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
    logging.getLogger("uvicorn.error").warning("answer: %s", echo_of("Basic " + TOKEN))


def test_a_traceback_and_a_message_are_masked_while_the_app_runs(uvicorn_error_log):
    with redacted_logs([PASSWORD, TOKEN]):
        _log_a_failure()
    written = uvicorn_error_log.getvalue()
    assert "RuntimeError: the cluster said Authorization: Basic ****" in written
    assert "Traceback (most recent call last)" in written and "\x1b" not in written
    assert_no_credential(written)


def test_the_handlers_are_left_as_they_were_after(uvicorn_error_log):
    with redacted_logs([PASSWORD]):
        pass
    _log_a_failure()  # the filter is gone: what the test above masks shows
    assert PASSWORD in uvicorn_error_log.getvalue()

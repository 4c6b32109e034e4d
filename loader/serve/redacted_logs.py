"""The secrets of ``loader serve``'s settings masked in every line its log handlers write.

uvicorn writes through handlers of its own (on the ``uvicorn`` and ``uvicorn.access`` loggers,
which do not propagate to the root): a traceback it logs, or a library's line quoting the
cluster's answer, would otherwise reach the log with the cluster's password or its Basic token in
it. ``redacted_logs`` puts one ``RedactingFilter`` on the handlers of uvicorn's loggers and of
the root logger while the app runs; the filter masks the secrets with ``loader.redact`` in the
message, the traceback and the stack, and escapes control characters (an echoed terminal
sequence must not reach a terminal).

Example::

    with redacted_logs(secret_values(settings)):
        ...  # serve requests
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from loader.redact import scrub_secrets
from loader.terminal import printable, printable_lines

# Whose handlers are filtered: the root's (the CLI's, where the app's own loggers propagate) and
# uvicorn's, which keep their records to themselves.
SERVER_LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")


class RedactingFilter(logging.Filter):
    """Masks ``secrets`` in each record a handler writes: its message, its traceback (formatted
    here, so the handler's formatter uses the masked text) and its stack."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = [secret for secret in secrets if secret]

    def _clean(self, text: str) -> str:
        return scrub_secrets(text, self.secrets) if self.secrets else text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = printable(self._clean(message))
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = printable_lines(self._clean(text))
        if record.stack_info:
            record.stack_info = printable_lines(self._clean(record.stack_info))
        return True


@contextlib.contextmanager
def redacted_logs(secrets: list[str]) -> Iterator[RedactingFilter]:
    """While the block runs, every handler of ``SERVER_LOGGERS`` masks ``secrets``."""
    redacting = RedactingFilter(secrets)
    handlers = {handler for name in SERVER_LOGGERS for handler in logging.getLogger(name).handlers}
    for handler in handlers:
        handler.addFilter(redacting)
    try:
        yield redacting
    finally:
        for handler in handlers:
            handler.removeFilter(redacting)

"""Logging setup: one line per event, never secrets."""

import logging
import re
from typing import Any

from stormwatch.core.security import TOKEN_KINDS

# Every token shape core.security issues (`<tag>_<alphanumerics>`), wherever it sits in a line.
_SECRET_RE = re.compile(
    r"(?<![A-Za-z0-9])(" + "|".join(sorted(TOKEN_KINDS.values())) + r")_[A-Za-z0-9]{8,}")
_TAGS = tuple(f"{tag}_" for tag in TOKEN_KINDS.values())
# Webhook signing secrets (Standard Webhooks' `whsec_` + base64), which core.security does
# not issue: a channel's secret must not reach a log either.
_WEBHOOK_SECRET_RE = re.compile(r"(?<![A-Za-z0-9])whsec_[A-Za-z0-9+/]{16,}={0,2}")


def redact(text: str) -> str:
    """`text` with every Stormwatch token and webhook signing secret replaced by its kind
    tag and asterisks."""
    if "whsec_" in text:
        text = _WEBHOOK_SECRET_RE.sub("whsec_********", text)
    if not any(tag in text for tag in _TAGS):
        return text
    return _SECRET_RE.sub(r"\1_********", text)


def _redact_arg(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, int | float | bool) or value is None:
        return value
    text = str(value)
    masked = redact(text)
    return value if masked == text else masked


def redact_record(record: logging.LogRecord) -> None:
    """Masks tokens in a record's message, arguments, traceback and stack, in place.

    Arguments are masked one by one (not merged into the message), so formatters that read
    `record.args` themselves, like uvicorn's access log, keep working.
    """
    if isinstance(record.msg, str):
        record.msg = redact(record.msg)
    elif record.msg is not None and not isinstance(record.msg, int | float):
        record.msg = _redact_arg(record.msg)
    if isinstance(record.args, dict):
        record.args = {k: _redact_arg(v) for k, v in record.args.items()}
    elif record.args:
        record.args = tuple(_redact_arg(v) for v in record.args)
    if record.exc_info and not record.exc_text:
        # Formatters reuse exc_text when it is set, so the masked text is what gets written.
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


class RedactSecrets(logging.Filter):
    """Masks anything shaped like a Stormwatch token that slipped into a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


_base_factory = logging.getLogRecordFactory()


def _redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record = _base_factory(*args, **kwargs)
    try:
        redact_record(record)
    except Exception:  # noqa: BLE001 - a log call must never raise because of masking
        record.msg, record.args = "<log record dropped: it could not be masked>", None
    return record


def setup_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(RedactSecrets())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Records are masked when created, so handlers set up by others (uvicorn's, Celery's
    # after it takes over the root logger) never see a token either.
    logging.setLogRecordFactory(_redacting_factory)

"""Logging setup: one line per event, never secrets."""

import logging
import re

_SECRET_RE = re.compile(r"\b(sw[aekp]_)[A-Za-z0-9]{8,}")


class RedactSecrets(logging.Filter):
    """Masks anything shaped like a Stormwatch token that slipped into a message."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if "sw" in msg:
            redacted = _SECRET_RE.sub(r"\1********", msg)
            if redacted != msg:
                record.msg, record.args = redacted, None
        return True


def setup_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(RedactSecrets())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())

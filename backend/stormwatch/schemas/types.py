"""Field types shared by request schemas: each takes exactly its JSON type, as documented."""

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator

_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _iso_only(value: Any) -> Any:
    """pydantic reads numbers as Unix times; the API documents ISO 8601 date-times only."""
    if isinstance(value, bool | int | float) or (
            isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("must be an ISO 8601 date-time (e.g. 2026-11-23T12:00:00Z), "
                         "not a number")
    return value


IsoDatetime = Annotated[datetime, BeforeValidator(_iso_only)]

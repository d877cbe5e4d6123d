"""One table per router from a service's exceptions to HTTP answers, and the guards that
apply it around a read or a committed write, so every route says not-found, conflict and
invalid the same way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, NoReturn

from fastapi import HTTPException
from sqlalchemy.ext.asyncio import AsyncSession

# Either a fixed detail or one computed from the exception (`str` for its message, or its
# field errors).
Detail = str | Callable[[Any], Any]


def value_error(loc: list[Any], msg: str) -> list[dict[str, Any]]:
    """FastAPI's own 422 shape: one error naming the field path."""
    return [{"loc": loc, "msg": msg, "type": "value_error"}]


class ServiceErrors:
    """The router's table; `reading()` translates, `writing(session)` also rolls back on
    error and commits on success."""

    def __init__(self, table: Mapping[type[Exception], tuple[int, Detail]]) -> None:
        self._table = dict(table)
        self.types = tuple(self._table)

    def http(self, exc: Exception) -> HTTPException:
        for kind, (code, detail) in self._table.items():
            if isinstance(exc, kind):
                return HTTPException(code, detail if isinstance(detail, str) else detail(exc))
        raise exc

    def raise_(self, exc: Exception) -> NoReturn:
        raise self.http(exc) from exc

    def reading(self) -> _Guard:
        return _Guard(self, None)

    def writing(self, session: AsyncSession) -> _Guard:
        return _Guard(self, session)


class _Guard:
    def __init__(self, errors: ServiceErrors, session: AsyncSession | None) -> None:
        self._errors, self._session = errors, session

    def __enter__(self) -> None:  # reads need no await
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if isinstance(exc, self._errors.types):
            self._errors.raise_(exc)

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._session is not None, "writing() guards are entered with async with"
        if exc is None:
            await self._session.commit()
            return
        if isinstance(exc, self._errors.types):
            await self._session.rollback()
            self._errors.raise_(exc)

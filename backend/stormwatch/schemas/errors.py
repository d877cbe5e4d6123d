"""The error bodies every route may answer, so the schema documents each status it sends."""

from typing import Any

from pydantic import BaseModel


class ErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    detail: str | list[ErrorItem]


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


# Every API route: credentials, role, bad input, database down.
COMMON: dict[int | str, dict[str, Any]] = {
    401: _error("Missing, unknown, revoked or expired credential"),
    403: _error("The credential may not do this (role, kind of token, or CSRF header)"),
    422: _error("Invalid input; `detail[].loc` names the field, e.g. [\"query\", \"start\"]"),
    503: _error("Database unavailable; retry after Retry-After seconds"),
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: _error("No such resource in the caller's org (other orgs' rows look the same)")}
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: _error("Conflicts with an existing resource")}

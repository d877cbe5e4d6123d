import uuid
from typing import Literal

from pydantic import BaseModel, Field


class LoginRequest(BaseModel):
    email: str = Field(min_length=3, max_length=320, pattern=r"^[^@\s]+@[^@\s]+$")
    password: str = Field(min_length=1, max_length=500)


class PasswordChange(BaseModel):
    current_password: str = Field(min_length=1, max_length=500)
    # The same rule as for a new user's password.
    new_password: str = Field(min_length=12, max_length=500)


class Me(BaseModel):
    user_id: uuid.UUID | None
    email: str | None
    org_id: uuid.UUID
    org_name: str
    kind: str
    # What the credential may do: the UI offers changes only to admins (the API enforces it).
    role: Literal["admin", "viewer"]
    csrf_token: str | None = None



class InvitationAccept(BaseModel):
    token: str = Field(min_length=8, max_length=200, pattern=r"^[A-Za-z0-9_]+$")
    password: str = Field(min_length=12, max_length=500)


class PasswordResetRequest(BaseModel):
    email: str = Field(min_length=3, max_length=320, pattern=r"^[^@\s]+@[^@\s]+$")


class PasswordResetRequested(BaseModel):
    detail: str


class PasswordResetConfirm(BaseModel):
    token: str = Field(min_length=8, max_length=200, pattern=r"^[A-Za-z0-9_]+$")
    password: str = Field(min_length=12, max_length=500)

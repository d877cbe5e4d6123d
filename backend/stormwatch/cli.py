"""Operator commands.

    python -m stormwatch.cli create-admin --org "Acme" --email admin@acme.example

creates the org (unless one with the same slug exists) and an admin user in it. The
password comes from the environment variable ADMIN_PASSWORD (or `--password-env NAME`) or
from the first line of stdin with `--password-stdin`, never from the command line, where
`ps` would show it. `--org` and `--email` default to ADMIN_ORG and ADMIN_EMAIL. Running it
again changes nothing (the password only with `--reset-password`), so it is safe on every
start: docker-compose.yml runs it after the migrations, and `make run` creates its demo
admin through the same code. The database is DATABASE_URL's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from stormwatch.core.config import get_settings
from stormwatch.core.security import hash_password
from stormwatch.models import Org, User
from stormwatch.services import accounts

MIN_PASSWORD_LEN = 12  # as for users created through the API
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+$")


class CliError(Exception):
    """A problem the operator can fix; printed without a traceback."""


@dataclass(frozen=True)
class AdminResult:
    org_id: uuid.UUID
    org_name: str
    user_id: uuid.UUID
    email: str
    org_created: bool
    user_created: bool
    password_set: bool
    promoted: bool

    def describe(self) -> str:
        if self.user_created:
            where = "new org" if self.org_created else "existing org"
            return f"created admin {self.email} in {where} {self.org_name!r} ({self.org_id})"
        changes = [c for c, done in (("password reset", self.password_set),
                                     ("promoted to admin", self.promoted)) if done]
        return (f"admin {self.email} of org {self.org_name!r} exists: "
                + (", ".join(changes) if changes else "nothing changed"))


def _check_password(password: str | None) -> str:
    if not password:
        raise CliError("no password given: set ADMIN_PASSWORD or use --password-stdin")
    if len(password) < MIN_PASSWORD_LEN:
        raise CliError(f"the password must have at least {MIN_PASSWORD_LEN} characters")
    return password


async def ensure_admin(session: AsyncSession, org_name: str, email: str, password: str | None,
                       *, reset_password: bool = False, org_slug: str | None = None,
                       password_hash: str | None = None) -> AdminResult:
    """Makes sure `email` is an admin of the org named `org_name`; flushes, doesn't commit.

    The org is found by its slug (`org_slug`, else derived from the name) and created when
    missing. An existing user keeps its password unless `reset_password` is set, so the
    password is needed only the first time. `password_hash`: a new user's password already
    hashed (accounts.create_user).
    """
    org_name = org_name.strip()
    email = email.strip().lower()
    if not 0 < len(org_name) <= 200:
        raise CliError("the org name must have 1-200 characters")
    if not _EMAIL_RE.match(email) or len(email) > 320:
        raise CliError(f"not an email address: {email!r}")
    slug = org_slug or accounts.slugify(org_name)

    user = (await session.execute(select(User).where(User.email == email))).scalar()
    if user is not None:
        org = await session.get(Org, user.org_id)
        assert org is not None
        if org.slug != slug:
            raise CliError(f"{email} is already a user of another org ({org.name!r})")
        if reset_password:
            user.password_hash = hash_password(_check_password(password))
        promoted = user.role != "admin"
        user.role = "admin"
        await session.flush()
        return AdminResult(org.id, org.name, user.id, email, org_created=False,
                           user_created=False, password_set=reset_password, promoted=promoted)

    password = _check_password(password)
    org = (await session.execute(select(Org).where(Org.slug == slug))).scalar()
    org_created = org is None
    if org is None:
        org = await accounts.create_org(session, org_name, slug=slug)
    user = await accounts.create_user(session, org.id, email, password, role="admin",
                                      password_hash=password_hash)
    return AdminResult(org.id, org.name, user.id, email, org_created=org_created,
                       user_created=True, password_set=True, promoted=False)


async def create_admin(database_url: str, org_name: str, email: str, password: str | None,
                       *, reset_password: bool = False) -> AdminResult:
    """`ensure_admin` in its own transaction against `database_url`."""
    engine = create_async_engine(database_url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            result = await ensure_admin(session, org_name, email, password,
                                        reset_password=reset_password)
            await session.commit()
            return result
    finally:
        await engine.dispose()


def _read_password(args: argparse.Namespace) -> str | None:
    if args.password_stdin:
        line = sys.stdin.readline()
        return line.rstrip("\r\n") or None
    return os.environ.get(args.password_env) or None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stormwatch.cli",
                                     description="Stormwatch operator commands.")
    commands = parser.add_subparsers(dest="command", required=True)
    admin = commands.add_parser(
        "create-admin", help="create an org and its admin user (idempotent)",
        description="Creates the org (if missing) and an admin user in it; a second run "
        "changes nothing. The password is read from $ADMIN_PASSWORD or stdin.")
    admin.add_argument("--org", default=os.environ.get("ADMIN_ORG"),
                       help="org name (default: $ADMIN_ORG)")
    admin.add_argument("--email", default=os.environ.get("ADMIN_EMAIL"),
                       help="admin's email, the login (default: $ADMIN_EMAIL)")
    admin.add_argument("--password-env", default="ADMIN_PASSWORD", metavar="NAME",
                       help="environment variable holding the password (default: %(default)s)")
    admin.add_argument("--password-stdin", action="store_true",
                       help="read the password from the first line of stdin")
    admin.add_argument("--reset-password", action="store_true",
                       help="set the password of an admin that already exists")
    args = parser.parse_args(argv)

    try:
        if not args.org:
            raise CliError("no org name: pass --org or set ADMIN_ORG")
        if not args.email:
            raise CliError("no admin email: pass --email or set ADMIN_EMAIL")
        result = asyncio.run(create_admin(get_settings().database_url, args.org, args.email,
                                          _read_password(args),
                                          reset_password=args.reset_password))
    except CliError as exc:
        print(f"create-admin: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"create-admin: cannot reach the database: {exc}", file=sys.stderr)
        return 1
    print(result.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())

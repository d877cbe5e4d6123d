"""The words of the mail the server sends on its own behalf."""

from __future__ import annotations

from stormwatch.core.config import Settings


def invitation(url: str, org_name: str, inviter: str | None, settings: Settings) -> str:
    who = f"{inviter} invited you" if inviter else "You are invited"
    days = settings.invite_ttl_hours / 24
    return (f"{who} to the Stormwatch organisation {org_name}.\n\n"
            f"Open this link to choose your password and sign in:\n\n{url}\n\n"
            f"The link works once, within {days:g} days. If you did not expect this "
            "invitation, ignore this message.\n")


def reset(url: str, settings: Settings) -> str:
    return ("Someone asked to reset the password of your Stormwatch account.\n\n"
            f"Open this link to choose a new one:\n\n{url}\n\n"
            f"The link works once, within {settings.reset_ttl_minutes:g} minutes, and "
            "signs you out of your other sessions. If you did not ask for it, ignore this "
            "message: your password stays as it is.\n")

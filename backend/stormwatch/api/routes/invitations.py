"""Invitations: an admin invites a person by email; the mail's link sets their password."""

import uuid
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, HTTPException, Response, status

from stormwatch.api.deps import (
    AdminUserDep,
    AuditActorDep,
    OrgPrincipalDep,
    SessionDep,
    SettingsDep,
    get_owned,
)
from stormwatch.models import AccountLink, Org, User
from stormwatch.schemas.accounts import InvitationCreate, InvitationCreated, InvitationPublic
from stormwatch.schemas.errors import CONFLICT, NOT_FOUND
from stormwatch.services import account_links, audit, mail_texts, system_mail

router = APIRouter(tags=["settings"])


@router.get("/invitations", response_model=list[InvitationPublic])
async def list_invitations(principal: OrgPrincipalDep,
                           session: SessionDep) -> list[AccountLink]:
    """Invitations not yet accepted, withdrawn or expired."""
    return await account_links.pending_invitations(session, principal.org_id)


@router.post("/invitations", response_model=InvitationCreated,
             status_code=status.HTTP_201_CREATED, responses=CONFLICT)
async def create_invitation(body: InvitationCreate, principal: AdminUserDep,
                            session: SessionDep, settings: SettingsDep,
                            actor: AuditActorDep) -> InvitationCreated:
    """Mails a single-use link that sets the person's password. Without an SMTP server (or
    when the mail fails) the answer carries the link instead, this once."""
    try:
        link = await account_links.create_invitation(
            session, principal.org_id, body.email, body.role, principal.user_id,
            timedelta(hours=settings.invite_ttl_hours))
    except account_links.EmailTaken as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, "a user with this email exists") from exc
    org = await session.get(Org, principal.org_id)
    inviter = await session.get(User, principal.user_id) if principal.user_id else None
    assert org is not None
    audit.record(session, principal.org_id, actor, "invitation.create", "invitation",
                 link.row.id, link.row.email,
                 audit.diff(None, {"email": link.row.email, "role": body.role}))
    await session.commit()
    url = account_links.link_url(settings.public_base_url, "invite", link.token)
    failure = await system_mail.send(
        settings, link.row.email, f"You are invited to {org.name} on Stormwatch",
        mail_texts.invitation(url, org.name, inviter.email if inviter else None, settings))
    public = InvitationPublic.model_validate(link.row).model_dump()
    if failure is None:
        return InvitationCreated(**public, email_sent=True,
                                 detail=f"invitation mailed to {link.row.email}")
    # The relay's own reply is the operator's business (logged), not the org's.
    why = failure if not system_mail.configured(settings) else "the mail could not be sent"
    return InvitationCreated(**public, email_sent=False, invite_url=url,
                             detail=f"not mailed ({why}): pass this link on yourself; it is "
                                    "shown only this once")


@router.delete("/invitations/{invitation_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses=NOT_FOUND)
async def revoke_invitation(invitation_id: uuid.UUID, principal: AdminUserDep,
                            session: SessionDep, actor: AuditActorDep) -> Response:
    row = await get_owned(session, AccountLink, invitation_id, principal, "invitation")
    if row.purpose != "invite":
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such invitation")
    if row.revoked_at is None:
        row.revoked_at = datetime.now(UTC)
        audit.record(session, principal.org_id, actor, "invitation.revoke", "invitation",
                     row.id, row.email, audit.diff({"revoked_at": None},
                                                   {"revoked_at": row.revoked_at}))
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)

"""From alert events to sent messages, in named stages:

1. plan (plan.py): claim the events nobody handled and group them per rule and kind; add
   reminders and the messages of alerts whose silence ended;
2. mute (mute.py): drop what a silence or maintenance window covers;
3. render (notifications/render.py): one message per group from the rule and its alerts'
   Evidence, written to the outbox with one row per channel;
4. send (outbox.py): claim due rows and send each through its channel (notifications/);
5. record (outbox.py, and plan.py for each event's outcome): sent, retried or failed,
   compare-and-set under the claim.

`plan` runs in the caller's transaction; `deliver_due` works the outbox. Delivery is
at-least-once per outbox row; see docs/alerts.md for what each channel makes of a resend."""

from __future__ import annotations

from stormwatch.services.notify.outbox import deliver_due, next_due_in_s
from stormwatch.services.notify.plan import plan

__all__ = ["deliver_due", "next_due_in_s", "plan"]

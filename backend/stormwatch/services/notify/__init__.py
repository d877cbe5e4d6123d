"""Alert notification delivery: channels, silences, maintenance windows, dispatch, outbox."""

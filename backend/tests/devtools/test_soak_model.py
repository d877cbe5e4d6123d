"""The soak's alert model (devtools/soak_model.py): it must agree with an evaluator that did
its job, name every window where one did not, and set aside only the windows judged before
their samples arrived or decided while still open."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stormwatch.devtools.soak_model import check_loss_rule

W, SETTLE = 30, 5
T0 = 1_800_000_000 // W * W
KEY, SRC = "a|b|64", "a"


def events_of(breaches: list[bool]) -> list[tuple]:
    """What a correct 1-of-1 evaluator records: a transition at the end of each window whose
    verdict differs from the previous one, decided once the window could be judged closed."""
    out, firing = [], False
    for i, b in enumerate(breaches):
        if b != firing:
            at = T0 + (i + 1) * W
            out.append((KEY, "firing" if b else "resolved", at, False))
            firing = b
    return out


def windows_of(breaches: list[bool]) -> dict:
    return {(KEY, T0 + i * W): (150, 10 if b else 1) for i, b in enumerate(breaches)}


def check(breaches: list[bool], events: list[tuple], late: list[tuple] = ()):
    return check_loss_rule(start=T0, end=T0 + len(breaches) * W, window_s=W, threshold=0.01,
                           settle_s=SETTLE, windows=windows_of(breaches), events=events,
                           late_batches=late, source_of={KEY: SRC})


def test_a_correct_evaluator_agrees_on_every_window():
    b = [False, True, True, False, True, False, False]
    r = check(b, events_of(b))
    assert (r.agreed, r.firing, r.late, r.early, r.disagreements) == (7, 3, 0, 0, [])
    assert r.summary().startswith("model agrees on 7 pair windows, 3 of them firing;")


def test_a_missed_resolution_is_named_with_its_window_and_counts():
    b = [False, True, False, False]
    events = [e for e in events_of(b) if e[1] != "resolved"]
    r = check(b, events)
    assert len(r.disagreements) == 2
    assert r.disagreements[0] == (f"{KEY} window at {T0 + 2 * W}: 1 of 150 lost, model not "
                                  "firing, evaluator firing")
    assert r.summary().startswith("model DISAGREES on 2")


def test_windows_whose_samples_arrived_after_their_judgement_are_set_aside_not_failed():
    b = [False, False, True, True, False]
    # The evaluator saw nothing of windows 2-3 (their samples were spooled): no firing.
    assert len(check(b, []).disagreements) == 2  # without the batch, the model disagrees
    spool = (SRC, T0 + 4 * W + 20.0, T0 + 2 * W + 1.0)  # received after windows 2-3 closed
    r = check(b, [], [spool])
    assert (r.late, r.agreed, r.disagreements) == (2, 3, [])


def test_a_batch_of_another_agent_or_one_on_time_sets_nothing_aside():
    b = [True, False, True]
    on_time = (SRC, T0 + 2 * W + SETTLE - 3.5, T0 + 2 * W - 1.0)  # 2.5 s old at arrival
    other = ("c", T0 + 3 * W + 60, T0 + 1.0)
    r = check(b, events_of(b), [on_time, other])
    assert (r.agreed, r.late, r.disagreements) == (3, 0, [])


def test_an_early_firing_on_a_window_that_ends_clean_is_set_aside():
    b = [False, False, False]
    at = T0 + 2 * W
    events = [(KEY, "firing", at, True), (KEY, "resolved", at + W, False)]
    r = check(b, events)
    assert (r.early, r.agreed, r.disagreements) == (1, 2, [])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.booleans(), min_size=1, max_size=40), st.data())
def test_any_history_agrees_and_any_flipped_transition_is_found(breaches, data):
    assert check(breaches, events_of(breaches)).disagreements == []
    events = events_of(breaches)
    if not events:
        return
    i = data.draw(st.integers(0, len(events) - 1))
    dropped = events[:i] + events[i + 1:]
    assert check(breaches, dropped).disagreements


def test_an_early_or_late_window_that_agrees_counts_as_agreed():
    b = [False, True, False]
    at = T0 + 2 * W
    events = [(KEY, "firing", at, True), (KEY, "resolved", at + W, False)]
    spool = (SRC, T0 + 3 * W + 20.0, T0 + 1.0)  # windows 0-2 all judged before it arrived
    r = check(b, events, [spool])
    assert (r.agreed, r.firing, r.late, r.early, r.disagreements) == (3, 1, 0, 0, [])


def test_a_firing_on_a_clean_window_not_decided_early_is_a_disagreement():
    b = [False, False, False]
    at = T0 + 2 * W
    events = [(KEY, "firing", at, False), (KEY, "resolved", at + W, False)]
    r = check(b, events)
    assert (r.early, r.disagreements) == (0, [f"{KEY} window at {T0 + W}: 1 of 150 lost, "
                                              "model not firing, evaluator firing"])

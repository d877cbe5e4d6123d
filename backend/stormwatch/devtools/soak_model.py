"""The soak's reference model of its alert rule, checked against what the evaluator recorded.

The soak's rule is "mesh loss rate above a threshold, 1 of 1 windows, each pair its own
group": after judging window [t, t + W) a pair is firing exactly when that window's stored
samples of the pair lose more than the threshold. The model recomputes every window from the
samples the database holds at the end, and the evaluator's state per window comes from its
alert events (firing at window end t + W, resolved at the end of the window that cleared it).

A window where the two differ is a failure unless the evaluator rightly judged it on other
data than the final one, in one of two ways (each counted):
- late: some batch of the pair's source agent arrived after the window could first be judged
  (its end + SETTLE_S) and holds samples older than the window's end (a spool drained after an
  outage, an agent restarted): the evaluator may have judged it without them;
- early: the evaluator fired on the window before it could be judged closed (enough samples
  already breached), as its evidence says (decided_early), before all its samples were in.
Every other (pair, window) from the rule's first judged window to its last must agree."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

# A batch is taken as seen by an evaluation this long after it was received (its commit).
COMMIT_MARGIN_S = 2.0


@dataclass
class ModelCheck:
    agreed: int = 0
    firing: int = 0  # of the agreed windows, those both have firing
    late: int = 0  # differing windows judged before all their samples arrived
    early: int = 0  # differing windows the evaluator decided while still open
    disagreements: list[str] = field(default_factory=list)

    def summary(self) -> str:
        verdict = ("model agrees" if not self.disagreements
                   else f"model DISAGREES on {len(self.disagreements)}")
        return (f"{verdict} on {self.agreed} pair windows, {self.firing} of them firing; "
                f"differs on {self.late} judged before all their samples arrived and "
                f"{self.early} decided early")


def check_loss_rule(
    *, start: int, end: int, window_s: int, threshold: float, settle_s: float,
    windows: dict[tuple[str, int], tuple[int, int]],
    events: Iterable[tuple[str, str, float, bool]],
    late_batches: Iterable[tuple[str, float, float]],
    source_of: dict[str, str],
) -> ModelCheck:
    """Compares the model with the evaluator over the windows starting in [start, end).

    windows: (pair key, window start) -> (samples, failed samples), from the final data;
    events: (pair key, 'firing' | 'resolved', at in epoch seconds, decided early);
    late_batches: (source agent id, received at, oldest sample at) of accepted batches;
    source_of: pair key -> its source agent id (every pair the rule may have judged)."""
    w = window_s
    late: dict[str, set[int]] = defaultdict(set)
    for src, received, oldest in late_batches:
        # Windows that ended after the oldest sample and could be judged before the batch.
        first = int((oldest - w) // w + 1) * w
        last = int((received + COMMIT_MARGIN_S - settle_s - w) // w) * w
        for t in range(max(first, start), min(last, end - w) + 1, w):
            late[src].add(t)
    transitions: dict[str, list[tuple[float, str]]] = defaultdict(list)
    early: set[tuple[str, int]] = set()
    for key, kind, at, decided_early in events:
        transitions[key].append((at, kind))
        if kind == "firing" and decided_early:
            early.add((key, int(at) - w))
    out = ModelCheck()
    for key, src in sorted(source_of.items()):
        seq = sorted(transitions.get(key, []))
        i, firing = 0, False
        for t in range(start, end, w):
            while i < len(seq) and seq[i][0] <= t + w:
                firing = seq[i][1] == "firing"
                i += 1
            samples, failed = windows.get((key, t), (0, 0))
            breach = samples > 0 and failed / samples > threshold
            if breach == firing:
                out.agreed += 1
                out.firing += breach
            elif t in late[src]:
                out.late += 1
            elif (key, t) in early:
                out.early += 1
            else:
                out.disagreements.append(
                    f"{key} window at {t}: {failed} of {samples} lost, model "
                    f"{'firing' if breach else 'not firing'}, evaluator "
                    f"{'firing' if firing else 'not firing'}")
    return out

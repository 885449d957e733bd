"""What would end a consumer's use of the volume, in words: its next actions
(:func:`vacate.decide.actions.actions_for`) as the sentence
:mod:`vacate.observing.model.sentence` renders."""

from __future__ import annotations

from vacate.observing.model.sentence import render


def for_consumer(c, by_id: dict | None = None) -> str:
    """What would end the consumer ``c``'s use of the volume, in words."""
    from vacate.decide.actions import actions_for

    return render(actions_for(c, by_id if by_id is not None else {c.id: c}))

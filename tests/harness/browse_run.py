"""Drive the ``browse`` app headless (Textual's pilot) and read what its screen shows."""

from __future__ import annotations

import asyncio

from vacate.browse.app import Browse


def run(app: Browse, script, size=(80, 24)):
    async def go():
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await script(app, pilot)
    asyncio.run(go())


def screen_text(app: Browse) -> str:
    """What the screen shows, as text (lines of the current screen's render)."""
    return "\n".join(s.text for s in app.screen._compositor.render_strips())

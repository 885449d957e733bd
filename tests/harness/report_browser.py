"""Open a report page in Debian's headless Chromium through chromedriver (selenium), inside
the network namespace the caller made (``unshare -n``: nothing can leave it), and write what
a person and a test need to know as JSON: console messages, every request the page made,
whether a dialog opened, the elements a hostile name might have injected, the treemap's
tiles as laid out (from the DOM), the text with scripts on and with scripts off, and a
screenshot.

Run: ``unshare -n sh -c 'ip link set lo up; python3 report_browser.py PAGE OUT.json SHOT.png'``
(chromedriver talks to the browser over the loopback)."""

from __future__ import annotations

import json
import sys

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service

TILES = """
return Array.from(document.querySelectorAll('.map')).filter(m => m.offsetParent !== null)
  .slice(0, 1).flatMap(m => { const mb = m.getBoundingClientRect();
  return Array.from(m.querySelectorAll('.t')).map(t => { const b = t.getBoundingClientRect();
    return {i: +t.dataset.i, p: +t.dataset.p, bytes: +t.dataset.bytes, kind: t.className,
            w: b.width, h: b.height, x: b.left - mb.left, y: b.top - mb.top,
            text: t.textContent}; }); });
"""
INJECTED = "return document.querySelectorAll('img, svg, iframe, object, embed, form').length"


def _driver(scripts: bool, width: int) -> webdriver.Chrome:
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={width},1400", "--no-first-run", "--disable-extensions"):
        o.add_argument(a)
    if not scripts:
        o.add_argument("--blink-settings=scriptEnabled=false")
    o.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    o.set_capability("unhandledPromptBehavior", "ignore")
    return webdriver.Chrome(options=o, service=Service("/usr/bin/chromedriver"))


def look(page: str, shot: str, *, scripts: bool = True, width: int = 1400) -> dict:
    d = _driver(scripts, width)
    try:
        d.get("file://" + page)
        try:
            alert = d.switch_to.alert.text
        except NoAlertPresentException:
            alert = None
        out = {"alert": alert, "title": d.title}
        if scripts:
            out["tiles"] = d.execute_script(TILES)
            out["injected"] = d.execute_script(INJECTED)
            # a click on the first nested tile drills into it (the script's one job)
            nest = d.find_elements("css selector", ".map-disk_bytes .t.nest")
            if nest:
                d.execute_script("arguments[0].click()", nest[0])
                out["zoomed"] = d.execute_script(
                    "return document.querySelector('.map-disk_bytes .up').hidden === false")
                out["panel"] = d.find_element("id", "panel").text
                d.execute_script("document.querySelector('.map-disk_bytes .up').click()")
            try:
                alert = d.switch_to.alert.text
            except NoAlertPresentException:
                alert = None
            out["alert_after"] = alert
        out["text"] = d.find_element("tag name", "body").text
        out["html_len"] = len(d.page_source)
        d.save_screenshot(shot)
        out["console"] = d.get_log("browser")
        out["requests"] = [m["message"]["params"]["request"]["url"]
                           for m in (json.loads(x["message"]) for x in d.get_log("performance"))
                           if m["message"]["method"] == "Network.requestWillBeSent"]
        return out
    finally:
        d.quit()


def main() -> int:
    page, out, shot = sys.argv[1:4]
    res = {"on": look(page, shot), "off": look(page, shot.replace(".png", "-noscript.png"),
                                                scripts=False),
           "phone": look(page, shot.replace(".png", "-phone.png"), width=390)}
    with open(out, "w") as f:
        json.dump(res, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

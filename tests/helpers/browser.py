"""A real browser for the HTML report: headless Chromium (Debian's ``chromium``; `.ci/run` installs it).

:func:`inspect` loads a page the way a reader's browser does and reports what it rendered: the page's size, every
image with whether it loaded, and whether anything is wider than the window. :func:`screenshot` writes a PNG of
the whole page. Both run the browser with no network, no GPU, no sandbox (containers) and a fresh profile.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage",
         "--disable-extensions", "--disable-sync", "--disable-default-apps", "--disable-component-update",
         "--no-first-run", "--mute-audio", "--hide-scrollbars", "--force-device-scale-factor=1")
INSTALL_HINT = "apt-get install -y chromium (.ci/run installs it)"
# written into the page's title once every image has loaded or failed (the --dump-dom output carries it)
_PROBE = """<script>window.addEventListener('load', function () {
  var imgs = Array.prototype.map.call(document.images, function (i) {
    return {src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth, h: i.naturalHeight};
  });
  document.title = 'CCDA-PROBE' + JSON.stringify({height: document.documentElement.scrollHeight,
    width: document.documentElement.scrollWidth, window: window.innerWidth, images: imgs,
    tables: document.querySelectorAll('table').length, headings: Array.prototype.map.call(
      document.querySelectorAll('h2'), function (h) { return h.textContent; })}) + 'CCDA-END';
});</script>"""


def find() -> str | None:
    """The Chromium executable on PATH, or None."""
    return next((p for n in NAMES if (p := shutil.which(n))), None)


def _run(chrome: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chrome, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                              timeout=timeout)


def inspect(page: Path, chrome: str, width: int = 1280, timeout: float = 120) -> dict:
    """What the browser rendered of ``page`` (see the module docstring); images are loaded from its folder."""
    page = Path(page).resolve()
    probe = page.with_name(f".probe-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    try:
        r = _run(chrome, [f"--window-size={width},900", "--virtual-time-budget=15000", "--dump-dom",
                          probe.as_uri()], timeout)
    finally:
        probe.unlink(missing_ok=True)
    m = re.search(r"CCDA-PROBE(.*?)CCDA-END", r.stdout, re.S)
    if m is None:
        raise RuntimeError(f"chromium rendered no probe (rc {r.returncode}): {r.stderr[-2000:]}")
    import html

    return json.loads(html.unescape(m.group(1)))


def screenshot(page: Path, out: Path, chrome: str, width: int = 1280, height: int | None = None,
               timeout: float = 120) -> Path:
    """A PNG of ``page`` at ``width`` pixels, as tall as the page (or ``height``)."""
    height = height or int(inspect(page, chrome, width, timeout)["height"])
    r = _run(chrome, [f"--window-size={width},{height}", "--virtual-time-budget=15000",
                      f"--screenshot={Path(out).resolve()}", Path(page).resolve().as_uri()], timeout)
    if not Path(out).is_file():
        raise RuntimeError(f"chromium wrote no screenshot (rc {r.returncode}): {r.stderr[-2000:]}")
    return Path(out)

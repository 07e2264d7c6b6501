"""Drives the page `tandem serve` serves under an `--allow-host` name, as on a LAN (tests/it/web.rs runs it).

Usage: lan.py BASE_URL API_KEY

BASE_URL is `http://box.lan:PORT`; chromium maps `box.lan` to 127.0.0.1 (`--host-resolver-rules`), so the page is
loaded from that origin and its own POSTs carry `Origin: http://box.lan:PORT`, as a browser on the network sends
them. A run is started with plan approval, its plan approved, and the run followed to its end, all from the page.
Prints "all checks passed" at the end; any failed expectation raises.
"""

import re
import sys
import tempfile
from urllib.parse import urlparse

from playwright.sync_api import expect, sync_playwright

BASE, KEY = sys.argv[1], sys.argv[2]
NAME = urlparse(BASE).hostname
# Model work (planning, the joiner) on a loaded machine.
SLOW = 900_000
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--host-resolver-rules=MAP {NAME} 127.0.0.1"]


def main():
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium", headless=True, args=ARGS,
            viewport={"width": 1000, "height": 760})
        page = context.new_page()
        refused = []
        page.on("response", lambda r: refused.append(f"{r.request.method} {r.url}: {r.status}")
                if r.status == 403 else None)
        page.goto(f"{BASE}/")
        assert page.evaluate("location.origin") == BASE, page.evaluate("location.origin")
        page.get_by_label("API key").fill(KEY)
        page.get_by_role("button", name="Use key").click()
        expect(page.get_by_role("heading", name="Runs")).to_be_visible()

        # Started from the page (a POST with the page's own origin), its plan approved (another), to its end.
        page.goto(f"{BASE}/#/new")
        page.get_by_label("Goal").fill("What is 12*4+5?")
        page.get_by_label("Approval").select_option("plan")
        page.get_by_label("Replans").fill("0")
        page.get_by_role("button", name="Start run").click()
        page.wait_for_url(re.compile(r"#/runs/[A-Za-z0-9_-]+$"))
        expect(page.locator("#plan-editor")).to_be_visible(timeout=SLOW)
        expect(page.locator("#run-status")).to_have_text("awaiting_approval")
        page.get_by_role("button", name="Approve").click()
        expect(page.locator("#run-status")).to_contain_text("finished", timeout=SLOW)
        expect(page.locator("#timeline")).to_contain_text("Run finished")
        expect(page.get_by_role("alert")).to_be_hidden()
        assert not refused, f"the server refused the page's own requests: {refused}"
        context.close()
    print("all checks passed")


main()

"""Drives the page `tandem serve` serves at `/` in Debian's chromium through Playwright (tests/it/web.rs runs it).

Usage: drive.py BASE_URL API_KEY [SCREENSHOT_DIR]

A wrong key gets an error on the page; a run started with plan approval shows its plan, a bad edit is refused by
the check, an edited calculator expression is approved and the answer streams in with the edit's result; the
run's link reloads to the same timeline; a rejected plan ends its run; the runs list filters; a benchmark run
shows its summary, chart and records. Controls are found
by their labels and roles, as a screen reader would; the new run is started from the keyboard. Prints "all
checks passed" at the end; any failed expectation raises.
"""

import os
import re
import sys
import tempfile

from playwright.sync_api import expect, sync_playwright

BASE, KEY = sys.argv[1], sys.argv[2]
SHOTS = sys.argv[3] if len(sys.argv) > 3 else None
# Model work (planning, the joiner) on a loaded machine.
SLOW = 900_000
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def shot(page, name):
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, name))


def start_run(page, goal):
    """Starts a run waiting for plan approval from the New run form, by keyboard; its id."""
    page.goto(f"{BASE}/#/new")
    page.get_by_label("Goal").fill(goal)
    page.get_by_label("Approval").select_option("plan")
    page.get_by_label("Replans").fill("0")
    page.get_by_role("button", name="Start run").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"#/runs/[A-Za-z0-9_-]+$"))
    return page.url.rsplit("/", 1)[1]


def main():
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium", headless=True, args=ARGS,
            viewport={"width": 1000, "height": 760})
        page = context.new_page()
        console = []
        page.on("console", lambda m: console.append(m.text))
        page.on("pageerror", lambda e: console.append(f"page error: {e}"))

        # A wrong key: the page says the server refused it.
        page.goto(f"{BASE}/")
        page.get_by_label("API key").fill("not-the-key")
        page.get_by_role("button", name="Use key").click()
        expect(page.get_by_role("alert")).to_contain_text("401")
        # The right key: the runs list loads, no error.
        page.get_by_label("API key").fill(KEY)
        page.get_by_role("button", name="Use key").click()
        expect(page.get_by_role("heading", name="Runs")).to_be_visible()
        expect(page.get_by_role("alert")).to_be_hidden()

        # A run with plan approval: its plan waits in the editor.
        run = start_run(page, "What is 12*4+5?")
        editor = page.locator("#plan-editor")
        expect(editor).to_be_visible(timeout=SLOW)
        expect(page.locator("#run-status")).to_have_text("awaiting_approval")
        expect(page.locator("#timeline")).to_contain_text("Plan v1 (initial)")
        shot(page, "plan-approval.png")
        steps = editor.locator("fieldset")
        tools = [steps.nth(i).get_by_label("Tool", exact=True).input_value() for i in range(steps.count())]
        assert "calculator" in tools, f"the plan has no calculator step: {tools}"
        keep = tools.index("calculator")
        # A bad edit is refused by the check, naming the field.
        tool = steps.nth(keep).get_by_label("Tool", exact=True)
        tool.fill("teleport")
        page.get_by_role("button", name="Check plan").click()
        expect(page.locator("#check-error")).to_contain_text("teleport")
        expect(tool).to_have_attribute("aria-invalid", "true")
        tool.fill("calculator")
        # The edit: one calculator step computing something else; the others removed.
        for i in range(steps.count()):
            if i != keep:
                steps.nth(i).get_by_label("remove this step").check()
        steps.nth(keep).get_by_label("expression").fill("12*4+6")
        page.get_by_role("button", name="Check plan").click()
        expect(page.locator("#check-result")).to_contain_text("valid")
        page.get_by_role("button", name="Approve").click()
        # The steps and the answer stream in; the answer is the edited expression's.
        expect(page.locator("#answer-text")).to_be_visible(timeout=SLOW)
        expect(page.locator("#run-status")).to_contain_text("finished", timeout=SLOW)
        timeline = page.locator("#timeline")
        expect(timeline).to_contain_text(re.compile(r"Plan v\d edited \(by http\)"))
        expect(timeline).to_contain_text("Plan v2 (edited)")
        expect(timeline).to_contain_text("12*4+6")
        expect(timeline).to_contain_text("Run finished: done")
        expect(page.locator("#answer-text")).to_contain_text("54")
        shot(page, "run.png")
        before = timeline.inner_text()

        # The run's link, reloaded: the same timeline.
        page.goto(f"{BASE}/#/runs/{run}")
        page.reload()
        expect(page.locator("#run-status")).to_contain_text("finished", timeout=60_000)
        expect(page.locator("#timeline")).to_contain_text("Run finished")
        assert page.locator("#timeline").inner_text() == before, "the reloaded timeline differs"

        # A rejected plan ends its run, nothing run.
        rejected = start_run(page, "What is 7*6?")
        expect(page.locator("#plan-editor")).to_be_visible(timeout=SLOW)
        page.get_by_role("button", name="Reject").click()
        expect(page.locator("#run-status")).to_have_text("finished (rejected)", timeout=SLOW)
        expect(page.locator("#timeline")).to_contain_text("Run finished: rejected")
        assert "Tool call" not in page.locator("#timeline").inner_text()

        # The runs list: both runs, filtered by goal text and status; cards on a narrow window.
        page.goto(f"{BASE}/#/")
        rows = page.locator("table.runs tbody tr")
        expect(rows).to_have_count(2)
        page.get_by_label("Search").fill("7*6")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text(rejected)
        page.get_by_label("Search").fill("")
        page.get_by_label("Status", exact=True).select_option("finished")
        expect(rows).to_have_count(2)
        page.get_by_label("From", exact=True).fill("2000-01-01")
        page.get_by_label("To", exact=True).fill("2000-01-02")
        expect(rows).to_have_count(0)
        page.get_by_label("To", exact=True).fill("")
        expect(rows).to_have_count(2)
        shot(page, "runs.png")
        page.set_viewport_size({"width": 390, "height": 760})
        expect(page.locator("ul.cards li").first).to_be_visible()
        page.get_by_role("link", name="What is 12*4+5?").click()
        expect(page.locator("#answer-text")).to_contain_text("54", timeout=60_000)
        shot(page, "run-narrow.png")

        # Benchmark results: the run, its summary and chart, a record unfolded.
        page.set_viewport_size({"width": 1000, "height": 760})
        page.get_by_role("link", name="Benchmarks").click()
        page.get_by_role("link", name="tasks-q0-20261128-101010").click()
        expect(page.locator("#bench-summary")).to_contain_text("0.500")
        chart = page.locator("img.chart")
        expect(chart).to_be_visible()
        assert chart.evaluate("img => img.complete && img.naturalWidth > 0"), "the chart did not load"
        page.get_by_text("#2 arith-2").click()
        expect(page.locator("#bench-samples")).to_contain_text('"gold": "9"')
        shot(page, "bench.png")

        violations = [m for m in console if "Content Security Policy" in m or "page error" in m]
        assert not violations, f"the page broke its policy or threw: {violations}"
        context.close()
    print("all checks passed")


main()

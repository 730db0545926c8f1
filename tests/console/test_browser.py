"""The whole workflow through the console in a real browser (chromium, Selenium), against
the real engine and a real server on an ephemeral port: an author signs in, saves a draft
with a typo and sees the loader's error at its line, fixes it, writes its test, runs the
tests, sees the behavioural diff; her own approval is refused with the workflow's sentence,
so is an auditor's; another approver approves and promotes; the preview shows the new
behaviour; the kill switch disables it; a rollback brings it back; the audit shows a
recorded request like the preview. Beside it, the history page's moves without an event.
Screenshots of the main pages: ``tests/console/browser.SHOTS``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from tests.console.browser import SHOTS, WAIT_S, browser, served
from tests.console.test_history import HOSTILE
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_history_semantics import candidate
from tests.lifecycle.test_move_intents import Crash, Crashing, alias_move, dead_owner, workflow
from tests.lifecycle.test_move_intents_read import withdrawn_disable

pytestmark = pytest.mark.browser

TYPO = """\
id: coffee-creamers
title: creamer means coffee creamers
owner: merch-team-grocery
priority: 60
trigger:
  phrase: [creamer, creamers]
  consume: true
rules:
  - category: {values: [Coffee creamers]}
explian: Shoppers typing creamer want coffee creamers, not cream.
"""
FIXED = TYPO.replace("explian:", "explain:")
TESTS = """\
- name: creamer shows coffee creamers only
  intent: creamer
  expect:
    applied: [coffee-creamers, in-stock-only]
    results: {min_hits: 3, every: {category: {eq: Coffee creamers}}}
"""


def _replaced(element: Any) -> Any:
    """A wait condition: ``element``'s page was replaced. Chromium reports an element of a
    page being torn down either as stale or, mid-navigation, as a node that "does not belong
    to the document"; both mean the next page is coming."""

    def check(_driver: Any) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in str(error):
                return True
            raise
        return False

    return check


class Console:
    def __init__(self, driver: Any, base: str, shots: Path) -> None:
        self.driver, self.base, self.shots = driver, base, shots

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)
        self.loaded()

    def loaded(self) -> None:
        WebDriverWait(self.driver, WAIT_S).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
        )

    def submit(self, element_id: str) -> None:
        """Press a form's button (with the keyboard) and wait for the next page."""
        page = self.driver.find_element(By.TAG_NAME, "html")
        self.driver.find_element(By.ID, element_id).send_keys(Keys.ENTER)
        WebDriverWait(self.driver, WAIT_S).until(_replaced(page))
        self.loaded()

    def text(self, css: str = "main") -> str:
        return str(self.driver.find_element(By.CSS_SELECTOR, css).text)

    def fill(self, element_id: str, value: str) -> None:
        field = self.driver.find_element(By.ID, element_id)
        field.clear()
        field.send_keys(value)

    def edit(self, text: str) -> None:
        """Replace the CodeMirror editor's text (the textarea is hidden behind it)."""
        self.driver.execute_script(
            "document.querySelector('.CodeMirror').CodeMirror.setValue(arguments[0])", text
        )

    def sign_in(self, key: str) -> None:
        self.open("/console/sign-in")
        self.fill("api_key", key)
        field = self.driver.find_element(By.ID, "api_key")
        page = self.driver.find_element(By.TAG_NAME, "html")
        field.send_keys(Keys.ENTER)
        WebDriverWait(self.driver, WAIT_S).until(_replaced(page))
        self.loaded()

    def sign_out(self) -> None:
        page = self.driver.find_element(By.TAG_NAME, "html")
        self.driver.find_element(By.CSS_SELECTOR, "form.who button").click()
        WebDriverWait(self.driver, WAIT_S).until(_replaced(page))
        self.loaded()

    def shot(self, name: str) -> None:
        self.shots.mkdir(parents=True, exist_ok=True)
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(1400, min(max(int(height), 800), 2400))
        assert self.driver.save_screenshot(str(self.shots / f"{name}.png")), name
        self.driver.set_window_size(1400, 1000)

    def preview(self, intent: str) -> None:
        self.open("/console/preview")
        self.fill("intent", intent)
        self.submit_htmx("run-preview", "#preview-results")

    def submit_htmx(self, element_id: str, target: str) -> None:
        """Press a button whose form htmx sends: the target is swapped, the page stays."""
        before = self.driver.find_element(By.CSS_SELECTOR, target)
        self.driver.find_element(By.ID, element_id).click()
        WebDriverWait(self.driver, WAIT_S).until(_replaced(before))
        WebDriverWait(self.driver, WAIT_S).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, target + " section.side")
        )

    def applied_on(self, side: str) -> list[str]:
        links = self.driver.find_elements(By.CSS_SELECTOR, f'section[data-side="{side}"] ol.applied > li > a')
        return [link.text for link in links]


@pytest.fixture()
def console(lifecycle: Lifecycle, tmp_path: Path) -> Iterator[Console]:
    driver = browser()
    try:
        with served(lifecycle.client.app) as base:
            yield Console(driver, base, SHOTS or tmp_path / "console")
    finally:
        driver.quit()


def test_the_whole_workflow_in_a_browser(console: Console, lifecycle: Lifecycle) -> None:
    lc, c = lifecycle, console
    live_before = lc.workflow.environment("live").version

    # An author signs in: live and staging side by side.
    c.sign_in(lc.keys["alice"])
    assert "Signed in as alice" in c.text("header")
    assert c.driver.find_elements(By.CSS_SELECTOR, "#live-policies tr[data-policy='in-stock-only']")
    c.fill("q", "orange")
    c.submit("q")
    rows = c.driver.find_elements(By.CSS_SELECTOR, "#live-policies tbody tr[data-policy]")
    assert rows and all("orange" in r.text.lower() for r in rows)

    # A draft with a typo: the loader's error, at its line, marked in the editor.
    c.open("/console/author")
    c.edit(TYPO)  # the editor asks the loader as the author types
    WebDriverWait(c.driver, WAIT_S).until(lambda d: "line 10" in c.text("#live-problems"))
    assert "unknown_field" in c.text("#live-problems")
    c.fill("reason", "creamers")
    c.submit("save-draft")
    problems = c.text("#problems")
    assert "line 10, column 1" in problems and "unknown_field" in problems, problems
    marked = c.driver.execute_script(
        "var cm = document.querySelector('.CodeMirror').CodeMirror, found = [];"
        " cm.eachLine(function (h) { var i = cm.lineInfo(h);"
        " if ((i.bgClass || '').indexOf('cm-error-line') >= 0) found.push(i.text); });"
        " return found;"
    )
    assert len(marked) == 1 and marked[0].startswith("explian:"), marked
    c.shot("author-error")
    assert not lc.workflow.history(action="draft")  # nothing was staged

    # Fixed: staged; then its test file.
    c.edit(FIXED)
    WebDriverWait(c.driver, WAIT_S).until(lambda d: "no problem" in c.text("#live-problems"))
    c.submit("save-draft")
    assert "Saved coffee-creamers to staging" in c.text("#notice")
    c.open("/console/tests?file=grocery/tests/creamers.yaml")
    c.edit(TESTS)
    c.submit("save-tests")
    assert "Saved grocery/tests/creamers.yaml" in c.text("#notice")
    c.open("/console/policies")
    staged = c.driver.find_element(By.CSS_SELECTOR, "#staging-policies tr[data-policy='coffee-creamers']")
    assert "only here" in staged.text
    assert not c.driver.find_elements(By.CSS_SELECTOR, "#live-policies tr[data-policy='coffee-creamers']")
    c.shot("policies")

    # Run the tests, see the diff.
    c.open("/console/review")
    c.submit("run-tests")
    report = c.text("#test-report")
    assert "creamer shows coffee creamers only" in report and "failed" not in report.split("\n", 1)[1]
    c.fill("queries", "creamer\noranges")
    c.submit("run-diff")
    assert "1 of 2 intent(s) change" in c.text("#diff-summary")
    assert "creamer" in c.text("#diff")
    c.shot("review")

    # The preview: live without the draft, staging with it, the consumed span marked.
    c.preview("creamer")
    assert "coffee-creamers" not in c.applied_on("live")
    assert "coffee-creamers" in c.applied_on("staging")
    mark = c.driver.find_element(By.CSS_SELECTOR, 'section[data-side="staging"] p.intent mark')
    assert mark.text == "creamer" and "coffee-creamers" in (mark.get_attribute("data-policies") or "")
    c.shot("preview")
    c.open("/console/review")

    # Four eyes: the author may not approve her own change; the workflow says why.
    c.submit("approve")
    refusal = c.text("#refusal")
    assert "self_approval" in refusal and "another approver must approve it" in refusal
    c.shot("review-refused")
    c.sign_out()

    # An auditor may read but not approve: the workflow's role refusal.
    c.sign_in(lc.keys["carol"])
    c.open("/console/review")
    c.submit("approve")
    assert "carol may not approve: it needs the role approver" in c.text("#refusal")
    c.sign_out()

    # Another approver approves and promotes.
    c.sign_in(lc.keys["bob"])
    c.open("/console/review")
    c.fill("comment", "checked the diff")
    c.submit("approve")
    assert "Done: approved" in c.text("#notice")
    c.fill("promote-reason", "creamers campaign")
    c.submit("promote")
    assert "Done: promoted" in c.text("#notice")
    promoted = lc.workflow.environment("live").version
    assert promoted != live_before

    # The preview shows the new behaviour on live: each hit placed by the policy.
    c.preview("creamer")
    assert "coffee-creamers" in c.applied_on("live")
    hits = c.driver.find_elements(By.CSS_SELECTOR, 'section[data-side="live"] tr.hit')
    assert len(hits) >= 3 and all("coffee-creamers" in h.text for h in hits)

    # The kill switch, from the policy's page.
    c.open("/console/policies/coffee-creamers")
    assert "Shoppers typing creamer want coffee creamers" in c.text(".explain")
    history = c.text("#history-table")
    assert "promote" in history and "bob" in history and "creamers campaign" in history
    c.fill("disable-reason", "customer complaints")
    c.submit("disable-reason")
    assert "Done: disabled" in c.text("#notice")
    c.preview("creamer")
    assert "coffee-creamers" not in c.applied_on("live")

    # Roll back: what was live before the kill switch, the promoted version.
    c.open("/console/review")
    c.fill("rollback-reason", "complaints resolved")
    c.submit("rollback")
    assert "Done: rolled back" in c.text("#notice")
    assert lc.workflow.environment("live").version == promoted
    c.preview("creamer")
    assert "coffee-creamers" in c.applied_on("live")
    c.sign_out()

    # The audit: a recorded request, rendered like the preview; decisions by policy.
    answer = httpx.post(c.base + "/v1/search", json={"intent": "creamer"}, timeout=WAIT_S)
    assert answer.status_code == 200, answer.text
    request_id = answer.json()["request_id"]
    c.sign_in(lc.keys["carol"])
    c.open(f"/console/audit?request_id={request_id}")
    assert request_id in c.text("h2")
    assert "coffee-creamers" in c.applied_on(f"request {request_id}")
    c.shot("audit")
    c.open("/console/audit?policy_id=coffee-creamers")
    assert request_id in c.text("#decisions")

    # The policy's page: history with the kill switch and the rollback, impact from the audit.
    c.open("/console/policies/coffee-creamers")
    history = c.text("#history-table")
    assert "customer complaints" in history and "complaints resolved" in history
    assert "enabled" in history  # the field the kill switch and the rollback changed
    assert "applied 1" in c.text("#impact-table")
    c.shot("policy")


def test_the_moves_without_an_event_in_a_browser(console: Console, lifecycle: Lifecycle) -> None:
    """The history page beside the workflow: a withdrawn kill switch and a promotion whose
    process died before moving live (its reason hostile markup), read by an auditor who
    follows the header's link; the reason shows as text, nothing of it runs or renders."""
    lc, c = lifecycle, console
    withdrawn_disable(lc)
    doomed = workflow(lc, Crashing(lc.engine, alias_move(lc, "live")), dead_owner)
    with pytest.raises(Crash):
        doomed.promote(lc.principals["bob"], candidate(lc, "herbal", "herbal tea"), HOSTILE)

    c.sign_in(lc.keys["carol"])
    page = c.driver.find_element(By.TAG_NAME, "html")
    c.driver.find_element(By.LINK_TEXT, "History").click()
    WebDriverWait(c.driver, WAIT_S).until(_replaced(page))
    c.loaded()
    assert c.text("h1") == "History"
    moves = c.driver.find_elements(By.CSS_SELECTOR, "#moves tbody tr.move")
    assert [m.get_attribute("data-state") for m in moves] == ["dropped", "withdrawn"]
    dropped, withdrawn = (m.text for m in moves)
    assert HOSTILE in dropped and "promote by bob" in dropped and "live never served" in dropped
    assert "its event could not be written; the alias was moved back" in withdrawn
    assert not c.driver.find_elements(By.CSS_SELECTOR, "#moves img, #moves script")
    assert "never made" in c.text("#move-states") and "taken back" in c.text("#move-states")
    assert "bootstrap" in c.text("#events") and HOSTILE not in c.text("#events")
    c.shot("history")

    c.driver.find_element(By.CSS_SELECTOR, "#env option[value='staging']").click()
    c.submit("show-history")
    assert "No move without an event: every move of staging is in the history." in c.text("#no-moves")

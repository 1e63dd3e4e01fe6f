"""The web viewer in a real browser (Debian's headless Chromium, driven by selenium through
/usr/bin/chromedriver): open a run, pick a fact and see its memory; approve a waiting call
and see the run go on; follow a run another process records; read a thread as a
conversation, follow a turn to its run and find its branch; answer a turn's question on the
thread page. Skipped where Chromium is missing (a failure under CI=true, whose .ci/run
installs it).

`AGENTSM_UI_SCREENSHOTS=docs/images` saves the screenshots the README shows."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web viewer needs the ui extra")
pytest.importorskip("selenium", reason="the browser tests need selenium (the test extra)")

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from agentsm import HumanInputRequired  # noqa: E402
from eventstore import SQLiteEventStore  # noqa: E402
from replay import branch_thread, decide  # noqa: E402
from replay.cli import main  # noqa: E402
from replay.ui import Server, Viewer, create_app  # noqa: E402

from .outside_agent import make_agent as make_asking_agent  # noqa: E402
from .thread_agent import make_agent as make_thread_agent  # noqa: E402
from .ui_agent import ANSWER, make_agent  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1500",
)

pytestmark = pytest.mark.required_in_ci


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
        pytest.skip("Chromium is missing: apt-get install chromium chromium-driver (.ci/run does)")
    profile = tempfile.mkdtemp(prefix="agentsm-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "SEVERE"})
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    """Start the viewer of a log on a free port in a thread; stopped in teardown."""
    started: list[Server] = []

    def start(db: str, **settings: Any) -> Server:
        server = Server(create_app(Viewer(db, **settings))).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(autouse=True)
def _no_page_errors(browser: webdriver.Chrome, serve: Callable[..., Server]) -> Iterator[None]:
    """A journey fails on any error the page logged: a script error, a request the page
    made that failed, or anything the content security policy blocked. (Checked while the
    servers still run; then the page is left, so that nothing it would still ask for meets
    a stopped server.)"""
    browser.get_log("browser")  # forget the previous journey's
    yield
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    browser.get("about:blank")
    assert not errors, errors


def wait(driver: webdriver.Chrome, what: str, test: Callable[[Any], Any]) -> Any:
    """Wait (up to 30 s, checking the page every 50 ms) until `test(driver)` is truthy; an
    element the page replaced while it was read is read again."""
    waiting = WebDriverWait(
        driver, 30, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)
    )
    try:
        return waiting.until(test)
    except Exception as e:
        raise AssertionError(f"the page never showed {what}") from e


def find(driver: webdriver.Chrome, selector: str) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, selector)


def texts(driver: webdriver.Chrome, selector: str) -> list[str]:
    """The text of every element `selector` finds, read at once (the page re-renders as
    facts arrive, so elements found one call earlier may be gone)."""
    found = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e.textContent)", selector
    )
    return [str(t) for t in found]


def status_is(status: str) -> Callable[[Any], bool]:
    return lambda d: status in texts(d, ".head [data-testid=status]")


def screenshot(driver: webdriver.Chrome, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("AGENTSM_UI_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(folder / name))


def waiting_run(db: str) -> str:
    with SQLiteEventStore(db) as store:
        with pytest.raises(HumanInputRequired) as waiting:
            make_agent("pay the invoice").store(store).build().run()
        return waiting.value.run_id


def test_open_a_run_pick_a_fact_and_see_its_memory(
    browser: webdriver.Chrome, serve: Callable[..., Server], tmp_path: Path
) -> None:
    db = str(tmp_path / "demo.db")
    assert main(["demo", "--db", db]) == 0
    server = serve(db)
    browser.get(server.url + "/")
    rows = wait(browser, "the runs", lambda d: find(d, "[data-testid=runs] tbody tr"))
    assert len(rows) == 2
    screenshot(browser, "ui-runs.png", tmp_path)
    parent = next(r for r in rows if not r.find_elements(By.CSS_SELECTOR, "td:nth-child(8) a"))
    parent.find_element(By.CSS_SELECTOR, "a").click()
    wait(browser, "the facts", lambda d: find(d, "[data-testid=fact]"))
    assert "null" not in browser.find_element(By.CSS_SELECTOR, ".head").text
    visited = {e.get_attribute("data-state") for e in find(browser, "g.state.visited")}
    assert {"Idle", "Planning", "Acting", "Observing", "Done"} <= visited
    assert "Path: Idle → Planning" in browser.find_element(By.CSS_SELECTOR, ".pictures p").text
    assert find(browser, "[data-testid=timeline] g.block.tool")
    asked = next(
        row
        for row in find(browser, "[data-testid=fact]")
        if "LlmRequested" in row.text and int(row.get_attribute("data-seq") or 0) > 10
    )
    seq = asked.get_attribute("data-seq")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", asked)
    asked.click()
    memory = wait(browser, "the memory", lambda d: find(d, "[data-testid=memory]"))[0]
    assert "Memory (state Planning)" in memory.text and "search(" in memory.text
    talk = browser.find_element(By.CSS_SELECTOR, "[data-testid=conversation]")
    assert f"as sent by the LLM request at seq {seq}" in talk.text
    assert "capital of France" in talk.text
    assert browser.find_element(By.CSS_SELECTOR, "g.state.here").get_attribute("data-state") == (
        "Planning"
    )
    browser.execute_script("document.querySelector('.split').scrollIntoView()")
    screenshot(browser, "ui-memory.png", tmp_path)
    lineage = browser.find_element(By.CSS_SELECTOR, "[data-testid=lineage]")
    assert "parted at seq" in lineage.text
    browser.execute_script("window.scrollTo(0, 0)")
    screenshot(browser, "ui-run.png", tmp_path)
    lineage.find_element(By.LINK_TEXT, "diff").click()
    relation = wait(browser, "the diff", lambda d: find(d, "[data-testid=relation]"))[0]
    assert "B branched from A at seq" in relation.text
    columns = find(browser, "[data-testid=diff] .column")
    assert len(columns) == 2 and "LlmResponded" in columns[0].text
    screenshot(browser, "ui-diff.png", tmp_path)


def test_approve_a_waiting_call_and_see_the_run_go_on(
    browser: webdriver.Chrome, serve: Callable[..., Server], tmp_path: Path
) -> None:
    db = str(tmp_path / "pay.db")
    run_id = waiting_run(db)
    server = serve(db, allow_write=True, builder=make_agent)
    browser.get(f"{server.url}/#/run/{run_id}")
    approve = wait(browser, "the approve button", lambda d: find(d, "[data-testid=approve]"))[0]
    assert "pay" in browser.find_element(By.CSS_SELECTOR, "[data-testid=waiting]").text
    wait(browser, "the waiting status", status_is("waiting"))
    screenshot(browser, "ui-waiting.png", tmp_path)
    approve.click()
    wait(browser, "the run done", status_is("done"))
    shown = wait(browser, "the answer", lambda d: texts(d, "[data-testid=answer]"))
    assert ANSWER in shown[0]  # the markup is shown as text, and it did not run
    assert browser.execute_script("return window.pwned === undefined")
    assert not find(browser, "[data-testid=answer] script, [data-testid=answer] b")
    assert not find(browser, "[data-testid=approve]")
    kinds = texts(browser, "[data-testid=fact]")
    assert any("HumanDecided" in k for k in kinds) and "RunFinished" in kinds[-1]


def test_follow_a_run_another_process_records(
    browser: webdriver.Chrome, serve: Callable[..., Server], tmp_path: Path
) -> None:
    db = str(tmp_path / "pay.db")
    run_id = waiting_run(db)
    decide(db, run_id, "approved")
    server = serve(db)  # read-only: this page only watches
    browser.get(f"{server.url}/#/run/{run_id}")
    wait(browser, "the decided run", status_is("ready"))
    shown = len(find(browser, "[data-testid=fact]"))
    with SQLiteEventStore(db) as store:  # what another process (a worker) would do
        make_agent("pay the invoice").store(store).attach(run_id).run()
        last = store.run(run_id).last_seq
    wait(browser, "every new fact", lambda d: len(find(d, "[data-testid=fact]")) == last)
    assert last > shown
    wait(browser, "the run done", status_is("done"))
    assert "→ Done" in texts(browser, ".pictures p")[0]
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight / 3)")
    screenshot(browser, "ui-live.png", tmp_path)


def test_a_thread_as_a_conversation_its_turns_runs_and_branch(
    browser: webdriver.Chrome, serve: Callable[..., Server], tmp_path: Path
) -> None:
    db = str(tmp_path / "chat.db")
    with SQLiteEventStore(db) as store:
        thread = make_thread_agent("chat").store(store).thread("trip")
        for text in ("Hello", "look up Oslo", "Thanks"):
            thread.send(text)
    branch_thread(db, "trip", 2, "look up Rome", make_thread_agent, new_thread_id="rome")
    server = serve(db)
    browser.get(server.url + "/")
    wait(browser, "the runs", lambda d: find(d, "[data-testid=runs] tbody tr"))
    (parent,) = texts(browser, "[data-testid=runs] tr[data-run='rome-2'] td:nth-child(8)")
    assert parent.startswith("trip-1@") and parent.endswith(" turn 2 of thread rome")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=threads-link]").click()
    wait(browser, "the threads", lambda d: find(d, "[data-testid=threads] tbody tr"))
    cells = texts(browser, "[data-testid=threads] tr[data-thread=rome] td")
    assert cells[:3] == ["rome", "2", "done"] and cells[-1] == "trip@2"
    row = browser.find_element(By.CSS_SELECTOR, "[data-testid=threads] tr[data-thread=trip] a")
    row.click()
    turns = wait(browser, "the turns", lambda d: find(d, "[data-testid=turn]"))
    assert [t.get_attribute("data-run") for t in turns] == ["trip-1", "trip-2", "trip-3"]
    said = texts(browser, "[data-testid=turn] [data-testid=said-user] pre, [data-testid=reply] pre")
    assert said == [
        "Hello",
        "Answer 1 to 'Hello'; earlier: nothing",
        "look up Oslo",
        "Answer 2 to 'look up Oslo'; earlier: Hello",
        "Thanks",
        "Answer 3 to 'Thanks'; earlier: Hello / look up Oslo",
    ]
    assert texts(browser, "[data-testid=turn] .turn-head [data-testid=status]") == ["done"] * 3
    assert 'lookup({"city":"Oslo"})' in texts(browser, "[data-testid=calls]")[0]
    branches = texts(browser, "[data-testid=branches] li")
    assert len(branches) == 1 and "rome" in branches[0] and "at turn 2" in branches[0]
    assert "look up Rome" in texts(browser, "[data-turn='2'] [data-testid=branched-here]")[0]
    screenshot(browser, "ui-thread.png", tmp_path)
    turns[1].find_element(By.CSS_SELECTOR, "[data-testid=turn-run]").click()
    wait(browser, "the turn's run", lambda d: texts(d, "[data-testid=run-id]") == ["trip-2"])
    assert "Turn 2 of thread trip" in texts(browser, "[data-testid=thread-turn]")[0]
    assert texts(browser, "[data-testid=task]") == ["look up Oslo"]
    browser.find_element(By.CSS_SELECTOR, "[data-testid=thread-turn] a").click()
    wait(browser, "the thread again", lambda d: find(d, "[data-turn='2'].picked"))
    browser.find_element(By.CSS_SELECTOR, "[data-testid=branches] a").click()
    origin = wait(browser, "where the branch came from", lambda d: texts(d, "[data-testid=origin]"))
    assert "Branched from thread trip at turn 2" in origin[0]
    turns = find(browser, "[data-testid=turn]")
    assert [t.get_attribute("data-run") for t in turns] == ["trip-1", "rome-2"]
    assert "shared with thread trip" in turns[0].text
    assert "Answer 2 to 'look up Rome'; earlier: Hello" in turns[1].text


QUESTION = "[data-turn='1'] [data-testid=question]"


def test_answer_a_turns_question_on_the_thread_page_and_see_the_turn_go_on(
    browser: webdriver.Chrome, serve: Callable[..., Server], tmp_path: Path
) -> None:
    db = str(tmp_path / "ask.db")
    with SQLiteEventStore(db) as store:
        thread = make_asking_agent("chat").store(store).thread("desk")
        with pytest.raises(HumanInputRequired):
            thread.send("ask me the city")
    server = serve(db, allow_write=True, builder=make_asking_agent)
    browser.get(f"{server.url}/#/thread/desk")
    asked = wait(browser, "the question", lambda d: find(d, QUESTION))
    assert "Which city?" in asked[0].text
    assert texts(browser, ".turn-head [data-testid=status]") == ["waiting"]
    asked[0].find_element(By.CSS_SELECTOR, "[data-testid=answer-text]").send_keys("Lyon")
    asked[0].find_element(By.CSS_SELECTOR, "[data-testid=answer]").click()
    reply = wait(browser, "the answer", lambda d: texts(d, "[data-testid=reply] pre"))
    assert reply == ["Heard: SUCCESS: Lyon"]  # the viewer's agent went on with the answer
    assert texts(browser, ".turn-head [data-testid=status]") == ["done"]
    said = texts(browser, "[data-testid=during] pre")
    assert said == ["Which city?", "Lyon"]  # the agent asked, the person answered
    assert not find(browser, "[data-testid=question]")

"""End to end in a real browser: `streamlit run app.py`, headless Chromium (Debian's, driven by
Playwright), accept a suggestion on the Link page with the mouse and one with the keyboard,
download the SKOS CSV on the Crosswalk page, then ask for SKOS Turtle and download it; on a shared app (MELO_AUTH=on) a curator signs in
and decides, a reviewer signs in, confirms it in the review queue and downloads the confirmed
mappings; with OpenID Connect, users sign in and out through a real provider (oidc-provider-mock).

Skips when Playwright or Chromium is missing (`make test` installs both where it can). Set
MELO_SCREENSHOT_DIR to keep the screenshots (docs/review-queue.png comes from here;
docs/link-page.png from scripts/screenshot_link_page.py, with `best` prepared over the full data)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rdflib import Graph
from rdflib.namespace import SKOS

from db.quickstart import start_curation
from db.store import Store
from db.testing import run_cli_ok

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    return os.environ.get("MELO_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(env: dict[str, str], log_path: Path, secrets: Path | None = None) -> Iterator[str]:
    """`streamlit run app.py` on a free local port with ``env`` (and ``secrets``, a secrets.toml,
    instead of the checkout's); yields its URL."""
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]  # fmt: skip
    if secrets is not None:
        command += ["--secrets.files", str(secrets)]
    log = log_path.open("w")
    server = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                    if response.read() == b"ok":
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.3)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def curation_env(nor_data: Path, esco_csv: Path, tmp_path: Path, url: str, shared: bool = False) -> dict[str, str]:
    """The app's environment over the nor_no start in store ``url``; ``shared``: sign-in required."""
    env = {
        "MELO_DATA": str(nor_data),
        "MELO_ESCO": str(esco_csv),
        "MELO_CACHE": str(tmp_path / "cache"),
        "MELO_DB_URL": url,
        "MELO_PREPARE": "manual",  # the app serves a ready pipeline; nothing is built in the background
    }
    return env | {"MELO_AUTH": "on"} if shared else env


@pytest.fixture
def app_url(nor_data: Path, esco_csv: Path, tmp_path: Path) -> Iterator[str]:
    """The app over the nor_no curation start (ESCO union of one dataset, the crosswalk's terms)."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
    with serve(curation_env(nor_data, esco_csv, tmp_path, url), tmp_path / "streamlit.log") as app:
        yield app


@pytest.fixture
def shared_app(nor_data: Path, esco_csv: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The app shared (MELO_AUTH=on) over the nor_no start, with curators alice and bob, reviewer
    rita, and two terms on which alice and bob disagree; yields (app URL, store URL)."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
        store.add_account("alice", "curator", "alice-secret")
        store.add_account("bob", "curator", "bob-secret-1")
        store.add_account("rita", "reviewer", "rita-secret")
        alice, bob = store.sign_in("alice", "alice-secret"), store.sign_in("bob", "bob-secret-1")
        terms = store.queue("nor_no", limit=3)[1:]
        doctor = store.find_concepts("lege", limit=2)
        store.decide(terms[0].id, doctor[0].uri, "exactMatch", alice, concept_label=doctor[0].label)
        store.decide(terms[0].id, doctor[0].uri, "narrowMatch", bob, concept_label=doctor[0].label)
        store.decide(terms[1].id, doctor[0].uri, "exactMatch", alice, concept_label=doctor[0].label)
        store.decide(terms[1].id, doctor[1].uri, "exactMatch", bob, concept_label=doctor[1].label)
    with serve(curation_env(nor_data, esco_csv, tmp_path, url, shared=True), tmp_path / "streamlit.log") as app:
        yield app, url


@pytest.fixture
def oidc_app(nor_data: Path, esco_csv: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The app shared (MELO_AUTH=on) over the nor_no start, signing in through OpenID Connect
    against a real provider on this machine (oidc-provider-mock: any subject it is given signs in,
    with that subject as e-mail); rita@example.org a reviewer and dave@example.org disabled
    beforehand, as `users add EMAIL --oidc` would. Yields (app URL, store URL)."""
    provider = pytest.importorskip(
        "oidc_provider_mock", reason="oidc-provider-mock is not installed (requirements-dev.txt)"
    )
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
        store.add_account("rita@example.org", "reviewer")
        store.add_account("dave@example.org", "curator")
        store.set_disabled("dave@example.org", True)
    with provider.run_server_in_thread() as server:
        secrets = tmp_path / "secrets.toml"
        secrets.write_text(
            "[auth]\n"
            'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
            'cookie_secret = "a-secret-for-this-test-only"\n'
            'client_id = "melo-studio"\n'
            'client_secret = "melo-studio-secret"\n'
            f'server_metadata_url = "http://localhost:{server.server_port}/.well-known/openid-configuration"\n',
            encoding="utf-8",
        )
        env = curation_env(nor_data, esco_csv, tmp_path, url, shared=True)
        with serve(env, tmp_path / "streamlit.log", secrets=secrets) as app:
            yield app, url


@pytest.fixture
def runs_app_url(run_set_db: Path, melo_data: Path, tmp_path: Path) -> Iterator[str]:
    """The app over the small stored run set (tests/conftest.py)."""
    shutil.copy(run_set_db, tmp_path / "melo.db")
    env = {
        "MELO_DATA": str(melo_data),
        "MELO_CACHE": str(tmp_path / "cache"),
        "MELO_DB_URL": f"sqlite:///{tmp_path / 'melo.db'}",
    }
    with serve(env, tmp_path / "streamlit.log") as app:
        yield app


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    """A page of headless Chromium (Debian's, driven by Playwright) that accepts downloads; the
    test skips without them, before its app is started (request this fixture first)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)")
    executable = chromium_path()
    if executable is None:
        pytest.skip("Chromium not found (Debian package chromium; or set MELO_CHROMIUM)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_FLAGS,
            accept_downloads=True,
            viewport={"width": 1400, "height": 1100},
        )
        try:
            opened = browser.new_page()
            opened.set_default_timeout(60_000)
            yield opened
        finally:
            browser.close()


def test_accept_a_suggestion_and_download_the_skos_csv(page: Any, app_url: str, tmp_path: Path) -> None:
    page.goto(f"{app_url}/Link")
    page.get_by_label("Your name (recorded with every decision)").fill("Alice")
    page.get_by_role("button", name="Start").click()
    page.get_by_role("button", name="Exact").wait_for()
    page.get_by_text("Offiserer fra fenrik og høyere grad", exact=True).first.wait_for()
    page.wait_for_timeout(1500)  # let the table and the fonts settle for the screenshot
    shots = Path(os.environ.get("MELO_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "link-page.png"), full_page=True)

    page.get_by_role("button", name="Exact").click()
    page.get_by_text("Saved: Offiserer fra fenrik og høyere grad").first.wait_for()

    # The keyboard: letters typed into a text box are text, not shortcuts...
    comment = page.get_by_label("Comment (optional)")
    comment.fill("")
    comment.press_sequentially("xu")
    page.wait_for_timeout(1500)
    assert page.get_by_text("(rejected).").count() == 0 and page.get_by_text("(unsure).").count() == 0
    comment.fill("")
    page.evaluate("document.activeElement.blur()")
    # ...elsewhere, 2 picks the second candidate and N accepts it as a narrow match.
    page.keyboard.press("2")
    page.wait_for_timeout(1000)
    page.keyboard.press("n")
    page.get_by_text("(narrowMatch).").first.wait_for()

    page.get_by_role("link", name="Crosswalk").click()
    page.get_by_role("button", name="SKOS CSV").wait_for()
    page.reload()  # a new session: the curator rides in the address (?curator=Alice), so no name is asked
    page.get_by_text("Curator: Alice").wait_for()
    assert page.get_by_label("Your name (recorded with every decision)").count() == 0
    with page.expect_download() as download_info:
        page.get_by_role("button", name="SKOS CSV").click()
    content = Path(download_info.value.path()).read_text(encoding="utf-8")
    header, *rows = content.splitlines()
    assert header.startswith("source_uri,source_code,source_label,relation,target_uri")
    accepted = [r for r in rows if ",skos:exactMatch," in r]
    assert len(accepted) == 1 and "Offiserer fra fenrik" in accepted[0] and ",Alice," in accepted[0]
    by_key = [r for r in rows if ",skos:narrowMatch," in r]
    assert len(by_key) == 1 and ",Alice," in by_key[0] and "Offiserer fra fenrik" not in by_key[0]

    # SKOS Turtle is written once asked for; then it downloads like the others.
    page.get_by_role("button", name="Write SKOS Turtle").click()
    with page.expect_download() as download_info:
        page.get_by_role("button", name="SKOS Turtle", exact=True).click()
    graph = Graph().parse(Path(download_info.value.path()), format="turtle")
    assert len(list(graph.triples((None, SKOS.exactMatch, None)))) == 1
    assert len(list(graph.triples((None, SKOS.narrowMatch, None)))) == 1


def sign_in(page: Any, username: str, password: str) -> None:
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Sign in").click()


def test_curator_decides_reviewer_confirms_and_exports_confirmed(
    page: Any, shared_app: tuple[str, str], tmp_path: Path
) -> None:
    app_url, store_url = shared_app
    page.goto(f"{app_url}/Link")
    navigation = page.locator("[data-testid='stSidebarNav']")
    navigation.get_by_text("Home", exact=True).wait_for()  # the landing page, not "app"
    assert navigation.get_by_text("app", exact=True).count() == 0
    assert page.get_by_role("button", name="Deploy").count() == 0  # no developer toolbar
    sign_in(page, "alice", "not-her-password")
    page.get_by_text("wrong user name or password.").wait_for()
    sign_in(page, "alice", "alice-secret")
    page.get_by_text("Signed in as").wait_for()
    page.get_by_role("button", name="Exact").click()
    page.get_by_text("Saved: Offiserer fra fenrik og høyere grad").first.wait_for()

    reviewer = page.context.new_page()  # another browser tab: a session of its own
    reviewer.set_default_timeout(60_000)
    reviewer.goto(f"{app_url}/Crosswalk")
    sign_in(reviewer, "rita", "rita-secret")
    queue = reviewer.locator(".st-key-cw_review")
    queue.get_by_text("Review queue").wait_for()
    reviewer.get_by_role("button", name="Confirm selected (0)").wait_for()
    queue.scroll_into_view_if_needed()
    reviewer.wait_for_timeout(1500)  # let the table and the fonts settle for the screenshot
    shots = Path(os.environ.get("MELO_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    queue.screenshot(path=str(shots / "review-queue.png"))

    # Select alice's decision (the first row: the first term) in the table, confirm it.
    grid = queue.locator("[data-testid='stDataFrame']")
    box = grid.bounding_box()
    reviewer.mouse.click(box["x"] + 18, box["y"] + 35 + 17)
    reviewer.get_by_role("button", name="Confirm selected (1)").click()
    reviewer.get_by_text("Confirmed 1 mapping(s).").wait_for()

    reviewer.get_by_text("Only confirmed mappings").click()
    # The caption is under the buttons: once it says so, the buttons serve the filtered files.
    reviewer.get_by_text("The downloads hold 1 decision confirmed by a reviewer.").wait_for()
    with reviewer.expect_download() as download_info:
        reviewer.get_by_role("button", name="SKOS CSV").click()
    rows = Path(download_info.value.path()).read_text(encoding="utf-8").splitlines()[1:]
    matched = [r for r in rows if ",skos:" in r]
    assert len(matched) == 1 and "Offiserer fra fenrik" in matched[0] and ",alice," in matched[0]
    everything = run_cli_ok("export", "--scheme", "nor_no", "--format", "skos-csv", "--out", "-", "--db", store_url)
    confirmed = run_cli_ok("export", "--scheme", "nor_no", "--format", "skos-csv", "--out", "-", "--db", store_url,
                           "--confirmed-only")  # fmt: skip
    assert everything.count(",skos:") == 4 and [r for r in confirmed.splitlines() if ",skos:" in r] == matched


def sign_in_with_provider(page: Any, app_url: str, subject: str, then: str) -> None:
    """The app's OpenID Connect button, the provider's form (oidc-provider-mock's), then the page
    ``then``: Streamlit's callback lands on the home page."""
    page.get_by_role("button", name="Sign in with your organisation's account").click()
    page.locator("input[name='sub']").fill(subject)
    page.get_by_role("button", name="Authorize", exact=True).click()
    page.get_by_text("Link occupation names to the ESCO taxonomy").wait_for()
    page.goto(f"{app_url}/{then}")


def test_sign_in_through_openid_connect(page: Any, oidc_app: tuple[str, str]) -> None:
    """A first sign-in creates a curator account under the provider's e-mail, and decisions record
    it; a reviewer made beforehand signs in as a reviewer; a disabled account is told so."""
    app_url, store_url = oidc_app
    page.goto(f"{app_url}/Link")
    page.get_by_text("Decisions are recorded under the identity your organisation's sign-in gives.").wait_for()
    assert page.get_by_label("Password", exact=True).count() == 0  # no local accounts beside the provider
    sign_in_with_provider(page, app_url, "carol@example.org", then="Link")
    page.get_by_text("Signed in as carol@example.org (curator)").wait_for()
    page.get_by_role("button", name="Exact").click()
    page.get_by_text("Saved: Offiserer fra fenrik og høyere grad").first.wait_for()
    with Store(store_url) as store:
        assert [(a.username, a.role, a.local) for a in store.accounts() if a.username.startswith("carol")] == [
            ("carol@example.org", "curator", False)
        ]
    exported = run_cli_ok("export", "--scheme", "nor_no", "--format", "skos-csv", "--out", "-", "--db", store_url)
    decided = [r for r in exported.splitlines() if ",skos:exactMatch," in r]
    assert len(decided) == 1 and ",carol@example.org," in decided[0]

    # Signing out ends the provider's session too (its confirmation page), then the home page; the
    # identity cookie is gone, so the next visit asks again.
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="End session").click()
    page.get_by_text("Link occupation names to the ESCO taxonomy").wait_for()
    page.goto(f"{app_url}/Link")
    sign_in_with_provider(page, app_url, "dave@example.org", then="Link")
    page.get_by_text("the account 'dave@example.org' is disabled").wait_for()

    sign_in_with_provider(page, app_url, "rita@example.org", then="Crosswalk")
    page.get_by_text("Signed in as rita@example.org (reviewer)").wait_for()
    page.locator(".st-key-cw_review").get_by_text("Review queue").wait_for()


def test_a_benchmark_chart_downloads_as_png(page: Any, runs_app_url: str) -> None:
    """The charts' PNG comes from Plotly's camera button in the browser (no server-side renderer)."""
    page.goto(f"{runs_app_url}/Benchmark")
    chart = page.locator(".st-key-chart_heatmap_mrr .js-plotly-plot").first  # not the reliability diagram above it
    chart.wait_for()
    chart.hover()
    with page.expect_download() as download_info:
        chart.locator("[data-title='Download plot as a PNG']").first.click()  # Streamlit's modebar
    download = download_info.value
    content = Path(download.path()).read_bytes()
    assert download.suggested_filename == "heatmap_mrr.png"
    assert content.startswith(b"\x89PNG\r\n\x1a\n") and len(content) > 10_000

"""docs/link-page.png: the Link page as a curator sees it once `best` is prepared.

    python -m melo_core prepare --data ../shared/melo --pipeline best --langs en,no
    python scripts/screenshot_link_page.py --data ../shared/melo --esco ../shared/esco --out docs/link-page.png

Starts `streamlit run app.py` over the full data with a fresh store (the cache and models of the
project root, so `best` serves), signs in as "Alice", imports the nor_no terms with the page's own
button, and saves a full-page screenshot of the first term's candidates (headless Chromium, as in
tests/test_e2e_browser.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.test_e2e_browser import CHROMIUM_FLAGS, chromium_path, serve


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the MELO data folder")
    parser.add_argument("--esco", required=True, help="the ESCO CSV export folder (ISCO groups, descriptions)")
    parser.add_argument("--out", default="docs/link-page.png")
    parser.add_argument("--wait", type=int, default=600, help="seconds to wait for the candidates (default 600)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        env = {"MELO_DATA": str(Path(args.data).resolve()), "MELO_ESCO": str(Path(args.esco).resolve()),
               "MELO_DB_URL": f"sqlite:///{work / 'melo.db'}", "MELO_PREPARE": "manual"}  # fmt: skip
        with serve(env, work / "streamlit.log") as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch_persistent_context(
                str(work / "profile"),
                executable_path=chromium_path(),
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": 1400, "height": 1100},
            )
            page = browser.new_page()
            page.set_default_timeout(args.wait * 1000)
            page.goto(f"{url}/Link")
            page.get_by_label("Your name (recorded with every decision)").fill("Alice")
            page.get_by_role("button", name="Start").click()
            page.get_by_role("button", name="Import ESCO and these terms").click()
            page.get_by_role("button", name="Exact").wait_for()
            page.wait_for_timeout(3000)  # the table and the fonts settle
            page.screenshot(path=args.out, full_page=True)
            browser.close()
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The store the page benchmarks (crosswalk_page.py, link_page.py) time a page on: a fresh SQLite
store with the ESCO union of the data folder and one crosswalk's terms, its matches as decisions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def store_with_crosswalk(folder: str | Path, data: str, crosswalk: str, scheme: str | None = None,
                         todo_scheme: str | None = None) -> str:  # fmt: skip
    """The store's URL, in ``folder``: `import-taxonomy`, then `import-terms --with-decisions` of
    ``crosswalk`` as ``scheme`` (default: the crosswalk's code); with ``todo_scheme``, its terms
    again under that name with nothing decided."""
    url = f"sqlite:///{Path(folder) / 'melo.db'}"
    cli = [sys.executable, "-m", "melo_core"]
    subprocess.run([*cli, "import-taxonomy", "--data", data, "--db", url], check=True, cwd=ROOT)
    subprocess.run([*cli, "import-terms", "--scheme", scheme or crosswalk, "--crosswalk", crosswalk,
                    "--with-decisions", "--data", data, "--db", url], check=True, cwd=ROOT)  # fmt: skip
    if todo_scheme:
        subprocess.run([*cli, "import-terms", "--scheme", todo_scheme, "--crosswalk", crosswalk, "--data", data,
                        "--db", url], check=True, cwd=ROOT)  # fmt: skip
    return url

"""Store: concept search on the ESCO union of the MELO corpora (316,372 labels, 21 languages), the
Link page's "Find any concept by label" (issue 90). How long one ``Store.find_concepts`` takes,
and how long migration 0007 takes to refill the labels' search text of an existing store.

    python benchmarks/concept_search.py                                   # SQLite, a temp file
    scripts/with_postgres.sh python benchmarks/concept_search.py --backend postgresql

Prints, per query, the median of ``--repeat`` runs (limit 10, as the page asks) and the first
result; no results file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from db.store import Store, _alembic_config  # noqa: E402
from db.testing import empty_store_url, run_cli_ok  # noqa: E402
from melo_core.cli.arguments import at_least  # noqa: E402

QUERIES = ("nurse care", "nurse", "nurs car", "market research manager", "Bäcker", "lege", "e", "ma")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "melo"), help="MELO data folder")
    parser.add_argument("--repeat", type=at_least(1), default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, empty_store_url(args.backend, Path(folder)) as url:
        start = time.perf_counter()
        run_cli_ok("import-taxonomy", "--data", args.data, "--db", url, "--quiet")
        print(f"{args.backend}: import-taxonomy {time.perf_counter() - start:.1f} s")
        with Store(url) as store:
            from alembic import command

            with store.engine.begin() as connection:
                command.downgrade(_alembic_config(connection), "0006")
        start = time.perf_counter()
        Store(url).close()  # opening upgrades: 0007 refills every label
        print(f"migration 0007 on the union: {time.perf_counter() - start:.1f} s")
        with Store(url) as store:
            for query in QUERIES:
                times = []
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    found = store.find_concepts(query, limit=10, language="en")
                    times.append(time.perf_counter() - start)
                first = f"{found[0].name} (matched “{found[0].label}”, {found[0].language})" if found else "-"
                print(f"{query!r:28} {statistics.median(times) * 1000:6.0f} ms  {len(found):2d} found, first {first}")


if __name__ == "__main__":
    main()

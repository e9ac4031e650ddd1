"""CLI commands of the crosswalk store, registered into ``python -m melo_core`` from above:
``register`` is the entry point ``store`` of group ``melo_studio.cli`` (pyproject.toml), which
``melo_core.cli.extensions`` loads; it also gives core commands the store (``eval --store``,
``train --with-decisions``).

- ``import-taxonomy --data DIR | --esco-csv DIR [--replace]``: the ESCO union of the MELO corpora,
  or the ESCO CSV export; a replacement that would remove many concepts, change the languages or
  overwrite melo-union from elsewhere needs ``--replace``.
- ``import-terms --scheme NAME --csv FILE | --crosswalk CODE|FILE.json [--with-decisions] |
  --skos-csv FILE``.
- ``export --scheme NAME --format skos-csv|sssom|turtle|… --out FILE|- [--negatives] [--suggestions]
  [--confirmed-only] [--undecided] [--validate] [--no-formula-guard]``.
- ``migrate --scheme NAME --to VERSION [--name esco] [--dry-run] [--review-out FILE]``: re-target a
  scheme's crosswalk to another imported taxonomy version; a report counts carried-over,
  relabelled, replaced and gone concepts, and the changed ones go to a review queue (without
  ``--to``: the open queue as CSV).
- ``users add NAME [--role curator|reviewer] [--oidc]`` (the password from a prompt, or one line
  of stdin with ``--password-stdin``), ``users disable NAME``, ``users enable NAME``, ``users
  list``: the accounts of a shared app.
- ``import-results --data DIR``: the published baselines of ``results/`` as read-only evaluation
  runs (``eval --store`` stores runs of ours).
- ``propose --scheme NAME [--precision 0.95] [--pipeline P]``: machine proposals for the scheme's
  undecided terms whose first candidate's calibrated probability clears the threshold of that
  precision on other countries (``db.proposals``); the Crosswalk page confirms or rejects them.

The store is ``--db URL``, else ``MELO_DB_URL``, else ``melo.db`` in the project root. Files are
checked completely before the store is opened: a bad file exits with code 2 and writes nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from melo_core import config
from melo_core.cli.extensions import Decision, Extensions, RecordRun, StoreAccess
from melo_core.errors import MeloInputError
from melo_core.evaluation.effort import PROPOSAL_PRECISION
from melo_core.files.output import check_output, message_stream, store_inputs

if TYPE_CHECKING:
    from db.store import MigrationItem
    from melo_core.esco.datasets import MeloDataset
    from melo_core.evaluation.protocol import EvaluationResult

DB_HELP = "store URL (SQLAlchemy); default: $MELO_DB_URL, else the SQLite file melo.db in the project root"
CREATE_HELP = "create the store if there is none yet (without it, a store that does not exist is refused)"


def _split(value: str | None) -> list[str] | None:
    if not value:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _esco_version(folder: Path) -> str:
    """The ESCO version named in the export's folder (``ESCO dataset - v1.2.0 - ...``)."""
    for part in (folder.resolve().name, folder.resolve().parent.name):
        match = re.search(r"\bv(\d+(?:\.\d+)+)\b", part)
        if match:
            return f"v{match.group(1)}"
    return "esco-csv"


def cmd_import_taxonomy(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from db.imports import count_labels, import_taxonomy
    from db.store import Store
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo, taxonomy_from_esco_csv, taxonomy_from_melo

    languages = _split(args.langs)
    started = time.perf_counter()
    say = (lambda message: None) if args.quiet else (lambda message: print(message, file=sys.stderr))
    if args.esco_csv:
        say(f"reading the ESCO CSV export in {args.esco_csv} ...")
        taxonomy = taxonomy_from_esco_csv(args.esco_csv, languages)
        version = args.version or _esco_version(Path(args.esco_csv))
        source = str(Path(args.esco_csv).resolve())
    else:
        say(f"reading the MELO corpora in {args.data} ...")
        if languages:
            taxonomy = taxonomy_from_melo(args.data, languages)
        else:
            taxonomy = cached_taxonomy_from_melo(args.data)
        version = args.version or "melo-union"
        source = str(Path(args.data).resolve())
    total = len(taxonomy.concepts) + count_labels(taxonomy)
    with Store(args.db, create=True) as store:
        with tqdm(total=total, unit="row", desc="importing taxonomy", disable=args.quiet, file=sys.stderr) as bar:
            report = import_taxonomy(store, taxonomy, args.name, version, source, on_progress=bar.update,
                                     replace=args.replace, from_melo_corpora=not args.esco_csv)  # fmt: skip
        print(f"{report.summary()} in {store.display_url} ({time.perf_counter() - started:.1f} s)")
    return 0


def cmd_import_terms(args: argparse.Namespace) -> int:
    from db.imports import check_accounted, import_terms, read_term_file
    from db.store import Store
    from melo_core.esco.crosswalk import crosswalk_path

    if args.with_decisions and not args.crosswalk:
        raise MeloInputError("--with-decisions goes with --crosswalk (a SKOS CSV always brings its decisions)")
    if args.csv:
        source = read_term_file(args.csv, "csv")
    elif args.crosswalk:
        source = read_term_file(crosswalk_path(args.data, args.crosswalk), "crosswalk", args.with_decisions)
    else:
        source = read_term_file(args.skos_csv, "skos-csv")
    with Store(args.db, create=args.create) as store:
        report = import_terms(store, args.scheme, source, kind=args.kind, language=args.lang, base_uri=args.base_uri)
        check_accounted(source, report)
        print(f"{report.summary()} ({source.rows} read from {source.path}, into {store.display_url})")
    return 0


def _store_command_inputs(url: str | None) -> list[tuple[str, str | Path | None]]:
    """What an output of a store command must not replace: the store's file (SQLite) and the data folder."""
    return [*store_inputs(url or config.database_url()), ("the data folder", config.data_dir())]


class ExportFormatNames:
    """``export --format`` choices: the names in ``db.exports.EXPORT_FORMATS``, read when the command
    checks or prints them, so a command other than ``export`` does not import the exports (SQLAlchemy)."""

    def __contains__(self, name: object) -> bool:
        from db.exports import EXPORT_FORMATS

        return name in EXPORT_FORMATS

    def __iter__(self) -> Iterator[str]:
        from db.exports import EXPORT_FORMATS

        return iter(list(EXPORT_FORMATS))


def cmd_export(args: argparse.Namespace) -> int:
    from db.exports import export
    from db.store import Store

    check_output(args.out, _store_command_inputs(args.db))  # before the store is opened
    with Store(args.db) as store:
        rows = export(
            store,
            args.scheme,
            args.format,
            args.out,
            negatives=args.negatives,
            license=args.license,
            mapping_set_id=args.mapping_set_id,
            suggestions=args.suggestions,
            validate=args.validate,
            confirmed_only=args.confirmed_only,
            formula_guard=args.formula_guard,
            undecided=args.undecided,
        )
    if args.validate:
        print(f"{args.format} export of scheme {args.scheme} is valid", file=message_stream(args.out))
    print(f"wrote {rows} row(s) of scheme {args.scheme} as {args.format} to {args.out}", file=message_stream(args.out))
    return 0


REVIEW_COLUMNS = (
    "term_code",
    "term_label",
    "relation",
    "concept_uri",
    "change",
    "old_label",
    "new_label",
    "candidate_uri",
    "candidate_score",
    "from_version",
    "to_version",
)


def _write_review(items: Sequence[MigrationItem], out: str) -> None:
    import csv

    from db.formats import neutralise
    from melo_core.files.output import open_output

    with open_output(out) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(REVIEW_COLUMNS)
        for item in items:
            cells = [item.term_code, item.term_label, f"skos:{item.outcome}", item.concept_uri, item.change,
                     item.old_label or "", item.new_label or "", item.candidate_uri or "",
                     "" if item.candidate_score is None else f"{item.candidate_score:.4g}",
                     item.from_version or "", item.to_version]  # fmt: skip
            writer.writerow([neutralise(c) for c in cells])


def cmd_migrate(args: argparse.Namespace) -> int:
    from db.store import Store

    say = message_stream(args.review_out or "")
    check_output(args.review_out, _store_command_inputs(args.db), "--review-out")  # before the store is opened
    with Store(args.db) as store:
        if args.to is None:  # the open review queue of earlier migrations
            try:
                items = store.migration_reviews(args.scheme)
            except KeyError:
                raise store.unknown_scheme(args.scheme) from None
            _write_review(items, args.review_out or "-")
            print(f"{len(items)} open item(s) to review in scheme {args.scheme}", file=sys.stderr)
            return 0
        report = store.migrate_scheme(args.scheme, args.to, name=args.name, curator=args.curator, dry_run=args.dry_run)
        print(report.summary(), file=say, flush=True)
        if args.review_out:
            _write_review(report.review, args.review_out)
            print(f"wrote {len(report.review)} item(s) to review to {args.review_out}", file=sys.stderr)
        elif report.review:
            print(f"{len(report.review)} item(s) to review (--review-out FILE lists them)", file=sys.stderr)
    return 0


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise MeloInputError("--password-stdin: no password on standard input")
        return password
    import getpass

    if not sys.stdin.isatty():
        raise MeloInputError("no terminal to ask the password on: give it with --password-stdin")
    password = getpass.getpass(f"password for {args.name}: ")
    if getpass.getpass("again: ") != password:
        raise MeloInputError("the two passwords differ; nothing changed")
    return password


def cmd_users(args: argparse.Namespace) -> int:
    from db.store import Store
    from db.store.accounts import check_password, check_username

    if args.action == "list":
        with Store(args.db) as store:
            accounts = store.accounts()
            if not accounts:  # on stderr: stdout stays one account per line for scripts
                print("no accounts yet: add one with `python -m melo_core users add NAME`", file=sys.stderr)
            for account in accounts:
                state = "disabled" if account.disabled else "enabled"
                how = "password" if account.local else "OpenID Connect"
                print(f"{account.username}\t{account.role}\t{state}\t{how}")
        return 0
    try:
        name = check_username(args.name)
        if args.action == "add":
            with Store(args.db, create=args.create) as store:
                if store.account(name) is not None:  # before asking for a password
                    raise ValueError(f"an account {name!r} exists already")
                password = None if args.oidc else _read_password(args)
                if password is not None:
                    check_password(password)
                account = store.add_account(name, args.role, password)
                how = "signs in through OpenID Connect" if args.oidc else "signs in with a password"
                print(f"added {account.role} {account.username} ({how}) to {store.display_url}")
            return 0
        with Store(args.db) as store:
            account = store.set_disabled(name, args.action == "disable")
            print(f"{account.username} is {'disabled' if account.disabled else 'enabled'} in {store.display_url}")
        return 0
    except ValueError as exc:
        raise MeloInputError(f"users {args.action}: {exc}") from None
    except KeyError as exc:
        raise MeloInputError(f"users {args.action}: {exc.args[0]}") from None


def cmd_import_results(args: argparse.Namespace) -> int:
    from db.runs import import_published, list_runs
    from db.store import Store
    from melo_core.evaluation.published import published_models, results_dir

    if not published_models(args.data):
        expected = "expected results/<model>/<dataset>/summary.tsv"
        raise MeloInputError(f"no published results here ({expected})", results_dir(args.data))
    with Store(args.db, create=args.create) as store:
        added = import_published(store, args.data)
        total = len(list_runs(store, "published"))
        print(f"imported {added} published run(s) ({total} in all, read-only) into {store.display_url}")
    return 0


def cmd_propose(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from db.proposals import pipeline_link, propose, scheme_calibrator
    from db.store import Store
    from melo_core.version import code_version

    say = (lambda message: None) if args.quiet else (lambda message: print(message, file=sys.stderr))
    with Store(args.db) as store:
        if store.scheme(args.scheme) is None:
            raise store.unknown_scheme(args.scheme)
        if not 0.0 < args.precision < 1.0:
            raise MeloInputError(f"--precision must lie between 0 and 1, got {args.precision}")
        name, link, link_decided, kinds = pipeline_link(store, args.scheme, args.pipeline, args.data, say)
        calibrator = scheme_calibrator(name, args.scheme)
        todo = store.queue_counts(args.scheme)["todo"]
        with tqdm(total=todo, unit="term", desc="linking", disable=args.quiet, file=sys.stderr) as bar:
            report = propose(store, args.scheme, args.precision, link, calibrator, pipeline=name,
                             tool_version=code_version(), on_progress=lambda n: bar.update(n - bar.n),
                             link_decided=link_decided, kinds=kinds)  # fmt: skip
        print(report.summary())
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    data_help = f"data folder in the official MELO layout (default: $MELO_DATA or ./data; now {config.data_dir()})"

    it = commands.add_parser(
        "import-taxonomy",
        help="import ESCO (MELO corpora union or ESCO CSV export) into the crosswalk store",
        description="Import a taxonomy version into the store with bulk inserts. Importing the same "
        "content again changes nothing; new content under the same name and version replaces the old, "
        "and the diff is printed. A replacement that would remove many concepts, change the languages or "
        "overwrite melo-union from an ESCO CSV export stops unless --replace.",
    )
    source = it.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help=f"the ESCO union of the MELO corpora under this folder ({data_help})")
    source.add_argument("--esco-csv", help="folder of the ESCO CSV export (occupations_<lang>.csv, ISCOGroups_...)")
    it.add_argument("--name", default="esco", help="taxonomy name (default: esco)")
    it.add_argument(
        "--version",
        help="taxonomy version, recorded with every decision made against it (default: melo-union for "
        "--data, since the MELO corpora do not record which ESCO release they come from; for --esco-csv "
        "the vX.Y.Z in the folder name, else esco-csv). Give the real ESCO version when you know it",
    )
    it.add_argument("--langs", type=str.lower, help="comma-separated label languages to keep (default: all)")
    it.add_argument(
        "--replace",
        action="store_true",
        help="replace a stored version even when that removes more than 2%% of its concepts, changes its "
        "label languages, or overwrites melo-union with anything but --data (without it: the diff, exit 2, "
        "nothing written)",
    )
    it.add_argument("--db", help=DB_HELP)
    it.add_argument("--quiet", action="store_true", help="no progress bar")
    it.set_defaults(func=cmd_import_taxonomy)

    terms = commands.add_parser(
        "import-terms",
        help="import source terms (and decisions) of a scheme into the crosswalk store",
        description="Add a scheme's terms from a CSV (code,label[,description][,lang]), a standardised "
        "crosswalk JSON, or our SKOS CSV export (terms and decisions). Idempotent; a bad file is "
        "rejected with its line and column, and nothing is written.",
    )
    terms.add_argument("--scheme", required=True, help="source scheme name (created if new), e.g. nor_no")
    given = terms.add_mutually_exclusive_group(required=True)
    given.add_argument(
        "--csv",
        help="CSV with a header: code,label[,description][,lang] (commas, or semicolons as spreadsheets save them), "
        "or an Excel workbook (.xlsx) whose first sheet has those columns",
    )
    given.add_argument("--crosswalk", help="crosswalk code (e.g. nor_no, looked up under --data) or a JSON file")
    given.add_argument("--skos-csv", help="a SKOS CSV written by `export --format skos-csv`")
    terms.add_argument(
        "--with-decisions",
        action="store_true",
        help="with --crosswalk: its matches become decisions by curator import:<file name>",
    )
    terms.add_argument("--data", default=config.data_dir(), help=data_help)
    terms.add_argument(
        "--lang", help="language of a new scheme (default: from a crosswalk name like nor_no, else none)"
    )
    terms.add_argument("--kind", choices=("terminology", "job-titles"), help="kind of a new scheme")
    terms.add_argument(
        "--base-uri",
        help="URIs of a new scheme's terms: BASE + code (default: the code when it is a URI, "
        "else urn:melo:scheme:<scheme>:<code>)",
    )
    terms.add_argument("--db", help=DB_HELP)
    terms.add_argument("--create", action="store_true", help=CREATE_HELP)
    terms.set_defaults(func=cmd_import_terms)

    ex = commands.add_parser(
        "export",
        help="export a scheme's current crosswalk as SKOS CSV, SSSOM TSV or SKOS Turtle",
        description="Write the current crosswalk (latest decision per term and concept) of a scheme.",
    )
    ex.add_argument("--scheme", required=True, help="source scheme name")
    ex.add_argument(
        "--format",
        required=True,
        choices=ExportFormatNames(),
        metavar="FORMAT",  # argparse would read the choices (and import the exports) to build the parser
        help="output format: %(choices)s",
    )
    ex.add_argument("--out", required=True, help="output file, or - for standard output")
    ex.add_argument("--negatives", action="store_true", help="include rejections (SSSOM: predicate_modifier Not)")
    ex.add_argument(
        "--license",
        default="https://creativecommons.org/licenses/by/4.0/",
        help="SSSOM licence URI (default: CC BY 4.0, as ESCO)",
    )
    ex.add_argument(
        "--suggestions",
        action="store_true",
        help="sssom, turtle: add each scorer's best stored suggestion nobody decided on (machine mappings: "
        "mapping_tool, confidence)",
    )
    ex.add_argument(
        "--validate",
        action="store_true",
        help="check before writing: sssom with the sssom package's validator, turtle by reading it back "
        "(rdflib); invalid: exit 2, nothing written",
    )
    ex.add_argument(
        "--mapping-set-id",
        help="mapping set id, an absolute IRI (default: urn:melo:mapping-set:<scheme>); --license is one too",
    )
    ex.add_argument(
        "--no-formula-guard",
        dest="formula_guard",
        action="store_false",
        help="skos-csv, sssom: write text cells starting with =, +, -, @, tab or CR as they are (by default they "
        "get a leading ' so that a spreadsheet shows them instead of running them; SSSOM ids never need it)",
    )
    ex.add_argument(
        "--confirmed-only",
        action="store_true",
        help="only the mappings a reviewer confirmed (the latest review of their current decision)",
    )
    ex.add_argument(
        "--undecided",
        action="store_true",
        help="skos-csv: also each term without a mapping in the file, with empty relation columns (the whole "
        "scheme, as import-terms --skos-csv restores it); by default only decided terms",
    )
    ex.add_argument("--db", help=DB_HELP)
    ex.set_defaults(func=cmd_export)

    mg = commands.add_parser(
        "migrate",
        help="re-target a scheme's crosswalk to another imported ESCO version, with a review queue",
        description="Compare each current match of the scheme with the new taxonomy version: the same "
        "URI and label carries over; a new label (same URI) carries over and is flagged; a URI that is "
        "gone gets a replacement candidate (same label, else the closest label) or none. Changed ones "
        "go to a review queue. One transaction: an unknown scheme or version changes nothing.",
    )
    mg.add_argument("--scheme", required=True, help="source scheme name")
    mg.add_argument(
        "--to",
        help="taxonomy version to move to (imported with import-taxonomy); without it, list the scheme's open "
        "review queue (to --review-out, else standard output)",
    )
    mg.add_argument("--name", help="taxonomy name (default: that of the scheme's current taxonomy)")
    mg.add_argument("--curator", default="migrate", help="who ran the migration (recorded with it)")
    mg.add_argument("--dry-run", action="store_true", help="report only, write nothing")
    mg.add_argument("--review-out", help="write the review queue as CSV to this file (- for stdout)")
    mg.add_argument("--db", help=DB_HELP)
    mg.set_defaults(func=cmd_migrate)

    users = commands.add_parser(
        "users",
        help="accounts of a shared app: add, disable, enable, list",
        description="Accounts for signing in to a shared app (server.address not loopback, or MELO_AUTH=on). "
        "Passwords are stored as salted scrypt hashes, never as text.",
    )
    actions = users.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add an account (asks the password twice)")
    add.add_argument("name", help="user name (recorded with every decision)")
    add.add_argument("--role", choices=("curator", "reviewer"), default="curator", help="default: curator")
    how = add.add_mutually_exclusive_group()
    how.add_argument("--password-stdin", action="store_true", help="read the password from one line of stdin")
    how.add_argument("--oidc", action="store_true", help="no password: signs in through OpenID Connect (its e-mail)")
    for action, text in (("disable", "disable an account (it can no longer sign in or act)"),
                         ("enable", "enable a disabled account again")):  # fmt: skip
        sub = actions.add_parser(action, help=text)
        sub.add_argument("name", help="user name")
    actions.add_parser("list", help="list the accounts")
    for sub in actions.choices.values():
        sub.add_argument("--db", help=DB_HELP)
    add.add_argument("--create", action="store_true", help=CREATE_HELP)
    users.set_defaults(func=cmd_users)

    ir = commands.add_parser(
        "import-results",
        help="load the published baselines (results/) as read-only evaluation runs",
        description="One read-only run (metrics only) per published model and dataset, for comparing "
        "with runs of `eval --store`. Importing again adds only what is new.",
    )
    ir.add_argument("--data", default=config.data_dir(), help=data_help)
    ir.add_argument("--db", help=DB_HELP)
    ir.add_argument("--create", action="store_true", help=CREATE_HELP)
    ir.set_defaults(func=cmd_import_results)

    pr = commands.add_parser(
        "propose",
        help="propose mappings for a scheme's undecided terms at a stated precision, for review",
        description="Link every undecided term of the scheme; where the first candidate's calibrated "
        "probability clears the threshold at which first candidates reached --precision on other countries' "
        "crosswalks, record it as a machine proposal (tool, version, pipeline, probability). Proposals are no "
        "decisions: a person confirms them (each becomes her decision) or rejects them on the Crosswalk page. "
        "Proposing again adds nothing; a rejected proposal does not come back.",
    )
    pr.add_argument("--scheme", required=True, help="source scheme name")
    pr.add_argument("--precision", type=float, default=PROPOSAL_PRECISION,
                    help=f"target precision (default: {PROPOSAL_PRECISION})")  # fmt: skip
    pr.add_argument("--pipeline", help="pipeline (default: best when it can serve, else its fallback)")
    pr.add_argument("--data", default=config.data_dir(), help=data_help)
    pr.add_argument("--db", help=DB_HELP)
    pr.add_argument("--quiet", action="store_true", help="no progress bar")
    pr.set_defaults(func=cmd_propose)


@contextmanager
def open_runs(url: str | None, create: bool = False) -> Iterator[RecordRun]:
    """``eval --store``: the store at ``url`` opened now (created with ``create``), and a function
    storing one result as a run."""
    from db.runs import save_run
    from db.store import Store
    from melo_core.version import code_version

    version = code_version()
    with Store(url, create=create) as store:

        def record(result: EvaluationResult, dataset: MeloDataset, scorer: str) -> str:
            run_id = save_run(store, result, dataset, scorer=scorer, code_version=version)
            return f"stored run {run_id} ({dataset.name} / {scorer}) in {store.display_url}"

        yield record


def accepted_decisions(url: str | None) -> tuple[list[str], list[Decision]]:
    """``train --with-decisions``: the schemes with current exact/narrow decisions, and those."""
    from db.aliases import accepted_aliases
    from db.store import Store

    with Store(url) as store:
        return [s.name for s in store.schemes() if accepted_aliases(store, s.name)], accepted_aliases(store)


def register(extensions: Extensions) -> None:
    """Entry point of group ``melo_studio.cli``: the store's commands and the store for core commands."""
    extensions.commands.append(add_commands)
    extensions.store = StoreAccess(open_runs=open_runs, accepted_decisions=accepted_decisions)

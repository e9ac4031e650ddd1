"""Bulk linking (``melo_core.linking.bulk``, `link --input ... --out FOLDER`): streaming in batches smaller
than the input, resume after a run killed with SIGKILL (every row exactly once), the Ray Data engine
in local mode against the local engine on the same Parquet file, and bad input (missing column,
unreadable file, empty and 10 MB titles).

Real data: the Norwegian MELO corpus (nor_q_no_c_no) as the taxonomy, its 96 queries as titles
(repeated: feeds repeat titles), the `lexical` pipeline with the nor_no crosswalk as mentions."""

from __future__ import annotations

import csv
import gc
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from db.testing import run_cli
from melo_core.linking.bulk import (
    MAX_TITLE_CHARS,
    BatchLinker,
    InputBatches,
    LinkSettings,
    TextLayout,
    ray_titles,
    read_output,
    run_local,
    text_layout,
)
from tests.conftest import write_workbook

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cache for the module (taxonomy pickle, fitted TF-IDF), never the project's."""
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MELO_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def titles(nor_data: Path) -> list[str]:
    """The 96 Norwegian queries, each twice, interleaved (duplicates in and across batches)."""
    queries = [line.split("\t")[1] for line in
               (nor_data / "processed/melo/nor_q_no_c_no/queries.tsv").read_text(encoding="utf-8").splitlines()]  # fmt: skip
    return [q for pair in zip(queries, reversed(queries), strict=True) for q in pair]


def write_titles(path: Path, titles: list[str]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["code", "title"])
        writer.writerows([[i, t] for i, t in enumerate(titles)])
    return path


def link_args(data: Path, source: Path | str, out: Path | str, *more: str) -> list[str]:
    return ["link", "--data", str(data), "--pipeline", "lexical", "--input", str(source), "--column", "title",
            "--out", str(out), "--top", "3", "--quiet", *more]  # fmt: skip


def rows_of(table: pa.Table) -> list[tuple]:
    return list(zip(*(table.column(n).to_pylist() for n in table.column_names), strict=True))


def test_streams_batches_smaller_than_the_input_and_links_each_distinct_title_once(
    nor_data: Path, titles: list[str], tmp_path: Path
) -> None:
    source = write_titles(tmp_path / "titles.csv", titles)
    folder = tmp_path / "links"
    code, _, err = run_cli(*link_args(nor_data, source, folder, "--batch-size", "50"))
    assert code == 0, err
    shards = sorted(p.name for p in folder.glob("part-*.parquet"))
    assert shards == [f"part-{n:06d}.parquet" for n in range(4)]  # 192 rows in batches of 50
    assert [pq.read_metadata(folder / s).num_rows for s in shards] == [150, 150, 150, 126]
    manifest = json.loads((folder / "_manifest.json").read_text(encoding="utf-8"))
    assert manifest["complete"] and manifest["rows"] == 192 and manifest["rejected"] == 0
    table = read_output(folder)
    assert [(r, k) for r, k in zip(table["row"].to_pylist(), table["rank"].to_pylist(), strict=True)] == [
        (r, k) for r in range(192) for k in (1, 2, 3)
    ]
    # The same rows as one CSV file (the historical `--out FILE.csv`), and as the linker ranks each title.
    flat = tmp_path / "links.csv"
    code, _, err = run_cli(*link_args(nor_data, source, flat, "--batch-size", "7"))
    assert code == 0, err
    with flat.open(encoding="utf-8", newline="") as handle:
        lines = list(csv.reader(handle))
    assert lines[0] == ["row", "rank", "concept_uri", "label", "score", "matched_label", "matched_language"]
    assert [(int(r), int(k), u, lab, float(s), m, lang) for r, k, u, lab, s, m, lang in lines[1:]] == rows_of(table)
    settings = LinkSettings(data=str(nor_data), pipeline="lexical", top=3)
    engine = BatchLinker(settings)
    summary = run_local(InputBatches(source, "title", 50), settings, str(tmp_path / "again"), quiet=True,
                        linker_factory=lambda: engine)  # fmt: skip
    assert summary.rows == 192 and engine.distinct_linked == len(set(titles)) < len(titles) / 2
    for bad in (0, -3):  # a Python caller's mistake, said in its own words (not the CLI's --batch-size)
        with pytest.raises(ValueError, match=f"batch_size must be 1 or more, got {bad}"):
            InputBatches(source, "title", bad)
    by_title = {t: c for t, c in zip(titles[:2], engine.linker.link(titles[:2], top_k=3), strict=True)}
    first = [r for r in rows_of(table) if r[0] == 1]
    assert [(r[2], r[4]) for r in first] == [(c.concept_uri, round(c.score, 6)) for c in by_title[titles[1]]]


def test_a_ray_actor_keeps_its_linker_out_of_collections_and_link_leaves_nothing_frozen(
    nor_data: Path, titles: list[str], tmp_path: Path
) -> None:
    """A Ray actor builds its linker once and links until it ends: the linker is frozen, out of
    the collector's walks (``kept_until_exit``). A `link` run in this process (as in a notebook)
    freezes what it builds too, and gives it back when the command ends."""
    settings = LinkSettings(data=str(nor_data), pipeline="lexical", top=3)
    assert gc.get_freeze_count() == 0, "a test left objects frozen"
    try:
        actor = BatchLinker(settings, own_process=True)
        assert gc.isenabled() and gc.get_freeze_count() > 10_000
        assert not any(o is actor.linker for o in gc.get_objects())
    finally:
        gc.unfreeze()
    in_process = BatchLinker(settings)
    assert gc.get_freeze_count() == 0 and any(o is in_process.linker for o in gc.get_objects())
    source = write_titles(tmp_path / "titles.csv", titles[:20])
    code, _, err = run_cli(*link_args(nor_data, source, tmp_path / "links.csv"))
    assert code == 0, err
    code, out, err = run_cli("link", "--data", str(nor_data), "--pipeline", "lexical", "--query", titles[0])
    assert code == 0 and out, err
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_semicolon_separated_csv_and_unicode_text_link_as_the_comma_separated_one(
    nor_data: Path, titles: list[str], tmp_path: Path
) -> None:
    """Spreadsheets in many European locales save CSV with ';'; the header line tells (here of a
    gzipped file, with a title holding both separators). Their "Unicode Text" is UTF-16 with a
    byte-order mark, tab-separated, in a .txt file."""
    chosen = [*titles[:20], "baker; konditor, sjef"]
    comma = write_titles(tmp_path / "comma.csv", chosen)
    semicolon = tmp_path / "sheet" / "semicolon.csv.gz"
    semicolon.parent.mkdir()
    with gzip.open(semicolon, "wt", encoding="utf-8", newline="") as handle:
        csv.writer(handle, delimiter=";").writerows([["code", "title"], *([i, t] for i, t in enumerate(chosen))])
    assert text_layout(semicolon, "csv").delimiter == text_layout(semicolon.parent, "csv").delimiter == ";"  # a folder
    assert text_layout(comma, "csv") == TextLayout("utf-8", ",") and text_layout(comma, "tsv").delimiter == "\t"
    below = tmp_path / "below.csv"  # empty lines above the header: the delimiter is the header's
    below.write_text("\n\ncode;title\n1;lege\n", encoding="utf-8")
    assert text_layout(below, "csv").delimiter == ";"
    unicode_text = tmp_path / "sheet.txt"
    with unicode_text.open("w", encoding="utf-16", newline="") as handle:
        csv.writer(handle, delimiter="\t").writerows([["code", "title"], *([i, t] for i, t in enumerate(chosen))])
    assert text_layout(unicode_text, "csv") == TextLayout("utf-16", "\t")
    # An Excel workbook's first sheet: codes as numbers, a formatted empty cell after the header
    workbook = write_workbook(tmp_path / "sheet.xlsx", [["code", "title"], *([i, t] for i, t in enumerate(chosen))], 4)
    linked = []
    for source in (comma, semicolon, unicode_text, workbook):
        code, _, err = run_cli(*link_args(nor_data, source, tmp_path / f"{source.name}.links.csv"))
        assert code == 0, err
        linked.append((tmp_path / f"{source.name}.links.csv").read_text(encoding="utf-8"))
    assert linked[0] == linked[1] == linked[2] == linked[3] and len(linked[0].splitlines()) == 1 + 3 * len(chosen)


def test_a_killed_run_resumes_and_every_row_is_written_exactly_once(
    nor_data: Path, titles: list[str], tmp_path: Path, cache: Path
) -> None:
    source = write_titles(tmp_path / "titles.csv", titles * 5)  # 960 rows, one shard per 8
    folder = tmp_path / "links"
    args = link_args(nor_data, source, folder, "--batch-size", "8", "--format", "csv")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MELO_CACHE": str(cache)}
    process = subprocess.Popen([sys.executable, "-m", "melo_core", *args], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    while len(list(folder.glob("part-*.csv"))) < 3 and process.poll() is None:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    written = sorted(folder.glob("part-*.csv"))
    assert process.returncode == -signal.SIGKILL and 3 <= len(written) < 120
    assert not json.loads((folder / "_manifest.json").read_text(encoding="utf-8"))["complete"]
    for shard in written:  # whole shards only: 8 rows of 3 candidates each and the header
        assert len(shard.read_text(encoding="utf-8").splitlines()) == 1 + 8 * 3
    again = run_cli(*args)
    assert again[0] == 2 and again[2].splitlines() == [
        f"error: {folder}: output folder is not empty; --resume continues the run written there, or choose a new folder"
    ]
    changed = run_cli(*link_args(nor_data, source, folder, "--batch-size", "9", "--format", "csv", "--resume"))
    assert changed[0] == 2 and "batch_size" in changed[2]
    # The input's bytes decide, not its time: an edited input refuses; the same bytes written back
    # (a new time, as a copy or a fresh download) resume.
    original = source.read_bytes()
    source.write_bytes(original.replace(b"\n", b"\nx", 1))
    edited = run_cli(*args, "--resume")
    assert edited[0] == 2 and "input_bytes, input_sha1 differ" in edited[2]
    source.write_bytes(original)
    info = source.stat()
    os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    code, _, err = run_cli(*args, "--resume")
    assert code == 0, err
    table = read_output(folder)
    assert [(r, k) for r, k in zip(table["row"].to_pylist(), table["rank"].to_pylist(), strict=True)] == [
        (r, k) for r in range(960) for k in (1, 2, 3)
    ]
    assert json.loads((folder / "_manifest.json").read_text(encoding="utf-8"))["complete"]
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    clean = tmp_path / "clean"
    code, _, err = run_cli(*link_args(nor_data, source, clean, "--batch-size", "8", "--format", "csv"))
    assert code == 0, err
    assert rows_of(read_output(clean)) == rows_of(table)


def test_the_ray_engine_in_local_mode_writes_what_the_local_engine_writes(
    nor_data: Path, titles: list[str], tmp_path: Path, cache: Path
) -> None:
    source = tmp_path / "titles.parquet"
    feed = [*titles[:60], "", "  ", *titles[:20]]  # two rejects, duplicates
    pq.write_table(pa.table({"id": list(range(len(feed))), "title": feed}), source, row_group_size=25)
    local, ray = tmp_path / "local", tmp_path / "ray"
    code, _, err = run_cli(*link_args(nor_data, source, local, "--batch-size", "16"))
    assert code == 0, err
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MELO_CACHE": str(cache)}
    result = subprocess.run([sys.executable, "-m", "melo_core",
                             *link_args(nor_data, source, ray, "--batch-size", "16", "--engine", "ray", "--workers", "1")],
                            env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    ours, theirs = read_output(local), read_output(ray)
    assert ours.num_rows == theirs.num_rows == (len(feed) - 2) * 3
    drop = ["score"]
    assert rows_of(ours.drop_columns(drop)) == rows_of(theirs.drop_columns(drop))
    assert max(abs(a - b) for a, b in zip(ours["score"].to_pylist(), theirs["score"].to_pylist(), strict=True)) <= 1e-6
    manifest = json.loads((ray / "_manifest.json").read_text(encoding="utf-8"))
    assert manifest["engine"] == "ray" and manifest["rows"] == len(feed) and manifest["rejected"] == 2
    rejected = sorted(int(row["row"]) for f in (ray / "_rejects").glob("*.csv")
                      for row in csv.DictReader(f.open(encoding="utf-8")))  # fmt: skip
    assert rejected == [60, 61]
    assert not list(tmp_path.glob(".ray.*"))  # no staging folder left


def test_the_ray_engine_gives_its_actors_blocks_of_one_batch_with_row_positions(tmp_path: Path) -> None:
    """Ray's CSV reader makes blocks of many batches; linked a block per actor task, no rows were
    written until a whole block was (110 s for 100,000 titles) and one actor could be left alone
    with the last block. The linking reads blocks of at most one batch, rows in input order."""
    import ray
    import ray.data

    source = tmp_path / "titles.csv"
    titles = [f"clerk, grade {i}" for i in range(300)]
    with source.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([["code", "title"], *[[i, t] for i, t in enumerate(titles)]])
    context = ray.data.DataContext.get_current()
    ordered = context.execution_options.preserve_order
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        context.execution_options.preserve_order = True
        numbered, count = ray_titles(str(source), "title", "csv", 32)
        blocks = list(numbered.iter_batches(batch_size=None, batch_format="pyarrow"))
        workbook = write_workbook(
            tmp_path / "titles.xlsx", [["code", "title"], *[[i, t] for i, t in enumerate(titles)]]
        )
        from_sheet, sheet_count = ray_titles(str(workbook), "title", "xlsx", 32)
        sheet_blocks = list(from_sheet.iter_batches(batch_size=None, batch_format="pyarrow"))
        folder = tmp_path / "feed"  # three files: three read blocks, numbered on from each other
        folder.mkdir()
        for part, start in enumerate((0, 70, 190)):
            with (folder / f"part-{part}.csv").open("w", encoding="utf-8", newline="") as handle:
                csv.writer(handle).writerows([["title"], *[[t] for t in titles[start : start + (70, 120, 110)[part]]]])
        from_folder, folder_count = ray_titles(str(folder), "title", "csv", 32)
        header_only = tmp_path / "header.csv"
        header_only.write_text("title\n", encoding="utf-8")
        from_header, header_count = ray_titles(str(header_only), "title", "csv", 32)  # Ray reads no schema
        header_rows = from_header.count()
        folder_rows = [row for b in from_folder.iter_batches(batch_size=None, batch_format="pyarrow")
                       for row in zip(b.column("row").to_pylist(), b.column("title").to_pylist(), strict=True)]  # fmt: skip
    finally:
        context.execution_options.preserve_order = ordered
        ray.shutdown()
    assert count == 300
    assert max(b.num_rows for b in blocks) <= 32 and sum(b.num_rows for b in blocks) == 300
    assert [r for b in blocks for r in b.column("row").to_pylist()] == list(range(300))
    assert [t for b in blocks for t in b.column("title").to_pylist()] == titles
    assert sheet_count == 300 and max(b.num_rows for b in sheet_blocks) <= 32  # the workbook reads as its CSV
    assert [(r, t) for b in sheet_blocks for r, t in zip(b.column("row").to_pylist(), b.column("title").to_pylist(),
                                                          strict=True)] == list(enumerate(titles))  # fmt: skip
    assert folder_count == 300 and folder_rows == list(enumerate(titles))
    assert header_count == header_rows == 0  # nothing to link, as the local engine


def test_bad_input_exits_2_with_one_line_or_rejects_the_row(nor_data: Path, titles: list[str], tmp_path: Path) -> None:
    source = tmp_path / "names.csv"
    source.write_text("code,name\n1,lege\n", encoding="utf-8")
    code, _, err = run_cli(*link_args(nor_data, source, tmp_path / "out"))
    assert code == 2 and err.splitlines() == [f"error: {source}:1: missing column title; found code, name"]
    assert not (tmp_path / "out").exists()  # nothing written
    missing = tmp_path / "nope.csv"
    code, _, err = run_cli(*link_args(nor_data, missing, tmp_path / "out"))
    assert code == 2 and err.splitlines() == [f"error: {missing}: cannot read file (No such file or directory)"]
    broken = tmp_path / "broken.csv"
    broken.write_bytes(b"title\nlege\n\xff\xfe sykepleier\n")
    code, _, err = run_cli(*link_args(nor_data, broken, tmp_path / "out"))
    assert code == 2 and len(err.splitlines()) == 1 and str(broken) in err
    assert "not UTF-8 text" in err and "'CSV UTF-8'" in err  # says how to save it right
    latin = tmp_path / "latin.csv"  # a spreadsheet's plain CSV: the header is no UTF-8 either
    latin.write_bytes("Stellenbezeichnung,title\nBäcker,Bäcker\n".replace("e,", "ä,").encode("cp1252"))
    code, _, err = run_cli(*link_args(nor_data, latin, tmp_path / "out"))
    assert code == 2 and len(err.splitlines()) == 1 and "not UTF-8 text" in err and "'CSV UTF-8'" in err
    fake = tmp_path / "fake.parquet"
    fake.write_text("title\nlege\n", encoding="utf-8")
    code, _, err = run_cli(*link_args(nor_data, fake, tmp_path / "out"))
    assert code == 2 and len(err.splitlines()) == 1 and "cannot read as PARQUET" in err
    sheet = write_workbook(tmp_path / "names.xlsx", [["code", "name"], [1, "lege"]])
    code, _, err = run_cli(*link_args(nor_data, sheet, tmp_path / "out"))
    assert code == 2 and err.splitlines() == [f"error: {sheet}:1: missing column title; found code, name"]
    damaged = tmp_path / "damaged.xlsx"
    damaged.write_bytes(sheet.read_bytes()[:300])  # a download cut short: a zip without its directory
    code, _, err = run_cli(*link_args(nor_data, damaged, tmp_path / "out"))
    assert code == 2 and len(err.splitlines()) == 1 and "cannot read as an Excel workbook" in err
    old_excel = tmp_path / "old.xlsx"  # Excel 97-2003's format, whatever the name says
    old_excel.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    code, _, err = run_cli(*link_args(nor_data, old_excel, tmp_path / "out"))
    assert code == 2 and err.splitlines() == [
        f"error: {old_excel}: an Excel 97-2003 workbook (.xls): save it as .xlsx or as 'CSV UTF-8'"]  # fmt: skip
    calc = tmp_path / "calc.xlsx"  # LibreOffice's own format: a zip whose first entry, stored, names it
    with zipfile.ZipFile(calc, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("content.xml", "<office:document-content/>")
    code, _, err = run_cli(*link_args(nor_data, calc, tmp_path / "out"))
    assert code == 2 and err.splitlines() == [
        f"error: {calc}: an OpenDocument spreadsheet (.ods): save it as .xlsx or as 'CSV UTF-8'"]  # fmt: skip
    remote = "s3://bucket/ads.xlsx"  # a cluster reads files in parallel; a workbook is read here
    code, _, err = run_cli(*link_args(nor_data, remote, tmp_path / "out", "--engine", "ray"))
    assert code == 2 and len(err.splitlines()) == 1 and f"{remote}: an Excel workbook is read on this machine" in err
    assert not (tmp_path / "out").exists()

    huge = "lege " * (2 * 2**20)  # 10 MB
    feed = write_titles(tmp_path / "feed.csv", [titles[0], "", huge, titles[1], "   "])
    folder, rejects = tmp_path / "links", tmp_path / "rejects.csv"
    code, _, err = run_cli(*[a for a in link_args(nor_data, feed, folder, "--batch-size", "2") if a != "--quiet"])
    assert code == 0, err
    assert "linked 2 of 5 row(s); 3 rejected" in err
    assert sorted(set(read_output(folder)["row"].to_pylist())) == [0, 3]
    listed = [
        row for f in sorted((folder / "_rejects").glob("*.csv")) for row in csv.DictReader(f.open(encoding="utf-8"))
    ]
    assert [(r["row"], r["reason"]) for r in listed] == [
        ("1", "empty"), ("2", f"longer than {MAX_TITLE_CHARS} characters"), ("4", "empty")]  # fmt: skip
    assert int(listed[1]["length"]) == len(huge.strip()) and len(listed[1]["start"]) == 100
    code, _, err = run_cli(*link_args(nor_data, feed, tmp_path / "links.csv", "--rejects", str(rejects)))
    assert code == 0, err
    assert [r["row"] for r in csv.DictReader(rejects.open(encoding="utf-8"))] == ["1", "2", "4"]

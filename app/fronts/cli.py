"""`abstract-qa`: a thin command line over the library. Errors print as one line, no traceback."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TimeRemainingColumn
from rich.table import Table

from core.errors import AQAError, InputError
from core.models import (
    MODES,
    Answer,
    Filters,
    IndexStats,
    IngestReport,
    Rating,
    TrainQuestion,
)
from core.models import Table as EvidenceTable
from core.settings import Settings, get_settings
from ingest.schemas import LABELS

cli = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Question answering over research-paper abstracts, with citations.",
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
MAX_LISTED = 25


def main() -> None:
    try:
        cli()
    except AQAError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)  # one per kind of failure: README, "Errors"


@cli.command("ingest")
def ingest_command(
    paths: list[Path] = typer.Argument(None, help="Files or directories to read."),
    sample: bool = typer.Option(
        False, "--sample", help="Also read the bundled sample (57 ICLR abstracts)."
    ),
    rebuild: bool = typer.Option(False, "--rebuild", help="Delete the index and start over."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    if_empty: bool = typer.Option(
        False, "--if-empty", help="Do nothing when the index already holds papers."
    ),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="Read every file as this format, whatever its name: " + ", ".join(LABELS) + ".",
    ),
) -> None:
    """Read abstracts into the index: JSON Lines, JSON, CSV, BibTeX, RIS, CSL-JSON, Zotero CSV,
    the arXiv snapshot, OpenAlex or Semantic Scholar files (gzipped too). Re-running adds only
    what changed; a paper exported again from another tool updates the one indexed."""
    from ingest.pipeline import ingest
    from ingest.read import SAMPLE
    from store.index import Index

    if fmt is not None and fmt not in LABELS:
        raise typer.BadParameter(f"choose one of {', '.join(LABELS)}", param_hint="--format")
    paths = [*(paths or []), *([SAMPLE] if sample else [])]
    if not paths:
        raise typer.BadParameter("name files or directories to read, or --sample")
    settings = get_settings()
    if if_empty and not rebuild and Index(settings).stats().papers > 0:
        out.print("The index already holds papers; nothing to do (--if-empty).")
        return
    show_bar = not as_json and sys.stderr.isatty()
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=not show_bar,
        transient=True,
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        try:
            # the console script's main module is import-safe, so chunking may use every core
            report = ingest(
                paths,
                settings,
                rebuild=rebuild,
                progress=progress,
                processes=os.cpu_count() or 1,
                forced=fmt,
            )
        except KeyboardInterrupt:
            err.print(
                "Interrupted. What was written is kept; run the same command again to finish."
            )
            raise typer.Exit(130) from None
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        _print_report(report)
    if report.papers == 0:
        err.print("Nothing could be read: see the reasons above.")
        raise typer.Exit(1)


@cli.command("remove")
def remove_command(
    paper_ids: list[str] = typer.Argument(..., help="Ids of the papers to delete."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Delete papers from the index by id (the id `ask --json` gives each source). Servers and
    the app stop citing them as soon as this ends."""
    from ingest.pipeline import remove

    report = remove(paper_ids, get_settings())
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        out.print(f"Removed {report.papers} paper(s), {report.removed} chunk(s).")
        for problem in report.skipped[:MAX_LISTED]:
            out.print(f"  {problem}", highlight=False, markup=False)
    if report.papers == 0:
        err.print("None of these ids is in the index: nothing was removed.")
        raise typer.Exit(1)


def _print_report(report: IngestReport) -> None:
    for name, label in list(report.formats.items())[:MAX_LISTED]:
        out.print(f"Read {name} as {label}.", highlight=False, markup=False)
    if len(report.formats) > MAX_LISTED:
        out.print(f"... and {len(report.formats) - MAX_LISTED} more file(s) (see --json)")
    out.print(
        f"Read {report.files} file(s): {report.papers} papers, {report.chunks} chunks "
        f"in {report.seconds:.1f}s."
    )
    if report.without_abstract:
        out.print(
            f"{report.without_abstract} record(s) have no abstract and were not indexed "
            "(listed under Skipped)."
        )
    out.print(
        f"Chunks: {report.added} added, {report.updated} updated, "
        f"{report.unchanged} unchanged, {report.removed} removed."
    )
    for label, problems in (
        ("Merged (one paper read twice)", report.merged),
        ("Skipped", report.skipped),
        ("Warnings", report.warnings),
    ):
        if problems:
            out.print(f"{label} ({len(problems)}):")
            for problem in problems[:MAX_LISTED]:
                out.print(f"  {problem}", highlight=False, markup=False)
            if len(problems) > MAX_LISTED:
                out.print(f"  ... and {len(problems) - MAX_LISTED} more (see --json)")


@cli.command("ask")
def ask_command(
    question: str = typer.Argument(..., help="The question, in quotes."),
    as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON."),
    k: int | None = typer.Option(None, "--k", min=1, max=100, help="Papers to retrieve."),
    year_from: int | None = typer.Option(None, "--year-from", help="Earliest year."),
    year_to: int | None = typer.Option(None, "--year-to", help="Latest year."),
    venue: list[str] | None = typer.Option(None, "--venue", help="Venue (repeatable)."),
    decision: list[str] | None = typer.Option(None, "--decision", help="Decision (repeatable)."),
    author: list[str] | None = typer.Option(
        None, "--author", help='Author, e.g. "B. Schölkopf" (repeatable: any of them).'
    ),
    ignore: list[str] | None = typer.Option(
        None,
        "--ignore-filter",
        help="Do not read this filter from the question: year, venues, decisions or authors.",
    ),
    mode: str = typer.Option("hybrid", "--mode", help="Retrieval: " + ", ".join(MODES) + "."),
    export_to: Path | None = typer.Option(
        None,
        "--export",
        help="Also write the answer to this file: .md (the answer and its cited papers), .bib or "
        ".csl.json (the cited papers, for a reference manager), .json (the Answer).",
    ),
    export_all: bool = typer.Option(
        False, "--export-all", help="Export every source shown, not only the cited papers."
    ),
) -> None:
    """Answer a question from the indexed abstracts, citing them."""
    from app.engine.export import export, format_for
    from app.engine.service import QAService

    if mode not in MODES:
        raise typer.BadParameter(f"choose one of {', '.join(MODES)}", param_hint="--mode")
    fmt = format_for(export_to.name) if export_to is not None else None
    service = QAService()
    events = service.stream(
        question,
        k=k,
        filters=Filters(
            year_from=year_from,
            year_to=year_to,
            venues=venue or [],
            decisions=decision or [],
            authors=author or [],
        ),
        ignore=ignore or None,
        mode=mode,  # type: ignore[arg-type]
    )
    streamed = False
    for event in events:
        if isinstance(event, Answer):
            if export_to is not None and fmt is not None:
                text = export([event], fmt, service.paper, everything=export_all)
                export_to.write_text(text, encoding="utf-8")
                err.print(f"Exported to {export_to} ({fmt}).", highlight=False, markup=False)
            if as_json:
                typer.echo(event.model_dump_json(indent=2))
            else:
                if streamed and sys.stdout.isatty():
                    out.print()
                _print_answer(event, already_streamed=streamed and sys.stdout.isatty())
        elif not as_json and sys.stdout.isatty():
            out.print(event, end="", markup=False, highlight=False)
            streamed = True


def _print_answer(answer: Answer, already_streamed: bool) -> None:
    if not already_streamed or answer.invalid_citations:
        out.print(answer.answer, markup=False, highlight=False)
    if answer.invalid_citations:
        out.print(f"(removed citations to missing sources: {', '.join(answer.invalid_citations)})")
    if answer.filters_applied != "none":
        out.print(f"Filters: {answer.filters_applied}", highlight=False)
    shown = answer.cited_sources
    if answer.abstained and answer.sources:
        from app.providers.wording import is_not_mentioned

        if is_not_mentioned(answer.answer):
            out.print("Related papers (none mentions it):")
        else:
            out.print("Closest passages (not relevant enough to answer):")
        shown = answer.sources[:3]
    for source in shown:
        meta = ", ".join(str(x) for x in (source.venue, source.year) if x)
        line = f"[{source.marker}] {source.title} ({meta}) score {source.score:.2f}"
        if source.relevance:
            line += f", relevance {source.relevance:.2f}"
        out.print(
            f"{line} - {source.paper_id}",
            markup=False,
            highlight=False,
        )


@cli.command("related")
def related_command(
    paper_id: str = typer.Argument(..., help="A paper id, as `ask --json` shows it."),
    k: int = typer.Option(5, "--k", min=1, max=100, help="How many papers."),
    as_json: bool = typer.Option(False, "--json", help="Print the papers as JSON."),
) -> None:
    """The papers nearest to one paper of the index ("more like this")."""
    from app.engine.service import QAService

    sources = QAService().related(paper_id, k)
    if as_json:
        typer.echo(json.dumps([s.model_dump() for s in sources], indent=2, ensure_ascii=False))
        return
    for source in sources:
        meta = ", ".join(str(x) for x in (source.venue, source.year) if x)
        out.print(
            f"[{source.marker}] {source.title} ({meta}) score {source.score:.2f} - "
            f"{source.paper_id}",
            markup=False,
            highlight=False,
        )


@cli.command("table")
def table_command(
    topic: str | None = typer.Argument(None, help="A question or keywords: its papers are rows."),
    column: list[str] = typer.Option(
        ..., "--column", help='A short question asked of every paper, e.g. "dataset" (repeat).'
    ),
    paper: list[str] | None = typer.Option(
        None, "--paper", help="A paper id to use as a row (repeat); instead of a topic."
    ),
    rows: int = typer.Option(10, "--rows", min=1, max=200, help="How many papers a topic gives."),
    year_from: int | None = typer.Option(None, "--year-from", help="Earliest year."),
    year_to: int | None = typer.Option(None, "--year-to", help="Latest year."),
    venue: list[str] | None = typer.Option(None, "--venue", help="Venue (repeatable)."),
    decision: list[str] | None = typer.Option(None, "--decision", help="Decision (repeatable)."),
    author: list[str] | None = typer.Option(None, "--author", help="Author (repeatable)."),
    out_file: Path | None = typer.Option(
        None, "--out", help="Write the table to this file: .csv, .md, .xlsx, .json or .bib."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
) -> None:
    """An evidence table: the same short questions (columns) asked of many papers (rows), each
    cell a quote of that paper's abstract or "not stated". Ctrl-C keeps the rows filled."""
    from app.engine.export import export_table, table_format_for
    from app.engine.service import QAService
    from core.models import TableRequest, TableRow

    fmt = table_format_for(out_file.name) if out_file is not None else None
    request = TableRequest.read(
        topic=topic,
        columns=column,
        papers=paper or [],
        rows=rows,
        filters=Filters.given(year_from, year_to, venue or [], decision or [], author or []),
    )
    plan = QAService().table_plan(request)
    filled: list[TableRow] = []
    complete = True
    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeRemainingColumn(), console=err, disable=not sys.stderr.isatty(), transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task("filling rows", total=len(plan.rows))
        try:
            for row in plan.fill():
                filled.append(row)
                bar.update(task, completed=len(filled))
        except KeyboardInterrupt:
            complete = False
    table = plan.result(filled, complete)
    if not complete:
        err.print(f"stopped: {len(filled)} of {len(plan.rows)} rows filled", highlight=False)
    if out_file is not None and fmt is not None:
        out_file.write_bytes(export_table(table, fmt))
        err.print(f"Wrote {out_file} ({fmt}).", highlight=False, markup=False)
    if as_json:
        typer.echo(table.model_dump_json(indent=2))
    elif out_file is None:
        _print_table(table)
    if not complete:
        raise typer.Exit(130)


def _print_table(table: EvidenceTable) -> None:
    grid = Table(show_lines=True)
    grid.add_column("paper")
    for column in table.columns:
        grid.add_column(column)
    for row in table.rows:
        meta = ", ".join(str(x) for x in (row.venue, row.year) if x)
        cells = [escape(c.text) if c.stated else "[dim]not stated[/]" for c in row.cells]
        grid.add_row(f"{escape(row.title)} ({escape(meta)})\n[dim]{row.paper_id}[/]", *cells)
    out.print(grid)
    if table.suggested_columns:
        out.print("Columns these papers often answer: " + ", ".join(table.suggested_columns))


@cli.command("eval")
def eval_command(
    questions: Path = typer.Argument(..., help="Question file (JSON Lines)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report(s) as JSON."),
    out_dir: Path | None = typer.Option(
        None, "--out", help="Write report.json, report.md (and compare.png) here."
    ),
    k: int | None = typer.Option(None, "--k", min=1, max=100, help="Papers retrieved."),
    compare: list[str] | None = typer.Option(
        None,
        "--compare",
        help="Another configuration to run, e.g. 'mode=bm25' or "
        "'llm=openai,llm_model=gpt-4o-mini' (repeatable).",
    ),
    use_judge: bool = typer.Option(
        False, "--judge", help="Also grade answers 1-5 with the configured chat model."
    ),
) -> None:
    """Run a question set through ask() and report retrieval, citations, answers, abstention."""
    from app.engine.service import QAService
    from app.evaluation.harness import (
        known_paper_ids,
        load_questions,
        parse_variant,
        run_eval,
        write_reports,
    )

    settings = get_settings()
    qs = load_questions(questions, known_paper_ids(settings), TrainQuestion)  # a superset
    variants: list[tuple[str, dict[str, object], str]] = [("default", {}, "hybrid")]
    variants += [parse_variant(spec) for spec in compare or []]
    reports = []
    for label, overrides, mode in variants:
        service = QAService(get_settings({**_explicit(settings), **overrides}))
        with Progress(
            "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
            console=err, disable=as_json or not sys.stderr.isatty(), transient=True,
        ) as bar:  # fmt: skip
            task = bar.add_task(label, total=len(qs))

            def advance(done: int, total: int, task: TaskID = task) -> None:
                bar.update(task, completed=done, total=total)

            report = run_eval(
                qs, service, k=k, mode=mode, label=label, use_judge=use_judge,  # type: ignore[arg-type]
                progress=advance,
            )  # fmt: skip
        reports.append(report)
    if out_dir is not None:
        for path in write_reports(reports, out_dir):
            err.print(f"wrote {path}")
    if as_json:
        payload = [r.model_dump() for r in reports]
        typer.echo(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
        return
    from app.evaluation.harness import markdown

    out.print(markdown(reports), markup=False, highlight=False)


@cli.command("train")
def train_command(
    questions: Path = typer.Argument(
        Path("data/train/questions.jsonl"), help="Annotated training questions (JSON Lines)."
    ),
    out_file: Path | None = typer.Option(
        None, "--out", help="Where to write the selector (default: the one the package ships)."
    ),
    holdout: str | None = typer.Option(
        "packet-8", "--holdout", help="A batch of questions kept out of training and measured."
    ),
    seed: int = typer.Option(37, "--seed"),
    as_json: bool = typer.Option(False, "--json", help="Print the training report as JSON."),
) -> None:
    """Retrain the answer selector from annotated questions, over the configured index (which
    must hold their papers: the shared corpus for data/train/)."""
    from app.engine.service import QAService
    from app.evaluation.training import train
    from app.providers.selector import MODEL_FILE

    service = QAService(get_settings())
    target = out_file or MODEL_FILE
    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeRemainingColumn(), console=err, disable=as_json or not sys.stderr.isatty(),
        transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task("reading the training questions", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        report = train(service, questions, target, holdout=holdout or None, seed=seed,
                       progress=advance)  # fmt: skip
    err.print(f"wrote {target}")
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    ranked = f"{report.train.first:.3f} of training questions"
    if report.held and report.cosine_alone:
        ranked += (
            f", {report.held.first:.3f} held out "
            f"(MiniLM similarity alone: {report.cosine_alone.first:.3f})"
        )
    out.print(
        f"{report.trained_on} questions trained on, {report.held_out} held out "
        f"({report.rows} candidate sentences), in {report.seconds:.0f} s. "
        f"Ranked first a fact: {ranked}",
        highlight=False,
    )


@cli.command("train-columns")
def train_columns_command(
    tables: Path = typer.Argument(
        Path("data/train/tables.jsonl"), help="Annotated evidence tables (JSON Lines)."
    ),
    out_file: Path | None = typer.Option(
        None, "--out", help="The selector to update (default: the one the package ships)."
    ),
    seed: int = typer.Option(37, "--seed"),
    as_json: bool = typer.Option(False, "--json", help="Print the training report as JSON."),
) -> None:
    """Retrain the answer selector's column stage (evidence tables) from annotated tables, over
    the configured index (which must hold their papers); its answer stages are kept."""
    from app.engine.service import QAService
    from app.evaluation.training import train_columns
    from app.providers.selector import MODEL_FILE

    report = train_columns(QAService(get_settings()), tables, out_file or MODEL_FILE, seed=seed)
    err.print(f"wrote {out_file or MODEL_FILE}")
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    out.print(
        f"{report.cells} cells of {report.tables} tables ({report.rows} sentences) in "
        f"{report.seconds:.0f} s; the first sentence states the fact for {report.first:.3f} of "
        "the stated cells.",
        highlight=False,
    )


@cli.command("eval-table")
def eval_table_command(
    tables: Path = typer.Argument(..., help="Annotated evidence tables (JSON Lines)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Fill annotated evidence tables (their papers as rows) and score every cell: accuracy,
    "not stated" precision and recall, quotes from another paper."""
    from app.engine.service import QAService
    from app.evaluation.tables import load_tables, score_tables

    report = score_tables(QAService(get_settings()), load_tables(tables))
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    out.print(
        f"{report.cells} cells of {report.tables} tables: accuracy {report.accuracy:.3f} "
        f"(reading the quote: {report.quote_accuracy:.3f}); not stated: precision "
        f"{report.not_stated_precision:.3f}, recall {report.not_stated_recall:.3f}; quotes from "
        f"another paper: {report.wrong_paper_quotes}; {report.seconds_per_table:.2f} s a table.",
        highlight=False,
    )


@cli.command("judge")
def judge_command(
    before: Path = typer.Argument(..., help="The first run's reports (<set>/report.json)."),
    after: Path = typer.Argument(..., help="Folder of the second run's reports, the same sets."),
    as_json: bool = typer.Option(False, "--json", help="Print the judgement as JSON."),
) -> None:
    """Whether a change to answers lands: two runs over every frozen blind set, judged together
    (pooled fact coverage, a sign test over the changed questions, per-set losses, refusals).
    Exits 1 when it does not land."""
    from app.evaluation.judge import judge_runs, load_runs, markdown

    verdict = judge_runs(load_runs(before), load_runs(after))
    if as_json:
        typer.echo(verdict.model_dump_json(indent=2))
    else:
        out.print(markdown(verdict), markup=False, highlight=False)
    if not verdict.lands:
        raise typer.Exit(1)


def _explicit(settings: Settings) -> dict[str, object]:
    """The settings as init arguments (the key as its value, not its mask)."""
    values = settings.model_dump()
    for name, value in values.items():
        if isinstance(value, SecretStr):
            values[name] = value.get_secret_value()
    return values


feedback_cli = typer.Typer(
    no_args_is_help=True, help="Users' ratings of answers: export them as questions, count them."
)
cli.add_typer(feedback_cli, name="feedback")


@feedback_cli.command("export")
def feedback_export_command(
    path: Path = typer.Argument(..., help="The question file to write (JSON Lines)."),
    rating: Rating | None = typer.Option(
        None, "--rating", help="Only the thumbs-up or only the thumbs-down ratings."
    ),
) -> None:
    """Write the rated answers as a question file that `abstract-qa eval` runs: a thumbs-up is a
    regression question (the cited papers are its gold), a thumbs-down is kept with its comment,
    marked for review."""
    from app.engine.feedback import as_questions, question_file
    from store.feedback import FeedbackStore
    from store.index import Index

    settings = get_settings()
    store = FeedbackStore(settings.data_dir)
    known = Index(settings).paper_ids()  # a gold paper no longer indexed: kept for review
    questions = as_questions(store.all(), rating, known)
    if not questions:
        kind = {"up": "thumbs-up ", "down": "thumbs-down "}.get(rating or "", "")
        raise InputError(f"No {kind}ratings yet in {store.path}.")
    try:
        path.write_text(question_file(questions), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"Cannot write {path}: {exc.strerror or exc}.") from exc
    review = sum(q.review for q in questions)
    out.print(
        f"Wrote {len(questions)} question(s) to {path}: {len(questions) - review} to score, "
        f"{review} to review (thumbs-down: write their gold papers).",
        highlight=False,
    )


@feedback_cli.command("stats")
def feedback_stats_command(
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
) -> None:
    """Ratings by thumbs up and down, and by week."""
    from app.engine.feedback import stats
    from store.feedback import FeedbackStore

    counted = stats(FeedbackStore(get_settings().data_dir).all())
    if as_json:
        typer.echo(counted.model_dump_json(indent=2))
        return
    out.print(
        f"{counted.total} rating(s): {counted.up} up, {counted.down} down, "
        f"{counted.commented} with a comment.",
        highlight=False,
    )
    table = Table("week", "up", "down", box=None)
    for week in counted.weeks:
        table.add_row(week.week, str(week.up), str(week.down))
    if counted.weeks:
        out.print(table)


@cli.command("stats")
def stats_command(
    as_json: bool = typer.Option(False, "--json", help="Print the statistics as JSON."),
) -> None:
    """What the index holds: papers, chunks, venues, years, model, data directory."""
    from store.index import Index

    stats = Index(get_settings()).stats()
    if as_json:
        typer.echo(stats.model_dump_json(indent=2))
        return
    _print_stats(stats)


def _preload_app() -> None:
    """Load the model and the index into the app's cache while Streamlit starts."""
    import logging

    from app.ui import shared as ui

    # outside a page run Streamlit warns that there is no script context: expected here
    logging.getLogger("streamlit.runtime.scriptrunner_utils").setLevel(logging.ERROR)
    logging.getLogger("streamlit.runtime.caching").setLevel(logging.ERROR)
    seconds = ui.preload()
    if seconds is not None:
        out.print(f"Model and index loaded in {seconds:.1f} s: ready for questions.")


@cli.command("app")
def app_command(
    port: int = typer.Option(8501, "--port", help="Port of the app."),
    host: str = typer.Option("localhost", "--host", help="Address to listen on."),
) -> None:
    """The Streamlit app, from wherever the package is installed (what `make run` starts)."""
    from streamlit.web import cli as streamlit_cli

    page = Path(__file__).resolve().parents[1] / "ui" / "streamlit_app.py"
    out.print(f"Open http://{host}:{port} (Ctrl-C stops the app)", highlight=False)
    threading.Thread(target=_preload_app, daemon=True, name="aqa-preload").start()
    # the options of .streamlit/config.toml, which an installed package has no folder for
    sys.argv = ["streamlit", "run", str(page), "--server.port", str(port), "--server.address",
                host, "--server.headless", "true", "--browser.gatherUsageStats", "false",
                "--client.toolbarMode", "minimal"]  # fmt: skip
    sys.exit(streamlit_cli.main())


@cli.command("serve")
def serve_command(
    host: str | None = typer.Option(None, "--host", help="Address to listen on (AQA_API_HOST)."),
    port: int | None = typer.Option(None, "--port", help="Port (AQA_API_PORT)."),
) -> None:
    """The HTTP API (OpenAPI docs at /docs): ask, ask streamed, search, papers, stats, ingest."""
    import uvicorn

    from app.fronts.api import create_app, is_loopback

    base = get_settings()
    settings = base.model_copy(
        update={"api_host": host or base.api_host, "api_port": port or base.api_port}
    )
    if settings.api_token is None and not is_loopback(settings.api_host):
        err.print(
            f"Listening on {settings.api_host} without AQA_API_TOKEN: ingest and feedback over "
            "HTTP are off.",
            highlight=False,
        )
    uvicorn.run(create_app(settings), host=settings.api_host, port=settings.api_port)


@cli.command("mcp")
def mcp_command() -> None:
    """An MCP server over stdio (tools: ask, search, get_paper) for assistants and editors."""
    from app.fronts.mcp_server import main as serve_mcp

    serve_mcp()


def _print_stats(stats: IndexStats) -> None:
    table = Table(show_header=False, box=None)
    table.add_row("papers", str(stats.papers))
    table.add_row("chunks", str(stats.chunks))
    table.add_row("embedding model", f"{stats.embedding_model} ({stats.embedding_dim} dims)")
    table.add_row("data directory", str(stats.data_dir))
    table.add_row("chroma", stats.chroma)
    table.add_row("venues", ", ".join(f"{v} ({n})" for v, n in stats.venues.items()) or "-")
    table.add_row("years", ", ".join(f"{y} ({n})" for y, n in stats.years.items()) or "-")
    out.print(table)


if __name__ == "__main__":
    main()

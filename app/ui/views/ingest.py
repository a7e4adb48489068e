"""Add papers: upload a corpus or a reference library's export and see the ingest report."""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from app.ui import shared as ui
from core.errors import AQAError
from ingest.pipeline import ingest
from ingest.read import FORMATS

settings = ui.settings()
st.title("Add papers")
st.markdown(
    "Upload your reference library as it is: **BibTeX** (`.bib`, from Zotero, Google Scholar, "
    "DBLP, arXiv or OpenReview), **RIS** (EndNote, Mendeley, Scopus, Web of Science), "
    "**CSL-JSON** or **Zotero's CSV** export, the **arXiv** metadata snapshot, **OpenAlex** or "
    "**Semantic Scholar** JSON. Or a corpus of your own: **JSON Lines**, **JSON**, **CSV** "
    "(fields `id, title, abstract, authors, year, venue, url, keywords, decision, doi`; only "
    "`abstract` is required) or the **plain sample format** (first line `VENUE YEAR ...`, then "
    "one abstract per paragraph). Gzipped files work too. One paper exported twice (same DOI, "
    "arXiv id or title) is indexed once; uploading again updates only what changed."
)
types = [ext.lstrip(".") for ext in FORMATS] + ["gz"]
files = st.file_uploader("Corpus files", type=types, accept_multiple_files=True, key="uploads")

if st.button("Ingest", type="primary", disabled=not files):
    bar = st.progress(0.0, text="Reading…")

    def progress(stage: str, done: int, total: int) -> None:
        label = "Embedding new chunks" if stage == "embedding" else "Updating the keyword index"
        bar.progress(done / total if total else 1.0, text=f"{label}: {done}/{total}")

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for upload in files or []:
            path = Path(tmp) / Path(upload.name).name
            path.write_bytes(upload.getvalue())
            paths.append(path)
        try:
            report = ingest(paths, settings, progress=progress)
        except AQAError as exc:
            bar.empty()
            st.error(str(exc), icon=":material/error:")
            st.stop()
    bar.progress(1.0, text=f"Done in {report.seconds:.1f}s")
    st.cache_data.clear()  # corpus statistics changed
    cols = st.columns(5)
    for col, (name, value) in zip(
        cols,
        [("Papers read", report.papers), ("Added", report.added), ("Updated", report.updated),
         ("Unchanged", report.unchanged), ("Removed", report.removed)],
        strict=True,
    ):  # fmt: skip
        col.metric(name, value)
    st.caption("Added, updated, unchanged and removed count chunks (passages) of abstracts.")
    if report.formats:
        st.caption(
            "Read "
            + "; ".join(f"{Path(f).name} as {label}" for f, label in report.formats.items())
            + "."
        )
    if report.without_abstract:
        st.warning(
            f"{report.without_abstract} record(s) have no abstract and were not indexed "
            "(listed under Rejected).",
            icon=":material/info:",
        )
    if report.papers == 0:
        st.error("Nothing could be read from these files; see the reasons below.")
    for title, problems in (
        ("One paper read twice: merged", report.merged),
        ("Rejected", report.skipped),
        ("Read with a caveat", report.warnings),
    ):
        if problems:
            st.subheader(f"{title} ({len(problems)})")
            rows = [
                {"file": Path(p.file).name, "line": p.line, "reason": p.reason} for p in problems
            ]
            st.dataframe(rows, use_container_width=True, hide_index=True)

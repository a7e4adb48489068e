"""What the Streamlit pages share: cached heavy objects, and safe HTML for corpus text.

Everything from the corpus is escaped for HTML *and* Markdown before it is shown, so an abstract
holding `<script>`, `**bold**`, `[link](...)` or `$math$` renders as the characters it holds.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from app.engine.export import MEDIA_TYPES, ExportFormat, export
from app.engine.service import QAService
from app.providers import answers_off_machine
from app.providers.base import resolve_llm
from app.providers.wording import is_not_mentioned
from core.errors import AQAError, InputError
from core.models import FILTER_KINDS, Answer, Feedback, IndexStats, Rating, Source
from core.settings import Settings, get_settings
from core.text import fingerprint, same_author
from store.index import Index

# Characters Markdown (and Streamlit's $...$ math) would interpret, as HTML entities: entities are
# decoded after Markdown is parsed, so they show literally.
_MARKDOWN_SPECIALS = {c: f"&#{ord(c)};" for c in "\\`*_{}[]()#+-.!|~$:<>"}
_CITATION = re.compile(r"&#91;(\d+)&#93;")
_EMPHASIS = re.compile(r"&#42;([^<>]+?)&#42;")  # the answerer's *Title*, after escaping
_URL = re.compile(r"https?://[^\s<>\"'()\[\]{}]+[^\s<>\"'()\[\]{}.,;:!?]")


def escape(text: str) -> str:
    """Corpus text made inert for st.markdown(..., unsafe_allow_html=True)."""
    escaped = html.escape(text, quote=True)
    escaped = escaped.replace("&lt;", "\0lt").replace("&gt;", "\0gt").replace("&amp;", "\0amp")
    escaped = escaped.replace("&quot;", "\0quot").replace("&#x27;", "\0apos")
    out = "".join(_MARKDOWN_SPECIALS.get(c, c) for c in escaped)
    for name, entity in (("lt", "&lt;"), ("gt", "&gt;"), ("amp", "&amp;"), ("quot", "&quot;")):
        out = out.replace("\0" + name, entity)
    return out.replace("\0apos", "&#x27;").replace("\n", "<br>")


def linked(text: str) -> str:
    """Corpus text made inert, with its http(s) addresses as links that open a new tab."""
    out, pos = [], 0
    for m in _URL.finditer(text):
        url = m.group(0)
        out.append(escape(text[pos : m.start()]))
        out.append(
            f'<a href="{html.escape(url, quote=True)}" target="_blank" rel="noopener noreferrer">'
            f"{escape(url)}</a>"
        )
        pos = m.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def answer_html(answer: Answer) -> str:
    """The answer text, escaped, with paper titles in italics, addresses linked, and its
    citation markers as small badges."""
    body = _EMPHASIS.sub(r"<em>\1</em>", linked(answer.answer))
    return _CITATION.sub(r'<sup class="aqa-cite">[\1]</sup>', body)


def highlight(text: str, sentences: list[str]) -> str:
    """The passage, escaped, with the supporting sentences marked."""
    spans = sorted((start, start + len(s)) for s in sentences if s and (start := text.find(s)) >= 0)
    out, pos = [], 0
    for start, end in spans:
        if start < pos:
            continue
        out.append(linked(text[pos:start]))
        out.append(f"<mark>{linked(text[start:end])}</mark>")
        pos = end
    out.append(linked(text[pos:]))
    return "".join(out)


def figures(source: Source) -> str:
    """A source's figures under the names every front gives them (`Source.score`,
    `Source.relevance`); relevance only where it was computed (an answer's sources)."""
    shown = f"score {source.score:.2f}"
    return shown + (f" · relevance {source.relevance:.2f}" if source.relevance else "")


def source_card(source: Source, supporting: list[str]) -> str:
    """One source as an HTML card: title (linked when known), authors, venue and year, score,
    and the passage with its supporting sentences highlighted."""
    title = escape(source.title)
    if source.url and source.url.startswith(("http://", "https://")):
        title = f'<a href="{html.escape(source.url, quote=True)}" target="_blank">{title}</a>'
    derived = ' <span class="aqa-muted">(untitled; first sentence shown)</span>'
    meta = " · ".join(escape(str(x)) for x in (source.venue, source.year) if x)
    links = [
        f'<a href="{html.escape(url, quote=True)}" target="_blank">{label}</a>'
        for label, url in (("DOI", source.doi_url), ("arXiv", source.arxiv_url))
        if url
    ]
    meta = " · ".join(x for x in (meta, *links) if x)
    authors = escape(", ".join(source.authors[:6]) + (" et al." if len(source.authors) > 6 else ""))
    return (
        f'<div class="aqa-card"><div class="aqa-head"><b>[{source.marker}]</b> {title}'
        f"{derived if source.title_derived else ''}</div>"
        f'<div class="aqa-muted">{authors}{" — " if authors and meta else ""}{meta}'
        f" · {figures(source)}</div>"
        f'<div class="aqa-snippet">{highlight(source.text, supporting)}</div></div>'
    )


CSS = """
<style>
.aqa-card {border: 1px solid rgba(128,128,128,.35); border-radius: .5rem; padding: .6rem .8rem;
           margin: .4rem 0;}
.aqa-head {margin-bottom: .2rem;}
.aqa-muted {color: rgba(128,128,128,1); font-size: .85rem;}
.aqa-snippet {font-size: .9rem; margin-top: .3rem;}
.aqa-snippet mark {background: rgba(255, 215, 0, .35); padding: 0 .1rem;}
sup.aqa-cite {font-weight: 600; color: #1f77b4;}
</style>
"""


@st.cache_resource(show_spinner="Loading the embedding model and the index…")
def _service(_settings: Settings, cache_key: str) -> QAService:
    """One service (model, Chroma client, provider) per process and settings, loaded when the
    page first opens (under the spinner), so the first answer is as fast as the next."""
    service = QAService(_settings)
    service.warm()
    return service


def cache_key(current: Settings) -> str:
    """Settings as a cache key; the secrets only as a fingerprint, never in clear."""
    secrets = ("openai_api_key", "chroma_token", "api_token")
    values = [getattr(current, name) for name in secrets]
    clear = [value.get_secret_value() if value is not None else "" for value in values]
    return current.model_dump_json(exclude=set(secrets)) + fingerprint(*clear)


def settings() -> Settings:
    try:
        return get_settings()
    except AQAError as exc:
        st.error(str(exc))
        st.stop()
        raise  # unreachable: st.stop() ends the run


def get_service(current: Settings) -> QAService:
    """The cached service; a configuration error (no key, bad model path) stops the page with
    its message instead of failing at the first question."""
    try:
        svc = _service(current, cache_key(current))
        svc.provider  # noqa: B018 - builds the provider now so its errors show up front
        return svc
    except AQAError as exc:
        st.error(str(exc))
        st.stop()
        raise


def preload() -> float | None:
    """Fill the service cache before any page opens: `abstract-qa app` calls this as Streamlit
    starts, so the first visitor finds the model and the index loaded. Seconds it took (None
    when the settings are wrong: the page shows why)."""
    started = time.perf_counter()
    try:
        current = get_settings()
        _service(current, cache_key(current)).provider  # noqa: B018 - as get_service does
    except AQAError:
        return None
    return time.perf_counter() - started


@st.cache_data(ttl=30, show_spinner=False)
def _stats(_settings: Settings, cache_key: str) -> IndexStats:
    return Index(_settings).stats()


def stats(current: Settings) -> IndexStats:
    """What the index holds (no papers yet is not an error); a Chroma server that cannot be
    reached stops the page with its message, never as "the index is empty"."""
    try:
        return _stats(current, cache_key(current))
    except AQAError as exc:
        st.error(str(exc))
        st.stop()
        raise


def provider_label(current: Settings) -> tuple[str, bool]:
    """('extractive' or 'openai: gpt-4o-mini at URL', whether it runs offline)."""
    kind = resolve_llm(current)
    if kind == "extractive":
        return "extractive (no generative model)", True
    if kind == "llamacpp":
        name = current.llm_model_path.name if current.llm_model_path else "?"
        return f"llama.cpp: {name}", True
    where = current.openai_base_url or "api.openai.com"
    return f"openai: {current.llm_model} at {where}", not answers_off_machine(current)


def matching_authors(service: QAService, typed: str) -> list[str]:
    """The index's authors a typed name matches (as the author filter would)."""
    return [n for n in service.retriever.open().bm25.author_names if same_author(typed, n)]


def filter_buttons(answer: Answer, key: str) -> None:
    """One button per filter read from the question: a click asks again without it."""
    read = answer.filters.read_kinds
    words = {str(kind): word for kind, word in FILTER_KINDS.items()}
    for name in sorted(read):
        if st.button(
            f"Remove the {words.get(name, name)} filter read from the question",
            key=f"drop-{key}-{name}",
            icon=":material/filter_alt_off:",
        ):
            st.session_state.ask_again = {"question": answer.question, "ignore": [name]}
            st.rerun()


def more_like_this(source: Source, key: str) -> None:
    """A button under a source card that lists the papers nearest to it."""
    shown = st.session_state.setdefault("related", {})
    slot = f"{key}-{source.paper_id}"
    if st.button("More like this", key=f"more-{slot}", icon=":material/travel_explore:"):
        try:
            shown[slot] = get_service(settings()).related(source.paper_id, 5)
        except AQAError as exc:
            st.error(str(exc))
    if slot in shown:
        lines = []
        for paper in shown[slot]:
            meta = " · ".join(escape(str(x)) for x in (paper.venue, paper.year) if x)
            lines.append(f"- {escape(paper.title)} <span class='aqa-muted'>{meta}</span>")
        st.markdown("\n".join(lines) or "Nothing near it.", unsafe_allow_html=True)


def counts_chart(answer: Answer) -> None:
    """Matching papers per year, and per venue as a second view."""
    counts = answer.counts
    assert counts is not None
    per_year, per_venue = st.tabs(["Papers per year", "Papers per venue"])
    with per_year:
        st.bar_chart(
            pd.DataFrame({"papers": list(counts.by_year.values())}, index=list(counts.by_year)),
            x_label="year",
            y_label="matching papers",
        )
    with per_venue:
        st.bar_chart(
            pd.DataFrame({"papers": list(counts.by_venue.values())}, index=list(counts.by_venue)),
            x_label="venue",
            y_label="matching papers",
        )
    st.caption(f"Counted: {escape(counts.rule)}", unsafe_allow_html=True)


EXPORTS: list[tuple[str, ExportFormat, str]] = [
    ("Markdown", "markdown", "md"),
    ("BibTeX", "bibtex", "bib"),
    ("CSL-JSON", "csl-json", "csl.json"),
]


def export_buttons(
    answers: list[Answer], key: str, name: str = "answer", stacked: bool = False
) -> None:
    """Download buttons: the answers with their cited papers as Markdown, the cited papers as
    BibTeX or CSL-JSON for a reference manager; side by side, or one under another. A file is
    written when its button is clicked, not on every rerun."""
    if not any(a.cited_sources for a in answers):
        return

    def written(fmt: ExportFormat) -> Callable[[], str]:
        def write() -> str:
            service = get_service(settings())
            cited = {s.paper_id for a in answers for s in a.cited_sources}
            papers = {paper_id: service.paper(paper_id) for paper_id in cited}  # each read once
            return export(answers, fmt, papers.__getitem__)

        return write

    places = [st.container() for _ in EXPORTS] if stacked else st.columns(len(EXPORTS))
    for column, (label, fmt, suffix) in zip(places, EXPORTS, strict=True):
        column.download_button(
            label,
            data=written(fmt),
            file_name=f"{name}.{suffix}",
            mime=MEDIA_TYPES[fmt],
            key=f"export-{fmt}-{key}",
            on_click="ignore",
            icon=":material/download:",
            width="stretch",
        )


def conversation_buttons(answers: list[Answer]) -> None:
    """The whole conversation's downloads (in the sidebar): every question and answer with the
    papers they cite, and those papers for a reference manager."""
    if any(a.cited_sources for a in answers):
        plural = "s" * (len(answers) != 1)
        st.caption(f"Download this conversation ({len(answers)} answer{plural}):")
        export_buttons(answers, "conversation", name="conversation", stacked=True)


RATINGS: tuple[Rating, Rating] = ("down", "up")  # st.feedback("thumbs"): 0 down, 1 up


def _ratings() -> dict[str, dict[str, Any]]:
    """The answers rated in this session: message key -> the stored rating's id, thumb and
    comment (widget state goes when another page is shown; this stays)."""
    rated: dict[str, dict[str, Any]] = st.session_state.setdefault("rated", {})
    return rated


def _rated(answer: Answer, key: str) -> None:
    """The thumbs changed: store the rating, change it, or take it back."""
    value = st.session_state[f"rating-{key}"]
    rated = _ratings()
    store = get_service(settings()).feedback
    try:
        if value is None:
            if key in rated:
                store.remove(rated.pop(key)["id"])
            return
        if key in rated:
            try:
                store.change(rated[key]["id"], rating=RATINGS[value])
                rated[key]["rating"] = value
                return
            except InputError:  # the rating is gone from the store: rate afresh
                del rated[key]
        comment = st.session_state.get(f"comment-{key}")
        record = get_service(settings()).rate(Feedback.of(answer, RATINGS[value], comment))
        rated[key] = {"id": record.id, "rating": value, "comment": record.comment or ""}
    except AQAError as exc:
        st.session_state[f"rating-error-{key}"] = str(exc)


def _commented(key: str) -> None:
    rated = _ratings()
    if key in rated:
        comment = st.session_state[f"comment-{key}"]
        try:
            get_service(settings()).feedback.change(rated[key]["id"], comment=comment)
            rated[key]["comment"] = comment
        except AQAError as exc:
            st.session_state[f"rating-error-{key}"] = str(exc)


def feedback_widget(answer: Answer, key: str) -> None:
    """Thumbs up or down on the answer and, once rated, an optional comment; both are stored
    at once (the Feedback page and `abstract-qa feedback` read them)."""
    rated = _ratings().get(key)
    if rated is not None:  # back from another page: the widgets show what is stored
        st.session_state.setdefault(f"rating-{key}", rated["rating"])
        st.session_state.setdefault(f"comment-{key}", rated["comment"])
    left, right = st.columns([1, 5], vertical_alignment="center")
    with left:
        st.feedback("thumbs", key=f"rating-{key}", on_change=_rated, args=(answer, key))
    if st.session_state.get(f"rating-{key}") is not None:
        right.text_input(
            "Comment",
            key=f"comment-{key}",
            on_change=_commented,
            args=(key,),
            placeholder="What was right or wrong? (optional; Enter saves it)",
            label_visibility="collapsed",
        )
    if error := st.session_state.pop(f"rating-error-{key}", None):
        st.error(error, icon=":material/error:")


def share_link(answer: Answer) -> None:
    """A link (in a new tab) that opens the app on this question with the filters it was asked
    with (those read from the question are in its words)."""
    given = answer.filters.without(answer.filters.read_kinds)
    query: dict[str, list[str]] = {"q": [answer.standalone_question]}
    if given.year_from is not None or given.year_to is not None:
        years = sorted(int(y) for y in stats(settings()).years if y.isdigit())
        lowest, highest = (years[0], years[-1]) if years else (0, 9999)
        query["years"] = [str(given.year_from or lowest), str(given.year_to or highest)]
    if given.venues:
        query["venues"] = given.venues
    if given.authors:
        query["author"] = given.authors[:1]
    page = st.context.url.split("?", 1)[0] if st.context.url else ""
    st.caption(
        f'<a href="{html.escape(page + "?" + urlencode(query, doseq=True), quote=True)}" '
        'target="_blank" rel="noopener">Link to this question</a>',
        unsafe_allow_html=True,
    )


def render_stopped(text: str) -> None:
    """An answer stopped while it streamed: what it had written, its citations unchecked."""
    st.markdown(escape(text) or "…", unsafe_allow_html=True)
    st.caption("Stopped before the answer was finished: its citations were not checked.")


def render_answer(answer: Answer, key: str = "0") -> None:
    """The answer with its citation badges, then a card per cited source."""
    if answer.abstained:
        st.info(answer.answer, icon=":material/help:")
        if answer.filters_applied != "none":
            st.caption(f"Filters: {escape(answer.filters_applied)}", unsafe_allow_html=True)
        filter_buttons(answer, key)
        share_link(answer)
        feedback_widget(answer, key)
        if answer.sources:
            label = (
                "Related papers (none mentions it)"
                if is_not_mentioned(answer.answer)
                else "Retrieved passages (none was relevant enough to answer)"
            )
            with st.expander(label, expanded=is_not_mentioned(answer.answer)):
                for source in answer.sources:
                    st.markdown(source_card(source, []), unsafe_allow_html=True)
        return
    st.markdown(answer_html(answer), unsafe_allow_html=True)
    if answer.counts is not None and answer.counts.papers:
        counts_chart(answer)
    notes = []
    if answer.filters_applied != "none":
        notes.append(f"Filters: {escape(answer.filters_applied)}")
    if answer.invalid_citations:
        notes.append(f"Removed citations to missing sources: {', '.join(answer.invalid_citations)}")
    if answer.uncited_sentences:
        notes.append(f"{len(answer.uncited_sentences)} sentence(s) without a citation")
    notes.append(f"{answer.timings.get('total', 0):.2f}s")
    st.caption(" · ".join(notes), unsafe_allow_html=True)
    filter_buttons(answer, key)
    share_link(answer)
    export_buttons([answer], key, name=f"answer-{key}")
    feedback_widget(answer, key)
    supporting: dict[int, list[str]] = {c.marker: c.supporting for c in answer.citations}
    cited = answer.cited_sources
    for source in cited:
        st.markdown(source_card(source, supporting[source.marker]), unsafe_allow_html=True)
        more_like_this(source, key)
    others = [s for s in answer.sources if s not in cited]
    if others:
        with st.expander(f"Other retrieved passages ({len(others)})"):
            for source in others:
                st.markdown(source_card(source, []), unsafe_allow_html=True)

"""Chat with the corpus: streamed answers, citation badges, a card per cited source."""

from __future__ import annotations

from collections.abc import Iterator

import streamlit as st

from app.ui import shared as ui
from core.errors import AQAError
from core.models import Answer, Filters

st.markdown(ui.CSS, unsafe_allow_html=True)
settings = ui.settings()
service = ui.get_service(settings)
stats = ui.stats(settings)

# --- sidebar: provider, retrieval controls, corpus ------------------------------------------------
with st.sidebar:
    label, offline = ui.provider_label(settings)
    st.markdown(f"**Answers:** {ui.escape(label)}", unsafe_allow_html=True)
    st.caption("Runs offline" if offline else "Calls a remote model")
    if st.button("New conversation", icon=":material/add_comment:", use_container_width=True):
        st.session_state.messages = []
    st.subheader("Retrieval")
    k = st.slider(
        "Papers per answer (top-k)",
        1,
        20,
        settings.top_k,
        key="top_k",
        help=f'Left at {settings.top_k}, a listing question ("which papers ...?") gets '
        f"{settings.listing_top_k}.",
    )
    years = sorted(int(y) for y in stats.years if y.isdigit())
    year_range: tuple[int, int] | None = None
    if len(years) > 1:
        year_range = st.slider("Years", years[0], years[-1], (years[0], years[-1]), key="years")
    venues = st.multiselect("Venues", sorted(stats.venues), key="venues")
    author = st.text_input("Author", placeholder="e.g. B. Schölkopf", key="author").strip()
    if author:
        matches = ui.matching_authors(service, author)
        st.caption(
            (
                "Matches "
                + ", ".join(ui.escape(m) for m in matches[:5])
                + ("…" if len(matches) > 5 else "")
            )
            if matches
            else "No author of that name in the index.",
            unsafe_allow_html=True,
        )
    st.subheader("Corpus")
    if stats.papers:
        a, b = st.columns(2)
        a.metric("Papers", f"{stats.papers:,}")
        b.metric("Chunks", f"{stats.chunks:,}")
        st.caption(
            "Venues: " + ", ".join(f"{ui.escape(v)} ({n})" for v, n in stats.venues.items()),
            unsafe_allow_html=True,
        )
        if years:
            st.caption(f"Years: {years[0]} to {years[-1]}")
        st.caption(f"Embeddings: {stats.embedding_model or 'none yet'}")

st.title("Ask the abstracts")
if stats.papers == 0:
    st.warning(
        "The index is empty. Add papers on the **Add papers** page, or run "
        "`abstract-qa ingest --sample` (what `make run` does on first start).",
        icon=":material/inbox:",
    )
    st.stop()

if "messages" not in st.session_state:
    st.session_state.messages = []

for i, message in enumerate(st.session_state.messages):
    with st.chat_message(message["role"]):
        if message["role"] == "user":
            st.markdown(ui.escape(message["content"]), unsafe_allow_html=True)
        else:
            ui.render_answer(message["answer"], key=str(i))

prompt = st.chat_input("Ask about the papers, e.g. “Which papers study federated learning?”")
ignore: list[str] = []
if prompt is None and (again := st.session_state.pop("ask_again", None)):
    # a filter read from the question was removed with one click: ask again without it
    prompt, ignore = again["question"], again["ignore"]
if prompt:
    history = [
        (m["question"], m["answer"].answer)
        for m in st.session_state.messages
        if m["role"] == "assistant" and isinstance(m.get("answer"), Answer)
    ]
    st.session_state.messages.append({"role": "user", "content": prompt})
    with st.chat_message("user"):
        st.markdown(ui.escape(prompt), unsafe_allow_html=True)
    with st.chat_message("assistant"):
        final: dict[str, Answer] = {}

        def pieces(question: str) -> Iterator[str]:
            for event in service.stream(
                question,
                history=history,
                k=None if k == settings.top_k else k,  # the service's own choice
                filters=Filters(
                    year_from=year_range[0] if year_range and year_range[0] != years[0] else None,
                    year_to=year_range[1] if year_range and year_range[1] != years[-1] else None,
                    venues=venues or [],
                    authors=[author] if author else [],
                ),
                ignore=ignore or None,
            ):
                if isinstance(event, Answer):
                    final["answer"] = event
                else:
                    yield event

        placeholder = st.empty()
        try:
            with placeholder.container():
                st.write_stream(pieces(prompt))
        except AQAError as exc:
            placeholder.empty()
            st.error(str(exc), icon=":material/error:")
            st.session_state.messages.pop()
            st.stop()
        placeholder.empty()
        answer = final["answer"]
        ui.render_answer(answer, key=str(len(st.session_state.messages)))
    st.session_state.messages.append({"role": "assistant", "question": prompt, "answer": answer})

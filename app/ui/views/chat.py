"""Chat with the corpus: streamed answers, citation badges, a card per cited source.

The URL carries the question (``?q=``, asked when the page opens) and the sidebar's filters
(bound to the query parameters), so a question can be shared as a link; the chat input turns
into a stop button while an answer streams.
"""

from __future__ import annotations

import uuid
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
        st.query_params.pop("q", None)
    conversation = st.container()  # its downloads, filled once this run's answer is in
    st.subheader("Retrieval")
    k = st.slider(
        "Papers per answer (top-k)",
        1,
        20,
        settings.top_k,
        key="top_k",
        bind="query-params",
        help=f'Left at {settings.top_k}, a listing question ("which papers ...?") gets '
        f"{settings.listing_top_k}.",
    )
    years = sorted(int(y) for y in stats.years if y.isdigit())
    year_range: tuple[int, int] | None = None
    if len(years) > 1:
        year_range = st.slider(
            "Years", years[0], years[-1], (years[0], years[-1]), key="years", bind="query-params"
        )
    venues = st.multiselect("Venues", sorted(stats.venues), key="venues", bind="query-params")
    author = st.text_input(
        "Author", placeholder="e.g. B. Schölkopf", key="author", bind="query-params"
    ).strip()
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
if (stopped := st.session_state.pop("streaming", None)) is not None:
    # the last run ended mid-answer (the stop button): keep the answer as far as it went
    st.session_state.messages.append({"role": "assistant", **stopped})

for message in st.session_state.messages:
    with st.chat_message(message["role"]):
        if message["role"] == "user":
            st.markdown(ui.escape(message["content"]), unsafe_allow_html=True)
        elif "answer" in message:
            ui.render_answer(message["answer"], key=message["id"])
        else:
            ui.render_stopped(message["text"])

prompt = st.chat_input(
    "Ask about the papers, e.g. “Which papers study federated learning?”", submit_mode="stop"
)
ignore: list[str] = []
if prompt is None and (again := st.session_state.pop("ask_again", None)):
    # a filter read from the question was removed with one click: ask again without it
    prompt, ignore = again["question"], again["ignore"]
if prompt is None and "opened" not in st.session_state and (linked := st.query_params.get("q")):
    prompt = linked  # a shared link: asked as the page opens
st.session_state.opened = True
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
        message_id = uuid.uuid4().hex[:12]
        streaming = {"id": message_id, "question": prompt, "text": ""}
        st.session_state.streaming = streaming  # what a stopped run leaves behind

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
                    streaming["text"] += event
                    yield event

        placeholder = st.empty()
        try:
            with placeholder.container():
                st.write_stream(pieces(prompt))
        except AQAError as exc:
            del st.session_state.streaming
            placeholder.empty()
            st.error(str(exc), icon=":material/error:")
            st.session_state.messages.pop()
            st.stop()
        answer = final["answer"]
        # the answer is in the conversation before it is drawn: a click while its cards render
        # (the stop button, its thumbs) reruns the page with it, not without it
        st.session_state.messages.append(
            {"role": "assistant", "id": message_id, "question": prompt, "answer": answer}
        )
        del st.session_state.streaming
        st.query_params["q"] = answer.standalone_question  # the address bar links to it
        placeholder.empty()
        ui.render_answer(answer, key=message_id)

with conversation:
    ui.conversation_buttons(
        [m["answer"] for m in st.session_state.messages if isinstance(m.get("answer"), Answer)]
    )

"""The OpenAI-compatible client path, end to end, against llama-cpp-python's real HTTP server
serving SmolLM2-135M on loopback. No mocked HTTP. The tiny model's answers are poor; what is
tested is that whatever it says reaches the user streamed, with only real citations."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from app.engine.service import QAService
from app.providers.prompts import load_prompt
from app.providers.wording import is_not_stated
from core.errors import ConfigError, IndexMismatchError, ProviderError
from core.models import Answer
from core.settings import Settings
from tests.conftest import (
    HOSTILE,
    INJECTIONS,
    LLM_KEY,
    ROOT,
    SAMPLE,
    assert_citations_real,
    free_port,
    gguf_path,
    make_settings,
    paper_id_containing,
    serve,
)

pytestmark = [pytest.mark.slow, pytest.mark.server]
KEY = LLM_KEY


@pytest.fixture(scope="module")
def server(llm_server: str) -> str:
    return llm_server


def llm_settings(sample_settings: Settings, url: str, **extra: object) -> Settings:
    update = {"llm": "openai", "openai_base_url": url, "openai_api_key": SecretStr(KEY)}
    update |= {"llm_model": "smollm2", "top_k": 2, "listing_top_k": 2, "llm_max_tokens": 80}
    update |= extra
    return sample_settings.model_copy(update=update)


def test_answers_stream_from_a_real_server_with_only_real_citations(
    server: str, sample_settings: Settings
) -> None:
    service = QAService(llm_settings(sample_settings, server))
    # With two sources given, this tiny model cites a third that does not exist when asked to;
    # which wording makes it do so shifts with the prompt, so the first that does is checked.
    for question in (
        "Which papers study federated learning? List them as [1], [2], [3], [4].",
        "Which papers study federated learning? Cite each as [1] [2] [3] [4] [5].",
        "Which papers study federated learning? Answer: [3] and [4].",
    ):
        events = list(service.stream(question))
        pieces, final = events[:-1], events[-1]
        if isinstance(final, Answer) and final.invalid_citations:
            break
    assert isinstance(final, Answer)
    assert len(pieces) > 3, "tokens arrive one by one"
    raw = "".join(str(p) for p in pieces)
    assert final.provider == "openai" and final.model == "smollm2"
    raw_markers = {
        int(n)
        for group in re.findall(r"\[([\d,\s]+)\]", raw)
        for n in re.split(r"[,\s]+", group)
        if n
    }
    bogus = sorted(str(n) for n in raw_markers if n not in {1, 2})
    assert bogus, f"the model cited no missing source this time: {raw!r}"
    assert set(final.invalid_citations) == set(bogus)
    for n in bogus:
        assert f"[{n}]" not in final.answer
    if not final.abstained:
        assert_citations_real(final)
    else:
        assert final.citations == []
    assert len(final.sources) == 2


def test_abstained_means_the_same_for_the_generative_path(
    server: str, sample_settings: Settings
) -> None:
    """Format and checks, not quality: whatever the tiny model writes, the answer is abstained
    exactly when it cites nothing or says only that the named paper lacks the detail, as the
    prompt asks it to ("The abstract of X [n] does not state ...")."""
    assert "does not state" in load_prompt("answer.system")
    service = QAService(llm_settings(sample_settings, server))
    for question in (
        "What top-1 accuracy does ContraNorm reach on ImageNet?",
        "Reply with exactly: The abstract of ContraNorm [1] does not state its accuracy.",
    ):
        answer = service.ask(question)
        said_missing = is_not_stated(answer.answer)
        assert answer.abstained is (not answer.citations or said_missing), answer.answer
        if said_missing:
            assert answer.citations, "a 'not stated' answer points to the paper"


def test_a_follow_up_is_rewritten_by_the_model(server: str, sample_settings: Settings) -> None:
    service = QAService(llm_settings(sample_settings, server))
    answer = service.ask(
        "What does it improve?",
        history=[("What is DASHA?", "DASHA is a family of distributed optimization methods [1].")],
    )
    assert answer.standalone_question != "What does it improve?"
    assert answer.sources[0].paper_id == paper_id_containing("We develop and analyze DASHA")


def test_a_compatible_server_stops_at_the_max_tokens_setting(
    server: str, sample_settings: Settings
) -> None:
    """AQA_LLM_MAX_TOKENS bounds every reply, plain and JSON, from a server that reads only the
    older max_tokens field (llama-cpp-python's): left unbounded, a JSON reply ran on in blank
    space until the context was full, minutes per table row."""
    from app.providers.openai import OpenAIProvider

    provider = OpenAIProvider(llm_settings(sample_settings, server, llm_max_tokens=16))
    essay = [("user", "Write a long essay, at least 500 words, on federated learning.")]
    for json_mode in (False, True):
        reply = provider.complete(essay, json=json_mode)
        text = reply.text()
        # this server reports no usage when streaming: sixteen tokens are a line of text
        assert text and len(text) < 200, text


@pytest.mark.parametrize(
    ("base_url", "field"),
    [
        (None, "max_completion_tokens"),
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("https://my-team.openai.azure.com/openai/v1/", "max_completion_tokens"),
        ("http://127.0.0.1:8080/v1", "max_tokens"),
        ("https://notopenai.com/v1", "max_tokens"),
    ],
)
def test_the_length_limit_goes_in_the_one_field_the_server_reads(
    base_url: str | None, field: str, sample_settings: Settings
) -> None:
    """OpenAI answers 400 to a request holding both length fields; a compatible server that
    predates max_completion_tokens ignores it. Each gets the limit once, in its own field."""
    from app.providers.openai import OpenAIProvider

    provider = OpenAIProvider(
        llm_settings(sample_settings, "", openai_base_url=base_url, llm_max_tokens=64)
    )
    payload = provider.chat._get_request_payload([("user", "hi")])
    sent = payload | payload.get("extra_body", {})  # the client merges extra_body into the body
    assert {k: v for k, v in sent.items() if k.startswith("max_")} == {field: 64}


def test_a_wrong_key_and_an_unreachable_server_are_one_line_errors(
    server: str, sample_settings: Settings
) -> None:
    bad_key = QAService(llm_settings(sample_settings, server, openai_api_key=SecretStr("wrong")))
    with pytest.raises(ProviderError, match="rejected the API key"):
        bad_key.ask("What is DASHA?")
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    down = QAService(llm_settings(sample_settings, nobody, llm_max_retries=0))
    with pytest.raises(ProviderError, match="Cannot reach"):
        down.ask("What is DASHA?")


def test_the_llamacpp_provider_answers_from_a_gguf_file(sample_settings: Settings) -> None:
    settings = sample_settings.model_copy(
        update={"llm": "llamacpp", "llm_model_path": gguf_path(), "top_k": 2, "llm_max_tokens": 60}
    )
    events = list(QAService(settings).stream("Which papers study federated learning?"))
    final = events[-1]
    assert isinstance(final, Answer) and final.provider == "llamacpp"
    assert len(events) > 3  # streamed
    valid = {s.marker for s in final.sources}
    assert {c.marker for c in final.citations} <= valid


def test_a_hostile_corpus_cannot_steer_the_model_into_fake_citations(
    server: str, tmp_path: Path
) -> None:
    """Abstracts that order the model to cite [9] or [12], or to say PWNED, or that carry
    markers of their own: whatever the model does, only real sources are cited and text tied
    to no source is flagged or refused."""
    from ingest.pipeline import ingest

    settings = make_settings(data_dir=tmp_path / "hostile")
    ingest([HOSTILE], settings)
    service = QAService(llm_settings(settings, server, top_k=3))
    for question, _, _ in INJECTIONS[:3]:
        answer = service.ask(question)
        assert answer.provider == "openai" and len(answer.sources) == 3
        for fake in ("[7]", "[9]", "[12]", "[42]", "[99]"):
            assert fake not in answer.answer
        assert_citations_real(answer)  # a refusal has none; otherwise each is a real source


def test_the_judge_grades_through_the_server_in_a_call_of_its_own(
    server: str, sample_settings: Settings, sample_service: QAService, tmp_path: Path
) -> None:
    """`eval --judge` asks the chat model to grade each answer: a real request in JSON mode,
    whose reply is kept, whose scores (when the model gives them) are 1-5, and which leaves the
    graded answers, their usage included, as they were."""
    from app.evaluation.harness import judge, load_questions, run_eval

    grader = QAService(llm_settings(sample_settings, server, llm_max_tokens=120))
    answers = [sample_service.ask("What is DASHA?")]
    assert not any(a.abstained for a in answers)
    untouched = [a.model_copy(deep=True) for a in answers]
    for answer in answers:
        verdict = judge(grader, answer)
        assert verdict is not None and verdict.reply.lstrip().startswith("{"), verdict
        assert set(verdict.scores) <= {"correctness", "faithfulness"}
        assert all(1 <= v <= 5 for v in verdict.scores.values())
    assert answers == untouched
    refusal = sample_service.ask("How do honeybees communicate?")
    assert refusal.abstained and judge(grader, refusal) is None  # nothing to grade

    questions = tmp_path / "q.jsonl"
    dasha = paper_id_containing("We develop and analyze DASHA")
    questions.write_text(json.dumps({"id": "q1", "question": "What is DASHA?", "gold": [dasha]}))
    report = run_eval(load_questions(questions), grader, use_judge=True)
    (result,) = report.results
    assert (result.judge_reply is None) == result.abstained  # what is answered is graded


def test_openai_embeddings_end_to_end_against_a_real_embeddings_endpoint(
    tmp_path: Path,
) -> None:
    """AQA_EMBEDDINGS=openai against a real OpenAI-compatible /v1/embeddings on loopback
    (llama-cpp-python's server, mean-pooled): ingest, search, answer and fill a table with its
    vectors, and an index built by it refuses another model."""
    from ingest.pipeline import ingest
    from ingest.read import read_paths
    from store.index import Index

    port = free_port()
    command = [sys.executable, str(ROOT / "tests/fixtures/embedding_server.py"), str(gguf_path()),
               str(port)]  # fmt: skip
    with serve(command, f"http://127.0.0.1:{port}/v1/models", tmp_path / "embed.log"):
        settings = make_settings(
            data_dir=tmp_path / "index",
            embeddings="openai",
            embedding_model="smol-embed",
            openai_base_url=f"http://127.0.0.1:{port}/v1",
            llm="extractive",
        )
        papers = read_paths([SAMPLE]).papers[:12]  # a small corpus: this model is slow on CPU
        dasha = paper_id_containing("We develop and analyze DASHA")
        papers += [p for p in read_paths([SAMPLE]).papers if p.paper_id == dasha]
        corpus = tmp_path / "papers.jsonl"
        corpus.write_text("".join(json.dumps({"id": p.paper_id, "abstract": p.abstract}) + "\n"
                                  for p in papers))  # fmt: skip
        report = ingest([corpus], settings)
        assert report.papers == len({p.paper_id for p in papers})
        assert report.embedded == report.chunks > 0
        stats = Index(settings).stats()
        assert (stats.embedding_model, stats.embedding_dim) == ("smol-embed", 576)
        answer = QAService(settings).ask("What is DASHA?")
        assert not answer.abstained and answer.provider == "extractive"
        assert answer.citations[0].paper_id == dasha
        assert_citations_real(answer)
        # a table over this index: its vectors are not those the column similarity was learned
        # on, so the selector scores the cells by the features alone
        table = QAService(settings).table(papers=[dasha], columns=["dataset", "main result"])
        (row,) = table.rows
        assert [c.column for c in row.cells] == ["dataset", "main result"]
        for cell in row.cells:
            assert not cell.stated or row.abstract[cell.start : cell.end] == cell.quote
    with pytest.raises(IndexMismatchError, match="smol-embed"):
        QAService(make_settings(data_dir=tmp_path / "index")).ask("What is DASHA?")


def test_llamacpp_failures_are_typed_errors_with_the_fix(
    sample_settings: Settings, tmp_path: Path
) -> None:
    """A file llama.cpp cannot read is a setting to fix (ConfigError, naming the file); a failure
    while answering (here a prompt far over the model's context) is a ProviderError: the errors
    every front maps, never a raw exception."""
    junk = tmp_path / "notamodel.gguf"
    junk.write_bytes(b"GGUF but not really")
    bad = sample_settings.model_copy(update={"llm": "llamacpp", "llm_model_path": junk})
    with pytest.raises(ConfigError, match=r"notamodel\.gguf"):
        QAService(bad).ask("What is DASHA?")
    from app.providers.llamacpp import LlamaCppProvider

    settings = sample_settings.model_copy(
        update={"llm": "llamacpp", "llm_model_path": gguf_path(), "llm_max_tokens": 10}
    )
    provider = LlamaCppProvider(settings)
    with pytest.raises(ProviderError, match=r"llama\.cpp failed"):
        list(provider.stream([("user", "federated learning " * 4000)]))


def test_a_table_filled_by_a_real_server_quotes_only_its_own_abstracts(
    server: str, sample_settings: Settings
) -> None:
    """The generative table path through the real llama.cpp server: every row comes back with a
    cell per column; a stated cell's quote is a sentence of that row's own abstract (a quote the
    abstract does not hold became "not stated" and flagged); the tiny model's quality is not
    what is tested."""
    service = QAService(llm_settings(sample_settings, server, llm_max_tokens=300))
    table = service.table(topic="federated learning", columns=["dataset", "main result"], rows=3)
    assert table.provider == "openai" and table.model == "smollm2" and len(table.rows) == 3
    for row in table.rows:
        assert [c.column for c in row.cells] == ["dataset", "main result"]
        for cell in row.cells:
            if cell.stated:
                assert cell.start is not None and row.abstract[cell.start : cell.end] == cell.quote
            else:
                assert cell.text == "not stated" and cell.quote == ""

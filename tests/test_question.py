"""What a question asks for and how a quoted sentence is framed: pure functions, table tests."""

from __future__ import annotations

import pytest

from app.providers.extractive import frame, third_person
from app.query import question as q
from core.models import Source


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How much more accurate are models that start from a pre-trained model?", "quantity"),
        ("By what margin does the method beat the baseline?", "quantity"),
        ("How many fewer steps than Adam does Sophia need?", "quantity"),
        ("Which optimizer gets a twofold speed-up over Adam?", "name"),
        ("Which operation maps representations onto simplices?", "name"),
        ("What is the name of the layer they propose?", "name"),
        ("What was found about batch size in IRM studies?", "finding"),
        ("On which benchmarks is the method evaluated?", "application"),
        ("Why does momentum fail to accelerate SGD?", "reason"),
        ("How can dynamic time warping be made differentiable?", "method"),
        ("Tell me about simplicial embeddings", "general"),
    ],
)
def test_what_the_question_asks_for(question: str, kind: str) -> None:
    assert q.wanted(question)[0] == kind


def test_a_question_can_ask_for_a_name_and_a_finding() -> None:
    kinds = q.wanted("Which training hyperparameter was found to be overlooked in IRM studies?")
    assert kinds[0] == "name" and "finding" in kinds


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("It improves accuracy by up to 40% over random starts.", 2),
        ("Sophia achieves a 2x speed-up compared to Adam.", 2),
        ("The loss drops to 0.82 on average.", 2),
        ("We evaluate on 12 datasets.", 1),
        ("GPT-2 and ResNet-50 were trained in 2019.", 0),
        ("No numbers at all here.", 0),
    ],
)
def test_which_sentences_hold_a_quantity(sentence: str, expected: int) -> None:
    assert q.has_quantity(sentence) == expected


def test_a_name_sentence_fits_a_name_question_unless_the_name_is_the_questions_own() -> None:
    question = "Which training hyperparameter was found to matter in invariant risk minimization?"
    assert q.fit(["name"], question, "We propose DecDTW, a new layer.") == 1.0
    # IRM is the question's own words, abbreviated: not the name asked for
    assert q.fit(["name"], question, "IRM has received increasing attention.") == 0.0


@pytest.mark.parametrize(
    ("question", "sides"),
    [
        ("How do DASHA and 0/1 Adam differ?", ("DASHA", "0/1 Adam")),
        ("Compare Sophia with Adam", ("Sophia", "Adam")),
        ("What is the difference between DTW and soft-DTW?", ("DTW", "soft-DTW")),
        ("Which papers study federated learning?", None),
    ],
)
def test_comparison_sides(question: str, sides: tuple[str, str] | None) -> None:
    assert q.comparison_sides(question) == sides


@pytest.mark.parametrize(
    ("question", "listing"),
    [
        ("Which papers study federated learning?", True),
        ("List works on equivariance", True),
        ("Which optimizer is fastest?", False),
        ("What work models chemotaxis in C. elegans?", True),
        ("Which prior research uses Tetris as a testbed?", True),
        ("What work has been done on sepsis prediction?", True),
        ("What work is needed to train the model?", False),
        ("What research question does DASHA address?", False),
        ("What research gaps does the survey name?", False),
        ("Which research group developed AlphaFold?", False),
        ("What work were the authors building on?", False),
    ],
)
def test_listing_questions(question: str, listing: bool) -> None:
    assert q.is_listing(question) is listing


@pytest.mark.parametrize(
    ("verb", "third"),
    [("propose", "proposes"), ("study", "studies"), ("address", "addresses"),
     ("are", "is"), ("can", "can"), ("employ", "employs"), ("proposed", "proposed")],
)  # fmt: skip
def test_third_person(verb: str, third: str) -> None:
    assert third_person(verb) == third


@pytest.mark.parametrize(
    ("sentence", "first", "framed"),
    [
        (
            "We develop and analyze DASHA: a new family of methods.",
            True,
            "DASHA [1] develops and analyzes DASHA: a new family of methods.",
        ),
        (
            "In this paper, we propose a layer that we name DecDTW.",
            True,
            "DASHA [1] proposes a layer that they name DecDTW.",
        ),
        (
            "To address this, we introduce a new loss.",
            True,
            "To address this, DASHA [1] introduces a new loss.",
        ),
        (
            "Furthermore, our experiments show a 40% gain.",
            False,
            "It also reports that their experiments show a 40% gain [1].",
        ),
        (
            "Experiments show a 40% gain.",
            True,
            "DASHA [1] reports that experiments show a 40% gain.",
        ),
        (
            "This paper addresses learning with DTW.",
            True,
            "DASHA [1] addresses learning with DTW.",
        ),
        (
            "Simplicial Embeddings (SEM) are representations.",
            True,
            "DASHA [1] reports that Simplicial Embeddings (SEM) are representations.",
        ),
        (  # a closed-class word is never a name, whatever follows it
            "On ImageNet, the model reaches 76.1% top-1 accuracy.",
            True,
            "DASHA [1] reports that on ImageNet, the model reaches 76.1% top-1 accuracy.",
        ),
        (  # a connective leans on a sentence not shown; "Overall" without a comma is a word
            "But the bound is loose.",
            True,
            "DASHA [1] reports that the bound is loose.",
        ),
        (
            "Overall performance improves by 3%.",
            True,
            "DASHA [1] reports that overall performance improves by 3%.",
        ),
        (
            "To obtain our results, we prove a new concentration bound.",
            False,
            "To obtain their results, it proves a new concentration bound [1].",
        ),
    ],
)
def test_framing_in_the_third_person(sentence: str, first: bool, framed: str) -> None:
    assert frame(sentence, "DASHA", 1, first) == framed


def test_an_untitled_paper_is_named_by_what_it_introduces() -> None:
    from app.providers.wording import subject

    source = Source(
        marker=1,
        paper_id="p",
        title="This paper addresses learning",
        title_derived=True,
        text="This paper addresses learning with DTW. We instead propose a layer, DecDTW.",
        score=0.5,
        rank=1,
    )
    assert subject(source, 0) == "DecDTW"
    titled = source.model_copy(update={"title_derived": False, "title": "Deep Declarative DTW"})
    assert subject(titled, 0) == "*Deep Declarative DTW*"
    nameless = source.model_copy(update={"text": "Plain words only. Nothing named here."})
    assert subject(nameless, 0) == "One paper"
    assert subject(nameless, 1) == "Another paper"


def test_the_relevance_threshold_grows_with_the_index_unless_fixed() -> None:
    from app.engine.relevance import relevance, relevance_threshold

    assert relevance_threshold(65) == pytest.approx(0.42, abs=0.005)  # the bundled sample
    assert relevance_threshold(23_800) == pytest.approx(0.77, abs=0.005)  # the 22k corpus
    assert relevance_threshold(5) == relevance_threshold(10)  # a tiny index is not lenient
    assert relevance_threshold(23_800, fixed=0.3) == 0.3
    source = Source(marker=1, paper_id="p", title="t", text="x", score=0.4, lexical=0.6, rank=1)
    assert relevance(source, typicality=0.2) == pytest.approx(0.4 + 0.3 + 0.1)


@pytest.mark.parametrize(
    ("question", "counting"),
    [
        ("How has work on graph neural networks grown since 2015?", True),
        ("Which venues publish most on bandits?", True),
        ("How many papers study federated learning?", True),
        ("What are the research trends in offline RL?", True),
        ("How has the number of papers on GANs changed?", True),
        ("Where is work on bandits published?", True),
        ("How has pre-training changed federated learning accuracy?", False),
        ("What trends does the paper find in the data?", False),
        ("How many fewer steps than Adam does Sophia need?", False),
    ],
)
def test_counting_questions(question: str, counting: bool) -> None:
    assert q.is_count(question) is counting


def test_the_counted_topic_is_the_question_less_its_counting_words() -> None:
    assert q.count_topic("How has work on graph neural networks grown?") == "graph neural networks"
    assert q.count_topic("Which venues publish most on bandits?") == "bandits"
    assert q.count_topic("How many papers mention zorbulation?") == "zorbulation"

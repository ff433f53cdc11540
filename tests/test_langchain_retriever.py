"""The LangChain retriever with the real langchain-core, over a fake-backed memory."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core")
from langchain_core.retrievers import BaseRetriever  # noqa: E402

from epic_edge.langchain_retriever import EpicEdgeRetriever  # noqa: E402

VEGAN = "I follow a vegan diet"


@pytest.fixture
def retriever(fake_memory):
    fake_memory.add_preferences([VEGAN, "I love hiking trails"])
    fake_memory.ingest([
        {"text": "A vegan diet leaves out meat, dairy and eggs.", "source": "notes/1",
         "id": "n1"},
        {"text": "Long hiking trails cross the Alps.", "source": "notes/2"},
    ])
    return EpicEdgeRetriever(memory=fake_memory, k=2)


def test_documents_carry_instruction_item_and_preference(retriever, fake_memory):
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("What vegan food should I cook?")
    hits = fake_memory.retrieve("What vegan food should I cook?", 2)
    assert [d.page_content for d in docs] == [h.item_text for h in hits]
    first = docs[0]
    assert first.page_content.startswith("A vegan diet")
    assert first.metadata["preference"] == VEGAN
    assert first.metadata["item"] == first.page_content
    assert first.metadata["instruction"] == hits[0].instruction
    assert first.metadata["score"] == pytest.approx(hits[0].score)
    assert first.metadata["source"] == "notes/1" and first.metadata["entry_id"] == hits[0].entry_id
    assert first.metadata["similarity"] == pytest.approx(hits[0].similarity)
    assert (first.metadata["item_id"], first.metadata["external_id"]) == (hits[0].item_id, "n1")
    assert fake_memory.forget(first.metadata["item_id"]) == 1  # what an agent does with it
    assert first.page_content not in [d.page_content for d in retriever.invoke("vegan food")]


def test_async_and_batch_calls(retriever):
    docs = asyncio.run(retriever.ainvoke("hiking in the Alps"))
    assert docs and docs[0].metadata["preference"] == "I love hiking trails"
    batched = retriever.batch(["vegan food", "hiking trails"])
    assert len(batched) == 2 and all(batched)


def test_bad_input_raises_the_memory_error(retriever):
    from epic_edge.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="question is empty"):
        retriever.invoke("   ")

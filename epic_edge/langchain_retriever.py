"""A LangChain retriever over a Memory (the `langchain` extra: langchain-core)."""

from __future__ import annotations

from typing import Any

from epic_edge.optional import optional_import

_WHAT = "the LangChain retriever"
CallbackManagerForRetrieverRun = optional_import(
    "langchain_core.callbacks", "langchain", _WHAT).CallbackManagerForRetrieverRun
Document = optional_import("langchain_core.documents", "langchain", _WHAT).Document
BaseRetriever = optional_import("langchain_core.retrievers", "langchain", _WHAT).BaseRetriever
ConfigDict = optional_import("pydantic", "langchain", _WHAT).ConfigDict


class EpicEdgeRetriever(BaseRetriever):
    """Documents for a question from Memory.retrieve: the item's text as page content, and
    as metadata the instruction (how to read it for the user), the item, the preference it
    was kept for, the score it was ranked by and its vector similarity, and the entry, item and
    external ids (`memory.forget(metadata["item_id"])` deletes the item).

        retriever = EpicEdgeRetriever(memory=Memory.open("memory.epic"), k=5)
        docs = retriever.invoke("Where should I go out for dinner tonight?")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Any
    k: int | None = None
    steer: bool = True

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = self.memory.retrieve(query, self.k, steer=self.steer)
        return [
            Document(
                page_content=hit.item_text,
                metadata={
                    "instruction": hit.instruction,
                    "item": hit.item_text,
                    "preference": hit.preference.text,
                    "preference_id": hit.preference.id,
                    "score": hit.score,
                    "similarity": hit.similarity,
                    "confidence": hit.confidence,
                    "source": hit.source,
                    "entry_id": hit.entry_id,
                    "item_id": hit.item_id,
                    "external_id": hit.external_id,
                },
            )
            for hit in hits
        ]

"""A LangChain retriever over a Memory (the `langchain` extra: langchain-core)."""

from __future__ import annotations

from typing import Any

from epic_edge.errors import MissingExtraError

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "the LangChain retriever needs langchain-core: pip install 'epic-edge[langchain]'"
    ) from exc


class EpicEdgeRetriever(BaseRetriever):
    """Documents for a question from Memory.retrieve: the item's text as page content, and
    as metadata the instruction (how to read it for the user), the item, the preference it
    was kept for, the score and the entry id.

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
                    "confidence": hit.confidence,
                    "source": hit.source,
                    "entry_id": hit.entry_id,
                },
            )
            for hit in hits
        ]

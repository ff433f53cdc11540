"""`eval judge`: PrefEval-style judged evaluation against any OpenAI-compatible endpoint."""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.context import format_context
from epic_edge.errors import InvalidInputError
from epic_edge_lab import common, corpora
from epic_edge_lab.chat_client import ChatClient
from epic_edge_lab.systems import EpicMemory, RawItems
from epic_edge_lab.vectors import CachedEmbedder, corpus_vectors

ANSWER_SYSTEM = "You are a helpful personal assistant.\n\n{context}"
ANSWER_SYSTEM_EMPTY = "You are a helpful personal assistant."
JUDGE_SYSTEM = ("You grade an assistant's answer. Reply with one word, Yes or No, "
                "and nothing else.")
# The four checks, in our own words after PrefEval's rubric (Zhao et al., ICLR 2025).
CHECKS = {
    "acknowledges": ("The user holds this preference: \"{preference}\"\n"
                     "Question: {question}\nAnswer: {answer}\n\n"
                     "Does the answer show, openly or by how it tailors its suggestions, that "
                     "it took this preference into account? Yes or No?"),
    "violates": ("The user holds this preference: \"{preference}\"\n"
                 "Question: {question}\nAnswer: {answer}\n\n"
                 "Does the answer recommend or suggest anything that goes against this "
                 "preference? Yes or No?"),
    "hallucinates": ("The user's actual preference is: \"{preference}\"\n"
                     "Answer: {answer}\n\n"
                     "Does the answer claim the user likes or dislikes something they never "
                     "said, or misstate their preference? Yes or No?"),
    "helpful": ("Question: {question}\nAnswer: {answer}\n\n"
                "Does the answer give a relevant, usable response to the question (not a "
                "refusal, not off topic)? Yes or No?"),
}
SYSTEMS = ("epic", "store-everything", "none")
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_yes_no(reply: str) -> bool | None:
    """The first standalone yes/no word of a reply ("Yes.", "The answer is \"No\""), else None."""
    match = _YES_NO.search(reply)
    return None if match is None else match.group(1).lower() == "yes"


def classify(checks: dict[str, bool | None]) -> dict[str, bool]:
    """PrefEval's error types from the four checks; correct = none of them.

    An unparsable check counts against the answer (the conservative reading).
    """
    ack = checks["acknowledges"] is True
    violates = checks["violates"] is not False
    helpful = checks["helpful"] is True
    hallucinated = ack and checks["hallucinates"] is not False
    errors = {
        "unhelpful": not helpful,
        "inconsistent": ack and violates,
        "unaware_violation": (not ack) and violates,
        "hallucination": hallucinated,
    }
    return {**errors, "correct": not any(errors.values())}


def judge_answer(client: ChatClient, preference: str, question: str, answer: str,
                 ) -> dict[str, Any]:
    checks, replies = {}, {}
    for name, template in CHECKS.items():
        reply = client.ask(JUDGE_SYSTEM, template.format(preference=preference,
                                                         question=question, answer=answer),
                           max_tokens=8)
        replies[name], checks[name] = reply, parse_yes_no(reply)
    return {"checks": checks, "judge_replies": replies, **classify(checks)}


def run(endpoint: str, *, dataset: str = "prefeval", corpus: str | None = None,
        personas: str | None = "0", systems: tuple[str, ...] = ("epic",),
        questions_per_persona: int | None = None, limit: int | None = None,
        verifier: str = "template", profile: str = "linux-cpu", models: Path | None = None,
        tau: float | None = None, k: int = 5, model: str = "local", timeout: float = 120.0,
        max_tokens: int = 256, judge_endpoint: str | None = None, progress: bool = True,
        log=print, embedder: Any = None) -> dict[str, Any]:
    """Answer each question from retrieved context, then judge the answer with four checks."""
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise InvalidInputError(f"unknown system {unknown[0]!r}; choose from {SYSTEMS}")
    started = time.perf_counter()
    answerer = ChatClient(endpoint, model=model, timeout=timeout, max_tokens=max_tokens)
    judge = ChatClient(judge_endpoint or endpoint, model=model, timeout=timeout)
    loader, default_corpus = common.DATASETS[dataset]
    corpus = corpus or default_corpus
    limit = limit if limit is not None else (12_000 if corpus == "chat" else None)
    prof, model_dir = common.profile_and_models(profile, models)
    tau = prof.tau if tau is None else float(tau)
    data = loader()
    emb = embedder or common.make_embedder(prof, model_dir)
    items = corpora.load(corpus, limit=limit)
    vectors, _ = corpus_vectors(corpus, items, emb, corpora.data_dir() / "vectors",
                                progress=progress)
    cached = CachedEmbedder(emb, [it.text for it in items], vectors)
    rows = []
    with tempfile.TemporaryDirectory(prefix="epic-bench-judge-") as tmp:
        everything = (RawItems(Path(tmp) / "se.sqlite", cached, items, vectors,
                               [frozenset()] * len(items))
                      if "store-everything" in systems else None)
        for p_index in common.parse_personas(personas, len(data)):
            prefs, questions = common.persona_questions(data[p_index])
            epic = None
            if "epic" in systems:
                epic = EpicMemory(Path(tmp) / f"p{p_index}.epic", prof, cached,
                                  common.make_verifier(prof, model_dir, verifier), tau, prefs)
                epic.ingest(items)
            for question, block in questions[:questions_per_persona]:
                for system in systems:
                    context = _context(system, epic, everything, question, k)
                    system_prompt = (ANSWER_SYSTEM.format(context=context) if context
                                     else ANSWER_SYSTEM_EMPTY)
                    answer = answerer.ask(system_prompt, question)
                    verdict = judge_answer(judge, prefs[block], question, answer)
                    rows.append({"persona": p_index, "block": block, "system": system,
                                 "question": question, "answer": answer, **verdict})
                    log(f"  persona {p_index} block {block} [{system}]: "
                        f"{'correct' if verdict['correct'] else 'error'}")
            if epic is not None:
                epic.close()
        if everything is not None:
            everything.close()
    return {"bench": "judge", "dataset": dataset, "corpus": corpus, "endpoint": endpoint,
            "model": model, "verifier": verifier, "k": k, "systems": _aggregate(rows, systems),
            "answers": rows, "elapsed_s": time.perf_counter() - started,
            "machine": common.machine()}


def _context(system: str, epic: EpicMemory | None, everything: RawItems | None,
             question: str, k: int) -> str:
    if system == "epic" and epic is not None:
        return format_context(epic.memory.retrieve(question, k))
    if system == "store-everything" and everything is not None:
        return "\n".join(f"- {text}" for _, text in
                         everything.store.search(everything.embedder.embed([question])[0], k))
    return ""


def _aggregate(rows: list[dict], systems: tuple[str, ...]) -> dict[str, dict[str, float]]:
    out = {}
    for system in systems:
        mine = [r for r in rows if r["system"] == system]
        keys = ("correct", "unhelpful", "inconsistent", "unaware_violation", "hallucination")
        out[system] = {("accuracy" if key == "correct" else key):
                       float(np.mean([r[key] for r in mine])) if mine else float("nan")
                       for key in keys}
        out[system]["answers"] = len(mine)
        out[system]["unparsed_checks"] = sum(v is None for r in mine for v in r["checks"].values())
    return out


def render(result: dict[str, Any]) -> str:
    head = ["system", "accuracy", "unhelpful", "inconsistent", "unaware violation",
            "hallucination", "answers", "unparsed checks"]
    rows = [[name, *(f"{s[key]:.2f}" for key in ("accuracy", "unhelpful", "inconsistent",
                                                   "unaware_violation", "hallucination")),
             str(s["answers"]), str(s["unparsed_checks"])]
            for name, s in result["systems"].items()]
    return "\n".join([common.table(rows, head), "",
                      f"- {result['dataset']} on {result['corpus']}, endpoint "
                      f"{result['endpoint']} (model {result['model']}), verifier "
                      f"{result['verifier']}, {result['elapsed_s']:.0f} s"])

"""Prompt text, chat messages, the instruction grammar and fallback templates of the LLM verifier.

Every prompt puts the system text and the candidate preferences first and the passage after
them, and the decision and instruction prompts share everything up to the end of the passage,
so one llama.cpp context reuses the KV cache of that prefix across items and across the calls
made for one item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from epic_edge.instructions import (  # noqa: F401  (re-exported)
    LEAD_WORDS,
    TEMPLATE_INSTRUCTION,
    template_instruction,
)
from epic_edge.types import Preference

log = logging.getLogger(__name__)

SYSTEM = (
    "You decide what a personal assistant should remember about its user. "
    "The user has these preferences:\n{preferences}\n"
    "Keep a passage only if it would help answer this user's questions in light of these "
    "preferences; discard it otherwise."
)

PASSAGE = "Passage:\n{item}\n\n"
# Placeholder for the passage in rendered prompts; the verifier tokenises the passage apart.
ITEM_SLOT = "\ue000ITEM\ue000"

DECISION_TASK = (
    "Is this passage useful for answering questions of a user with these preferences? "
    "Answer with one word: Keep or Discard."
)

INSTRUCTION_TASK = (
    "Write one sentence for the assistant: how should it use this passage when this user, who "
    'says "{preference}", asks a question? Do not repeat the passage.'
)

# The assistant turn of an instruction starts with this text; the model continues it.
INSTRUCTION_PREFILL = "Use this passage"

# One plain sentence: printable characters only, no newline or quote, ends at . ! or ?
# (after which the grammar is complete and only end-of-sequence can follow).
INSTRUCTION_GRAMMAR = r"""
root ::= " " [a-zA-Z,] [^\x00-\x1f"\x7f.!?]* [.!?]
"""

# Decision words whose first sub-token we read from the next-token logits.
KEEP_WORDS = ("Keep", " Keep", "keep", " keep")
DISCARD_WORDS = ("Discard", " Discard", "discard", " discard")


# Plain ChatML, used only when the GGUF carries no chat template.
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# Base models (no chat template) get a plain completion prompt: the system text, then each
# user turn followed by ANSWER, the assistant's reply (if any) after it on the same line.
ANSWER = "Answer:"


class _Rendered:
    def __init__(self, prompt: str) -> None:
        self.prompt = prompt


def completion_prompt(messages: Sequence[dict[str, str]]) -> str:
    """Chat messages as one plain-text completion prompt ending in ANSWER (no role tokens),
    in the same order as the chat prompt, so the shared prefix stays first and the item last."""
    blocks: list[str] = []
    for m in messages:
        content = m["content"].strip()
        if m["role"] == "assistant" and blocks:
            blocks[-1] += f" {content}"
        elif m["role"] == "user":
            blocks.append(f"{content}\n{ANSWER}")
        else:
            blocks.append(content)
    return "\n\n".join(blocks)


class CompletionFormatter:
    """Stands in for llama_cpp's Jinja2ChatFormatter: formatter(messages=...).prompt."""

    def __call__(self, *, messages: Sequence[dict[str, str]], **_: object) -> _Rendered:
        return _Rendered(completion_prompt(messages))


def preference_list(candidates: Sequence[Preference]) -> str:
    return "\n".join(f"- {p.text.strip()}" for p in candidates)


def decision_messages(item: str, candidates: Sequence[Preference]) -> list[dict[str, str]]:
    """Chat messages asking Keep or Discard; the answer word is the next token."""
    return [
        {"role": "system", "content": SYSTEM.format(preferences=preference_list(candidates))},
        {"role": "user", "content": PASSAGE.format(item=item) + DECISION_TASK},
    ]


def instruction_messages(
    item: str, candidates: Sequence[Preference], preference: Preference
) -> list[dict[str, str]]:
    """Chat messages asking for a usage instruction; shares the decision prompt's prefix."""
    task = INSTRUCTION_TASK.format(preference=preference.text.strip())
    return [
        {"role": "system", "content": SYSTEM.format(preferences=preference_list(candidates))},
        {"role": "user", "content": PASSAGE.format(item=item) + task},
    ]


def clean_instruction(
    text: str, item: str, prefix: str = "", max_chars: int = 400, max_overlap: float = 0.6
) -> tuple[str, str]:
    """Return (prefix + text cleaned, problem); problem is "" when the text passes the checks.

    `text` is what the model generated after `prefix` (the prefill). Checks on it: printable,
    one line, at least two words with letters, at most `max_chars`, not mostly a copy of the
    passage (longest common run of words covering more than `max_overlap` of it).
    """
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split()).strip("\"'`\u201c\u201d\u2018\u2019 ")
    words = text.split()
    if sum(any(ch.isalpha() for ch in w) for w in words) < 2:
        return "", "empty or not words"
    if len(text) > max_chars:
        return "", "too long"
    if _copied_share(words, item.split()) > max_overlap:
        return "", "copies the passage"
    if prefix:
        text = prefix.strip() + ("" if text[0] in ",;:" else " ") + text
    if not text.endswith((".", "!", "?")):
        text += "."
    return text, ""


def checked_instructions(
    item: str, kept: Sequence[Preference], generate: Callable[[Preference], str],
    max_chars: int, *, fall_back_on_error: bool = False,
) -> tuple[dict[int, str], list[str], int]:
    """One instruction per kept preference: generate(preference) continues the prefill, the
    text is checked (clean_instruction) and the template replaces what fails, with a note.
    A generation error propagates, or (fall_back_on_error) is logged by type and templated."""
    instructions: dict[int, str] = {}
    notes: list[str] = []
    for pref in kept:
        try:
            text, problem = clean_instruction(generate(pref), item, prefix=INSTRUCTION_PREFILL,
                                              max_chars=max_chars)
        except Exception as exc:
            if not fall_back_on_error:
                raise
            log.warning("instruction generation failed (%s)", type(exc).__name__)
            text, problem = "", f"generation failed: {type(exc).__name__}"
        if problem:
            text = template_instruction(item, pref)
            notes.append(f"template instruction for preference {pref.id} ({problem})")
        instructions[pref.id] = text
    return instructions, notes, len(kept)


def _copied_share(words: list[str], item_words: list[str]) -> float:
    """Share of `words` covered by their longest contiguous run found in `item_words`."""
    if not words or not item_words:
        return 0.0
    a = [w.lower().strip(".,;:!?\"'") for w in words]
    b = [w.lower().strip(".,;:!?\"'") for w in item_words]
    best = 0
    prev = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        cur = [0] * (len(b) + 1)
        ai = a[i - 1]
        for j in range(1, len(b) + 1):
            if ai == b[j - 1]:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best = cur[j]
        prev = cur
    return best / len(a)


# -- other decision prompts (compared in epic_edge_lab.verification; shared by every LLM
#    verifier backend, local or HTTP, so a decision means the same thing on every device) -----

QUESTION_TASK = (
    'The user says: "{preference}". Is this passage about something this preference is '
    "about (the thing the user likes or avoids, or an alternative to it)? Answer yes or no."
)
YES_WORDS = ("yes", " yes", "Yes", " Yes")
NO_WORDS = ("no", " no", "No", " No")

# The paper's free-form JSON decision (parsed, not read from logits).
JSON_TASK = (
    "Decide whether to keep this passage for this user. Reply with JSON only, in the form "
    '{"decision": "Keep" or "Discard", "preferences": [numbers of the preferences it bears on]}.'
)


def numbered_preferences(candidates: Sequence[Preference]) -> str:
    return "\n".join(f"{k}. {p.text.strip()}" for k, p in enumerate(candidates, 1))


def question_messages(item: str, preference: Preference) -> list[dict[str, str]]:
    """Per-preference yes/no question; the passage comes before the preference so one item's
    KV state is shared by the questions about each of its candidate preferences."""
    return [
        {"role": "system", "content": "You judge whether a passage matters to a user's "
                                      "stated preference."},
        {"role": "user", "content": PASSAGE.format(item=item)
         + QUESTION_TASK.format(preference=preference.text.strip())},
    ]


def fewshot_messages(
    item: str, candidates: Sequence[Preference], examples: Sequence[tuple[str, str, bool]]
) -> list[dict[str, str]]:
    """Decision prompt preceded by worked (preference, passage, keep) examples as chat turns;
    the examples are fixed, so their KV state is a shared prefix across items."""
    messages = [{"role": "system", "content": SYSTEM.format(
        preferences="(each question lists them)") }]
    for pref, passage, keep in examples:
        messages.append({"role": "user", "content": f"Preferences:\n- {pref.strip()}\n"
                         + PASSAGE.format(item=passage) + DECISION_TASK})
        messages.append({"role": "assistant", "content": "Keep" if keep else "Discard"})
    messages.append({"role": "user", "content": "Preferences:\n" + preference_list(candidates)
                     + "\n" + PASSAGE.format(item=item) + DECISION_TASK})
    return messages


def json_messages(item: str, candidates: Sequence[Preference]) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM.format(
            preferences=numbered_preferences(candidates))},
        {"role": "user", "content": PASSAGE.format(item=item) + JSON_TASK},
    ]


def parse_json_decision(text: str) -> bool | None:
    """Keep (True) / Discard (False) from a free-form JSON reply; None when unreadable.

    Tolerant of truncation and prose around the JSON: the first Keep/Discard word wins.
    """
    lowered = text.lower()
    k, d = lowered.find("keep"), lowered.find("discard")
    if k < 0 and d < 0:
        return None
    if d < 0 or (0 <= k < d):
        return True
    return False

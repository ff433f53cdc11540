"""The deterministic template instruction: written by no LLM, so never stored, only rendered."""

from __future__ import annotations

from epic_edge.types import Preference

# The fallback and default instruction for a kept (item, preference). The item's lead words
# make each entry's instruction its own. A memory stores it as "" and renders it on read.
TEMPLATE_INSTRUCTION = (
    "When a question touches the preference \"{preference}\", read this passage on {lead}: "
    "use what agrees with the preference and flag what conflicts with it."
)
LEAD_WORDS = 16


def template_instruction(item: str, preference: Preference) -> str:
    """The deterministic instruction for a kept (item, preference): no LLM involved."""
    words = item.split()
    lead = " ".join(words[:LEAD_WORDS]) + (" ..." if len(words) > LEAD_WORDS else "")
    return TEMPLATE_INSTRUCTION.format(preference=preference.text.strip().rstrip("."), lead=lead)


def stored_form(instruction: str, item: str, preference: Preference) -> str:
    """What the file keeps: "" for the template (rendered again on read), else the text."""
    return "" if instruction == template_instruction(item, preference) else instruction


def read_form(stored: str, item: str, preference: Preference) -> str:
    """The instruction a reader sees for what the file keeps."""
    return stored or template_instruction(item, preference)

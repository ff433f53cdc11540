"""`epic-edge serve --mcp` end to end with the MCP SDK's own client over stdio, on a real
memory: linux-cpu's embedder, index and memory-use gate, with the template verifier."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from epic_edge.memory import Memory
from epic_edge.profiles import load_profile

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402


def linux_cpu_with_template_verifier() -> str:
    """linux-cpu's embedder, tau, index and memory-use gate; the template verifier decides."""
    base = load_profile("linux-cpu")
    retrieval = "\n".join(f"{key} = {value!r}" for key, value in base.retrieval.items()
                          if isinstance(value, (int, float)))
    return (f'name = "mcp-test"\n[embedder]\nbackend = "onnx"\n'
            f'model = "{base.embedder["model"]}"\ntokenizer = "{base.embedder["tokenizer"]}"\n'
            f'tau = {base.tau}\n[verifier]\nbackend = "template"\n[index]\nbackend = "faiss"\n'
            f'entry_vector = "{base.index.get("entry_vector", "instruction")}"\n'
            f'vectors = "{base.index.get("vectors", "float32")}"\n[retrieval]\n{retrieval}\n')


TOOLS = {"add_preference", "remove_preference", "list_preferences", "remember", "recall",
         "forget", "stats", "list_entries", "explain"}
VEGAN = "I strictly follow a vegan diet and never eat animal products."
HIKING = "I love hiking in the mountains."
NOTES = {
    "steak": "Smith's Steakhouse grills dry-aged beef ribeye and serves lamb chops.",
    "bistro": "Green Leaf is a fully vegan bistro with plant-based dinners and no animal "
              "products on the menu.",
    "tax": "Quarterly estimated tax payments are due on the 15th of April, June and September.",
}


@pytest.fixture
def server(tmp_path, reference_models):
    """(stdio parameters for `epic-edge serve --mcp`, a function opening the same memory)."""
    pytest.importorskip("faiss")
    profile = tmp_path / "mcp-test.toml"
    profile.write_text(linux_cpu_with_template_verifier())
    memory = tmp_path / "agent.epic"
    script = Path(sys.executable).with_name("epic-edge")
    command, prefix = (str(script), []) if script.exists() else (
        sys.executable, ["-c", "import sys; from epic_edge.cli import main; sys.exit(main())"])
    params = StdioServerParameters(
        command=command, args=[*prefix, "serve", "--mcp", "--memory", str(memory)],
        env={"EPIC_EDGE_PROFILE": str(profile), "EPIC_EDGE_MODELS": str(reference_models)})

    def open_memory() -> Memory:
        return Memory.open(memory, profile, model_dir=reference_models)

    return params, open_memory


def run(params, script):
    async def session_main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await script(session)

    return asyncio.run(session_main())


async def call(session, tool, **arguments):
    return await session.call_tool(tool, arguments)


async def fill(session):
    for text in (VEGAN, HIKING):
        result = await call(session, "add_preference", text=text)
        assert not result.is_error and result.structured_content["text"] == text
    for note_id, text in NOTES.items():
        result = await call(session, "remember", text=text, id=note_id, source="notes")
        assert not result.is_error and result.structured_content["stats"]["seen"] == 1


def test_every_tool_over_stdio(server):
    params, open_memory = server
    question = "Which vegan restaurant serves plant-based dinners?"

    async def script(session):
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        await fill(session)
        listed = (await call(session, "list_preferences")).structured_content
        assert [p["text"] for p in listed["preferences"]] == [VEGAN, HIKING]
        recalled = (await call(session, "recall", question=question, k=3)).structured_content
        stats = (await call(session, "stats")).structured_content
        errors = {
            "empty preference": await call(session, "add_preference", text="  "),
            "k zero": await call(session, "recall", question=question, k=0),
            "k huge": await call(session, "recall", question=question, k=10**9),
            "bad regime": await call(session, "recall", question=question, regime="wild"),
            "k not a number": await call(session, "recall", question=question, k="many"),
            "unknown item": await call(session, "forget", id="no-such-note"),
            "unknown preference": await call(session, "remove_preference", text_or_id=999),
            "missing argument": await call(session, "remember"),
            "unknown tool": await call(session, "frobnicate"),
        }
        forgot = (await call(session, "forget", id="bistro")).structured_content
        removed = (await call(session, "remove_preference", text_or_id=HIKING)).structured_content
        after = (await call(session, "stats")).structured_content
        return recalled, stats, errors, forgot, removed, after

    recalled, stats, errors, forgot, removed, after = run(params, script)
    assert stats["preferences"] == 2 and stats["entries"] >= 2 and stats["items"] >= 2
    assert recalled["used_memory"] and recalled["hits"] and recalled["context"]
    assert recalled["hits"][0]["item_text"] == NOTES["bistro"]
    assert {"instruction", "item_text", "preference", "score"} <= set(recalled["hits"][0])
    for name, result in errors.items():
        assert result.is_error, name
        text = result.content[0].text
        assert text and "Traceback" not in text, name
    assert "empty" in errors["empty preference"].content[0].text
    assert "argument 'k': Input should be less than or equal to 1000" in (
        errors["k huge"].content[0].text)
    assert "no item 'no-such-note'" in errors["unknown item"].content[0].text
    assert forgot["removed_entries"] >= 1 and removed["removed_entries"] >= 0
    assert after["preferences"] == 1 and after["entries"] < stats["entries"]


def test_recall_equals_the_api(server):
    params, open_memory = server
    questions = ["Which vegan restaurant serves plant-based dinners?",
                 "Where can I hike this weekend?"]

    async def script(session):
        await fill(session)
        return [(await call(session, "recall", question=q, k=4)).structured_content
                for q in questions]

    recalls = run(params, script)
    with open_memory() as memory:
        for question, recalled in zip(questions, recalls):
            found = memory.lookup(question, 4)
            hits = memory.retrieve(question, 4)
            assert [h["entry_id"] for h in recalled["hits"]] == [h.entry_id for h in hits]
            assert [h["instruction"] for h in recalled["hits"]] == [h.instruction for h in hits]
            assert [h["score"] for h in recalled["hits"]] == pytest.approx(
                [h.score for h in hits], abs=1e-5)
            assert recalled["used_memory"] == found.used_memory
            assert recalled["reason"] == found.reason
            assert recalled["context"] == memory.context(question, 4)


def test_a_vegan_user_asking_about_dinner_gets_the_bistro(server):
    params, _ = server

    async def script(session):
        await call(session, "add_preference", text=VEGAN)
        for note_id, text in NOTES.items():
            await call(session, "remember", text=text, id=note_id)
        return (await call(session, "recall",
                           question="Where should I go out for dinner tonight?")).structured_content

    recalled = run(params, script)
    assert recalled["used_memory"], recalled["reason"]
    assert recalled["hits"][0]["item_text"] == NOTES["bistro"]


def test_an_agent_adds_recalls_inspects_explains_and_forgets_by_the_id_it_got(server):
    params, _ = server
    question = "Which vegan restaurant serves plant-based dinners?"

    async def script(session):
        await call(session, "add_preference", text=VEGAN)
        kept = (await call(session, "remember", text=NOTES["bistro"])).structured_content
        dropped = (await call(session, "remember", text=NOTES["tax"])).structured_content
        recalled = (await call(session, "recall", question=question)).structured_content
        listed = (await call(session, "list_entries", limit=10)).structured_content
        explained = (await call(session, "explain", text=NOTES["tax"])).structured_content
        stored = (await call(session, "explain", text=NOTES["bistro"])).structured_content
        item_id = kept["items"][0]["item_id"]
        forgot = (await call(session, "forget", id=item_id)).structured_content
        again = (await call(session, "remember", text=NOTES["bistro"])).structured_content
        after = (await call(session, "recall", question=question)).structured_content
        return kept, dropped, recalled, listed, (explained, stored), forgot, again, after

    kept, dropped, recalled, listed, (explained, stored), forgot, again, after = run(params,
                                                                                    script)
    filed = kept["items"][0]
    assert kept["kept"] and filed["stage"] == "kept" and filed["preferences"][0]["text"] == VEGAN
    assert not dropped["kept"] and dropped["items"][0]["stage"] == "coarse filter"
    assert "tau" in dropped["items"][0]["reason"] and dropped["items"][0]["item_id"] is None
    hit = recalled["hits"][0]
    assert hit["item_id"] == filed["item_id"] and hit["item_text"] == NOTES["bistro"]
    assert [e["item_id"] for e in listed["entries"]] == [filed["item_id"]]
    assert listed["next_offset"] is None
    assert explained["verdict"] is None and "coarse filter" in explained["why"]
    assert stored["stored_under"] == [filed["preferences"][0]["id"]] and stored["verdict"]["keep"]
    assert forgot["removed_entries"] == 1
    assert not again["kept"] and again["items"][0]["stage"] == "forgotten"
    assert after["hits"] == [] and not after["used_memory"]


def test_schemas_errors_version_and_empty_text(server):
    params, _ = server

    async def script(session):
        tools = {t.name: t.input_schema for t in (await session.list_tools()).tools}
        await call(session, "add_preference", text=VEGAN)
        empties = {tool: await call(session, tool, **{arg: "  "}) for tool, arg in (
            ("add_preference", "text"), ("remember", "text"), ("recall", "question"),
            ("explain", "text"))}
        bad = {"k": await call(session, "recall", question="dinner?", k="many"),
               "regime": await call(session, "recall", question="dinner?", regime="wild"),
               "limit": await call(session, "list_entries", limit=0),
               "missing": await call(session, "remember")}
        return tools, empties, bad

    async def session_main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                return init.server_info, await script(session)

    from epic_edge import __version__

    info, (tools, empties, bad) = asyncio.run(session_main())
    assert info.name == "epic-edge" and info.version == __version__
    recall = tools["recall"]["properties"]
    assert _enum(recall["regime"]) == ["conservative", "ordinary", "aggressive"]
    k = next(s for s in recall["k"].get("anyOf", [recall["k"]]) if s.get("type") == "integer")
    assert (k["minimum"], k["maximum"]) == (1, 1000)
    limit = tools["list_entries"]["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 1000)
    for tool, result in empties.items():
        assert result.is_error and result.content[0].text.endswith(" is empty"), tool
    for name, result in bad.items():
        text = result.content[0].text
        assert result.is_error and "\n" not in text and "pydantic" not in text, name
        assert "http" not in text and f"argument '{'text' if name == 'missing' else name}'" in (
            text), name


def _enum(schema):
    """The allowed values of an optional enum argument's schema."""
    for option in schema.get("anyOf", [schema]):
        if "enum" in option:
            return option["enum"]
        if "$ref" in option:
            return None
    return None

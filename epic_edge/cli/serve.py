"""`epic-edge serve --mcp`: serve a memory to agents over the Model Context Protocol (stdio)."""

from __future__ import annotations

from epic_edge.cli.common import add_memory_options, open_memory, parser


def main(argv: list[str]) -> int:
    p = parser("serve", "Serve a memory to an agent over MCP on stdin/stdout (tools: "
                        "add_preference, remove_preference, list_preferences, remember, recall, "
                        "forget, list_entries, explain, stats). Memory, profile and key come "
                        "from the flags or $EPIC_EDGE_MEMORY, $EPIC_EDGE_PROFILE and "
                        "$EPIC_EDGE_KEY. Needs the MCP SDK (scripts/setup.sh installs it; "
                        "else: pip install 'mcp>=2.3,<3').")
    p.add_argument("--mcp", action="store_true", help="speak MCP over stdio (the only transport)")
    add_memory_options(p)
    args = p.parse_args(argv)
    if not args.mcp:
        p.error("say which protocol: --mcp")
    from epic_edge.mcp_server import build_server

    with open_memory(args, creates=True) as memory:
        build_server(memory).run("stdio")
    return 0

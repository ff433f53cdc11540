"""Command-line interface of epic-edge: `epic-edge COMMAND --help` for each command."""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
import warnings

from epic_edge.errors import EpicEdgeError

# command -> (module, one-line help); each module has main(argv) -> int
COMMANDS: dict[str, tuple[str, str]] = {
    "setup": ("epic_edge.cli.setup", "install the models a device profile needs (offline)"),
    "demo": ("epic_edge.cli.demo", "build a memory for a sample persona and answer questions"),
    "prefs": ("epic_edge.cli.prefs", "add, remove or list preferences of a memory"),
    "ingest": ("epic_edge.cli.ingest", "ingest a JSONL or text file (one item per line) or -"),
    "add": ("epic_edge.cli.add", "offer one item; say where it was filed or why it was dropped"),
    "query": ("epic_edge.cli.query", "retrieve memory entries (or the LLM context) for a question"),
    "info": ("epic_edge.cli.info", "footprint, counts and profile of a memory"),
    "export": ("epic_edge.cli.export", "export a device bundle (models + manifest), or check one"),
    "devices": ("epic_edge.cli.devices", "list device profiles and whether each runs here"),
    "bench": ("epic_edge.cli.bench", "latency breakdown on this machine (the lab adds more)"),
    "check": ("epic_edge.cli.check", "integrity check of a memory file"),
    "budget": ("epic_edge.cli.budget", "show or set a memory's entry or byte cap (evicts)"),
    "keygen": ("epic_edge.cli.keygen", "write a new encryption key file (mode 600)"),
    "ls": ("epic_edge.cli.ls", "list the stored entries of a memory, a page at a time"),
    "forget": ("epic_edge.cli.forget", "delete one item and its entries from a memory"),
    "explain": ("epic_edge.cli.explain", "say why a text would (not) be kept, stage by stage"),
    "backup": ("epic_edge.cli.backup", "export a whole memory to a JSONL file"),
    "restore": ("epic_edge.cli.restore", "import a JSONL export into a memory (merges)"),
    "serve": ("epic_edge.cli.serve", "serve a memory to agents over MCP (stdio)"),
}


# The lab (bench/, its own distribution epic-edge-lab) adds these commands and `bench` ones
# through the entry point group below; the product never imports it.
LAB_GROUP = "epic_edge.lab"
LAB_COMMANDS = ("bench", "build", "data", "eval", "calibrate", "train-verifier", "train-embedder",
                "train-keep-score", "train-question-gate")
LAB_HINT = "the lab is not installed: bash scripts/setup.sh --all (or pip install -e bench)"


def lab_commands() -> dict[str, tuple[str, str]]:
    """The installed lab's command table (name -> (module, help)), or {} without the lab."""
    from importlib.metadata import entry_points

    for point in entry_points(group=LAB_GROUP):
        try:
            return dict(point.load())
        except ImportError:  # metadata left behind by an uninstalled or broken lab
            return {}
    return {}


def _usage(prog: str, commands: dict[str, tuple[str, str]], lab: dict[str, tuple[str, str]]
           ) -> str:
    width = max(map(len, [*commands, *lab]))
    lines = [f"usage: {prog} COMMAND [options]   ({prog} COMMAND --help for details)", "",
             "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in commands.items()]
    if lab:
        lines += ["", "lab commands (epic-edge-lab):"]
        lines += [f"  {name:<{width}}  {text}" for name, (_, text) in lab.items()]
    elif prog == "epic-edge":
        lines += ["", f"lab commands ({', '.join(LAB_COMMANDS)}): {LAB_HINT}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, "epic-edge", COMMANDS)


def dispatch(argv: list[str] | None, prog: str, commands: dict[str, tuple[str, str]]) -> int:
    """Run `prog COMMAND ...` from `commands` (and, for epic-edge, the lab's when installed)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    lab = {n: c for n, c in lab_commands().items() if n not in commands} if (
        prog == "epic-edge" and (not argv or argv[0] not in commands)) else {}
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(_usage(prog, commands, lab))
        return 0
    if argv[0] in {"-V", "--version"}:
        from epic_edge import __version__

        print(f"{prog} {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in commands and name not in lab:
        if prog == "epic-edge" and name in LAB_COMMANDS:
            print(f"epic-edge {name}: {LAB_HINT}", file=sys.stderr)
            return 2
        print(f"{prog}: unknown command {name!r}\n\n{_usage(prog, commands, lab)}",
              file=sys.stderr)
        return 2
    for stream in (sys.stdout, sys.stderr):  # a path from undecodable bytes prints escaped
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    warnings.showwarning = functools.partial(_one_line_warning, name)
    module = importlib.import_module({**lab, **commands}[name][0])
    try:
        code = int(module.main(rest) or 0)
        sys.stdout.flush()
        return code
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, like `cat`
        _stdout_to_devnull()
        return 141
    except EpicEdgeError as exc:
        print(f"{prog} {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog} {name}: interrupted; committed batches are kept", file=sys.stderr)
        return 130


def _one_line_warning(command: str, message: Warning | str, *args: object, **kwargs: object
                      ) -> None:
    """A warning as one line on stderr (no file name or source line of the library's)."""
    print(f"epic-edge {command}: warning: {message}", file=sys.stderr)


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a file (tests capture it)
        pass


if __name__ == "__main__":
    sys.exit(main())

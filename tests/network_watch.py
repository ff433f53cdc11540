"""Watch a process for network use: strace (native code too) and a Python audit hook.

`watch(argv)` runs a command with a sitecustomize that logs every socket connect, sendto and
name lookup Python sees, and, when strace is installed, under `strace -f` for the syscalls
(ONNX Runtime's telemetry is native code that no Python hook sees). A finding is any socket
to a non-loopback address, or any DNS query (port 53, even on loopback) or the systemd
resolver; connects to Unix sockets (nscd for user names, ...) and to loopback are allowed.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from epic_edge.privacy import NO_TELEMETRY, OFFLINE

SYSCALLS = "connect,sendto,sendmsg,sendmmsg"
_SWITCHES = {**NO_TELEMETRY, **OFFLINE}
_AUDIT_HOOK = '''
import os, sys
_log = os.environ.get("EPIC_NET_LOG")
_EVENTS = {"socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
           "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr"}

def _hook(event, args):
    if _log and event in _EVENTS:
        target = args[1] if event.startswith(("socket.connect", "socket.send")) else args[0]
        port = args[1] if event == "socket.getaddrinfo" else None
        with open(_log, "a", encoding="utf-8") as fh:
            fh.write(f"{event}\\t{target!r}\\t{port!r}\\n")

sys.addaudithook(_hook)
'''
_INET = re.compile(r'sa_family=AF_INET6?, sin6?_port=htons\((\d+)\).*?'
                   r'(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")')
_RESOLVER = re.compile(r'sun_path="[^"]*(?:systemd/resolve|io\.systemd\.Resolve)')


@dataclass
class Observation:
    """What one watched process did on the network."""

    returncode: int
    output: str
    strace: bool
    python_events: list[str] = field(default_factory=list)
    syscalls: list[str] = field(default_factory=list)  # every connect/send seen by strace

    @property
    def python_findings(self) -> list[str]:
        return [e for e in self.python_events if _python_offends(e)]

    @property
    def syscall_findings(self) -> list[str]:
        return [s for s in self.syscalls if _syscall_offends(s)]

    @property
    def findings(self) -> list[str]:
        """Non-loopback sockets and DNS queries, from either instrument."""
        return self.python_findings + self.syscall_findings


def _loopback(host: str) -> bool:
    if host in ("localhost", "", None):
        return True
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False  # a name to look up is a DNS query
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback  # ::ffff:127.0.0.1


def _python_offends(event: str) -> bool:
    name, target, port = event.split("\t")
    if name == "socket.getaddrinfo" or name.startswith("socket.gethostby"):
        return not _loopback(target.strip("'\"")) or port == "53"
    match = re.match(r"\('([^']*)', (\d+)", target)  # (host, port, ...) of AF_INET(6)
    return bool(match) and (not _loopback(match[1]) or match[2] == "53")


def _syscall_offends(line: str) -> bool:
    if _RESOLVER.search(line):
        return True
    return any(port == "53" or not _loopback(v4 or v6) for port, v4, v6 in _INET.findall(line))


def is_dns(finding: str) -> bool:
    """A finding that is a name lookup (else a socket to an outside address)."""
    if "\t" in finding:  # an audit-hook event: event, target, port
        name, target, port = finding.split("\t")
        if name == "socket.getaddrinfo" or name.startswith("socket.gethostby"):
            host = target.strip("'\"")
            return port == "53" or not _is_address(host)
        return bool(re.match(r"\('[^']*', 53\b", target))
    return "htons(53)" in finding or bool(_RESOLVER.search(finding))


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return True


def strace_available() -> bool:
    return shutil.which("strace") is not None


def watch(argv: list[str], tmp: Path, *, timeout: float = 600,
          env: dict[str, str] | None = None) -> Observation:
    """Run argv (a Python program or console script) watched; wait for it to end."""
    hook_dir = tmp / "net-hook"
    hook_dir.mkdir(parents=True, exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(_AUDIT_HOOK, encoding="utf-8")
    log, trace = tmp / "net-python.log", tmp / "net-strace.log"
    for path in (log, trace):
        path.unlink(missing_ok=True)
    # the child must switch telemetry off itself, not inherit it from this process
    inherited = {k: v for k, v in os.environ.items() if k not in _SWITCHES}
    run_env = {**inherited, **(env or {}), "EPIC_NET_LOG": str(log),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(hook_dir),
                                                           os.environ.get("PYTHONPATH")]))}
    traced = strace_available()
    command = (["strace", "-f", "-qq", "-e", "signal=none", "-e", f"trace={SYSCALLS}",
                "-o", str(trace), *argv] if traced else argv)
    done = subprocess.run(command, env=run_env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return Observation(done.returncode, done.stdout + done.stderr, traced, _lines(log),
                       [line for line in _lines(trace) if "(" in line])


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []


def python_command(code: str) -> list[str]:
    """A Python child running `code` with this interpreter."""
    return [sys.executable, "-c", code]


def epic_edge_command(*args: str) -> list[str]:
    """The epic-edge CLI as a child process of this interpreter."""
    return [sys.executable, "-c", "import sys; from epic_edge.cli import main; sys.exit(main())",
            *args]

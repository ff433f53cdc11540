"""Typed options of a profile section: each key's type, allowed values and range, checked once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from epic_edge.errors import ProfileError


@dataclass(frozen=True)
class Option:
    """One key a profile section may set: its type, and optionally its choices or bounds."""

    type: type
    choices: tuple[Any, ...] = ()
    min: float | None = None
    max: float | None = None
    exclusive: bool = False  # min and max themselves are refused (an open interval)

    def problem(self, value: Any) -> str:
        """Why `value` is not acceptable ("" when it is)."""
        wanted = self.type
        ok = isinstance(value, wanted) and not (wanted is not bool and isinstance(value, bool))
        if wanted is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            return f"must be {wanted.__name__}, got {type(value).__name__} {value!r}"
        if self.choices and value not in self.choices:
            return f"is {value!r}; one of {', '.join(map(repr, self.choices))}"
        if self.min is not None and (value <= self.min if self.exclusive else value < self.min):
            return f"is {value!r}; {'above' if self.exclusive else 'at least'} {self.min}"
        if self.max is not None and (value >= self.max if self.exclusive else value > self.max):
            return f"is {value!r}; {'below' if self.exclusive else 'at most'} {self.max}"
        return ""


def check_section(where: str, section: str, config: Mapping[str, Any],
                  options: Mapping[str, Option], owner: str = "") -> None:
    """One-line ProfileError for the first unknown key or bad value of `config`."""
    for key, value in config.items():
        option = options.get(key)
        if option is None:
            known = ", ".join(sorted(options))
            raise ProfileError(f"profile {where}: [{section}] {key} is not a known key"
                               f"{owner} (known: {known})")
        problem = option.problem(value)
        if problem:
            raise ProfileError(f"profile {where}: [{section}] {key} {problem}")


INT = Option(int, min=0)
POSITIVE = Option(int, min=1)
TEXT = Option(str)
PROBABILITY = Option(float, min=0.0, max=1.0)
COSINE = Option(float, min=-1.0, max=1.0)

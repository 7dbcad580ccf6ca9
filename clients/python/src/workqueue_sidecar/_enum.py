"""The base of this package's enums: integers on the wire, names when printed."""

from __future__ import annotations

import enum


class NamedIntEnum(enum.IntEnum):
    """An IntEnum that prints as its name: ``str(KeyPhase.HELD)`` and
    ``f"{KeyPhase.HELD}"`` are ``"HELD"``, its repr ``KeyPhase.HELD``;
    it still compares equal to its wire value."""

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)

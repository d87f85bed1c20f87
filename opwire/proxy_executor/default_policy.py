"""Default policies: who fills an argument that a serialized call leaves out."""

from __future__ import annotations

import enum

from opwire.errors import BindError

__all__ = ["DefaultPolicy"]


class DefaultPolicy(enum.Enum):
    """Who fills arguments a file omits (docs/policies.md states the compatibility consequence of each)."""

    REQUIRE_SERIALIZED = "require_serialized"
    """The file must carry every argument; a missing one is a BindError."""
    REQUIRE_CALLER = "require_caller"
    """The caller passes what the file lacks (`defaults=` of `call`, or the AOTInductor int/tensor arrays)."""
    FROM_SCHEMA = "from_schema"
    """Taken from the op's registered schema; missing with no default is a BindError."""

    @classmethod
    def parse(cls, name: str | DefaultPolicy) -> DefaultPolicy:
        """The policy named `name` ("from_schema", "FROM_SCHEMA", "from-schema", or a policy)."""

        if isinstance(name, DefaultPolicy):
            return name
        key = str(name).strip().lower().replace("-", "_")
        for policy in cls:
            if policy.value == key:
                return policy
        raise BindError(f"unknown default policy {name!r}: expected one of {', '.join(p.value for p in cls)}")

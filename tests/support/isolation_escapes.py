"""What counts as a refused escape in the table the compromised kernel (`isolib.attack`) returns."""

from __future__ import annotations

from opwire.proxy_executor import landlock

__all__ = ["ESCAPES_LANDLOCK", "refused"]

# escapes only Landlock refuses (read-only opens: the seccomp allowlist lets torch open its own files lazily)
ESCAPES_LANDLOCK = ("open /dev/tty", "open /proc/PPID/mem", "open /etc/passwd")


def refused(name: str) -> set[str]:
    """The errors that mean `name` was refused: seccomp's EPERM; an open refused by Landlock (EACCES) or by having
    no terminal (ENXIO); without Landlock in the kernel a read-only open is a known limit (SECURITY.md)."""
    if name in ESCAPES_LANDLOCK:
        return {"EACCES", "ENXIO", "EPERM"} if landlock.abi_version() else {"EACCES", "ENXIO", "EPERM", "ALLOWED"}
    return {"EPERM"}

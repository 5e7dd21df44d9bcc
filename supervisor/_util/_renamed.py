"""The package's renamed public names: an old name keeps working, and its first use in a
process says, once, what it is called now (a :class:`DeprecationWarning`, which Python
shows for code run as ``__main__`` and test runners show everywhere). Imports nothing of
the package.
"""

from __future__ import annotations

import warnings

__all__ = ["renamed"]

#: The old names already warned about in this process.
_warned: set[str] = set()


def renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Say, the first time only, that ``old`` (a dotted public name) is now ``new``:
    ``stacklevel`` as :func:`warnings.warn`'s, counted from the caller of this function's
    caller (the default points at the code that used the old name through a method or a
    module ``__getattr__`` that calls this)."""
    if old in _warned:
        return
    _warned.add(old)
    warnings.warn(
        f"{old} is deprecated: it is now {new}", DeprecationWarning, stacklevel=stacklevel
    )

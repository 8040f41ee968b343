"""The error every reader raises for bad input: it names the file, the line and the token."""

from __future__ import annotations

import os


class InputFormatError(ValueError):
    """Malformed input data.

    The message starts ``FILE:LINE: ...`` (or ``FILE: ...`` when no line
    applies, e.g. a bad binary header), names the offending token where there
    is one, and says what is wrong.  The attributes carry the same facts for
    programs.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        message: str,
        *,
        line: int | None = None,
        token: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.token = token
        self.reason = message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # survives pickling through Dask workers
        return (_rebuild, (self.path, self.reason, self.line, self.token))


def _rebuild(path: str, message: str, line: int | None, token: str | None) -> InputFormatError:
    return InputFormatError(path, message, line=line, token=token)

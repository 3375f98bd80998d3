"""kernrt's exceptions: one class per error kind of the C ABI, each with the JSON pointer.

Owns: turning a failed C call (its status and kernrt_last_error_json) into an exception
whose class says who must act, `.path` is the RFC 6901 pointer of the first problem
("" when none), `.message` its message and `.errors` every problem as dicts.
"""
import json


class Error(Exception):
    """Base class: .kind, .path, .message, .errors (list of {"kind","path","message",...})."""
    kind = "error"

    def __init__(self, errors):
        self.errors = list(errors) or [{"kind": self.kind, "path": "", "message": "unknown error"}]
        first = self.errors[0]
        self.path = first.get("path", "")
        self.message = first.get("message", "")
        super().__init__("\n".join(_line(e) for e in self.errors))


def _line(e):
    where = e.get("path", "")
    if e.get("line"):
        where = f"{e['line']}:{e.get('column', 0)}"
    return f"{where}: {e.get('message', '')}" if where else e.get("message", "")


class ParseError(Error):
    """The text is not a schema-v4 manifest."""
    kind = "parse"


class ManifestError(Error):
    """A verifier rule is violated: the manifest's author must fix it."""
    kind = "manifest"


class ArtifactError(Error):
    """A cubin or weight is missing, changed or does not match its declaration."""
    kind = "artifact"


class DriverError(Error):
    """The CUDA driver or device failed or is absent."""
    kind = "driver"


class CallerError(Error):
    """The API was misused: unknown name, var out of range, wrong size, bad binding."""
    kind = "caller"


class IoError(Error):
    """A file could not be read or written."""
    kind = "io"


class InternalError(Error):
    """A failure inside kernrt (a bug or resource exhaustion)."""
    kind = "internal"


CLASSES = {c.kind: c for c in (ParseError, ManifestError, ArtifactError, DriverError,
                               CallerError, IoError, InternalError)}


def from_json(report):
    """The exception for a JSON error report (kernrt_last_error_json / kernrt_verify_json)."""
    errors = json.loads(report) if report else []
    kind = errors[0].get("kind", "internal") if errors else "internal"
    return CLASSES.get(kind, InternalError)(errors)

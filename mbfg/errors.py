"""The one exception type a user of mbfg catches (MbfgError, a ValueError) and the subclasses that narrow its origin."""

from __future__ import annotations


class MbfgError(ValueError):
    """Bad model, log, trajectory or parameter input.

    The message names the offending field, row or parameter and says what was
    expected. Subclasses only narrow the origin; catching ``MbfgError`` is enough.
    """


class ModelError(MbfgError):
    """A mechanism or model definition is malformed."""


class DataError(MbfgError):
    """A log or trajectory file is malformed."""


class DeclarationError(MbfgError, TypeError):
    """A factor type, key or variable used against its declaration (a key of the wrong kind, a residual of the
    wrong shape, a name taken by another residual); a ``TypeError`` too."""


class LimitError(MbfgError):
    """A run length, window, horizon or count beyond what memory or time allow (:mod:`mbfg.limits`)."""

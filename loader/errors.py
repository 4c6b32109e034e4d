"""One exception hierarchy for the whole package.

Every error message names the object, file or parameter at fault and, where there is one, the fix.
The CLI turns each class into one line on stderr and a distinct exit code (see ``exit_code``), so
scripts can tell what happened without parsing text.
"""

from __future__ import annotations


class LoaderError(Exception):
    """Base class of every error the library raises on purpose."""

    exit_code = 1


class ConfigError(LoaderError):
    """A setting, configuration file or template file is invalid."""

    exit_code = 2


class ClusterError(LoaderError):
    """OpenSearch could not be reached, refused the request, or is not what was expected."""

    exit_code = 3


class AuthenticationError(ClusterError):
    """OpenSearch rejected the credentials (HTTP 401/403)."""

    exit_code = 4


class IncompatibleIndexError(LoaderError):
    """The index on the cluster cannot serve the configuration (e.g. another vector dimension)."""

    exit_code = 5


class ModelError(LoaderError):
    """An embedding or reranking model could not be loaded or run."""

    exit_code = 6


class InputError(LoaderError):
    """A document could not be read: binary, undecodable, empty, too large or malformed."""

    exit_code = 7


class PartialFailure(LoaderError):
    """The work finished, but some items failed; each failure was reported."""

    exit_code = 8


class DockerError(LoaderError):
    """Docker is missing, not running, or could not start the local OpenSearch."""

    exit_code = 9


class RegressionError(LoaderError):
    """An evaluation metric dropped by more than the allowed threshold."""

    exit_code = 10


class QueryError(LoaderError):
    """OpenSearch refused a search as a bad request (HTTP 400): a parameter it cannot use."""

    exit_code = 11

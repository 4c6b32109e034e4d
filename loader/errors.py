"""One exception hierarchy for the whole package, mapped once for the CLI and once for HTTP.

Every error message names the object, file or parameter at fault and, where there is one, the fix.
Each class carries what callers need to tell what happened without parsing text:

- ``exit_code``: the CLI prints the message as one line on stderr and exits with it;
- ``http_status``: ``loader serve`` answers with it. 4xx means the request is at fault, 5xx the
  server or its cluster;
- ``public_reason``: what an HTTP client is told instead of the message, for errors whose message
  may name the cluster's URL or internals (``None``: the message itself is safe to show).

Example::

    try:
        push(folder, settings)
    except LoaderError as exc:
        print(exc, file=sys.stderr)
        sys.exit(exc.exit_code)
"""

from __future__ import annotations


class LoaderError(Exception):
    """Base class of every error the library raises on purpose."""

    exit_code = 1
    http_status = 500
    public_reason: str | None = "the server failed; its log has the reason"

    def __init__(self, message: str = "", *, public_reason: str | None = None) -> None:
        super().__init__(message)
        if public_reason is not None:
            self.public_reason = public_reason

    @property
    def public_message(self) -> str:
        """What an HTTP client may be told: the message, or the class's safe reason."""
        return str(self) if self.public_reason is None else self.public_reason


class ConfigError(LoaderError):
    """A setting, configuration file, template file or request parameter is invalid."""

    exit_code = 2
    http_status = 422
    public_reason = None


class ClusterError(LoaderError):
    """OpenSearch refused the request, or is not what was expected."""

    exit_code = 3
    http_status = 502
    public_reason = "OpenSearch failed the request; the server's log has the reason"


class ClusterUnavailableError(ClusterError):
    """OpenSearch could not be reached, did not answer in time, or is overloaded (429)."""

    http_status = 503
    public_reason = "cannot reach OpenSearch; try again later"


class AuthenticationError(ClusterError):
    """OpenSearch rejected the credentials (HTTP 401/403)."""

    exit_code = 4
    public_reason = "OpenSearch refused this server's credentials; the server's log has the reason"


class IncompatibleIndexError(LoaderError):
    """The index on the cluster cannot serve the configuration (e.g. another vector dimension)."""

    exit_code = 5
    http_status = 502
    public_reason = "the index on OpenSearch does not fit this server's configuration"


class ModelError(LoaderError):
    """An embedding or reranking model could not be loaded or run."""

    exit_code = 6
    http_status = 503
    public_reason = "a model failed on this server; the server's log has the reason"


class RerankerUnavailableError(ModelError):
    """A rerank was asked for (``--rerank``, ``rerank = on``, ``"rerank": true``) and
    ``reranker_model`` is no cross-encoder on this machine: the request asks for what the
    server cannot do, so a 4xx over HTTP, naming the setting; exit code 6 as any model error."""

    http_status = 422


class InputError(LoaderError):
    """A document could not be read: binary, undecodable, empty, too large or malformed."""

    exit_code = 7
    http_status = 422
    public_reason = None


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
    """OpenSearch refused a search as a bad request (HTTP 400): a parameter it cannot use.

    Not a ``ClusterError``: code that retries on cluster errors must not retry bad input."""

    exit_code = 11
    http_status = 400
    public_reason = None


class NotFoundError(LoaderError):
    """A request names something that does not exist for its tenant: a logged query, a query
    set. Another tenant's is reported the same way, so a key learns nothing of other tenants."""

    exit_code = 12
    http_status = 404
    public_reason = None


class ForbiddenError(LoaderError):
    """A request names another tenant's logged query (an unguessable id): refused, nothing
    written. Another tenant's query set is a ``NotFoundError``: its id can be computed."""

    exit_code = 13
    http_status = 403
    public_reason = None


class ModelRejectedError(LoaderError):
    """A trained model did not beat the current search on questions it did not learn from
    (``loader learn``'s guard): nothing was written, and the message says what was measured."""

    exit_code = 14
    http_status = 422
    public_reason = None


class NotEnoughEvidenceError(LoaderError):
    """The log holds too little to produce anything (``loader judgments clicks``: no click, or no
    question with a chunk shown ``--min-impressions`` times and clicked enough): nothing was
    written, and the message says how far short it fell. Not a document's fault, so not an
    ``InputError``: a script waits for more traffic, or lowers the bar."""

    exit_code = 15
    http_status = 422
    public_reason = None

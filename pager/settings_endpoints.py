"""The descriptions of the embedder endpoints' and the LLM seam's ``MEMPAGER_*`` variables (data only;
``settings_table`` builds the table from them and from ``settings_docs``)."""

from __future__ import annotations

# EmbedderSettings fields read from the environment: (variable, field, description). The numbers
# come from ``EmbedderSettings``' own list (``_NUMBERS``), described in ``NUMBER_DOCS``.
EMBEDDER_TEXT: tuple[tuple[str, str, str], ...] = (
    (
        "MEMPAGER_GATEWAY_URL",
        "gateway_url",
        "The mempager embedding gateway's URL; with a token, `auto` tries it first.",
    ),
    (
        "MEMPAGER_GATEWAY_TOKEN",
        "gateway_token",
        "Bearer token for the gateway (sent with the actor for spend attribution). Never shown or logged.",
    ),
    (
        "MEMPAGER_GATEWAY_MODEL",
        "gateway_model",
        "Model the gateway is asked for.",
    ),
    (
        "MEMPAGER_GATEWAY_DIM",
        "gateway_dim",
        "Vector width the gateway returns; unset, it is learnt from the first answer.",
    ),
    (
        "MEMPAGER_PROVIDER_URL",
        "provider_url",
        "An OpenAI-compatible embeddings endpoint; used (after the gateway) when a model is set too.",
    ),
    (
        "MEMPAGER_PROVIDER_API_KEY",
        "provider_api_key",
        "API key for the provider; leave unset for a keyless local server. Never shown or logged.",
    ),
    (
        "MEMPAGER_PROVIDER_MODEL",
        "provider_model",
        "Model name sent to the provider (required for the provider to be tried).",
    ),
    (
        "MEMPAGER_PROVIDER_DIM",
        "provider_dim",
        "Vector width the provider returns; unset, it is learnt from the first answer.",
    ),
    (
        "MEMPAGER_LOCAL_MODEL",
        "local_model",
        "The local sentence-transformers model: a directory or a cached repo id; unset, the packaged "
        "all-MiniLM-L6-v2. `off` (or none/0/false/no) skips the local model.",
    ),
    (
        "MEMPAGER_LOCAL_MODEL_SHA256",
        "local_sha256",
        "sha256 (64 lowercase hex digits) the local model's weights must have; unset, the packaged "
        "model's published hash (other models are not checked).",
    ),
    (
        "MEMPAGER_LOCAL_BACKEND",
        "local_backend",
        "What runs the local model: `auto` (ONNX Runtime fp32 from a verified export: torch's vectors "
        "and name, torch itself when that is unavailable, with the reason logged), `torch`, `onnx` "
        "(fp32, never torch) or `onnx-int8` (within 0.99 cosine of torch, recorded as another model: "
        "`<name>+onnx-int8`; faster than fp32 on one thread, not than fp32 on every core where the CPU "
        "lacks VNNI: benchmarks/results/embedders.md).",
    ),
    (
        "MEMPAGER_ONNX_CACHE_DIR",
        "onnx_cache_dir",
        "Where ONNX exports of the local model are kept, one per weights sha256 (made once, verified "
        "on every load); unset, `$XDG_CACHE_HOME/mempager/onnx` or `~/.cache/mempager/onnx`.",
    ),
)
# LLMSettings fields (pager/llm/settings.py): (variable, field, description)
LLM_TEXT: tuple[tuple[str, str, str], ...] = (
    (
        "MEMPAGER_LLM_URL",
        "url",
        "An OpenAI-compatible chat endpoint (`{url}/v1/chat/completions`) for the consolidation steps "
        "(merge, replay, reflect, distill, wrap auto); unset, those steps are skipped.",
    ),
    (
        "MEMPAGER_LLM_API_KEY",
        "api_key",
        "API key for the LLM endpoint; leave unset for a keyless local server. Never shown or logged.",
    ),
    (
        "MEMPAGER_LLM_MODEL",
        "model",
        "Model name sent to the LLM endpoint (required with `MEMPAGER_LLM_URL`).",
    ),
)

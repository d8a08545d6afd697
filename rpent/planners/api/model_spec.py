"""``--model <provider>:<id>`` parsing and provider credentials for the api planner.

Providers (RPent reference §2.1, §2.4):

==============  ======================  ==================  ===================
prefix          wire API                key env var         base-URL env var
==============  ======================  ==================  ===================
``anthropic``   Anthropic Messages      ANTHROPIC_API_KEY   ANTHROPIC_BASE_URL
``openai``      OpenAI Responses        OPENAI_API_KEY      OPENAI_BASE_URL
``openai-chat`` Chat Completions        OPENAI_API_KEY      OPENAI_BASE_URL
==============  ======================  ==================  ===================

``--base-url`` overrides the base-URL variable. OpenAI-compatible base URLs end in
``/v1`` (``http://127.0.0.1:8000/v1`` for vLLM); Anthropic base URLs do not.
"""

from __future__ import annotations

from dataclasses import dataclass

from rpent.planners.base import PlannerConfig, PlannerConfigError

__all__ = ["PROVIDERS", "ModelSpec", "ProviderSettings", "parse_model_spec", "resolve_provider"]

PROVIDERS: dict[str, tuple[str, str]] = {
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openai-chat": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
}

_EXAMPLE = "anthropic:claude-sonnet-4-5, openai:gpt-5.1 or openai-chat:<served-model-name>"


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``--model``: ``provider`` (a :data:`PROVIDERS` key) and the model ``id``."""

    provider: str
    id: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.id}"


@dataclass(frozen=True)
class ProviderSettings:
    """Resolved connection settings: ``api_key``, ``base_url`` (None = SDK default) and
    the env var names they came from (for error messages)."""

    spec: ModelSpec
    api_key: str
    base_url: str | None
    key_var: str
    base_url_var: str


class MissingApiKeyError(PlannerConfigError):
    """The provider's API key variable is not set."""


class UnsupportedProviderError(PlannerConfigError):
    """The ``--model`` prefix names no supported provider."""


def parse_model_spec(model: str | None) -> ModelSpec:
    """Parse ``"<provider>:<id>"``.

    Raises:
        PlannerConfigError: no model given or no prefix (names the accepted forms).
        UnsupportedProviderError: unknown prefix.
    """
    if not model:
        raise PlannerConfigError(f"the 'api' planner requires a model id; pass --model with a provider prefix "
                                 f"({_EXAMPLE})")
    provider, sep, model_id = model.partition(":")
    if not sep or not model_id:
        raise PlannerConfigError(f"--model {model!r} has no provider prefix; use {_EXAMPLE}")
    if provider not in PROVIDERS:
        raise UnsupportedProviderError(f"unsupported provider {provider!r} in --model {model!r}; "
                                       f"supported: {', '.join(PROVIDERS)}")
    return ModelSpec(provider, model_id)


def resolve_provider(config: PlannerConfig) -> ProviderSettings:
    """Model spec + key + base URL for ``config``.

    Key: ``config.api_key``, else the provider's env var. Base URL: ``config.base_url``
    (``--base-url``), else the env var, else the SDK default.

    Raises:
        PlannerConfigError / UnsupportedProviderError: bad ``--model``.
        MissingApiKeyError: no key (names the variable to export).
        PlannerConfigError: a base URL (``--base-url`` or the variable) without ``http://``/``https://``.
    """
    spec = parse_model_spec(config.model)
    key_var, url_var = PROVIDERS[spec.provider]
    key = config.api_key or config.getenv(key_var)
    if not key:
        raise MissingApiKeyError(f"{key_var} is not set; export it (any non-empty value for a local "
                                 f"OpenAI-compatible server) to use --model {spec}")
    base_url = config.base_url or config.getenv(url_var)
    if base_url and not base_url.lower().startswith(("http://", "https://")):
        source = "--base-url" if config.base_url else url_var
        raise PlannerConfigError(f"{source} {base_url!r} is not an http(s) URL; pass the provider's URL, e.g. "
                                 "http://127.0.0.1:8000/v1")
    return ProviderSettings(spec=spec, api_key=key, base_url=base_url, key_var=key_var, base_url_var=url_var)

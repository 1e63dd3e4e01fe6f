"""Azure OpenAI through the official `openai` SDK: `AzureOpenAiCaller` for Chat Completions on
a deployment (`AsyncAzureOpenAI`, with its `api-version`), `AzureOpenAiResponsesCaller` for the
Responses API at the resource's v1 endpoint (`/openai/v1`, no `api-version`). Requests and
responses are OpenAI's, read and written by `OpenAiCaller` and `OpenAiResponsesCaller`."""

from __future__ import annotations

import os
from typing import Any

from ..errors import BuildError
from .openai import OpenAiCaller, openai_client
from .openai_responses import OpenAiResponsesCaller
from .provider import ProviderCaller

__all__ = ["DEFAULT_AZURE_API_VERSION", "AzureOpenAiCaller", "AzureOpenAiResponsesCaller"]

DEFAULT_AZURE_API_VERSION = "2024-10-21"
"""The Chat Completions `api-version` used when neither `api_version` nor $OPENAI_API_VERSION
is given (the latest generally available one of the dated API)."""


class _OnAzure(ProviderCaller):
    """What both Azure callers share: the key, the resource's endpoint, and how errors name it."""

    key_env = "AZURE_OPENAI_API_KEY"
    model_env = "AZURE_OPENAI_DEPLOYMENT"
    base_url_env = "AZURE_OPENAI_ENDPOINT"
    default_base_url = ""  # there is none: every resource has its own
    key_required_with_base_url = True

    @property
    def where(self) -> str:
        return f"{self.provider} at {self.endpoint}"


def _base_url(caller: str, azure_endpoint: str | None, base_url: str | None, path: str) -> str:
    """The SDK's base URL: `base_url` as given, or the resource's endpoint (the argument, else
    $AZURE_OPENAI_ENDPOINT) followed by `path`."""
    if base_url is not None and azure_endpoint is not None:
        raise BuildError(
            f"{caller} takes azure_endpoint= (the resource, e.g. "
            "'https://NAME.openai.azure.com') or base_url= (the whole base URL), not both."
        )
    if base_url is not None:
        return base_url
    endpoint = azure_endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
    if not endpoint:
        raise BuildError(
            f"{caller} needs the resource's endpoint: pass "
            "azure_endpoint='https://NAME.openai.azure.com' or export AZURE_OPENAI_ENDPOINT=..."
        )
    return endpoint.rstrip("/") + path


class AzureOpenAiCaller(_OnAzure, OpenAiCaller):
    """An `LlmCaller` for Chat Completions on Azure OpenAI, with everything `OpenAiCaller` does
    (settings, `thinking` as `reasoning_effort`, streaming, retries, errors).

    `azure_endpoint` is the resource ($AZURE_OPENAI_ENDPOINT), `api_key` its key
    ($AZURE_OPENAI_API_KEY), `api_version` the dated API ($OPENAI_API_VERSION, else
    `DEFAULT_AZURE_API_VERSION`). Requests go to `azure_deployment` when it is given (it is
    also the default model), else to the deployment the model names; `base_url` replaces the
    endpoint and deployment with a whole base URL.
    """

    provider = "Azure OpenAI"
    fallback_model = "gpt-4o-mini"

    def __init__(
        self,
        *,
        azure_endpoint: str | None = None,
        azure_deployment: str | None = None,
        api_version: str | None = None,
        base_url: str | None = None,
        **options: Any,
    ) -> None:
        path = "/openai" + (f"/deployments/{azure_deployment}" if azure_deployment else "")
        base = _base_url(type(self).__name__, azure_endpoint, base_url, path)
        if azure_deployment and not options.get("default_model"):
            options["default_model"] = azure_deployment
        super().__init__(base_url=base, **options)
        self.azure_deployment = azure_deployment
        self.api_version = (
            api_version or os.environ.get("OPENAI_API_VERSION") or DEFAULT_AZURE_API_VERSION
        )

    def _settings(self) -> dict[str, Any]:
        return {
            **super()._settings(),
            "api_version": self.api_version,
            "azure_deployment": self.azure_deployment,
        }

    def _make_client(self) -> Any:
        import openai

        return openai.AsyncAzureOpenAI(
            api_key=self._key(),
            base_url=self.endpoint,
            api_version=self.api_version,
            max_retries=0,
            timeout=self.timeout,
        )


class AzureOpenAiResponsesCaller(_OnAzure, OpenAiResponsesCaller):
    """An `LlmCaller` for the Responses API on Azure OpenAI (its v1 API, `/openai/v1`, which
    takes no `api-version`), with everything `OpenAiResponsesCaller` does (reasoning items sent
    back encrypted with `store=False`, streaming, retries, errors).

    `azure_endpoint` is the resource ($AZURE_OPENAI_ENDPOINT) and `api_key` its key
    ($AZURE_OPENAI_API_KEY); the model is the deployment's name; `base_url` replaces the
    endpoint with a whole base URL.
    """

    provider = "Azure OpenAI Responses"
    fallback_model = "gpt-5-mini"

    def __init__(
        self, *, azure_endpoint: str | None = None, base_url: str | None = None, **options: Any
    ) -> None:
        base = _base_url(type(self).__name__, azure_endpoint, base_url, "/openai/v1")
        super().__init__(base_url=base, **options)

    def _make_client(self) -> Any:
        key = self._key()
        return openai_client(
            key, self.base_url, self.timeout, default_headers={"api-key": key or ""}
        )

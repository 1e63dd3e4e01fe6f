"""GeminiCaller: Google's Gemini API, or Vertex AI, through the official `google-genai` SDK
(the optional extra `agentsm[google]`), with function calls, parallel calls, streaming,
thought summaries, and thought signatures sent back on the parts that carried them."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Self

from ..errors import BuildError
from ._gemini_wire import (
    function_calling,
    gemini_contents,
    gemini_tools,
    llm_response,
    merge_part,
    response_parts,
    sdk_part,
    wire_part,
)
from .base import emit_reasoning, emit_text
from .errors import AuthenticationFailed, ProviderError, classify, redact
from .provider import ProviderCaller

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry
    from ..types import LlmResponse

__all__ = ["DEFAULT_GEMINI_MODEL", "KEY_ENVS", "THINKING_BUDGETS", "GeminiCaller"]

DEFAULT_GEMINI_MODEL = "gemini-2.5-flash"
"""Used when the agent's model string is empty and $GEMINI_MODEL is not set."""

KEY_ENVS = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
"""Where the API key is looked for, in the SDK's order."""

THINKING_BUDGETS = {"low": 1024, "medium": 8192, "high": 24576}
"""The `thinking_budget` of each level on Gemini 2 models (later models take the level)."""

INSTALL = "pip install 'agentsm[google]'"


def _genai() -> Any:
    """The google-genai SDK, or a BuildError saying how to install it."""
    try:
        from google import genai
    except ImportError as e:
        raise BuildError(
            f"GeminiCaller needs the google-genai SDK, which is not installed: {INSTALL}."
        ) from e
    return genai


class _Client:
    """An SDK client with the httpx clients it was given, closed together."""

    def __init__(self, sdk: Any, plain: Any, loop_bound: Any) -> None:
        self.sdk = sdk
        self.models = sdk.aio.models
        self._httpx = (plain, loop_bound)

    async def close(self) -> None:
        self._httpx[0].close()
        await self._httpx[1].aclose()


class GeminiCaller(ProviderCaller):
    """An `LlmCaller` for the Gemini API, or Vertex AI with `vertexai=True` (or a test server at
    `base_url`), on the official google-genai SDK: `pip install 'agentsm[google]'`.

    `api_key` defaults to $GOOGLE_API_KEY, then $GEMINI_API_KEY. On Vertex AI, `project` and
    `location` default to $GOOGLE_CLOUD_PROJECT and $GOOGLE_CLOUD_LOCATION (else "global"), and
    `credentials` (a google-auth object) to Application Default Credentials; an `api_key`
    there uses Vertex AI express mode. `base_url` defaults to $GOOGLE_GEMINI_BASE_URL (or
    $GOOGLE_VERTEX_BASE_URL), `api_version` to the SDK's own.

    Request settings: `temperature`, `top_p`, `top_k`, `max_tokens` (`maxOutputTokens`),
    `tool_choice` ("auto", "none", "required" or a tool name; or the API's own
    `functionCallingConfig`) and `extra_body` for any other field. `thinking` is a level
    ("low", "medium", "high": `thinkingLevel`, or a budget of 1024, 8192 or 24576 tokens on
    Gemini 2 models), a token budget, or the API's own `thinkingConfig`; thought summaries are
    asked for with it.

    Gemini's function calls carry no id: each gets one from its place ("call_{step}_{n}"),
    and the results go back in the calls' order. Thought summaries and the thought signatures
    the model puts on parts are recorded with the response and sent back on the same parts.
    """

    provider = "Gemini"
    key_env = "GEMINI_API_KEY"
    model_env = "GEMINI_MODEL"
    base_url_env = "GOOGLE_GEMINI_BASE_URL"
    default_base_url = "https://generativelanguage.googleapis.com"
    fallback_model = DEFAULT_GEMINI_MODEL
    supports_thinking = True

    def __init__(
        self,
        *,
        vertexai: bool | None = None,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
        api_version: str | None = None,
        max_tokens: int | None = None,
        top_k: int | None = None,
        **options: Any,
    ) -> None:
        if options.get("parallel_tool_calls") is not None:
            raise BuildError(
                "GeminiCaller does not take parallel_tool_calls (the Gemini API has no such "
                "setting); leave it out."
            )
        _genai()
        super().__init__(**options)
        if vertexai is None:
            vertexai = os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("true", "1")
        self.vertexai = vertexai
        if not vertexai and (project or location or credentials is not None):
            raise BuildError(
                "project=, location= and credentials= are for Vertex AI: add vertexai=True, "
                "or leave them out to use the Gemini API with an API key."
            )
        if vertexai and options.get("api_key") and credentials is not None:
            raise BuildError(
                "credentials= and api_key= exclude each other on Vertex AI: give credentials "
                "(with project and location), or an API key for express mode."
            )
        if vertexai:  # "global" where a project is known; with only a key, express mode
            project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
            location = location or os.environ.get("GOOGLE_CLOUD_LOCATION")
            location = location or ("global" if project else None)
        self.project = project
        self.location = location
        self.credentials = credentials
        self.api_version = api_version
        self.max_tokens = max_tokens
        self.top_k = top_k

    @classmethod
    def from_env(cls, **kwargs: Any) -> Self:
        """A caller whose key ($GOOGLE_API_KEY or $GEMINI_API_KEY) must be set now (BuildError
        otherwise); on Vertex AI, credentials come from the environment instead."""
        if kwargs.get("vertexai") or kwargs.get("api_key"):
            return cls(**kwargs)
        key = next((os.environ[k] for k in KEY_ENVS if os.environ.get(k)), None)
        if not key:
            raise BuildError(
                "GEMINI_API_KEY is not set: export GEMINI_API_KEY=... (or GOOGLE_API_KEY) "
                "before building the caller."
            )
        return cls(api_key=key, **kwargs)

    def _settings(self) -> dict[str, Any]:
        return {
            **super()._settings(),
            "top_k": self.top_k,
            "max_tokens": self.max_tokens,
            "vertexai": self.vertexai or None,
        }

    # -- where, and with which credentials ------------------------------------------------

    @property
    def endpoint(self) -> str:
        if not self.vertexai:
            return super().endpoint
        if self.base_url or os.environ.get("GOOGLE_VERTEX_BASE_URL"):
            return self.base_url or os.environ["GOOGLE_VERTEX_BASE_URL"]
        if self.location in (None, "global"):
            return "https://aiplatform.googleapis.com"
        return f"https://{self.location}-aiplatform.googleapis.com"

    @property
    def where(self) -> str:
        if not self.vertexai:
            return super().where
        return f"Vertex AI ({self.endpoint}, project {self.project!r}, {self.location})"

    def _env_key(self) -> str | None:
        return next((os.environ[k] for k in KEY_ENVS if os.environ.get(k)), None)

    def _key(self) -> str | None:
        if self.vertexai:
            return self._api_key  # else the credentials (or the SDK's own look-up)
        key = self._api_key if self._api_key is not None else self._env_key()
        if not key:
            raise AuthenticationFailed(
                "GEMINI_API_KEY is not set: export GEMINI_API_KEY=... (or GOOGLE_API_KEY) or "
                "pass api_key= to the caller."
            )
        return key

    def _classify(self, error: BaseException) -> ProviderError:
        secrets = (self._api_key, *(os.environ.get(k) for k in KEY_ENVS))
        if _is_sign_in_error(error):
            return self._not_signed_in(error)
        return classify(_as_status_error(error), self.where, self.key_env, *secrets)

    def _not_signed_in(self, error: BaseException) -> AuthenticationFailed:
        secrets = (self._api_key, *(os.environ.get(k) for k in KEY_ENVS))
        detail = redact(f"{type(error).__name__}: {error}", *secrets)
        how = (
            "pass credentials= (or api_key=), or set up Application Default Credentials "
            "(gcloud auth application-default login)"
            if self.vertexai
            else "pass api_key= or set GEMINI_API_KEY"
        )
        return AuthenticationFailed(f"{self.where} could not be signed in to: {detail}; {how}.")

    def _make_client(self) -> Any:
        import httpx

        genai = _genai()
        plain, loop_bound = (
            httpx.Client(timeout=self.timeout),
            httpx.AsyncClient(timeout=self.timeout),
        )
        options = genai.types.HttpOptions(
            base_url=self.base_url or None,
            api_version=self.api_version,
            timeout=int(self.timeout * 1000),
            httpx_client=plain,
            httpx_async_client=loop_bound,
        )
        place = {
            name: value
            for name, value in (
                ("project", self.project),
                ("location", self.location),
                ("credentials", self.credentials),
            )
            if value is not None
        }
        try:
            sdk = genai.Client(
                vertexai=self.vertexai, api_key=self._key(), http_options=options, **place
            )
        except (ValueError, ImportError) as e:  # no project or key, no credentials found
            plain.close()
            raise self._not_signed_in(e) from e
        except Exception as e:
            plain.close()
            raise self._classify(e) from e
        return _Client(sdk, plain, loop_bound)

    # -- the request ----------------------------------------------------------------------

    def _request(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> dict[str, Any]:
        system, contents = gemini_contents(memory)
        config: dict[str, Any] = {}
        if system:
            config["system_instruction"] = system
        for name, field in (
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("top_k", "top_k"),
            ("max_tokens", "max_output_tokens"),
        ):
            if getattr(self, name) is not None:
                config[field] = getattr(self, name)
        thinking = self._thinking(model)
        if thinking is not None:
            config["thinking_config"] = thinking
        declared = gemini_tools(tools)
        if declared:
            config["tools"] = declared
            choice = function_calling(self.tool_choice)
            if choice is not None:
                config["tool_config"] = {"function_calling_config": choice}
        return {"model": model, "contents": contents, "config": config, "step": memory.step}

    def _thinking(self, model: str) -> dict[str, Any] | None:
        """The request's `thinking_config` (thought summaries included), None when not set."""
        thinking = self.thinking
        if thinking is None or isinstance(thinking, dict):
            return thinking
        if isinstance(thinking, int):
            return {"thinking_budget": thinking, "include_thoughts": True}
        if model.startswith(("gemini-2", "models/gemini-2")):
            return {"thinking_budget": THINKING_BUDGETS[thinking], "include_thoughts": True}
        return {"thinking_level": thinking.upper(), "include_thoughts": True}

    def _sdk_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """The request as the SDK takes it: its types, signatures as bytes."""
        types = _genai().types
        config = types.GenerateContentConfig(**request["config"])
        if self.extra_body:
            config.http_options = types.HttpOptions(extra_body=self.extra_body)
        contents = [
            types.Content(role=c["role"], parts=[sdk_part(types, p) for p in c["parts"]])
            for c in request["contents"]
        ]
        return {"model": request["model"], "contents": contents, "config": config}

    # -- the response ---------------------------------------------------------------------

    async def _plain(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        response = await client.models.generate_content(**self._sdk_request(request))
        parts = [p for p in map(wire_part, response_parts(response)) if p is not None]
        return _identified(llm_response(parts, response, response, request["step"]), response)

    async def _streamed(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        stream = await client.models.generate_content_stream(**self._sdk_request(request))
        parts: list[dict[str, Any]] = []
        last: Any = None
        metered: Any = None
        async for chunk in stream:
            last = chunk
            if getattr(chunk, "usage_metadata", None) is not None:
                metered = chunk
            for part in map(wire_part, response_parts(chunk)):
                if part is None:
                    continue
                if part.get("text"):
                    (emit_reasoning if part.get("thought") else emit_text)(part["text"])
                merge_part(parts, part)
        return _identified(llm_response(parts, last, metered, request["step"]), last)

    def __repr__(self) -> str:
        key = "set" if (self._api_key or self._env_key()) else "missing"
        shown = self.base_url or "the provider's own endpoint"
        where = f"base_url={shown!r}"
        if self.vertexai:
            login = f", credentials={type(self.credentials).__name__}" if self.credentials else ""
            where = (
                f"vertexai=True, project={self.project!r}, location={self.location!r}{login}, "
                + where
            )
        chosen = "".join(
            f", {k}={v!r}" for k, v in self.settings.items() if k not in ("provider", "vertexai")
        )
        return (
            f"GeminiCaller({where}, default_model={self.default_model!r}, "
            f"stream={self.stream}{chosen}, api_key={key})"
        )


class _StatusError(Exception):
    """An SDK `APIError` in the shape `classify` reads (status, body, response headers)."""

    def __init__(self, error: Any) -> None:
        super().__init__(str(error.message or error))
        self.status_code = error.code
        self.body = error.details if isinstance(error.details, dict) else {}
        self.response = error.response
        self.message = error.message


def _is_sign_in_error(error: BaseException) -> bool:
    """Google credentials that could not be found or refreshed (a network failure while
    refreshing them is a network error)."""
    module = type(error).__module__
    return module.startswith("google.auth") and type(error).__name__ != "TransportError"


def _as_status_error(error: BaseException) -> BaseException:
    if type(error).__module__.startswith("google.genai") and hasattr(error, "code"):
        return _StatusError(error)
    return error


def _identified(response: LlmResponse, raw: Any) -> LlmResponse:
    """`response` with the id the server gave it (`responseId`), when it gave one."""
    given = getattr(raw, "response_id", None)
    if isinstance(given, str) and given:
        return response.model_copy(update={"response_id": given})
    return response

"""ProviderCaller: what the OpenAI and Anthropic callers share (keys, endpoints, request
settings, one SDK client per event loop, retries, streaming retractions, repr)."""

from __future__ import annotations

import inspect
import json
import os
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ..errors import BuildError
from ..outputs import AgentOutput, ReasoningDelta, TextDelta
from ._clients import LoopClients
from ._common import env_key, require_key_now
from .base import _text_sink, retract_text
from .errors import ProviderError, classify
from .retry import RetryPolicy

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry
    from ..types import LlmResponse

__all__ = ["DEFAULT_TIMEOUT", "THINKING_LEVELS", "ProviderCaller", "Thinking", "origin"]

DEFAULT_TIMEOUT = 600.0
"""Seconds one HTTP request may take (the SDKs' own default): room for slow local servers
(one answer of a 1.5B model on 2 CPU cores took 76 s). The whole call, retries included, is
bounded by `AgentConfig.llm_deadline`."""

ToolChoice = str | Mapping[str, Any]

Thinking = str | int | Mapping[str, Any]
"""How much the model may reason before it answers: "low", "medium" or "high", a token
budget, or the provider's own object (see each caller)."""

THINKING_LEVELS = ("low", "medium", "high")


class ProviderCaller:
    """An `LlmCaller` on an official SDK. Subclasses say how to make the SDK client, build the
    request, and read a plain or a streamed response; retries and errors are handled here.

    One caller serves any number of runs, on any number of event loops: each loop gets its own
    SDK client (and connection pool), closed when that loop shuts down (`asyncio.run` does), or
    by `await caller.aclose()` on that loop.
    """

    provider: ClassVar[str]
    key_env: ClassVar[str]
    model_env: ClassVar[str]
    base_url_env: ClassVar[str]
    default_base_url: ClassVar[str]
    fallback_model: ClassVar[str]
    key_required_with_base_url: ClassVar[bool] = True
    supports_thinking: ClassVar[bool] = False
    """Whether this caller takes `thinking=` (it says how it maps it)."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        stream: bool = False,
        max_retries: int = 3,
        timeout: float = DEFAULT_TIMEOUT,
        default_model: str | None = None,
        retry: RetryPolicy | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        tool_choice: ToolChoice | None = None,
        parallel_tool_calls: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        thinking: Thinking | None = None,
    ) -> None:
        self._api_key = api_key
        self.base_url = base_url
        self.stream = stream
        self.timeout = timeout
        self.default_model = default_model or os.environ.get(self.model_env) or self.fallback_model
        self.retry = retry or RetryPolicy(max_retries=max_retries)
        self.temperature = temperature
        self.top_p = top_p
        self.tool_choice = _tool_choice(tool_choice)
        self.parallel_tool_calls = parallel_tool_calls
        self.extra_body = _json_object(extra_body or {}, "extra_body")
        self.thinking = self._checked_thinking(thinking)
        self._clients: LoopClients[Any] = LoopClients(self._make_client, _close_client)

    @classmethod
    def from_env(cls, **kwargs: Any) -> Self:
        """A caller whose key must be in the environment now (BuildError otherwise)."""
        return cls(api_key=require_key_now(kwargs.pop("api_key", None), cls.key_env), **kwargs)

    # -- what this caller asks for --------------------------------------------------------

    @property
    def settings(self) -> dict[str, Any]:
        """What this caller asks of the server besides the conversation (temperature, seed,
        tool choice, extra body fields, ...): recorded in the run's definition (RunStarted),
        so that replay reports a changed setting."""
        chosen = {k: v for k, v in self._settings().items() if v is not None}
        if self.extra_body:
            chosen["extra_body"] = self.extra_body
        return {"provider": self.provider, **chosen}

    def _settings(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "thinking": self.thinking,
        }

    def _checked_thinking(self, thinking: Thinking | None) -> str | int | dict[str, Any] | None:
        """`thinking` as given, checked: a level, a positive token budget or a JSON object
        (BuildError otherwise, and for a caller that does not take it)."""
        if thinking is None:
            return None
        name = type(self).__name__
        if not self.supports_thinking:
            raise BuildError(f"{name} does not take thinking=; leave it out.")
        if isinstance(thinking, str) and thinking in THINKING_LEVELS:
            return thinking
        if isinstance(thinking, int) and not isinstance(thinking, bool) and thinking > 0:
            return thinking
        if isinstance(thinking, Mapping):
            return _json_object(thinking, "thinking")
        raise BuildError(
            f"thinking={thinking!r} is not a level ('low', 'medium', 'high'), a positive "
            f"token budget, or a dict in the provider's own format; {name} takes one of these."
        )

    @property
    def endpoint(self) -> str:
        """The base URL requests go to."""
        return self.base_url or os.environ.get(self.base_url_env) or self.default_base_url

    @property
    def where(self) -> str:
        """The server as errors name it."""
        if self.endpoint.rstrip("/") == self.default_base_url.rstrip("/"):
            return f"{self.provider} API ({self.endpoint})"
        return f"the {self.provider}-compatible server at {self.endpoint}"

    # -- calling --------------------------------------------------------------------------

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        """One LLM call: the request, then the response, retried as the policy says."""
        request = self._request(memory, tools, model or self.default_model)
        response = await self.retry.run(lambda: self._attempt(request), self._classify)
        server = origin(self.endpoint) if response.server is None else None
        return response.model_copy(update={"server": server}) if server else response

    async def aclose(self) -> None:
        """Close the SDK client of the running event loop (the next call opens a new one)."""
        await self._clients.aclose()

    async def _attempt(self, request: dict[str, Any]) -> LlmResponse:
        client = await self._clients.get()
        outer = _text_sink.get()
        if not self.stream:
            return await self._plain(client, request)
        if outer is None:
            return await self._streamed(client, request)
        shown: list[str] = []
        thought: list[str] = []

        def sink(output: AgentOutput) -> None:
            if isinstance(output, TextDelta):
                shown.append(output.text)
            elif isinstance(output, ReasoningDelta):
                thought.append(output.text)
            outer(output)

        token = _text_sink.set(sink)
        try:
            return await self._streamed(client, request)
        except BaseException as e:  # cancelled at a deadline too: the text is void
            error = e
        finally:
            _text_sink.reset(token)
        if isinstance(error, Exception):
            why = str(self._classify(error))
        else:
            why = f"the call was abandoned ({type(error).__name__})"
        retract_text("".join(shown), why, "".join(thought))
        raise error

    async def _create(
        self, method: Callable[..., Any], request: dict[str, Any], **more: Any
    ) -> Any:
        """`method(**request, **more)`; fields the SDK does not name (and `extra_body`) are
        sent in the SDK's `extra_body`, so any server field can be set."""
        accepted = inspect.signature(method).parameters
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in {**request, **more}.items():
            (kwargs if key in accepted else extra)[key] = value
        extra.update(self.extra_body)
        if extra:
            kwargs["extra_body"] = extra
        return await method(**kwargs)

    def _key(self) -> str | None:
        required = self.base_url is None or self.key_required_with_base_url
        return env_key(self._api_key, self.key_env, required=required)

    def _classify(self, error: BaseException) -> ProviderError:
        return classify(
            error, self.where, self.key_env, self._api_key, os.environ.get(self.key_env)
        )

    def _make_client(self) -> Any:
        raise NotImplementedError

    def _request(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> dict[str, Any]:
        raise NotImplementedError

    async def _plain(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        raise NotImplementedError

    async def _streamed(self, client: Any, request: dict[str, Any]) -> LlmResponse:
        raise NotImplementedError

    def __repr__(self) -> str:
        where = self.base_url or "the provider's own endpoint"
        key = "set" if (self._api_key or os.environ.get(self.key_env)) else "missing"
        chosen = "".join(f", {k}={v!r}" for k, v in self.settings.items() if k != "provider")
        return (
            f"{type(self).__name__}(base_url={where!r}, default_model={self.default_model!r}, "
            f"stream={self.stream}{chosen}, api_key={key})"
        )


async def _close_client(client: Any) -> None:
    await client.close()


def _tool_choice(choice: ToolChoice | None) -> ToolChoice | None:
    if choice is None or isinstance(choice, str):
        return choice
    if isinstance(choice, Mapping):
        return _json_object(choice, "tool_choice")
    raise BuildError(
        f"tool_choice={choice!r} is neither a string ('auto', 'none', 'required' or a tool "
        "name) nor a dict in the provider's own format."
    )


def _json_object(value: Mapping[str, Any], name: str) -> dict[str, Any]:
    try:
        return dict(json.loads(json.dumps(dict(value), allow_nan=False)))
    except (TypeError, ValueError) as e:
        raise BuildError(f"{name} must be a JSON object (it is sent to the server): {e}.") from e


def origin(url: str) -> str | None:
    """The `scheme://host[:port]` of `url` (no credentials, path or query), or None when it
    names no host: where a response came from, as `LlmResponse.server` records it."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not parts.scheme or not host:
        return None
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}" + (f":{port}" if port is not None else "")

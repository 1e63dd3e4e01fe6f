"""ProviderCaller: what the OpenAI and Anthropic callers share (keys, models, retries, repr)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ._common import env_key, require_key_now
from .errors import ProviderError, classify
from .retry import RetryPolicy

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry
    from ..types import LlmResponse

__all__ = ["ProviderCaller"]


class ProviderCaller:
    """An `LlmCaller` on an official SDK. Subclasses say how to make the SDK client, build the
    request, and read a plain or a streamed response; retries and errors are handled here."""

    provider: ClassVar[str]
    key_env: ClassVar[str]
    model_env: ClassVar[str]
    fallback_model: ClassVar[str]
    key_required_with_base_url: ClassVar[bool] = True

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        stream: bool = False,
        max_retries: int = 3,
        timeout: float = 60.0,
        default_model: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._api_key = api_key
        self.base_url = base_url
        self.stream = stream
        self.timeout = timeout
        self.default_model = default_model or os.environ.get(self.model_env) or self.fallback_model
        self.retry = retry or RetryPolicy(max_retries=max_retries)
        self._client: Any = None

    @classmethod
    def from_env(cls, **kwargs: Any) -> Self:
        """A caller whose key must be in the environment now (BuildError otherwise)."""
        return cls(api_key=require_key_now(kwargs.pop("api_key", None), cls.key_env), **kwargs)

    def _key(self) -> str | None:
        required = self.base_url is None or self.key_required_with_base_url
        return env_key(self._api_key, self.key_env, required=required)

    def _sdk(self) -> Any:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _classify(self, error: BaseException) -> ProviderError:
        return classify(
            error, self.provider, self.key_env, self._api_key, os.environ.get(self.key_env)
        )

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        """One LLM call: the request, then the response, retried as the policy says."""
        request = self._request(memory, tools, model or self.default_model)
        once = self._streamed if self.stream else self._plain
        return await self.retry.run(lambda: once(request), self._classify)

    def _make_client(self) -> Any:
        raise NotImplementedError

    def _request(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> dict[str, Any]:
        raise NotImplementedError

    async def _plain(self, request: dict[str, Any]) -> LlmResponse:
        raise NotImplementedError

    async def _streamed(self, request: dict[str, Any]) -> LlmResponse:
        raise NotImplementedError

    def __repr__(self) -> str:
        where = self.base_url or "the provider's own endpoint"
        key = "set" if (self._api_key or os.environ.get(self.key_env)) else "missing"
        return (
            f"{type(self).__name__}(base_url={where!r}, default_model={self.default_model!r}, "
            f"stream={self.stream}, api_key={key})"
        )

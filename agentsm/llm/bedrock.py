"""BedrockCaller: Amazon Bedrock's Converse and ConverseStream APIs through `boto3`, for the
models of every family Bedrock serves, with native `toolUse` / `toolResult` blocks, reasoning
(`reasoningContent` blocks recorded and sent back unchanged) and prompt caching (`cachePoint`).

boto3 is an optional dependency: `pip install 'agentsm[bedrock]'`."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal, Self

from ..errors import BuildError
from ._boto import AsyncBedrock, classify_aws
from ._converse import Assembly, converse_messages, converse_tools, model_family, read_message
from .anthropic import claude_budget, refuse_small_budget
from .errors import NetworkError, ProviderError
from .provider import ProviderCaller, Thinking, _json_object

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry
    from ..types import LlmResponse

__all__ = ["CACHE_PARTS", "DEFAULT_BEDROCK_MODEL", "BedrockCaller"]

DEFAULT_BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
"""Used when the agent's model string is empty and $BEDROCK_MODEL is not set."""

POOL = 32
"""Connections boto3 keeps open for one caller on one event loop (more calls at once open
more, closed after use)."""

CACHE_PARTS = ("system", "tools", "conversation")
"""What `cache=` may mark with a `cachePoint`, in the order of the request."""

AUTO_CACHE = {"anthropic": CACHE_PARTS, "amazon": ("system", "conversation")}
"""What `cache="auto"` marks for each model family (what Bedrock caches for it); none for
the others."""

_REFUSED = {
    "api_key": "Bedrock takes AWS credentials: aws_access_key_id= and aws_secret_access_key= "
    "(or profile=), or the usual AWS environment variables",
    "base_url": "give the endpoint as endpoint_url=",
    "parallel_tool_calls": "Converse has no such setting; leave it out",
}


class BedrockCaller(ProviderCaller):
    """An `LlmCaller` for Amazon Bedrock's Converse API (ConverseStream with `stream=True`).

    Credentials and region are boto3's: `aws_access_key_id`, `aws_secret_access_key`,
    `aws_session_token`, `profile` and `region` when given, else the usual AWS environment
    variables, `~/.aws` files and instance roles. `endpoint_url` (or
    $AWS_ENDPOINT_URL_BEDROCK_RUNTIME) points boto3 at another endpoint: a VPC endpoint, or a
    test server. boto3's own retries are off: `retry` (or `max_retries`) applies; `timeout`
    bounds each read, in seconds.

    The model is any Bedrock model id, cross-region inference profile or ARN
    (`us.amazon.nova-micro-v1:0`, `anthropic.claude-...`, `meta.llama...`). Request settings:
    `max_tokens`, `temperature`, `top_p`, `stop_sequences` (its `inferenceConfig`),
    `tool_choice` ("auto", "required", a tool name, or Converse's own dict),
    `additional_fields` (the model's own `additionalModelRequestFields`, e.g. `{"top_k": 50}`)
    and `extra_body` (other Converse fields, e.g. `performanceConfig`).

    `thinking` turns on Claude's extended thinking on Bedrock: "low", "medium" or "high"
    (budgets of 1024, 4096 and 16384 tokens), a budget of at least 1024 tokens, or Anthropic's
    `thinking` object (a dict with a `type`); any other dict is merged into
    `additionalModelRequestFields` as it is (another family's reasoning fields). The
    `reasoningContent` blocks of a response are recorded with it and sent back unchanged, first
    in their assistant turn.

    `cache` places `cachePoint` blocks (with `cache_ttl` "5m" or "1h" if given): name what to
    mark among "system", "tools" (after the last tool) and "conversation" (the end of the last
    message), or "auto" for what the model's family caches (Claude: all three; Nova: system
    and conversation; others: none); "off" (the default) marks none.
    """

    provider = "Bedrock"
    key_env = "AWS_ACCESS_KEY_ID"
    model_env = "BEDROCK_MODEL"
    base_url_env = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"
    default_base_url = ""
    fallback_model = DEFAULT_BEDROCK_MODEL
    supports_thinking = True

    def __init__(
        self,
        *,
        region: str | None = None,
        profile: str | None = None,
        endpoint_url: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        max_tokens: int | None = None,
        stop_sequences: Iterable[str] | None = None,
        additional_fields: Mapping[str, Any] | None = None,
        cache: str | Iterable[str] | None = None,
        cache_ttl: Literal["5m", "1h"] | None = None,
        **options: Any,
    ) -> None:
        for name, why in _REFUSED.items():
            if options.get(name) is not None:
                raise BuildError(f"BedrockCaller does not take {name}=: {why}.")
            options.pop(name, None)
        if importlib.util.find_spec("boto3") is None:
            raise BuildError(
                "BedrockCaller needs boto3, which is not installed: pip install 'agentsm[bedrock]'."
            )
        if (aws_access_key_id is None) != (aws_secret_access_key is None):
            raise BuildError(
                "BedrockCaller needs aws_access_key_id= and aws_secret_access_key= together "
                "(or neither, to use the AWS environment or a profile)."
            )
        super().__init__(**options)
        self.region = region
        self.profile = profile
        self.endpoint_url = endpoint_url
        self._access_key = aws_access_key_id
        self._secret_key = aws_secret_access_key
        self._session_token = aws_session_token
        budget = self._budget()
        if max_tokens is not None and budget is not None and max_tokens <= budget:
            raise BuildError(
                f"max_tokens={max_tokens} leaves no room for the answer after a thinking budget "
                f"of {budget} tokens; give max_tokens above it (e.g. {budget + 4096}), or leave "
                "it out."
            )
        if self.tool_choice == "none":
            raise BuildError(
                "Converse has no tool_choice 'none': give the agent no tools instead, or "
                "choose 'auto', 'required' or a tool name."
            )
        self.max_tokens = max_tokens
        self.stop_sequences = list(stop_sequences) if stop_sequences is not None else None
        self.additional_fields = _json_object(additional_fields or {}, "additional_fields")
        self.cache = _cache(cache)
        if cache_ttl not in (None, "5m", "1h"):
            raise BuildError(f"cache_ttl={cache_ttl!r} is neither '5m' nor '1h'.")
        self.cache_ttl = cache_ttl

    @classmethod
    def from_env(cls, **kwargs: Any) -> Self:
        """A caller whose AWS credentials and region boto3 finds now (BuildError otherwise)."""
        caller = cls(**kwargs)
        import boto3

        session = boto3.session.Session(**caller._session_options())
        if session.get_credentials() is None:
            raise BuildError(
                "boto3 finds no AWS credentials: export AWS_ACCESS_KEY_ID=... and "
                "AWS_SECRET_ACCESS_KEY=..., or AWS_PROFILE=..., first."
            )
        if session.region_name is None:
            raise BuildError("No AWS region is set: export AWS_REGION=..., or pass region=.")
        return caller

    # -- what this caller asks for --------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "tool_choice": self.tool_choice,
            "thinking": self.thinking,
            "max_tokens": self.max_tokens,
            "stop_sequences": self.stop_sequences,
            "additional_fields": self.additional_fields or None,
            "cache": self.cache if isinstance(self.cache, str) else list(self.cache) or None,
            "cache_ttl": self.cache_ttl,
        }

    def _checked_thinking(self, thinking: Thinking | None) -> str | int | dict[str, Any] | None:
        refuse_small_budget(thinking, "Claude on Bedrock")
        return super()._checked_thinking(thinking)

    def _budget(self) -> int | None:
        return claude_budget(self.thinking)

    def _model_fields(self) -> dict[str, Any]:
        """`additionalModelRequestFields`: the caller's own, then the thinking setting."""
        fields = dict(self.additional_fields)
        if isinstance(self.thinking, dict):
            if "type" in self.thinking:
                fields["thinking"] = dict(self.thinking)
            else:
                fields.update(self.thinking)
        elif self.thinking is not None:
            fields["thinking"] = {"type": "enabled", "budget_tokens": self._budget()}
        return fields

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to, as far as it is known before boto3 resolves it."""
        named = self.endpoint_url or os.environ.get(self.base_url_env)
        if named:
            return named
        region = self.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            return f"https://bedrock-runtime.{region}.amazonaws.com"
        return "bedrock-runtime in the configured region"

    @property
    def where(self) -> str:
        if self.endpoint_url or os.environ.get(self.base_url_env):
            return f"the Bedrock endpoint at {self.endpoint}"
        return f"Bedrock ({self.endpoint})"

    # -- calling --------------------------------------------------------------------------

    def _session_options(self) -> dict[str, Any]:
        return {
            "aws_access_key_id": self._access_key,
            "aws_secret_access_key": self._secret_key,
            "aws_session_token": self._session_token,
            "region_name": self.region or os.environ.get("AWS_REGION") or None,  # boto3 reads
            "profile_name": self.profile,  # only AWS_DEFAULT_REGION, other SDKs AWS_REGION too
        }

    def _boto_client(self) -> Any:
        import boto3
        from botocore.config import Config

        session = boto3.session.Session(**self._session_options())
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},  # one RetryPolicy applies
            connect_timeout=min(self.timeout, 60.0),
            read_timeout=self.timeout,
            user_agent_extra="agentsm",
            max_pool_connections=POOL,
        )
        return session.client("bedrock-runtime", endpoint_url=self.endpoint_url, config=config)

    def _make_client(self) -> AsyncBedrock:
        return AsyncBedrock(self._boto_client)

    def _secrets(self) -> tuple[str | None, ...]:
        return (
            self._secret_key,
            self._session_token,
            os.environ.get("AWS_SECRET_ACCESS_KEY"),
            os.environ.get("AWS_SESSION_TOKEN"),
            os.environ.get("AWS_BEARER_TOKEN_BEDROCK"),
        )

    def _classify(self, error: BaseException) -> ProviderError:
        return classify_aws(error, self.where, *self._secrets())

    def _request(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> dict[str, Any]:
        family = model_family(model)
        system, messages = converse_messages(memory, family)
        request: dict[str, Any] = {"modelId": model, "messages": messages}
        if system:
            request["system"] = [{"text": system}]
        inference = {
            name: value
            for name, value in (
                ("maxTokens", self.max_tokens),
                ("temperature", self.temperature),
                ("topP", self.top_p),
                ("stopSequences", self.stop_sequences),
            )
            if value is not None
        }
        if inference:
            request["inferenceConfig"] = inference
        fields = self._model_fields()
        if fields:
            request["additionalModelRequestFields"] = fields
        if len(tools):
            config: dict[str, Any] = {"tools": converse_tools(tools)}
            choice = _tool_choice(self.tool_choice)
            if choice is not None:
                config["toolChoice"] = choice
            request["toolConfig"] = config
        self._mark_cache(request, family)
        request.update(self.extra_body)
        return request

    def _mark_cache(self, request: dict[str, Any], family: str) -> None:
        """Put the `cachePoint` blocks `cache` asks for on the request."""
        parts = AUTO_CACHE.get(family, ()) if self.cache == "auto" else self.cache
        point: dict[str, Any] = {"type": "default"}
        if self.cache_ttl is not None:
            point["ttl"] = self.cache_ttl
        if "system" in parts and request.get("system"):
            request["system"].append({"cachePoint": dict(point)})
        if "tools" in parts and request.get("toolConfig"):
            request["toolConfig"]["tools"].append({"cachePoint": dict(point)})
        if "conversation" in parts and request["messages"]:
            request["messages"][-1]["content"].append({"cachePoint": dict(point)})

    async def _plain(self, client: AsyncBedrock, request: dict[str, Any]) -> LlmResponse:
        return read_message(await client.converse(**request))

    async def _streamed(self, client: AsyncBedrock, request: dict[str, Any]) -> LlmResponse:
        assembly = Assembly()
        async with aclosing(client.converse_stream(**request)) as events:
            async for event in events:
                assembly.feed(event)
        if assembly.stop is None:
            raise NetworkError(
                f"{self.where} ended the stream before its messageStop event; the answer is "
                "incomplete."
            )
        return assembly.response()

    def __repr__(self) -> str:
        given = "given" if self._access_key else "from the AWS environment"
        chosen = "".join(f", {k}={v!r}" for k, v in self.settings.items() if k != "provider")
        where = "".join(
            f", {name}={value!r}"
            for name, value in (
                ("region", self.region),
                ("profile", self.profile),
                ("endpoint_url", self.endpoint_url),
            )
            if value is not None
        )
        return (
            f"BedrockCaller(default_model={self.default_model!r}{where}, stream={self.stream}"
            f"{chosen}, credentials={given!r})"
        )


def _tool_choice(choice: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The caller's tool choice in Converse's shape."""
    if choice is None:
        return None
    if isinstance(choice, Mapping):
        return dict(choice)
    if choice == "auto":
        return {"auto": {}}
    if choice in ("required", "any"):
        return {"any": {}}
    return {"tool": {"name": choice}}


def _cache(cache: str | Iterable[str] | None) -> str | tuple[str, ...]:
    """`cache` as the caller keeps it: "auto", or the parts to mark in request order (none:
    off)."""
    if cache is None or cache == "off":
        return ()
    if cache == "auto":
        return "auto"
    names = (cache,) if isinstance(cache, str) else tuple(cache)
    if not all(isinstance(n, str) and n in CACHE_PARTS for n in names):
        raise BuildError(
            f"cache={cache!r} is not 'auto', 'off' or some of {', '.join(CACHE_PARTS)}: "
            "mark the system prompt, the tools or the conversation, e.g. "
            "cache=('system', 'tools')."
        )
    return tuple(n for n in CACHE_PARTS if n in names)

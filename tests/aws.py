"""Helpers for BedrockCaller tests: a caller pointed at the loopback server with fake static
credentials, an AWS environment that reads no real configuration, and AWS event-stream frames."""

from __future__ import annotations

import binascii
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsm.llm import RetryPolicy
from agentsm.llm.bedrock import BedrockCaller

from .loopback import LoopbackProvider

ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
EVENT_STREAM = {"content-type": "application/vnd.amazon.eventstream"}

_AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_BEARER_TOKEN_BEDROCK",
    "BEDROCK_MODEL",
)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No AWS variable of the machine, no ~/.aws files, no instance metadata: a test's
    credentials are the ones it gives. Yields the folder for config files a test writes."""
    for name in _AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield tmp_path


def caller(server: LoopbackProvider, **kwargs: Any) -> BedrockCaller:
    """A BedrockCaller on the loopback server, with fake static credentials."""
    options: dict[str, Any] = {
        "endpoint_url": server.url,
        "region": "us-east-1",
        "aws_access_key_id": ACCESS_KEY,
        "aws_secret_access_key": SECRET_KEY,
        "retry": RetryPolicy(max_retries=0),
        **kwargs,
    }
    return BedrockCaller(**options)


def frame(event_type: str, payload: dict[str, Any], message_type: str = "event") -> bytes:
    """One AWS event-stream message: prelude, string headers, JSON payload, both CRC32s (the
    recorded streams re-encode to their exact bytes)."""
    headers = {
        ":event-type" if message_type == "event" else ":exception-type": event_type,
        ":content-type": "application/json",
        ":message-type": message_type,
    }
    head = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
        for k, v in headers.items()
    )
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    prelude = struct.pack(">II", 16 + len(head) + len(body), len(head))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + head + body
    return message + struct.pack(">I", binascii.crc32(message))


def event_stream(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(frame(kind, payload) for kind, payload in events)


def recorded_frames(interaction: dict[str, Any]) -> bytes:
    """A recorded stream's decoded events encoded again."""
    return b"".join(
        frame(e["headers"][":event-type"], e["payload"])
        for e in interaction["response"]["eventstream_decoded"]
    )


def sent(server: LoopbackProvider, index: int) -> dict[str, Any]:
    """The JSON body boto3 sent in request `index`."""
    return server.requests[index]["json"]  # type: ignore[no-any-return]


def meaningful(request: dict[str, Any]) -> dict[str, Any]:
    """A recorded request without the empty fields some clients send (`"system": []`)."""
    return {k: v for k, v in request.items() if v not in ({}, [])}

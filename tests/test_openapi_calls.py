"""OpenAPI tools calling APIs on 127.0.0.1: what each tool sent (method, path, query, headers
with the credentials, body), the outcome recorded (status and body, cut at the limit; a
non-2xx a failure the LLM reads), secrets that never reach the log, and a petstore run
replayed offline with the server gone."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller, ToolCall
from agentsm.openapi import ApiKey, Basic, OpenApi, OpenApiTool
from agentsm.tools import ToolRegistry
from replay import replay_run
from tests.openapi_fakes import Loopback, Petstore, Request, Response

FIXTURES = Path(__file__).parent / "fixtures" / "openapi"
PETSTORE = FIXTURES / "petstore.yaml"
KEY = "pk-7f3a9c2e-SECRET"


def registry(tools: list[OpenApiTool]) -> ToolRegistry:
    made = ToolRegistry()
    for item in tools:
        made.add(item)
    return made


def run(tools: ToolRegistry, name: str, args: dict[str, Any]) -> Any:
    return asyncio.run(tools.aexecute(name, args))


@pytest.fixture
def petstore() -> Any:
    app = Petstore(api_key=KEY)
    with Loopback(app) as server:
        yield server


def test_petstore_calls_send_what_the_document_says(petstore: Loopback) -> None:
    api = OpenApi.load(PETSTORE)
    tools = registry(api.tools(base_url=petstore.url + "/api/v3", auth={"api_key": KEY}))

    found = run(tools, "findPetsByStatus", {"status": "sold"})
    sent = petstore.requests[-1]
    assert (sent.method, sent.path, sent.query) == (
        "GET",
        "/api/v3/pet/findByStatus",
        [("status", "sold")],
    )
    assert sent.headers["accept"] == "application/json"  # else the petstore answers XML
    assert "api_key" not in sent.headers  # the operation asks for OAuth only
    assert found.success and found.observation.startswith("SUCCESS: HTTP 200 OK\n[")
    assert [p["id"] for p in json.loads(found.observation.split("\n", 1)[1])] == [2, 5, 8]

    pet = run(tools, "getPetById", {"petId": 5})
    assert petstore.requests[-1].path == "/api/v3/pet/5"
    assert petstore.requests[-1].headers["api_key"] == KEY  # api_key OR petstore_auth
    assert json.loads(pet.observation.split("\n", 1)[1])["name"] == "Cat 2"

    run(tools, "findPetsByTags", {"tags": ["tag1", "no such tag"]})
    assert petstore.requests[-1].query == [("tags", "tag1"), ("tags", "no such tag")]

    added = run(
        tools,
        "addPet",
        {
            "name": "Rex",
            "photoUrls": ["https://pets/rex.jpg"],
            "category": {"id": 2, "name": "Dogs"},
        },
    )
    sent = petstore.requests[-1]
    assert (sent.method, sent.path, sent.headers["content-type"]) == (
        "POST",
        "/api/v3/pet",
        "application/json",
    )
    assert sent.json == {
        "name": "Rex",
        "photoUrls": ["https://pets/rex.jpg"],
        "category": {"id": 2, "name": "Dogs"},
    }
    assert json.loads(added.observation.split("\n", 1)[1])["id"] == 11

    run(tools, "updatePetWithForm", {"petId": 11, "name": "Rex II", "status": "pending"})
    assert petstore.requests[-1].query == [("name", "Rex II"), ("status", "pending")]
    run(tools, "deletePet", {"petId": 11, "api_key": "header value"})
    sent = petstore.requests[-1]
    assert (sent.method, sent.path, sent.headers["api_key"]) == (
        "DELETE",
        "/api/v3/pet/11",
        "header value",
    )
    uploaded = run(tools, "uploadFile", {"petId": 1, "additionalMetadata": "m:", "body": "abc"})
    assert petstore.requests[-1].headers["content-type"] == "application/octet-stream"
    assert '"message": "m:3 bytes"' in uploaded.observation
    inventory = run(tools, "getInventory", {})
    assert petstore.requests[-1].headers["api_key"] == KEY
    assert json.loads(inventory.observation.split("\n", 1)[1]) == {
        "available": 3,
        "pending": 4,
        "sold": 3,
    }
    login = run(tools, "loginUser", {"username": "theUser", "password": "12345"})
    assert login.observation == 'SUCCESS: HTTP 200 OK\n"Logged in user session: theUser"'


def test_a_status_that_is_not_2xx_is_a_failure_the_llm_reads(petstore: Loopback) -> None:
    api = OpenApi.load(PETSTORE)
    tools = registry(api.tools(base_url=petstore.url + "/api/v3"))  # no credentials
    missing = run(tools, "getPetById", {"petId": 404})
    assert not missing.success and missing.known
    assert missing.observation == "ERROR: HTTPError: HTTP 404 Not Found\nPet not found"
    bad = run(tools, "findPetsByStatus", {"status": "lost"})
    assert bad.error_type == "InvalidArguments"  # the enum is checked before any request
    denied = run(tools, "getInventory", {})
    assert denied.observation.startswith("ERROR: HTTPError: HTTP 401 Unauthorized\n")
    assert "a valid api_key header is required" in denied.observation
    refused = run(tools, "addPet", {"name": "Rex"})
    assert (
        refused.error_type == "InvalidArguments" and "photoUrls is required" in refused.observation
    )


def test_bearer_json_bodies_and_basic_forms_on_large_real_apis() -> None:
    def answer(request: Request) -> Response:
        return Response(200, {"object": "list", "data": [], "got": request.path})

    with Loopback(answer) as server:
        openai = OpenApi.load(FIXTURES / "openai.json")
        tools = registry(
            openai.tools(
                base_url=server.url + "/v1",
                auth="sk-test-123",
                operations=["listModels", "createEmbedding"],
                headers={"OpenAI-Organization": "org-1"},
            )
        )
        assert run(tools, "listModels", {}).success
        sent = server.requests[-1]
        assert (sent.method, sent.path) == ("GET", "/v1/models")
        assert sent.headers["authorization"] == "Bearer sk-test-123"
        assert sent.headers["openai-organization"] == "org-1"
        run(
            tools,
            "createEmbedding",
            {"model": "text-embedding-3-small", "input": ["a", "b"], "dimensions": 8},
        )
        sent = server.requests[-1]
        assert (sent.method, sent.path) == ("POST", "/v1/embeddings")
        assert sent.json == {
            "input": ["a", "b"],
            "model": "text-embedding-3-small",
            "dimensions": 8,
        }

        twilio = OpenApi.load(FIXTURES / "twilio_api_v2010.json")
        sid = "AC" + "0" * 32
        tools = registry(
            twilio.tools(
                base_url=server.url,
                auth={"accountSid_authToken": (sid, "auth-token-xyz")},
                operations=["CreateMessage", "ListMessage"],
            )
        )
        args = {"AccountSid": sid, "To": "+15551234567", "From": "+15557654321", "Body": "Hi & bye"}
        assert run(
            tools, "CreateMessage", {**args, "MediaUrl": ["https://a/1.png", "https://a/2.png"]}
        ).success
        sent = server.requests[-1]
        assert (sent.method, sent.path) == ("POST", f"/2010-04-01/Accounts/{sid}/Messages.json")
        assert sent.headers["content-type"] == "application/x-www-form-urlencoded"
        assert sent.headers["authorization"] == Basic(sid, "auth-token-xyz").secrets[1].join(
            ["Basic ", ""]
        )
        assert sent.form == [
            ("To", "+15551234567"),
            ("From", "+15557654321"),
            ("Body", "Hi & bye"),
            ("MediaUrl", "https://a/1.png"),
            ("MediaUrl", "https://a/2.png"),
        ]
        run(tools, "ListMessage", {"AccountSid": sid, "To": "+1555", "PageSize": 20})
        assert server.requests[-1].query == [("To", "+1555"), ("PageSize", "20")]


def test_api_key_in_the_query_and_a_document_read_from_a_url() -> None:
    document = {
        "openapi": "3.1.0",
        "info": {"title": "Weather", "version": "1"},
        "servers": [{"url": "/api"}],  # relative: to where the document came from
        "paths": {
            "/now/{city}": {
                "get": {
                    "operationId": "now",
                    "parameters": [
                        {
                            "name": "city",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {"name": "units", "in": "query", "schema": {"type": "string"}},
                    ],
                }
            }
        },
    }

    def answer(request: Request) -> Response:
        if request.path == "/spec/openapi.json":
            return Response(200, document)
        return Response(200, "sunny", {"content-type": "text/plain"})

    with Loopback(answer) as server:
        api = OpenApi.load(server.url + "/spec/openapi.json")
        (tool,) = api.tools(auth=ApiKey("q-key", query="appid"))
        outcome = run(registry([tool]), "now", {"city": "São Paulo", "units": "metric"})
        assert outcome.observation == "SUCCESS: HTTP 200 OK\nsunny"
        sent = server.requests[-1]
        assert sent.path == "/api/now/S%C3%A3o%20Paulo"  # percent-encoded, as sent
        assert sent.query == [("units", "metric"), ("appid", "q-key")]


def test_the_response_limit_binary_bodies_and_timeouts() -> None:
    big = "x" * 50_000

    def answer(request: Request) -> Response:
        if request.path == "/big":
            return Response(200, big, {"content-type": "text/plain"})
        if request.path == "/png":
            return Response(200, b"\x89PNG\r\n\x1a\n\x00\xff\xfe", {"content-type": "image/png"})
        return Response(hang=True)

    doc = {
        "openapi": "3.0.3",
        "info": {"title": "Limits", "version": "1"},
        "paths": {
            "/big": {"get": {"operationId": "big"}},
            "/png": {"get": {"operationId": "png"}},
            "/slow": {"get": {"operationId": "slowRead"}, "post": {"operationId": "slowWrite"}},
        },
    }
    with Loopback(answer) as server:
        tools = registry(
            OpenApi.load(doc).tools(base_url=server.url, timeout=0.5, max_response_bytes=1000)
        )
        cut = run(tools, "big", {})
        assert cut.observation == (
            "SUCCESS: HTTP 200 OK\n" + "x" * 1000 + "\n[... cut after 1000 bytes of 50000: "
            "the response size limit]"
        )
        assert (
            run(tools, "png", {}).observation
            == "SUCCESS: HTTP 200 OK\n[11 bytes of image/png, not shown]"
        )
        read = run(tools, "slowRead", {})  # a GET may be made again: a plain failure
        assert (
            read.known
            and read.observation == "ERROR: TimeoutError: GET /slow had no answer within 0.5s"
        )
        write = run(tools, "slowWrite", {})  # a POST may have taken effect: a human decides
        assert not write.known and "it may have taken effect" in write.observation


def pet_agent(url: str, key: str = KEY) -> AgentBuilder:
    script = [
        LlmResponse.tool_call("findPetsByStatus", {"status": "pending"}),
        LlmResponse.tool_calls(
            [
                ToolCall(id="a", name="getPetById", args={"petId": 2}),
                ToolCall(id="b", name="getInventory", args={}),
            ]
        ),
        LlmResponse.tool_call("getPetById", {"petId": 99}),
        LlmResponse.tool_call("addPet", {"name": "Rex", "photoUrls": [], "status": "available"}),
        LlmResponse.final_answer("Cat 1 is pending; Rex is now for sale."),
    ]
    return (
        AgentBuilder("Which pets are pending? Then list Rex for sale.")
        .llm(MockLlmCaller(script))
        .config(AgentConfig(reflect_every_n_steps=0))
        .openapi(PETSTORE, base_url=url + "/api/v3", auth={"api_key": key}, tags=["pet", "store"])
    )


def test_a_petstore_run_records_no_secret_and_replays_with_the_server_gone(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    app = Petstore(api_key=KEY)
    with Loopback(app) as server:
        url = server.url
        engine = pet_agent(url).store(str(db)).build()
        assert engine.run() == "Cat 1 is pending; Rex is now for sale."
        calls = len(server.requests)
    history = engine.memory.history
    assert [h.tool.name for h in history] == [
        "findPetsByStatus",
        "getPetById",
        "getInventory",
        "getPetById",
        "addPet",
    ]
    assert [h.success for h in history] == [True, True, True, False, True]
    assert history[3].observation == "ERROR: HTTPError: HTTP 404 Not Found\nPet not found"
    assert app.pets[11]["name"] == "Rex" and calls == 5
    assert engine.definition.redactions == ("openapi Swagger Petstore - OpenAPI 3.0: credentials",)
    for path in tmp_path.iterdir():  # the log, its WAL and all: no trace of the key
        assert KEY.encode() not in path.read_bytes(), path

    # the server is gone: replay serves every recorded response
    report = replay_run(str(db), engine.run_id, lambda task: pet_agent(url))
    assert report.identical, str(report)
    report = replay_run(str(db), engine.run_id, lambda task: pet_agent(url, key="another-key"))
    assert report.identical, str(report)  # the key is no part of what the run recorded


def test_a_server_that_echoes_the_key_cannot_bring_it_into_the_log(tmp_path: Path) -> None:
    def echo(request: Request) -> Response:
        return Response(403, {"error": f"key {request.headers.get('x-api-key')} is revoked"})

    doc = {
        "openapi": "3.0.3",
        "info": {"title": "Echo", "version": "1"},
        "paths": {"/me": {"get": {"operationId": "me"}}},
    }
    with Loopback(echo) as server:
        engine = (
            AgentBuilder("who am I?")
            .llm(
                MockLlmCaller(
                    [
                        LlmResponse.tool_call("me"),
                        LlmResponse.final_answer("The key was refused by the service."),
                    ]
                )
            )
            .config(AgentConfig(reflect_every_n_steps=0))
            .openapi(doc, base_url=server.url, auth=ApiKey(KEY))
            .store(str(tmp_path / "runs.db"))
            .build()
        )
        engine.run()
        assert server.requests[-1].headers["x-api-key"] == KEY
    (entry,) = engine.memory.history
    assert (
        entry.observation
        == 'ERROR: HTTPError: HTTP 403 Forbidden\n{"error": "key [REDACTED] is revoked"}'
    )
    for path in tmp_path.iterdir():
        assert KEY.encode() not in path.read_bytes(), path

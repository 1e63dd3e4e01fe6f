"""OpenAPI documents as tools: reading real documents (the Swagger Petstore, OpenAPI 3.0 in
YAML; OpenAI's API and Twilio's, large 3.1 and 3.0 JSON documents), their schemas valid JSON
Schema with names every provider accepts, `$ref`s and cycles, filters and the errors at build."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

import agentsm.openapi
from agentsm import AgentBuilder, BuildError, MockLlmCaller
from agentsm.openapi import ApiKey, Basic, Bearer, OpenApi

FIXTURES = Path(__file__).parent / "fixtures" / "openapi"
PETSTORE = FIXTURES / "petstore.yaml"
TOOL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
ARG_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")

PETSTORE_IDS = [
    "updatePet",
    "addPet",
    "findPetsByStatus",
    "findPetsByTags",
    "getPetById",
    "updatePetWithForm",
    "deletePet",
    "uploadFile",
    "getInventory",
    "placeOrder",
    "getOrderById",
    "deleteOrder",
    "createUser",
    "createUsersWithListInput",
    "loginUser",
    "logoutUser",
    "getUserByName",
    "updateUser",
    "deleteUser",
]


def petstore_dict() -> dict[str, Any]:
    return yaml.safe_load(PETSTORE.read_text())  # type: ignore[no-any-return]


def schemas(api: OpenApi, **kw: Any) -> dict[str, Any]:
    return {t.name: (t.description, t.schema) for t in api.tools(base_url="http://x", **kw)}


def test_the_petstore_reads_alike_from_yaml_json_a_path_and_a_dict() -> None:
    from_file = OpenApi.load(str(PETSTORE))
    assert [o.operation_id for o in from_file.operations] == PETSTORE_IDS
    assert from_file.skipped == []
    as_json = json.dumps(petstore_dict())  # what petstore3.swagger.io serves as openapi.json
    for other in (
        OpenApi.load(PETSTORE),
        OpenApi.load(PETSTORE.read_text()),
        OpenApi.load(as_json),
        OpenApi.load(petstore_dict()),
    ):
        assert schemas(other) == schemas(from_file)


def test_petstore_operations_become_one_schema_each() -> None:
    tools = {t.name: t for t in OpenApi.load(PETSTORE).tools()}
    assert list(tools) == PETSTORE_IDS
    assert tools["getPetById"].description == "Find pet by ID.\n\nReturns a single pet."
    assert tools["getPetById"].schema == {
        "type": "object",
        "properties": {
            "petId": {"type": "integer", "format": "int64", "description": "ID of pet to return"}
        },
        "required": ["petId"],
        "additionalProperties": False,
    }
    add = tools["addPet"].schema  # the JSON body's properties, $refs inlined
    assert list(add["properties"]) == ["id", "name", "category", "photoUrls", "tags", "status"]
    assert add["required"] == ["name", "photoUrls"]
    assert add["properties"]["tags"]["items"]["properties"]["name"] == {"type": "string"}
    assert add["properties"]["status"]["enum"] == ["available", "pending", "sold"]
    listed = tools["createUsersWithListInput"].schema  # an array body is one argument
    assert listed["properties"]["body"]["type"] == "array"
    delete = tools["deletePet"].schema["properties"]  # path and header parameters side by side
    assert set(delete) == {"petId", "api_key"}
    upload = tools["uploadFile"].schema["properties"]["body"]  # application/octet-stream
    assert upload == {
        "type": "string",
        "description": "The request body (application/octet-stream).",
    }
    assert tools["getPetById"].idempotent and not tools["addPet"].idempotent
    assert tools["updatePet"].operation.server is None
    assert tools["getPetById"].request({"petId": 7})[0] == (
        "https://petstore3.swagger.io/api/v3/pet/7"  # the document's server
    )


@pytest.mark.parametrize(
    ("name", "operations", "skipped"),
    [("openai.json", 288, 9), ("twilio_api_v2010.json", 197, 0)],
)
def test_every_tool_of_a_large_real_api_has_a_valid_schema_and_a_unique_name(
    name: str, operations: int, skipped: int
) -> None:
    api = OpenApi.load(FIXTURES / name)
    assert len(api.operations) + len(api.skipped) == operations
    assert len(api.skipped) == skipped
    assert all("file uploads are not supported" in s.reason for s in api.skipped)
    tools = api.tools()
    names = [t.name for t in tools]
    assert len(set(names)) == len(names) == operations - skipped
    for item in tools:
        assert TOOL_NAME.match(item.name), item.name
        Draft202012Validator.check_schema(item.schema)
        assert item.schema["type"] == "object" and item.schema["additionalProperties"] is False
        assert all(ARG_NAME.match(key) for key in item.schema["properties"]), item.name
        assert set(item.schema.get("required", ())) <= set(item.schema["properties"])
        assert len(json.dumps(item.schema)) <= 20_000, item.name
        assert 0 < len(item.description) <= 1024
    json.dumps([t.tool_schema.model_dump() for t in tools])  # what the LLM is sent


def test_openai_names_schemas_and_the_depth_bound() -> None:
    api = OpenApi.load(FIXTURES / "openai.json")
    tools = {t.name: t for t in api.tools()}
    embed = tools["createEmbedding"].schema
    assert {"input", "model", "encoding_format", "dimensions", "user"} == set(embed["properties"])
    assert set(embed["required"]) == {"input", "model"}
    assert "oneOf" in embed["properties"]["input"]
    assert tools["retrieveModel"].schema["required"] == ["model"]
    # a request whose schemas nest deeper than fits is cut at a $ref, and says so
    deep = [t for t in tools.values() if "nested too deep to show here" in json.dumps(t.schema)]
    assert "createResponse" in {t.name for t in deep}
    shallow = OpenApi.load(FIXTURES / "openai.json", max_schema_chars=10**9)
    full = next(o for o in shallow.operations if o.operation_id == "createResponse")
    assert len(json.dumps(full.schema)) > 20_000


def test_refs_cycles_nullable_and_names_that_clash() -> None:
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "Tree", "version": "1"},
        "servers": [{"url": "https://tree.example/v1"}],
        "paths": {
            "/nodes/{id}": {
                "parameters": [{"$ref": "#/components/parameters/Id"}],
                "put": {
                    "operationId": "nodes.put/one",
                    "parameters": [
                        {"name": "id", "in": "query", "schema": {"type": "string"}},
                        {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                        {"name": "filter[name]", "in": "query", "schema": {"type": "string"}},
                    ],
                    "requestBody": {"$ref": "#/components/requestBodies/Node"},
                    "responses": {"200": {"description": "ok"}},
                },
            },
            "/plain": {"get": {"responses": {"200": {"description": "no operationId"}}}},
        },
        "components": {
            "parameters": {
                "Id": {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
            },
            "requestBodies": {
                "Node": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}
                    },
                }
            },
            "schemas": {
                "Node": {
                    "type": "object",
                    "required": ["id", "label"],
                    "allOf": [{"$ref": "#/components/schemas/Named"}],
                    "properties": {
                        "id": {"type": "integer", "readOnly": True},
                        "weight": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                        "parent": {"$ref": "#/components/schemas/Node"},
                        "children": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Node"},
                        },
                        "note": {"type": "string", "nullable": True, "x-internal": "yes"},
                        "id_body": {"type": "string"},
                    },
                },
                "Named": {"properties": {"label": {"type": "string", "example": "root"}}},
            },
        },
    }
    api = OpenApi.load(doc)
    assert [(s.label, s.reason) for s in api.skipped] == [("GET /plain", "it has no operationId")]
    (made,) = api.tools()
    assert made.name == "nodes_put_one"
    schema = made.schema
    Draft202012Validator.check_schema(schema)
    props = schema["properties"]
    # path `id`, query `id`, and the body's `id` is read-only (the server sets it): left out
    assert list(props) == [
        "id",
        "query_id",
        "filter_name_",
        "weight",
        "parent",
        "children",
        "note",
        "id_body",
        "label",
    ]
    assert schema["required"] == ["id", "label"]
    assert props["weight"] == {"type": "number", "exclusiveMinimum": 0}
    assert props["note"] == {"type": ["string", "null"]}
    assert props["label"] == {"type": "string"}  # the example and extensions are left out
    # the body is a Node: a Node inside it is cut there, not expanded forever
    cut = {"type": "object", "description": "A Node (its schema contains itself; any such value)."}
    assert props["parent"] == cut and props["children"] == {"type": "array", "items": cut}
    url, headers, query = made.request(
        {"id": 3, "query_id": "q", "filter_name_": "x", "label": "a", "parent": {"label": "p"}}
    )
    assert url == "https://tree.example/v1/nodes/3"
    assert query == [("id", "q"), ("filter[name]", "x")]
    assert headers["Content-Type"] == "application/json"
    body = made._caller.request(made.operation, {"id": 3, "id_body": "b", "label": "a"})[2]
    assert json.loads(body or b"") == {"id_body": "b", "label": "a"}


def test_openapi_31_types_and_refs_beside_keywords() -> None:
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "T", "version": "1"},
        "paths": {
            "/t": {
                "post": {
                    "operationId": "make",
                    "requestBody": {
                        "content": {
                            "application/merge-patch+json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "kind": {
                                            "$ref": "#/components/schemas/Kind",
                                            "description": "Which kind.",
                                        },
                                        "size": {"type": ["integer", "null"], "const": 3},
                                    },
                                }
                            }
                        }
                    },
                }
            }
        },
        "components": {"schemas": {"Kind": {"enum": ["a", "b"], "description": "A kind."}}},
    }
    (made,) = OpenApi.load(doc).tools(base_url="http://x")
    assert made.schema["properties"] == {
        "kind": {"enum": ["a", "b"], "description": "Which kind."},
        "size": {"type": ["integer", "null"], "const": 3},
    }
    assert made.request({"kind": "a"})[1]["Content-Type"] == "application/merge-patch+json"


def test_filters_by_operation_tag_and_path() -> None:
    api = OpenApi.load(PETSTORE)

    def names(**kw: Any) -> list[str]:
        return [t.name for t in api.tools(**kw)]

    assert names(operations=["getPetById", "addPet"]) == ["addPet", "getPetById"]
    assert names(tags=["store"]) == ["getInventory", "placeOrder", "getOrderById", "deleteOrder"]
    assert names(paths=["/user/"]) == [  # /user and below: a prefix of whole segments
        "createUser",
        "createUsersWithListInput",
        "loginUser",
        "logoutUser",
        "getUserByName",
        "updateUser",
        "deleteUser",
    ]
    with pytest.raises(BuildError, match="starts with '/pet/findBy'"):
        api.tools(paths=["/pet/findBy"])  # not a whole segment
    assert names(tags=["pet"], paths=["/pet/{petId}"]) == [
        "getPetById",
        "updatePetWithForm",
        "deletePet",
        "uploadFile",
    ]
    assert names(operations="getInventory", prefix="shop_") == ["shop_getInventory"]
    with pytest.raises(BuildError, match=r"no operation 'getPet'\. Did you mean 'getPetById'"):
        api.tools(operations=["getPet"])
    with pytest.raises(BuildError, match=r"tag 'pets' \(its tags: pet, store, user\)"):
        api.tools(tags=["pets"])
    with pytest.raises(BuildError, match="No path of Swagger Petstore .* starts with '/pets'"):
        api.tools(paths=["/pets"])
    with pytest.raises(BuildError, match="passes all the filters"):
        api.tools(tags=["store"], paths=["/user"])
    openai = OpenApi.load(FIXTURES / "openai.json")
    with pytest.raises(
        BuildError, match=r"'createTranscription' .* cannot be offered: .*multipart"
    ):
        openai.tools(operations=["createTranscription"])


def test_the_builder_offers_the_tools_and_refuses_what_cannot_work(tmp_path: Path) -> None:
    engine = (
        AgentBuilder("pets")
        .llm(MockLlmCaller([]))
        .openapi(PETSTORE, base_url="http://127.0.0.1:9/api/v3", tags=["store"])
        .build()
    )
    assert [t.name for t in engine.definition.tools] == [
        "getInventory",
        "placeOrder",
        "getOrderById",
        "deleteOrder",
    ]
    assert engine.definition.idempotent_tools == ("getInventory", "getOrderById")
    assert engine.definition.redactions == ()  # no credentials, nothing to hide
    with pytest.raises(BuildError, match="tool named 'getInventory' already; give openapi"):
        AgentBuilder("x").openapi(PETSTORE, tags=["store"]).openapi(PETSTORE, tags=["store"])
    swagger = tmp_path / "old.json"
    swagger.write_text('{"swagger": "2.0", "paths": {}}')
    with pytest.raises(BuildError, match=r"not OpenAPI 3.x \(its version is Swagger 2.0\)"):
        AgentBuilder("x").openapi(swagger)
    with pytest.raises(BuildError, match="could not be read"):
        AgentBuilder("x").openapi(tmp_path / "missing.yaml")
    with pytest.raises(BuildError, match="neither JSON nor YAML"):
        AgentBuilder("x").openapi("openapi: [3\n")
    relative = {**petstore_dict(), "servers": [{"url": "/api/v3"}]}
    with pytest.raises(BuildError, match="no absolute server URL; give base_url"):
        AgentBuilder("x").openapi(relative)
    webhooks_only = {"openapi": "3.1.0", "info": {"title": "Hooks"}, "webhooks": {}}
    with pytest.raises(BuildError, match="offers no operation with an operationId"):
        AgentBuilder("x").openapi(webhooks_only)
    with pytest.raises(BuildError, match="bearer token is empty"):
        AgentBuilder("x").openapi(PETSTORE, auth="")
    with pytest.raises(
        BuildError, match=r"scheme 'apikey'.* \(its schemes: petstore_auth, api_key\)"
    ):
        AgentBuilder("x").openapi(PETSTORE, auth={"apikey": "k"})
    with pytest.raises(BuildError, match="one place for the key"):
        ApiKey("k", header="a", query="b")
    with pytest.raises(BuildError, match="max_response_bytes must be positive"):
        AgentBuilder("x").openapi(PETSTORE, max_response_bytes=0)


def test_credentials_never_show_in_reprs() -> None:
    assert "s3cret" not in repr(Bearer("s3cret")) + repr(ApiKey("s3cret")) + repr(
        Basic("u", "s3cret")
    )
    assert ApiKey("k").header == "X-API-Key"
    api = OpenApi.load(PETSTORE)
    assert repr(api) == "<OpenApi 'Swagger Petstore - OpenAPI 3.0': 19 operations>"
    assert (
        repr(api.tools(operations=["getPetById"])[0])
        == "<OpenApiTool 'getPetById' GET /pet/{petId}>"
    )


def test_exported_names() -> None:
    exported = agentsm.openapi.__all__
    assert exported == sorted(exported)
    assert {"ApiKey", "Basic", "Bearer", "OpenApi", "OpenApiTool"} <= set(exported)
    assert all(hasattr(agentsm.openapi, name) for name in exported)


def test_tool_names_follow_every_providers_rules() -> None:
    from agentsm.openapi._operations import tool_names

    long = "x" * 80
    made = tool_names(["repos/get", "repos.get", "9lives", long, long + "y", "a b"], "")
    assert made[:3] == ["repos_get", "repos_get_2", "op_9lives"]
    assert all(TOOL_NAME.match(n) for n in made) and len(set(made)) == len(made)
    assert made[3] != made[4] and len(made[3]) == 64

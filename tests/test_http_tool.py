"""The shipped `http_request` tool: a real request to a server on 127.0.0.1, its response
recorded as the observation and served on replay without the server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller
from agentsm.http_tool import http_request
from replay import replay_run

ANSWER = "The server says hello, as the tool reported."


class Hello(BaseHTTPRequestHandler):
    hits = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        Hello.hits += 1
        status = 404 if self.path == "/missing" else 200
        body = b"hello from the server" if status == 200 else b"no such page"
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def agent(url: str) -> AgentBuilder:
    return (
        AgentBuilder("fetch it")
        .llm(
            MockLlmCaller(
                [
                    LlmResponse.tool_call("http_request", {"method": "get", "url": url + "/"}),
                    LlmResponse.tool_call(
                        "http_request", {"method": "GET", "url": url + "/missing"}
                    ),
                    LlmResponse.final_answer(ANSWER),
                ]
            )
        )
        .config(AgentConfig(reflect_every_n_steps=0))
        .tool(http_request)
    )


def test_http_request_is_recorded_and_served_on_replay(server: str, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    engine = agent(server).store(db).build()
    assert engine.run() == ANSWER
    first, missing = engine.memory.history
    assert first.success and first.observation.endswith("HTTP 200 OK\nhello from the server")
    assert missing.success and "HTTP 404 Not Found\nno such page" in missing.observation
    hits = Hello.hits
    report = replay_run(db, engine.run_id, lambda task: agent(server))
    assert report.identical, str(report)
    assert Hello.hits == hits  # served from the log: the server was not asked again

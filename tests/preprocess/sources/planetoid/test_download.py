"""Planetoid by name: fetched once into the data root from a local mirror (file:// or a local HTTP
server, never the network), atomically, with errors naming the URL."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.errors import InputError
from gtool.preprocess.sources.planetoid import download
from gtool.preprocess.sources.planetoid.download import URL_VARIABLE, fetch_planetoid, planetoid_name
from gtool.store.reader import open_store


class ShortHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files but announces twice their length, like a connection dropped mid-download."""

    def send_header(self, keyword: str, value: str) -> None:
        super().send_header(keyword, str(2 * int(value)) if keyword == "Content-Length" else value)

    def log_message(self, *args: object) -> None:
        pass


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def serve(request: pytest.FixtureRequest) -> Iterator:
    """Start an HTTP server on 127.0.0.1 for a folder; returns its base URL."""
    servers = []

    def start(folder: Path, handler: type = QuietHandler) -> str:
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=folder)
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_names() -> None:
    assert [planetoid_name(s) for s in ("Cora", "citeseer", "PubMed", "arxiv")] == [
        "cora",
        "citeseer",
        "pubmed",
        None,
    ]


def test_fetch_over_http_once(tmp_path: Path, cora_dir: Path, serve, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_VARIABLE, serve(cora_dir) + "/")
    folder = fetch_planetoid("cora", str(tmp_path), progress=True)
    assert folder == tmp_path / "planetoid" / "cora"
    for file in cora_dir.iterdir():
        assert (folder / file.name).read_bytes() == file.read_bytes()
    monkeypatch.setenv(URL_VARIABLE, "http://127.0.0.1:9/nothing-here")
    assert fetch_planetoid("cora", str(tmp_path)) == folder


def test_only_missing_files_are_fetched(
    tmp_path: Path, cora_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_VARIABLE, cora_dir.as_uri())
    folder = fetch_planetoid("cora", str(tmp_path), progress=False)
    (folder / "ind.cora.tx").unlink()
    fetched = []
    real = download.copy_url
    monkeypatch.setattr(download, "copy_url", lambda url, *a, **k: fetched.append(url) or real(url, *a, **k))
    fetch_planetoid("cora", str(tmp_path), progress=False)
    assert fetched == [f"{cora_dir.as_uri()}/ind.cora.tx"]


def test_failed_download_names_the_url_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(URL_VARIABLE, (tmp_path / "empty").as_uri())
    with pytest.raises(InputError, match=f"downloading {(tmp_path / 'empty').as_uri()}/ind.pubmed.x failed"):
        fetch_planetoid("pubmed", str(tmp_path / "root"), progress=False)
    assert not list((tmp_path / "root").rglob("ind.*"))


def test_cut_short_download_is_an_error(tmp_path: Path, serve, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "ind.cora.x").write_bytes(b"x" * 1000)
    monkeypatch.setenv(URL_VARIABLE, serve(tmp_path / "mirror", ShortHandler))
    with pytest.raises(InputError, match="ended after 1,000 of 2,000 bytes") as info:
        fetch_planetoid("cora", str(tmp_path / "root"), progress=False)
    assert info.value.where.endswith("/ind.cora.x")
    assert not list((tmp_path / "root").rglob("ind.*"))


@pytest.mark.integration
def test_shard_cora_by_name(tmp_path: Path, cora_dir: Path) -> None:
    env = {URL_VARIABLE: cora_dir.as_uri(), "GTOOL_DATA": str(tmp_path / "data")}
    out = tmp_path / "cora.zarr"
    result = CliRunner().invoke(app, ["shard", "cora", "--tiles", "2x2", "-o", str(out), "-q"], env=env)
    assert result.exit_code == 0, result.output
    store = open_store(str(out))
    assert (store.num_nodes, store.num_features, store.num_classes) == (2708, 1433, 7)
    assert (tmp_path / "data" / "planetoid" / "cora" / "ind.cora.graph").is_file()

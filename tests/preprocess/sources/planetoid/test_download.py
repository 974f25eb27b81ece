"""Planetoid by name: fetched once into the data root from a local mirror (file:// or a local HTTP
server, never the network), atomically, with errors naming the URL."""

from __future__ import annotations

import functools
import http.server
import re
import shutil
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


class ErrorPageHandler(QuietHandler):
    """Answers every request with status 200 and an HTML page, as some proxies and portals do."""

    def do_GET(self) -> None:
        page = b"<html><body>Sorry, this page is not available</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)


class UntypedErrorPageHandler(ErrorPageHandler):
    """The same page, announced as binary data."""

    def send_header(self, keyword: str, value: str) -> None:
        super().send_header(keyword, "application/octet-stream" if keyword == "Content-Type" else value)


class CutWithoutLengthHandler(QuietHandler):
    """Sends half of each file without a Content-Length and closes: the client cannot tell it is cut."""

    def do_GET(self) -> None:
        data = (Path(self.directory) / self.path.lstrip("/")).read_bytes()
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])


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
    assert not (tmp_path / "root").exists()  # was an empty root/planetoid/pubmed


def test_a_failed_download_prints_its_error_alone(tmp_path: Path, monkeypatch) -> None:
    """Piped, a failed download printed a blank line (its progress display) before its error."""
    monkeypatch.setenv(URL_VARIABLE, (tmp_path / "empty").as_uri())
    result = CliRunner().invoke(app, ["shard", "cora", "--root", str(tmp_path / "root"), "-o", "c.zarr"])
    assert result.exit_code == 2 and result.output.startswith("error: cora: downloading ")
    assert len(result.output.splitlines()) == 1 and not (tmp_path / "root").exists()


def test_cut_short_download_is_an_error(tmp_path: Path, serve, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "ind.cora.x").write_bytes(b"x" * 1000)
    monkeypatch.setenv(URL_VARIABLE, serve(tmp_path / "mirror", ShortHandler))
    with pytest.raises(InputError, match="ended after 1,000 of 2,000 bytes") as info:
        fetch_planetoid("cora", str(tmp_path / "root"), progress=False)
    assert info.value.where.endswith("/ind.cora.x")
    assert not (tmp_path / "root").exists()


@pytest.mark.integration
def test_shard_cora_by_name(tmp_path: Path, cora_dir: Path) -> None:
    env = {URL_VARIABLE: cora_dir.as_uri(), "GTOOL_DATA": str(tmp_path / "data")}
    out = tmp_path / "cora.zarr"
    result = CliRunner().invoke(app, ["shard", "cora", "--tiles", "2x2", "-o", str(out), "-q"], env=env)
    assert result.exit_code == 0, result.output
    store = open_store(str(out))
    assert (store.num_nodes, store.num_features, store.num_classes) == (2708, 1433, 7)
    assert (tmp_path / "data" / "planetoid" / "cora" / "ind.cora.graph").is_file()


@pytest.mark.parametrize("url", ["ftp://mirror.example/planetoid", "data:,hello", "/srv/planetoid"])
def test_only_http_and_file_urls(tmp_path: Path, url: str) -> None:
    env = {URL_VARIABLE: url, "GTOOL_DATA": str(tmp_path / "data")}
    result = CliRunner().invoke(app, ["shard", "cora", "-o", str(tmp_path / "s.zarr"), "-q"], env=env)
    assert result.exit_code == 2, result.output
    assert f"error: {URL_VARIABLE}: expected an http://, https:// or file:// URL" in result.output
    assert not (tmp_path / "data").exists() and not (tmp_path / "s.zarr").exists()


@pytest.mark.parametrize(
    ("handler", "problem"),
    [
        (ErrorPageHandler, "the server sent an HTML page"),
        (UntypedErrorPageHandler, "not the published ind.cora.x (SHA-256"),
        (CutWithoutLengthHandler, "not the published ind.cora.x (SHA-256"),
    ],
)
def test_only_the_published_files_are_kept(
    tmp_path: Path, cora_dir: Path, serve, monkeypatch: pytest.MonkeyPatch, handler: type, problem: str
) -> None:
    monkeypatch.setenv(URL_VARIABLE, serve(cora_dir, handler))
    with pytest.raises(InputError, match=re.escape(problem)) as info:
        fetch_planetoid("cora", str(tmp_path / "root"), progress=False)
    assert info.value.where.endswith("/ind.cora.x")
    assert not (tmp_path / "root").exists()


def test_a_changed_file_already_there_is_refused(tmp_path: Path, cora_dir: Path) -> None:
    folder = tmp_path / "planetoid" / "cora"
    shutil.copytree(cora_dir, folder)
    (folder / "ind.cora.ty").chmod(0o644)
    (folder / "ind.cora.ty").write_bytes(b"<html>error</html>")
    with pytest.raises(InputError, match=r"not the published ind.cora.ty .*; delete it to download it again"):
        fetch_planetoid("cora", str(tmp_path), progress=False)

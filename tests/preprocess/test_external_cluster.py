"""`gtool shard --scheduler` against a cluster started as a user would (`dask scheduler` and two `dask
worker`s, each from a working directory of its own): relative paths and file:// URLs give the store of the
embedded cluster byte for byte; what the workers cannot use or cannot see is refused before any work, in
one line, exit 2, with nothing published."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bench.external_cluster import ExternalCluster, can_hide_folders, environment
from bench.stores_unchanged import differences
from tests.support.load import scaled
from tests.support.stores import make_store

pytestmark = pytest.mark.integration  # runs a scheduler, workers and the command line

SHARD = ["--tiles", "3x3", "--seed", "2", "-q"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two workers started from folders of their own; the second sees an empty folder at HIDDEN (its
    node-local folder) when this machine allows it."""
    root = tmp_path_factory.mktemp("cluster")
    hidden = root / "node-local"
    hidden.mkdir()
    started = ExternalCluster(root)
    try:
        yield started.start(2, {1: hidden} if can_hide_folders() else None), hidden
    finally:
        started.stop()


@pytest.fixture(scope="module")
def edges(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    path = folder / "edges.npy"
    np.save(path, np.random.default_rng(3).integers(0, 900, size=(2, 6000)))
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, edges) -> Path:
    """The embedded cluster's store of `edges`."""
    path = tmp_path_factory.mktemp("reference") / "ref.zarr"
    make_store(str(edges), path, tiles=3, seed=2)
    return path


def shard(cwd: Path, *arguments: str) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "gtool.cli", "shard", *arguments, *SHARD]
    return subprocess.run(
        command, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=300, check=False
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def no_worker_made_files(cluster: ExternalCluster) -> None:
    for folder in cluster.worker_folders:
        assert sorted(p.name for p in folder.iterdir()) == ["dask", "log.txt"], folder


def test_a_relative_output_gives_the_embedded_clusters_store(tmp_path, cluster, edges, reference):
    workers, _ = cluster
    run = tmp_path / "run"
    result = shard(run, str(edges), "-o", "rel.zarr", "--scheduler", workers.address)
    assert result.returncode == 0, result.stderr
    assert differences(reference, run / "rel.zarr") == []
    no_worker_made_files(workers)


def test_a_relative_source_and_spill_folder_work(tmp_path, cluster, edges, reference):
    workers, _ = cluster
    run = tmp_path / "run"
    run.mkdir()
    (run / "edges.npy").write_bytes(edges.read_bytes())
    arguments = ["edges.npy", "-o", str(tmp_path / "out.zarr"), "--spill-dir", "scratch"]
    result = shard(run, *arguments, "--scheduler", workers.address)
    assert result.returncode == 0, result.stderr
    problems = differences(reference, tmp_path / "out.zarr")
    assert problems == ["differs: zarr.json"]  # its source path: another copy of the same file
    no_worker_made_files(workers)


def test_a_file_url_spill_folder_is_that_folder(tmp_path, cluster, edges, reference):
    workers, _ = cluster
    run = tmp_path / "run"
    spill = f"file://{tmp_path / 'spill'}"
    result = shard(run, str(edges), "-o", "out.zarr", "--spill-dir", spill, "--scheduler", workers.address)
    assert result.returncode == 0, result.stderr
    assert differences(reference, run / "out.zarr") == []
    assert sorted(p.name for p in run.iterdir()) == ["out.zarr"]  # no folder named file:
    assert (tmp_path / "spill").is_dir()


@pytest.mark.parametrize("spill", ["memory://spill", "s3://bucket/spill"])
def test_an_object_store_spill_folder_is_refused_before_work(tmp_path, edges, spill):
    result = shard(tmp_path, str(edges), "-o", "out.zarr", "--spill-dir", spill, "-w", "2")
    line = one_error_line(result)
    assert f"--spill-dir {spill}: must be a folder on a file system, not a URL" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_url_output_on_a_cluster_needs_a_spill_folder(tmp_path, cluster, edges):
    workers, _ = cluster
    result = shard(tmp_path, str(edges), "-o", "memory://out.zarr", "--scheduler", workers.address)
    assert "needs --spill-dir" in one_error_line(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.skipif(not can_hide_folders(), reason="no mount namespaces here (unshare -m)")
@pytest.mark.parametrize("hidden", ["-o", "--spill-dir", "SOURCE"])
def test_a_folder_a_worker_does_not_see_is_refused_before_work(tmp_path, cluster, edges, hidden):
    workers, node_local = cluster
    folder = node_local / tmp_path.name / hidden.strip("-")
    folder.mkdir(parents=True)
    output = (folder if hidden == "-o" else tmp_path) / "out.zarr"
    spill = folder if hidden == "--spill-dir" else tmp_path / "spill"
    source = folder / "edges.npy" if hidden == "SOURCE" else edges
    source.write_bytes(edges.read_bytes())
    arguments = [str(source), "-o", str(output), "--spill-dir", str(spill)]
    line = one_error_line(shard(tmp_path, *arguments, "--scheduler", workers.address))
    assert str(folder) in line and "file system every worker sees" in line, line
    for address, (_, started_in) in workers.workers().items():  # named: the worker that does not see it
        assert (address in line) == (started_in == workers.worker_folders[1]), line
    assert not output.exists() and not any(output.parent.glob(".out.zarr*"))
    assert not [p for p in spill.iterdir()] if spill.exists() else True


def test_a_worker_stopped_before_the_work_is_named_and_nothing_is_published(tmp_path, cluster):
    """Only the stopped worker is named: the bound (5 s times the machine's load) leaves the other one time
    to answer however busy the machine is. The worker runs on afterwards (SIGCONT), for the next test."""
    workers, _ = cluster
    timeout = scaled(5)
    (stopped, (pid, _)), *_ = workers.workers().items()
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        arguments = ["rmat:10:4", "-o", "out.zarr", "--scheduler", workers.address]
        line = one_error_line(shard(tmp_path / "run", *arguments, "--worker-timeout", str(timeout)))
        elapsed = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert line.startswith(f"error: Dask worker {stopped} did not answer within {timeout} s"), line
    assert elapsed < scaled(60)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == []


def test_a_stopped_worker_is_named_within_the_bound_and_its_work_done_elsewhere(tmp_path, cluster):
    """SIGSTOP of a worker while it holds a task: with --worker-timeout 5 (times the machine's load) the
    run names it, its nanny restarts it, and the run ends with the undisturbed store well within two
    minutes (times the load). The module's last test: it leaves the cluster with a worker restarted."""
    from distributed import Client

    workers, _ = cluster
    reference = tmp_path / "ref.zarr"
    make_store("rmat:14:8", reference, tiles=3, seed=2)
    timeout = scaled(5)
    started = time.monotonic()
    command = [sys.executable, "-m", "gtool.cli", "shard", "rmat:14:8", "-o", "out.zarr", *SHARD]
    run = subprocess.Popen(
        [*command, "--scheduler", workers.address, "--worker-timeout", str(timeout)],
        cwd=tmp_path,
        env=environment(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    pids = {address: pid for address, (pid, _) in workers.workers().items()}
    with Client(workers.address) as client:
        while not (busy := [a for a, keys in client.processing().items() if keys]):
            assert run.poll() is None, run.stderr.read()
            time.sleep(0.02)
    os.kill(pids[busy[0]], signal.SIGSTOP)
    _, stderr = run.communicate(timeout=scaled(150))
    elapsed = time.monotonic() - started
    assert run.returncode == 0, stderr
    assert f"{busy[0]} sent no heartbeat for {timeout} s" in stderr, stderr
    assert elapsed < scaled(120)
    assert differences(reference, tmp_path / "out.zarr") == []

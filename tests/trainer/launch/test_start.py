"""A launcher of local ranks imports no torch (its supervisor does, once, for the ranks it forks), and an
`Entry` names a rank's function without importing it until it is called or resolved."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from gtool.trainer.launch.entry import Entry, resolved
from tests.support.stores import StoreFactory

LAUNCHER = """
import sys
import gtool.trainer.launch.start as start

def launch_local(world_size, main, *args, label=None, started=None):
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "numba"))
    print(world_size, main, loaded[:3], type(started).__name__)

start.launch_local = launch_local
from gtool.cli.main import program
sys.argv = ["gtool", "train", sys.argv[1], "--grid", "2x1x1", "--epochs", "1"]
program()
"""


@pytest.mark.integration
def test_gtool_train_starts_local_ranks_without_importing_torch(stores: StoreFactory, tmp_path) -> None:
    """The launcher's checks run while its supervisor, spawned first, imports torch (about a second)."""
    store = stores("sbm:200:2", tiles=2)
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, store], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert done.stdout.splitlines()[-1] == (
        "2 Entry(module='gtool.trainer.fit.rank', name='run_rank') [] LocalLaunch"
    )


def test_an_entry_travels_unimported_and_resolves_to_its_function() -> None:
    """A supervisor unpickles an entry without importing its module (collection is held only after), then
    resolves it; a plain function resolves to itself."""
    entry = Entry("os.path", "join")
    assert pickle.loads(pickle.dumps(entry)) == entry
    assert resolved(entry) is __import__("os").path.join
    assert resolved(len) is len
    assert entry("a", "b") == "a/b"


@pytest.mark.integration
@pytest.mark.parametrize("module", ["gtool.trainer.fit.train", "gtool.trainer.predict.job", "gtool.cli.main"])
def test_the_launchers_of_train_and_predict_import_no_torch(module: str) -> None:
    check = f"import sys, {module}; assert 'torch' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", check], check=True)

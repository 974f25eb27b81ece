#!/usr/bin/env bash
# The GPU benchmark in one command, from a copy of the repository on a GPU machine (bench/gpu.py says
# what it runs):  bench/gpu.sh [--dry-run] [--steps check,train,test,calibrate]
#
# First it installs what the machine lacks. gtool goes in editable (pip install -e ., as the README
# does); its missing dependencies come from the wheels in .whl/ when that folder has any (a machine
# without network: carry there, for its Python and platform, every dependency its image lacks, e.g.
# zarr, numcodecs, dask, distributed, ogb and theirs; and torch_geometric for the PyG row), else from
# the package index, with the gpu extra (triton). Where this checkout's gtool already imports, nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
needed="import os, zarr, dask.distributed, ogb, numba, gtool.trainer.fit.train as run
assert os.path.realpath(run.__file__).startswith(os.path.realpath('.')), 'gtool of another checkout'"
if ! "$python" -c "$needed" 2>/dev/null; then
    echo "bench/gpu.sh: installing gtool and what it lacks" >&2
    if compgen -G ".whl/*.whl" >/dev/null; then
        "$python" -m pip install -q --no-index --find-links .whl --no-build-isolation -e .
        if ! "$python" -c "import torch_geometric" 2>/dev/null && compgen -G ".whl/torch_geometric-*.whl" >/dev/null; then
            "$python" -m pip install -q --no-index --find-links .whl torch_geometric
        fi
    else
        "$python" -m pip install -q -e ".[gpu]"
    fi
    "$python" -c "$needed"
fi
exec "$python" -m bench.gpu "$@"

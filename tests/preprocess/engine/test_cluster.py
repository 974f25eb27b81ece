"""StageRunner: every result of a stage comes back, in batches, and the first failure is raised; cancelling
unfinished tasks marks the run as stopping; embedded clusters take free ports."""

from __future__ import annotations

import time

import pytest

from gtool.errors import InputError
from gtool.preprocess.engine.cluster import StageRunner, dask_engine
from tests.support.load import scaled

pytestmark = pytest.mark.integration  # starts processes


def _square(x: int) -> int:
    time.sleep(0.001 * (x % 3))
    return x * x


def _fails_on(x: int, bad: int) -> int:
    if x == bad:
        raise InputError("edges.txt", f"line {x}: bad")
    return x


@pytest.fixture(scope="module")
def stages():
    with dask_engine(None, 2, 1 << 30) as engine, StageRunner(engine.client, None, False) as runner:
        yield runner


def test_collect_returns_every_result_once(stages):
    assert sorted(stages.run("square", _square, list(range(200)))) == [x * x for x in range(200)]
    assert not stages.pending


def test_collect_raises_the_task_error(stages):
    with pytest.raises(InputError, match=r"edges\.txt: line 7: bad"):
        list(stages.run("fail", _fails_on, list(range(20)), 7))
    assert not stages.pending


def test_two_embedded_clusters_at_once_do_not_contend_for_a_port(recwarn: pytest.WarningsRecorder) -> None:
    with dask_engine(None, 1, 1 << 30), dask_engine(None, 1, 1 << 30):
        pass
    assert not [w for w in recwarn if "already in use" in str(w.message)]


def test_a_stage_whose_tasks_are_cancelled_says_it_is_stopping(stages):
    with StageRunner(stages.client, None, False) as runner:
        runner.finish(runner.submit("quick", _square, [1, 2]))
        assert not runner.stopping.is_set()
        futures = runner.submit("slow", time.sleep, [5])
        runner.cancel(futures)
        assert runner.stopping.is_set()


def test_when_finished_lets_go_of_a_result_before_freeing_what_the_task_read(stages):
    with StageRunner(stages.client, None, False) as runner:
        futures = runner.submit("quick", _square, [1, 2, 3])
        freed: list[int] = []
        runner.when_finished(futures, [lambda k=k: freed.append(k) for k in range(3)])
        runner.finish(futures)
        deadline = time.monotonic() + scaled(5)
        while len(freed) < 3 and time.monotonic() < deadline:  # the callbacks run in the client's thread
            time.sleep(0.01)
        assert sorted(freed) == [0, 1, 2]
        assert runner.let_go >= {str(f.key) for f in futures}  # released: Dask never runs them again


def test_when_finished_frees_nothing_once_the_run_is_stopping(stages):
    with StageRunner(stages.client, None, False) as runner:
        futures = runner.submit("slow", time.sleep, [0.5])
        freed: list[int] = []
        runner.when_finished(futures, [lambda: freed.append(1)])
        runner.cancel(futures)
        time.sleep(0.8)
        assert freed == []

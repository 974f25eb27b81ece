"""SerialRunner: a stage's tasks run in this process as they are submitted, results of earlier tasks
passed where an item or an argument holds them, as a StageRunner's futures are."""

from __future__ import annotations

from gtool.preprocess.engine.serial import Done, SerialRunner, resolved


def test_resolved_replaces_done_tasks_in_tuples_and_lists():
    assert resolved((1, (Done("a"), [Done(2), 3]), Done(None))) == (1, ("a", [2, 3]), None)


def test_tasks_run_in_order_with_earlier_results_and_report_their_stage():
    calls = []
    with SerialRunner(None, show=False) as runner:
        firsts = runner.submit("first", lambda item, k: calls.append(item) or item * k, [1, 2, 3], 10)
        assert calls == [1, 2, 3]
        seconds = runner.submit("second", lambda item, earlier: (item, sum(earlier)), [(Done(5),)], firsts)
        assert list(runner.collect(seconds)) == [((5,), 60)]
        assert list(runner.run("third", str, [7, 8])) == ["7", "8"]
        runner.finish(firsts)
        done = []
        runner.when_finished(firsts, [lambda k=k: done.append(k) for k in range(3)])
        assert done == [0, 1, 2]
        runner.on_every_worker(lambda: done.append("here"))
        assert done[-1] == "here"
        io = runner.stage_io()
    assert set(io) == {"first", "second", "third"}
    assert all(stage.task_seconds >= 0 for stage in io.values())

"""Property test of grouping: for any sequence of writes and deletes with runs, turns and pauses,
each point lands in the change set docs/architecture.md#change-sets says — its run's set; else the
set of its turn's newest capture (without a run) if that one is within the gap; else a set of its
own (``cs_<its point id>``)."""

from __future__ import annotations

import itertools
from unittest import mock

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from versions import ids, services
from versions.errors import NotFound
from versions.models import App, RestorePoint

GAP_SECONDS = 60
KEYS = [("pltf_page", "index"), ("pltf_stylesheet", "App"), ("pltf_frontend_module", "main")]
RUNS = ["", "", "run-a", "run-b"]
TURNS = ["", "turn-a", "turn-b"]
# Pauses around the gap, and none at all (several captures in one millisecond).
PAUSES_MS = st.sampled_from(
    [0, 0, 1, 999, GAP_SECONDS * 1000 - 1, GAP_SECONDS * 1000, GAP_SECONDS * 1000 + 1]
) | st.integers(0, 3 * GAP_SECONDS * 1000)
_counter = itertools.count()


class GroupingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.app = App.objects.create(slug=f"group-{next(_counter)}", name="Grouping")
        self.clock = ids.now_ms()
        self.patch = mock.patch.object(ids, "now_ms", lambda: self.clock)
        self.patch.start()
        self.version = itertools.count()
        self.exists = dict.fromkeys(KEYS, False)
        self.run_sets: dict[str, str] = {}
        # Captures of a turn without a run: (capture time in ms, set id), in capture order.
        self.turn_captures: dict[str, list[tuple[int, str]]] = {}

    def teardown(self) -> None:
        self.patch.stop()

    def _expect(self, receipt, run: str, turn: str) -> None:
        point = RestorePoint.objects.get(id=receipt.restore_point_id)
        at = ids.datetime_to_ms(point.created_on)
        own = f"cs_{receipt.restore_point_id}"
        if run:
            expected = self.run_sets.setdefault(run, own)
        elif turn and self.turn_captures.get(turn):
            newest_at, newest_set = self.turn_captures[turn][-1]
            expected = newest_set if newest_at >= at - GAP_SECONDS * 1000 else own
        else:
            expected = own
        assert receipt.change_set_id == expected, (run, turn, at, self.turn_captures)
        if turn and not run:
            self.turn_captures.setdefault(turn, []).append((at, receipt.change_set_id))

    @rule(
        key=st.sampled_from(KEYS),
        run=st.sampled_from(RUNS),
        turn=st.sampled_from(TURNS),
        pause=PAUSES_MS,
    )
    def write(self, key, run, turn, pause):
        self.clock += pause
        receipt = services.write_artifact(
            self.app,
            *key,
            f"version {next(self.version)}\n",
            requested_by="p",
            tool="t",
            run_id=run or None,
            turn_id=turn or None,
        )
        self.exists[key] = True
        self._expect(receipt, run, turn)

    @rule(
        key=st.sampled_from(KEYS),
        run=st.sampled_from(RUNS),
        turn=st.sampled_from(TURNS),
        pause=PAUSES_MS,
    )
    def delete(self, key, run, turn, pause):
        self.clock += pause
        if not self.exists[key]:
            with pytest.raises(NotFound):
                services.delete_artifact(self.app, *key, requested_by="p", tool="t")
            return
        receipt = services.delete_artifact(
            self.app, *key, requested_by="p", tool="t", run_id=run or None, turn_id=turn or None
        )
        self.exists[key] = False
        self._expect(receipt, run, turn)


@pytest.mark.django_db
@override_settings(VERSIONS_TURN_GAP_SECONDS=GAP_SECONDS, VERSIONS_POINTS_PER_APP=1000)
def test_grouping_of_any_sequence_of_writes_follows_runs_turns_and_the_gap():
    GroupingMachine.TestCase.settings = settings(
        max_examples=40,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    GroupingMachine.TestCase().runTest()

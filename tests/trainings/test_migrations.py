from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from trainings.defaults import RULES


@pytest.mark.django_db
def test_the_trainings_migrations_match_the_models() -> None:
    out = StringIO()
    call_command("makemigrations", "trainings", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_the_seeded_rules_are_seed_000s() -> None:
    """Migration 0002 seeds `trainings.defaults.RULES` (the autouse fixture re-seeds it after flushes)."""
    rules = {spec["slug"]: (spec["kind"], spec["offsets"], sorted(spec["templates"])) for spec in RULES}
    assert rules == {
        "pre-questionnaire": ("PRE", ["90m", "75m", "60m", "45m", "30m", "15m"], ["en", "fr"]),
        "post-questionnaire": (
            "POST",
            [f"{m}m" for m in (15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 165, 180)],
            ["en", "fr"],
        ),
        "invitation": ("INVITATION", ["3d", "2d", "1d", "6h"], ["en", "fr"]),
    }


def _before_link_migration() -> list[tuple[str, str]]:
    """The nodes just before the migration that links existing jobs to their trainings (found by name, so
    renumbering at merge does not break this test)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    graph = MigrationExecutor(connection).loader.graph
    node = next(n for n in graph.nodes if n[0] == "trainings" and n[1].endswith("_training_job_relation"))
    return sorted(parent.key for parent in graph.node_map[node].parents)


@pytest.mark.django_db(transaction=True)
def test_the_relation_migration_links_the_trainings_jobs_and_takes_back_one_adopted_from_a_user() -> None:
    import datetime as dt
    import uuid

    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = _before_link_migration()
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    Job, Training = old.get_model("reminders", "Job"), old.get_model("trainings", "Training")
    rules = {rule.slug: rule for rule in old.get_model("trainings", "ReminderRule").objects.all()}
    mallory = old.get_model("auth", "User").objects.create(username="mallory")
    team = old.get_model("trainings", "Team").objects.create(name="U15")
    start = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
    training = Training.objects.create(
        team=team, title="S", start=start, end=start + dt.timedelta(hours=1), time_zone="UTC"
    )

    def job(slug: str, *, key: str | None = None, owner: object = None, handler: bool = True,
            training_id: object = training.pk) -> int:  # fmt: skip
        rule = rules[slug]
        return Job.objects.create(
            key=key or f"training-{training_id}-{slug}",
            owner=owner,
            callback_type="handler" if handler else "rabbitmq",
            target="trainings.reminder" if handler else "q.mallory",
            payload={"training": str(training_id), "rule": rule.pk},
        ).pk

    ours = job("pre-questionnaire")
    adopted = job("invitation", owner=mallory)  # squatted, then rewritten by the trainings app
    squatted = job("post-questionnaire", owner=mallory, handler=False)  # squatted, never adopted
    replay = job("pre-questionnaire", key="replay-1", owner=mallory)  # the handler named through the API
    gone = job("pre-questionnaire", training_id=uuid.uuid4())  # its training was deleted

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    new = executor.loader.project_state(executor.loader.graph.leaf_nodes()).apps
    links = new.get_model("trainings", "TrainingJob").objects.values_list(
        "training_id", "rule__slug", "job_id"
    )
    assert sorted(links) == sorted(
        [(training.pk, "pre-questionnaire", ours), (training.pk, "invitation", adopted)]
    )
    owners = dict(new.get_model("reminders", "Job").objects.values_list("pk", "owner_id"))
    assert owners[adopted] is None  # the squatter can no longer read or cancel it
    assert (owners[squatted], owners[replay], owners[gone]) == (mallory.pk, mallory.pk, None)

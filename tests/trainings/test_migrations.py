from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from trainings.planning.defaults import RULES


@pytest.mark.django_db
def test_the_trainings_migrations_match_the_models() -> None:
    out = StringIO()
    call_command("makemigrations", "trainings", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_the_seeded_rules_are_seed_000s() -> None:
    """Migration 0002 seeds `trainings.planning.defaults.RULES` (the autouse fixture re-seeds it after
    flushes): the English templates, which the catalogs in locale/ translate for every other language."""
    rules = {spec["slug"]: (spec["kind"], spec["offsets"], sorted(spec["templates"])) for spec in RULES}
    assert rules == {
        "pre-questionnaire": ("PRE", ["90m", "75m", "60m", "45m", "30m", "15m"], ["en"]),
        "post-questionnaire": (
            "POST",
            [f"{m}m" for m in (15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 165, 180)],
            ["en"],
        ),
        "invitation": ("INVITATION", ["3d", "2d", "1d", "6h"], ["en"]),
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


@pytest.mark.django_db(transaction=True)
def test_a_rule_marked_critical_before_offsets_could_be_has_every_reminder_critical_after() -> None:
    """critical=True becomes "all" (its history rows too, so the audit still reads what was critical);
    a rule not marked has none; and back."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    executor = MigrationExecutor(connection)
    node = next(
        n for n in executor.loader.graph.nodes if n[0] == "trainings" and n[1].endswith("_critical_offsets")
    )
    before = sorted(parent.key for parent in executor.loader.graph.node_map[node].parents)
    try:
        executor.migrate(before)
        old = executor.loader.project_state(before).apps
        Rule, History = (
            old.get_model("trainings", "ReminderRule"),
            old.get_model("trainings", "HistoricalReminderRule"),
        )
        Rule.objects.filter(slug="pre-questionnaire").update(critical=True)
        pre = Rule.objects.get(slug="pre-questionnaire")
        for critical in (False, True):
            History.objects.create(id=pre.pk, slug=pre.slug, kind=pre.kind, offsets=pre.offsets,
                                   active=True, critical=critical, history_date=timezone.now(),
                                   history_type="~")  # fmt: skip

        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        new = executor.loader.project_state(executor.loader.graph.leaf_nodes()).apps
        rules = dict(
            new.get_model("trainings", "ReminderRule").objects.values_list("slug", "critical_offsets")
        )
        assert rules.pop("pre-questionnaire") == "all" and all(value == [] for value in rules.values())
        history = new.get_model("trainings", "HistoricalReminderRule").objects.filter(id=pre.pk)
        latest = history.order_by("-history_id").values_list("critical_offsets", flat=True)
        assert list(latest[:2]) == ["all", []]

        executor = MigrationExecutor(connection)
        executor.migrate(before)
        back = executor.loader.project_state(before).apps
        assert back.get_model("trainings", "ReminderRule").objects.get(slug="pre-questionnaire").critical
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

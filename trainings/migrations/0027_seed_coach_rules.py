from django.db import migrations


def seed(apps, schema_editor):
    from trainings.planning.defaults import COACH_RULES, rules_seed

    rules_seed(
        apps.get_model("trainings", "ReminderRule"),
        apps.get_model("trainings", "ReminderTemplate"),
        COACH_RULES,
    )


def unseed(apps, schema_editor):
    from trainings.planning.defaults import COACH_RULES

    apps.get_model("trainings", "ReminderRule").objects.filter(
        slug__in=[r["slug"] for r in COACH_RULES]
    ).delete()


class Migration(migrations.Migration):
    """The coaches' default rules (trainings/planning/defaults.py, COACH_RULES): apart from 0024's tables, so a
    rollback deletes the rules before it drops what refers to them (PostgreSQL refuses both in one go)."""

    dependencies = [("trainings", "0026_coaches_and_digests")]

    operations = [migrations.RunPython(seed, unseed)]

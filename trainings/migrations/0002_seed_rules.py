from django.db import migrations


def seed(apps, schema_editor):
    from trainings.planning.defaults import RULES, rules_seed

    rules_seed(
        apps.get_model("trainings", "ReminderRule"), apps.get_model("trainings", "ReminderTemplate"), RULES
    )


def unseed(apps, schema_editor):
    from trainings.planning.defaults import RULES

    apps.get_model("trainings", "ReminderRule").objects.filter(slug__in=[r["slug"] for r in RULES]).delete()


class Migration(migrations.Migration):
    dependencies = [("trainings", "0001_initial")]

    operations = [migrations.RunPython(seed, unseed)]

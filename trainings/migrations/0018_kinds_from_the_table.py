"""Kinds are a table in code (trainings/planning/kinds.py): the columns that store a kind's code read their choices
from it, and the database no longer keeps a second list of codes (a new kind needs no migration).
Answers' phase is as wide as the other kind columns."""

import trainings.planning.kinds
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('trainings', '0017_muted_and_critical'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='questionnaireanswer',
            name='answer_phase_valid',
        ),
        migrations.RemoveConstraint(
            model_name='reminderrule',
            name='rule_kind_valid',
        ),
        migrations.AlterField(
            model_name='historicalreminderrule',
            name='kind',
            field=models.CharField(choices=trainings.planning.kinds.rule_choices, max_length=10),
        ),
        migrations.AlterField(
            model_name='push',
            name='kind',
            field=models.CharField(choices=trainings.planning.kinds.push_choices, max_length=10),
        ),
        migrations.AlterField(
            model_name='questionnaireanswer',
            name='phase',
            field=models.CharField(choices=trainings.planning.kinds.questionnaire_choices, max_length=10),
        ),
        migrations.AlterField(
            model_name='reminderpreference',
            name='kind',
            field=models.CharField(choices=trainings.planning.kinds.rule_choices, max_length=10),
        ),
        migrations.AlterField(
            model_name='reminderrule',
            name='kind',
            field=models.CharField(choices=trainings.planning.kinds.rule_choices, max_length=10),
        ),
    ]

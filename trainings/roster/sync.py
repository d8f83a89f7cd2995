"""The bulk roster sync (`POST /api/roster/`): a club's teams, players, memberships and guardians, upserted
by the caller's external ids in one transaction.

All or nothing: the body is checked whole first (each field, then across rows: an id listed twice with
other values, an email address given to two people or held by someone outside the caller's roster), and a
bad row is a 400 naming its path (`teams[3].players[2].time_zone`) before anything is written. Then the
rows are read once per kind, compared, and written in bulk (bulk_create, bulk_update, one UPDATE per kind
of change): what already matches is not written at all, so a second identical call changes nothing and
says so. Two syncs of one caller at once apply one after the other (the caller's user row is locked).

`deactivate_missing` also takes away what the roster leaves out: memberships of its teams and
guardianships of its players that it does not list, and every membership (guardianship) of the caller's
teams and players (guardians) it does not name at all. Rows are never deleted: a membership becomes
inactive, history stays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from trainings.digest.schedule import team_digests_reschedule
from trainings.models import Guardian, Guardianship, Membership, Player, Team
from trainings.roster.emails import Holder, emails_sync

BATCH = 2_000


class RosterRowError(Exception):
    """Bad rows, by path: nothing was written."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__(errors)


@dataclass
class Counts:
    created: int = 0
    updated: int = 0
    deactivated: int = 0


@dataclass
class SyncResult:
    teams: Counts = field(default_factory=Counts)
    players: Counts = field(default_factory=Counts)
    memberships: Counts = field(default_factory=Counts)
    guardians: Counts = field(default_factory=Counts)
    guardianships: Counts = field(default_factory=Counts)


@dataclass
class _Row:
    path: str
    values: dict[str, Any]  # the fields given (email included when given)
    teams: list[str] = field(default_factory=list)  # a player's teams, by external id, in listed order


_PLAYER_FIELDS = ("name", "language", "time_zone")
_GUARDIAN_FIELDS = ("name",)


def errors_flattened(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested errors as {path: messages}: `teams[3].players[2].time_zone`."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = str(key)
            path = f"{prefix}[{name}]" if name.isdigit() else (f"{prefix}.{name}" if prefix else name)
            out.update(errors_flattened(value, path))
    elif isinstance(detail, list) and all(isinstance(item, str) for item in detail):
        out[prefix or "non_field_errors"] = [str(item) for item in detail]
    elif isinstance(detail, list):
        for index, item in enumerate(detail):
            if item:
                out.update(errors_flattened(item, f"{prefix}[{index}]"))
    else:
        out[prefix or "non_field_errors"] = [str(detail)]
    return out


def _collect(
    teams: list[dict[str, Any]],
) -> tuple[dict[str, _Row], dict[str, _Row], dict[str, _Row], dict[tuple[str, str], str | None]]:
    """The body's rows by external id, each once; a second listing must agree with the first."""
    errors: dict[str, list[str]] = {}
    team_rows: dict[str, _Row] = {}
    player_rows: dict[str, _Row] = {}
    guardian_rows: dict[str, _Row] = {}
    wards: dict[tuple[str, str], str | None] = {}  # (player, guardian) -> relation (None: not given)
    emails: dict[str, str] = {}  # address -> the path of the person given it first

    def email_once(values: dict[str, Any], path: str, person: str) -> None:
        address = values.get("email")
        if address is None:
            return
        first = emails.setdefault(address.lower(), person)
        if first != person:
            errors[f"{path}.email"] = [f"also the address of {first}: an address is one person's."]

    for t, team in enumerate(teams):
        tpath = f"teams[{t}]"
        if team["external_id"] in team_rows:
            errors[f"{tpath}.external_id"] = [f"listed twice (also {team_rows[team['external_id']].path})."]
            continue
        team_rows[team["external_id"]] = _Row(tpath, {k: v for k, v in team.items() if k != "players"})
        for p, player in enumerate(team.get("players", [])):
            ppath = f"{tpath}.players[{p}]"
            values = {k: v for k, v in player.items() if k not in ("guardians", "external_id")}
            row = player_rows.get(player["external_id"])
            if row is None:
                row = player_rows[player["external_id"]] = _Row(ppath, values)
                email_once(values, ppath, ppath)
            elif row.values != values:
                errors[ppath] = [
                    f"player {player['external_id']!r} is listed again with other values than at {row.path}."
                ]
                continue
            if team["external_id"] in row.teams:
                errors[f"{ppath}.external_id"] = ["listed twice in this team."]
                continue
            row.teams.append(team["external_id"])
            for g, guardian in enumerate(player.get("guardians", [])):
                gpath = f"{ppath}.guardians[{g}]"
                gvalues = {k: v for k, v in guardian.items() if k not in ("external_id", "relation")}
                grow = guardian_rows.get(guardian["external_id"])
                if grow is None:
                    grow = guardian_rows[guardian["external_id"]] = _Row(gpath, gvalues)
                    email_once(gvalues, gpath, gpath)
                elif grow.values != gvalues:
                    errors[gpath] = [
                        f"guardian {guardian['external_id']!r} is listed again with other values "
                        f"than at {grow.path}."
                    ]
                    continue
                key = (player["external_id"], guardian["external_id"])
                if key in wards and wards[key] != guardian.get("relation"):
                    errors[gpath] = ["listed again for this player with another relation."]
                wards[key] = guardian.get("relation")
                if player["external_id"] not in grow.teams:
                    grow.teams.append(player["external_id"])  # a guardian's players, in listed order
    if errors:
        raise RosterRowError(errors)
    return team_rows, player_rows, guardian_rows, wards


def roster_sync(*, owner: Any, teams: list[dict[str, Any]], deactivate_missing: bool = False) -> SyncResult:
    """Upsert the roster for `owner` (the caller); see the module's docstring."""
    team_rows, player_rows, guardian_rows, wards = _collect(teams)
    result = SyncResult()
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        team_ids = _teams_upsert(owner, team_rows, result)
        player_ids, players_new, players_changed = _players_upsert(owner, player_rows, team_ids, result)
        guardian_ids, guardians_new, guardians_changed = _guardians_upsert(
            owner, guardian_rows, player_rows, team_ids, result
        )
        emailed = _emails_set(owner, player_rows, player_ids, guardian_rows, guardian_ids)
        # A person whose only change is their email address is updated too.
        result.players.updated = len(
            players_changed | ({pk for c, pk in emailed if c == "player_id"} - players_new)
        )
        result.guardians.updated = len(
            guardians_changed | ({pk for c, pk in emailed if c == "guardian_id"} - guardians_new)
        )
        _memberships_set(owner, player_rows, team_ids, player_ids, deactivate_missing, result)
        _guardianships_set(owner, wards, player_ids, guardian_ids, deactivate_missing, result)
    return result


def _teams_upsert(owner: Any, rows: dict[str, _Row], result: SyncResult) -> dict[str, int]:
    mine = Team.objects.filter(owner=owner, external_id__isnull=False)
    existing = {t.external_id: t for t in mine if t.external_id in rows}
    new, changed, moved = [], [], []
    for key, row in rows.items():
        team = existing.get(key)
        values = row.values
        if team is None:
            new.append(
                Team(
                    owner=owner,
                    external_id=key,
                    name=values["name"],
                    time_zone=values.get("time_zone", "UTC"),
                )
            )
            continue
        differs = [n for n in ("name", "time_zone") if n in values and getattr(team, n) != values[n]]
        if differs:
            if "time_zone" in differs:
                moved.append(team)
            for name in differs:
                setattr(team, name, values[name])
            changed.append(team)
    Team.objects.bulk_create(new, batch_size=BATCH)
    if changed:
        Team.objects.bulk_update(changed, ["name", "time_zone"], batch_size=BATCH)
    for team in moved:
        team_digests_reschedule(team=team)  # the morning digest is at a time of the team's zone
    result.teams.created, result.teams.updated = len(new), len(changed)
    return {str(t.external_id): t.pk for t in [*existing.values(), *new]}


def _people_upsert(
    model: Any,
    owner: Any,
    rows: dict[str, _Row],
    fields: tuple[str, ...],
    defaults: dict[str, dict[str, Any]],
    counts: Counts,
) -> tuple[dict[str, int], set[int], set[int]]:
    """Create or update players (guardians) by external id; returns their ids by key, and the ids created
    and changed (an email change is counted by the caller)."""
    # The caller's keyed rows, all of them: one index scan on the owner, where IN (thousands of ids) was
    # parsed and probed per id.
    mine = model.objects.filter(owner=owner, external_id__isnull=False).only("pk", "external_id", *fields)
    existing = {p.external_id: p for p in mine if p.external_id in rows}
    new: list[Any] = []
    changed: list[Any] = []
    for key, row in rows.items():
        person = existing.get(key)
        given = {n: row.values[n] for n in fields if n in row.values}
        if person is None:
            new.append(model(owner=owner, external_id=key, **{**defaults.get(key, {}), **given}))
            continue
        differs = [n for n, v in given.items() if getattr(person, n) != v]
        for name in differs:
            setattr(person, name, given[name])
        if differs:
            changed.append(person)
    model.objects.bulk_create(new, batch_size=BATCH)
    if changed:
        model.objects.bulk_update(changed, list(fields), batch_size=BATCH)
    counts.created = len(new)
    ids = {p.external_id: p.pk for p in [*existing.values(), *new]}
    return ids, {p.pk for p in new}, {p.pk for p in changed}


def _team_zones(team_ids: dict[str, int]) -> dict[str, str]:
    rows = Team.objects.filter(pk__in=team_ids.values()).values_list("external_id", "time_zone")
    return {str(key): zone for key, zone in rows}


def _players_upsert(
    owner: Any, rows: dict[str, _Row], team_ids: dict[str, int], result: SyncResult
) -> tuple[dict[str, int], set[int], set[int]]:
    zones = _team_zones(team_ids)
    # A new player lives in their (first listed) team's zone unless the row gives one.
    defaults = {key: {"time_zone": zones[row.teams[0]]} for key, row in rows.items() if row.teams}
    return _people_upsert(Player, owner, rows, _PLAYER_FIELDS, defaults, result.players)


def _guardians_upsert(
    owner: Any,
    rows: dict[str, _Row],
    player_rows: dict[str, _Row],
    team_ids: dict[str, int],
    result: SyncResult,
) -> tuple[dict[str, int], set[int], set[int]]:
    """A new guardian lives in their first player's zone and speaks their language, unless told."""
    zones = _team_zones(team_ids)
    defaults = {}
    for key, row in rows.items():
        first = player_rows[row.teams[0]]  # the guardian's first player
        zone = first.values.get("time_zone") or zones.get(first.teams[0], "UTC")
        defaults[key] = {"time_zone": zone, "language": first.values.get("language", "en")}
    return _people_upsert(Guardian, owner, rows, _GUARDIAN_FIELDS, defaults, result.guardians)


def _emails_set(
    owner: Any,
    player_rows: dict[str, _Row],
    player_ids: dict[str, int],
    guardian_rows: dict[str, _Row],
    guardian_ids: dict[str, int],
) -> set[Holder]:
    """Each person given an `email` has exactly that email device; a device moves from another person the
    caller manages; one held by someone outside the caller's roster is refused (a 400 on the row). Returns
    the people whose addresses changed."""
    wanted: dict[Holder, tuple[str | None, str]] = {}  # (column, id) -> (address, path)
    for rows, ids, column in (
        (player_rows, player_ids, "player_id"),
        (guardian_rows, guardian_ids, "guardian_id"),
    ):
        for key, row in rows.items():
            if "email" in row.values:
                wanted[column, ids[key]] = (row.values["email"], row.path)
    if not wanted:
        return set()
    synced = {("player_id", pk) for pk in player_ids.values()} | {
        ("guardian_id", pk) for pk in guardian_ids.values()
    }
    touched, errors = emails_sync(owner=owner, wanted=wanted, synced=synced)
    if errors:
        raise RosterRowError(errors)
    return touched


def _memberships_set(
    owner: Any,
    player_rows: dict[str, _Row],
    team_ids: dict[str, int],
    player_ids: dict[str, int],
    deactivate_missing: bool,
    result: SyncResult,
) -> None:
    wanted = {(team_ids[t], player_ids[key]) for key, row in player_rows.items() for t in row.teams}
    rows = dict(
        ((team, player), (pk, active))
        for pk, team, player, active in Membership.objects.filter(team_id__in=team_ids.values()).values_list(
            "pk", "team_id", "player_id", "active"
        )
    )
    new = [Membership(team_id=t, player_id=p) for t, p in sorted(wanted - rows.keys())]
    back = [pk for key, (pk, active) in rows.items() if key in wanted and not active]
    off = [pk for key, (pk, active) in rows.items() if deactivate_missing and active and key not in wanted]
    Membership.objects.bulk_create(new, batch_size=BATCH)
    if back:
        Membership.objects.filter(pk__in=back).update(active=True)
    result.memberships.created, result.memberships.updated = len(new), len(back)
    if not deactivate_missing:
        return
    # The caller's teams and players the roster does not name: their active memberships end. (The sets
    # are subtracted here: NOT IN a list of thousands of ids cost PostgreSQL a second.)
    missing_team_ids = set(Team.objects.filter(owner=owner).values_list("pk", flat=True)) - set(
        team_ids.values()
    )
    missing_player_ids = set(Player.objects.filter(owner=owner).values_list("pk", flat=True)) - set(
        player_ids.values()
    )
    gone: list[tuple[int, int, int]] = []
    if missing_team_ids or missing_player_ids:
        left = Membership.objects.filter(active=True).filter(
            Q(team_id__in=missing_team_ids) | Q(player_id__in=missing_player_ids, team__owner=owner)
        )
        gone = list(left.values_list("pk", "team_id", "player_id"))
    off_all = set(off) | {pk for pk, _, _ in gone}
    if off_all:
        Membership.objects.filter(pk__in=off_all).update(active=False)
    result.memberships.deactivated = len(off_all)
    result.teams.deactivated = len({t for _, t, _ in gone if t in missing_team_ids})
    result.players.deactivated = len({p for _, _, p in gone if p in missing_player_ids})


def _guardianships_set(
    owner: Any,
    wards: dict[tuple[str, str], str | None],
    player_ids: dict[str, int],
    guardian_ids: dict[str, int],
    deactivate_missing: bool,
    result: SyncResult,
) -> None:
    wanted = {(player_ids[p], guardian_ids[g]): relation for (p, g), relation in wards.items()}
    rows = {
        (player, guardian): (pk, relation)
        for pk, player, guardian, relation in Guardianship.objects.filter(
            Q(player_id__in=player_ids.values()) | Q(guardian_id__in=guardian_ids.values())
        ).values_list("pk", "player_id", "guardian_id", "relation")
    }
    new = [
        Guardianship(player_id=p, guardian_id=g, relation=r or "")
        for (p, g), r in wanted.items()
        if (p, g) not in rows
    ]
    relabel = [
        Guardianship(pk=rows[key][0], relation=r)
        for key, r in wanted.items()
        if key in rows and r is not None and rows[key][1] != r
    ]
    Guardianship.objects.bulk_create(new, batch_size=BATCH)
    if relabel:
        Guardianship.objects.bulk_update(relabel, ["relation"], batch_size=BATCH)
    result.guardianships.created, result.guardianships.updated = len(new), len(relabel)
    if not deactivate_missing:
        return
    listed = set(player_ids.values())
    off = [pk for key, (pk, _) in rows.items() if key not in wanted and key[0] in listed]
    missing = set(Guardian.objects.filter(owner=owner).values_list("pk", flat=True)) - set(
        guardian_ids.values()
    )
    gone = (
        list(Guardianship.objects.filter(guardian_id__in=missing).values_list("pk", "guardian_id"))
        if missing
        else []
    )
    off_all = set(off) | {pk for pk, _ in gone}
    if off_all:
        Guardianship.objects.filter(pk__in=off_all).delete()
    result.guardianships.deactivated = len(off_all)
    result.guardians.deactivated = len({g for _, g in gone})

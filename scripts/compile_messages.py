"""Compile the catalogs in locale/ (<language>/LC_MESSAGES/django.po) into the .mo files Django reads.

Pure Python (Babel), so `make install` works on a machine without GNU gettext. The .mo files are build
output, not committed (.gitignore): each install compiles them from the .po files it has. Fuzzy entries are
left out, as msgfmt does. `--check` writes nothing and exits 1 when a .mo is missing or differs from its .po.
`--refresh` (`make messages`) first runs Django's makemessages for every language with `MAKEMESSAGES`, the
one list of what is scanned (tests/trainings/test_catalogs.py scans the same); it needs GNU gettext's
xgettext and msgmerge.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "locale"
# makemessages' options: the texts are in the apps' Python and templates, and the project's templates.
MAKEMESSAGES: dict[str, object] = {
    "extensions": ["html", "txt", "py"],
    "ignore_patterns": [".venv/*", "var/*", "tests/*", "bench/*", "docs/*", "site/*", "build/*", "scripts/*"],
    "no_obsolete": True,
    "verbosity": 0,
}


def languages() -> list[str]:
    """The catalogs there are: a directory per language under locale/."""
    return sorted(path.name for path in LOCALE.iterdir() if (path / "LC_MESSAGES").is_dir())


def refresh() -> None:
    """Django's makemessages for every language of locale/, from the repository's root."""
    import os

    import django
    from django.core.management import call_command

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    call_command("makemessages", locale=languages(), **MAKEMESSAGES)


def compiled(po: Path) -> bytes:
    with po.open("rb") as source:
        catalog = read_po(source, abort_invalid=True)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


def main(argv: list[str]) -> int:
    check = "--check" in argv
    if "--refresh" in argv:
        refresh()
    stale = []
    for po in sorted(LOCALE.glob("*/LC_MESSAGES/*.po")):
        mo = po.with_suffix(".mo")
        data = compiled(po)
        if mo.exists() and mo.read_bytes() == data:
            continue
        if check:
            stale.append(str(mo.relative_to(LOCALE.parent)))
        else:
            mo.write_bytes(data)
    if stale:
        print("stale or missing (run `make install`):", ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

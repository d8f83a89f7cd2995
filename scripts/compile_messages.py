"""Compile the catalogs in locale/ (<language>/LC_MESSAGES/django.po) into the .mo files Django reads.

Pure Python (Babel), so `make install` works on a machine without GNU gettext; `make messages` (Django's
makemessages, which needs xgettext) refreshes the .po files from the source. The .mo files are build
output, not committed (.gitignore): each install compiles them from the .po files it has. Fuzzy entries are
left out, as msgfmt does. `--check` writes nothing and exits 1 when a .mo is missing or differs from its .po.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

LOCALE = Path(__file__).resolve().parents[1] / "locale"


def compiled(po: Path) -> bytes:
    with po.open("rb") as source:
        catalog = read_po(source, abort_invalid=True)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


def main(argv: list[str]) -> int:
    check = "--check" in argv
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

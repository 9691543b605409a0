"""worldtrace's own records (`worldtrace validate` checks them; `process` reads them under
raw/ as they are): a JSONL line, or a `.json` record or list of records, carrying
worldtrace's `schema_version`.

Checked by the project's validator (`validate_dict`, the content id included), so import
takes what `worldtrace validate` passes; a record it refuses is `invalid`, its problems
named as `validate` names them (a lone surrogate is mended, as in any import). The record
is kept as given, its id too, except what the import stamps on every record: its
`source.origin_path` and `origin_index` say where import read it (this file and line: the
re-import key), the record's earlier ones kept in metadata `earlier_origin` (with the
options of the import that wrote it, `import_options`, which records this one's); the other
`source` fields (kind, name, job, episode, origin format and id) are as given. A generated
record stays `synthetic` (warning `synthetic_source`, as an AgentWorldBench export of one),
the older form too (`source.kind` collector, `environment.backend` synthetic), as export
and `stats` count it (`records.is_synthetic`).
`--domain` and the observation cap apply as to any import: a record they change gets the
id of what is stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.schemas import fields as F
from worldtrace.schemas.records import from_jsonable, is_synthetic, trajectory_from_dict
from worldtrace.schemas.validate import validate_dict

from .common import InvalidField, origin_path_of, warning
from .sink import IMPORT_OPTIONS

NAME = "worldtrace"
TRAJECTORY_VERSIONS = F.SCHEMA_VERSION.rsplit("/", 1)[0] + "/"
"""What a record's `schema_version` starts with (another version's record is named as the
validator names it, not taken for a foreign format)."""
EARLIER_ORIGIN = "earlier_origin"
"""Metadata key: the record's own `source.origin_path` and `origin_index` (JSON), where
the import that wrote it had read it, with that import's options (`import_options`), when
the file it is imported from now is another."""


def detect_record(d: Any) -> bool:
    return isinstance(d, dict) and str(d.get(F.SCHEMA_VERSION_F, "")).startswith(
        TRAJECTORY_VERSIONS
    )


def parse_record(d: Any, path: Path, index: int, domain: str | None = None) -> Iterator[Any]:
    """Record `index` of `path` as a Trajectory (validated), or InvalidField naming its
    problems."""
    record = from_jsonable(d)
    problems = validate_dict(record, "", texts=False)  # a lone surrogate: mended, warned
    if problems:
        raise InvalidField("; ".join(f"{p.field}: {p.message}" for p in problems))
    t = trajectory_from_dict(record)
    src = t.source
    here = None if src.origin_path is None else origin_path_of(path)
    if here is not None and (src.origin_path, src.origin_index) != (here, index):
        place = {"origin_path": src.origin_path, "origin_index": src.origin_index}
        if IMPORT_OPTIONS in t.metadata:  # that import's (this one records its own)
            place[IMPORT_OPTIONS] = t.metadata[IMPORT_OPTIONS]
        t.metadata = {**t.metadata, EARLIER_ORIGIN: json.dumps(place, ensure_ascii=False)}
    if domain is not None:
        t.domain = domain
    if is_synthetic(record):
        yield warning(
            "synthetic_source", "a generated (synthetic) trajectory: imported as synthetic"
        )
    yield t

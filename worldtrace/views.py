"""Moved to `worldtrace.schemas.views`; this re-export goes when the CLI imports it there."""

from worldtrace.schemas.views import *  # noqa: F403
from worldtrace.schemas.views import VIEW_DOCS, connect  # noqa: F401

"""worldtrace: trajectory data engineering for language world models.

The CLI lives in `worldtrace.cli`; the layers below (`schemas`, `sandboxes`,
`collectors`, `pipelines`) are importable on their own and never import this face.
"""

__version__ = "0.1.0"

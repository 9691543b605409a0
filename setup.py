"""The one thing pyproject.toml cannot say without an experimental table: the compression
statistics' C loop (pipelines/_deflate.c says why it exists). Optional: where it does not
build, `pipelines/stats.py` computes the same sizes in Python."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "worldtrace.pipelines._deflate",
            sources=["pipelines/_deflate.c"],
            libraries=["z"],
            optional=True,
        )
    ]
)

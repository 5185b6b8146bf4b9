"""The optional compiled Kineto event reader; everything else is configured in pyproject.toml.

Where no C compiler is available the build goes on without it and lltrace reads profiler traces with
DuckDB's JSON reader alone (the same results, about half the speed).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "lltrace.parsers._kineto_fast",
            sources=["parsers/_kineto_fast.c"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)

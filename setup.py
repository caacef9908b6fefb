"""Build hook for searchgym's one optional C extension; all metadata lives in pyproject.toml.

``searchgym.wrappers._substring_scan`` speeds up WCR waypoint matching. It is ``optional``: where no
C compiler is available the install still succeeds and the matcher uses its pure-Python strategies
(``searchgym.wrappers.waypoint_coverage_reward.NATIVE_AVAILABLE`` says which one you got).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "searchgym.wrappers._substring_scan",
            sources=["searchgym/wrappers/_substring_scan.c"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)

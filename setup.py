"""Only the package list lives here (everything else is in pyproject.toml): every package under
voxcli/ and models/ is found on disk, so adding a model family (a folder in models/) needs no edit."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["voxcli", "voxcli.*"]),
        "voxcli.models",
        *(f"voxcli.models.{p}" for p in find_packages("models")),
        "voxcli.recipes",
    ]
)

"""Policy answers: a bundle put in force, the one in force, the tenant's cleared."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from infrastructure.api.response_models import ResponseModel


class BundleSet(ResponseModel):
    scope: str
    bundle_hash: str
    rules: int = Field(description="how many rules the bundle holds")


class BundleShown(ResponseModel):
    scope: str = Field(description="the tenant's own scope, or the global one")
    bundle_hash: str
    bundle_yaml: str = Field(description="the bundle's YAML, verbatim")


class BundleInForce(ResponseModel):
    in_force: BundleShown | None = Field(description="null: no bundle applies")


class BundleCleared(ResponseModel):
    scope: str
    cleared: Literal[True]

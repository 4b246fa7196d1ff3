"""What a catalog operator is: a typed parameter schema, a TE definition, a numpy reference and a
FLOP count. Adding an operator is one small module that subclasses `Operator` and registers it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Annotated, Any, ClassVar, Generic, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tuning.catalog.dtypes import random_operand, round_to, widen_tolerance
from tuning.ir import arg_specs

MAX_DIM = 8192

Dim = Annotated[int, Field(strict=True, ge=1, le=MAX_DIM, description=f"extent, 1..{MAX_DIM}")]


class OpParams(BaseModel):
    """Base of every operator's parameter model: unknown fields are errors, numbers are strict."""

    model_config = ConfigDict(extra="forbid", frozen=True)


P = TypeVar("P", bound=OpParams)


class Operator(ABC, Generic[P]):
    """A catalog operator with parameters of type ``P``. Subclasses set `name`, `description`,
    `Params` (``P`` itself, or a subclass of it) and `example`."""

    name: ClassVar[str]
    description: ClassVar[str]
    Params: type[P]  # a class attribute (a ClassVar cannot hold a type variable)
    example: ClassVar[dict[str, Any]]
    # Positions of the parameters that are constants in deployment (weights): the packed search
    # space may choose their memory layout (tuning.search.spaces). Empty: every operand is data.
    constant_operands: ClassVar[tuple[int, ...]] = ()

    @abstractmethod
    def build(self, params: P) -> Any:
        """The operator as a TVM PrimFunc (inputs first, then the output)."""

    @abstractmethod
    def reference(self, params: P, inputs: list[np.ndarray]) -> np.ndarray:
        """The expected output for ``inputs``, computed with numpy in float64."""

    @abstractmethod
    def flop(self, params: P) -> float:
        """Floating-point operations of one call (a multiply-add counts two)."""

    def float32_tolerance(self, params: P) -> tuple[float, float]:
        """(rtol, atol) of the float32 kernel against the float64 reference."""
        return 1e-4, 1e-5

    def result_dtype(self, params: P) -> str:
        """The output's dtype (the storage dtype; contractions on int8 override it)."""
        return getattr(params, "dtype", "float32")

    def tolerance(self, params: P) -> tuple[float, float]:
        """(rtol, atol) for comparing the kernel's output with the reference, per dtype (see
        `tuning.catalog.dtypes`)."""
        return widen_tolerance(*self.float32_tolerance(params), self.result_dtype(params))

    def make_inputs(self, params: P, func: Any, rng: np.random.Generator) -> list[np.ndarray]:
        """Random inputs matching the PrimFunc's input buffers (floats uniform in [-1, 1))."""
        return [random_operand(shape, dtype, rng) for shape, dtype in arg_specs(func)[:-1]]

    def case(
        self, params: P, func: Any, rng: np.random.Generator
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Inputs and the exact (float64) output expected from them; operators whose inputs
        are derived (folded BN) override this."""
        inputs = self.make_inputs(params, func, rng)
        return inputs, self.reference(params, inputs)

    def make_case(
        self, params: P, func: Any, rng: np.random.Generator
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Inputs for a verification run and the output expected from them, rounded as the
        result dtype must round it."""
        inputs, expected = self.case(params, func, rng)
        return inputs, round_to(expected, self.result_dtype(params))

    def dtypes(self) -> list[str]:
        """The storage dtypes this operator is offered in."""
        return list(self.Params.model_json_schema()["properties"]["dtype"]["enum"])

    def schema(self) -> dict[str, Any]:
        """JSON Schema of the parameters."""
        return self.Params.model_json_schema()

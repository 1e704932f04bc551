"""The public API keeps its annotations: every function of ``toylab.__all__``, the methods and properties of its
classes, Monte Carlo and the readers' entry points (with the classes they return) annotate each parameter and their
return. mypy checks the
annotations against the code in CI (``.ci/run``, ``[tool.mypy]`` in pyproject.toml); this test keeps them from
being dropped in the default test run, which does not run mypy, and keeps mypy's file list covering them."""

import inspect
import sys
import tomllib
from functools import cached_property
from pathlib import Path

import pytest

import toylab
from toylab.analysis import diagnostics, montecarlo
from toylab.engine import moments
from toylab.your_run import columns, dumps, files, log, run

ROOT = Path(toylab.__file__).parent.parent
READERS = [run.load_file, run.read_file, run.step_logs, run.directory_files, run.zip_files, run.uploaded_files,
           run.step_and_rank, log.load_log, log.read_log, files.open_log_file, files.preview, columns.detect,
           columns.choose, dumps.dump_kind, dumps.canonical_file]
READ = [run.RunFile, run.StepLog, log.RolloutLog, log.Batch, files.Preview, columns.Columns, columns.Detection]
ANALYSIS = [diagnostics.diagnostics, montecarlo.monte_carlo, montecarlo.summarise, montecarlo.undefined_sizes, moments.exact_moments_many]


def methods(name, cls):
    """(name, function) for ``__init__`` and each public method and property a class defines."""
    for attribute, member in vars(cls).items():
        function = member.fget if isinstance(member, property) \
            else member.func if isinstance(member, cached_property) else member
        if inspect.isfunction(function) and (attribute == "__init__" or not attribute.startswith("_")):
            yield f"{name}.{attribute}", function


def exported():
    """(name, function) for each function of toylab.__all__ and each method and property its classes define."""
    for name in toylab.__all__:
        value = getattr(toylab, name)
        if inspect.isfunction(value):
            yield name, value
        elif inspect.isclass(value):
            yield from methods(name, value)


PUBLIC = [*exported(),
          *((f"{function.__module__}.{function.__qualname__}", function) for function in READERS + ANALYSIS),
          *(member for cls in READ for member in methods(f"{cls.__module__}.{cls.__qualname__}", cls))]


def unannotated(function):
    """The parameters (and "return") a function leaves without an annotation; ``self`` needs none."""
    signature = inspect.signature(function)
    missing = [parameter.name for parameter in signature.parameters.values()
               if parameter.annotation is inspect.Parameter.empty and parameter.name != "self"]
    return missing + (["return"] if signature.return_annotation is inspect.Signature.empty else [])


@pytest.mark.parametrize(("name", "function"), PUBLIC, ids=[name for name, _ in PUBLIC])
def test_every_public_function_annotates_each_parameter_and_its_return(name, function):
    assert unannotated(function) == [], name


def test_the_list_holds_the_api_and_a_missing_annotation_is_caught():
    names = {name for name, _ in PUBLIC}
    assert {"make_toy", "coefficients", "exact_moments", "Toy.__init__", "Toy.true_grad", "Moments.rel_rmse",
            "toylab.your_run.run.load_file", "toylab.your_run.log.RolloutLog.lengths"} <= names

    def partly(x, y: int, *rest, **params: float):
        return x

    assert unannotated(partly) == ["x", "rest", "return"]


def test_mypy_checks_every_module_that_defines_them():
    checked = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"])
    defining = {Path(sys.modules[function.__module__].__file__).relative_to(ROOT).as_posix() for _, function in PUBLIC}
    assert defining - checked == set()

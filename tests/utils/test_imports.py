"""The one loader of objects by name (`module:attr` or a module): what it returns, and an error that names what was
asked and what exists there instead."""

import pytest

from trinity.utils.imports import import_path


def test_a_module_attr_path_gives_the_object_and_a_module_path_the_module():
    import trinity.utils.imports as module

    assert import_path("trinity.utils.imports:import_path", "a test") is import_path
    assert import_path("trinity.utils.imports", "a test") is module


def test_a_missing_module_names_the_modules_of_its_package():
    with pytest.raises(ValueError) as err:
        import_path("trinity.utils.nowhere:fn", "reward function")
    assert str(err.value).startswith("reward function: cannot import 'trinity.utils.nowhere:fn': ")
    assert str(err.value).endswith("(trinity.utils has: atomic, child, device, imports)")


def test_a_missing_attribute_names_what_the_module_defines():
    with pytest.raises(ValueError) as err:
        import_path("trinity.utils.imports:import_paths", "workflow")
    assert str(err.value).startswith("workflow: cannot import 'trinity.utils.imports:import_paths': ")
    assert str(err.value).endswith("(trinity.utils.imports defines: import_path, lazy_module)")

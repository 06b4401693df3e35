"""Every step a lower layer calls by name has exactly one implementation, from its owner."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from core import hooks
from core.hooks import Hook


@pytest.mark.parametrize("hook", list(Hook))
def test_every_hook_has_its_implementation_from_the_app_it_names(hook: Hook) -> None:
    owner = hook.value.split(".")[0]
    assert hooks.implementation(hook).__module__.split(".")[0] == owner


@pytest.mark.parametrize("hook", list(Hook))
def test_a_second_implementation_of_a_hook_is_refused(hook: Hook) -> None:
    registered = hooks.implementation(hook)

    def another(**kwargs: object) -> None:
        raise AssertionError("never called")

    with pytest.raises(ImproperlyConfigured, match="cannot be a second"):
        hooks.register(hook, another)
    hooks.register(hook, registered)  # the same one again (ready() run twice) is no change
    assert hooks.implementation(hook) is registered

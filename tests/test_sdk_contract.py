"""What of the ``mcp`` SDK's own non-public surface the project builds on still exists as
it was: a subclass hook overridden, a private method it calls. Each failure names the
installed SDK version and what changed, so an SDK release that moves them fails here
first, not silently in a login.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

import pytest
from mcp.client.auth import OAuthClientProvider

from supervisor.auth._workload import WorkloadIdentityOAuthProvider

SDK = version("mcp")

#: The ``OAuthClientProvider`` hooks the workload-identity grant overrides, with the
#: parameters each takes: renamed or gone, the grant would silently become the SDK's
#: default authorization-code flow.
WORKLOAD_HOOKS = {
    "_initialize": ["self"],
    "_select_authorization_server": ["self", "advertised"],
    "_perform_authorization": ["self"],
    "_handle_token_response": ["self", "response"],
}


@pytest.mark.parametrize("hook", sorted(WORKLOAD_HOOKS))
def test_the_oauth_provider_hooks_the_workload_grant_overrides_are_there(hook: str) -> None:
    found = getattr(OAuthClientProvider, hook, None)
    assert found is not None, (
        f"mcp {SDK}: OAuthClientProvider.{hook} is gone; the workload_identity grant "
        "(supervisor/auth/_workload.py) overrides it"
    )
    params = list(inspect.signature(found).parameters)
    assert params == WORKLOAD_HOOKS[hook], (
        f"mcp {SDK}: OAuthClientProvider.{hook}{inspect.signature(found)} changed; "
        f"supervisor/auth/_workload.py overrides it as {hook}({', '.join(WORKLOAD_HOOKS[hook])})"
    )
    assert getattr(WorkloadIdentityOAuthProvider, hook) is not found


def test_the_provider_s_flow_still_goes_through_the_authorization_hook() -> None:
    """The SDK's flow (``_auth_flow``, which ``async_auth_flow`` drives) calls
    ``_initialize``, ``_perform_authorization`` (the grant's token request) and
    ``_handle_token_response``: a flow that stopped calling them would skip the grant."""
    flow = inspect.getsource(OAuthClientProvider._auth_flow)
    for hook in ("_initialize", "_perform_authorization", "_handle_token_response"):
        assert hook in flow, f"mcp {SDK}: OAuthClientProvider._auth_flow no longer calls {hook}"

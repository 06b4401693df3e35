"""The run agent (`python -m orchestration.agent run.json`): stdlib + jinja2 only.

See docs/agent-protocol.md for the contract it implements.
"""

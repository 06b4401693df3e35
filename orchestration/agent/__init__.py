"""The run agent (`python -m orchestration.agent run.json`): stdlib + jinja2 only.

See docs/agent-protocol.md for the contract it implements.
"""

# the agent's version, reported with every run's provenance; raised when its behaviour or
# its messages change (docs/agent-protocol.md)
AGENT_VERSION = "1.3.0"
# the run's provenance record, written by the agent into the case (so into its archive)
PROVENANCE_FILE = "windtunnel-provenance.json"
# how to rerun the case by hand, written by the agent beside it (orchestration/agent/rerun.py)
README_FILE = "windtunnel-README.txt"

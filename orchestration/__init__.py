"""Compute drivers, the run agent and the image composer. Never imports Django."""

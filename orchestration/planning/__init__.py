"""Where and what to run next: the surrogate model that proposes samples, and placement of
runs on pools. Plain Python, no Django."""

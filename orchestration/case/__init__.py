"""OpenFOAM cases as text: dictionaries and their tokens, inspection of uploaded cases, checks
of what a case may do, rendering of templates, and reading a tenant's case without following
its links. Plain Python, no Django."""

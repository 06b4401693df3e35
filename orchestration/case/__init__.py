"""OpenFOAM cases as text: dictionaries and their tokens, inspection of uploaded cases, the
checks of what a case may do, placeholders and the rendering of templates. Plain Python, no
Django."""

# The .py files here are inputs for tests/cpu/test_audit.py, read as text by the static audit: never import them.
collect_ignore_glob = ["*.py"]

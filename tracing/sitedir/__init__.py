"""A folder to put first on PYTHONPATH: its sitecustomize.py starts tracing from HANGDOCTOR_TRACE."""

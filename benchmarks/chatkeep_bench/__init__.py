"""The chatkeep benchmark harness (DESIGN section 8); run it with ``benchmarks/run.py``.

Not a distribution and not installed: ``run.py`` puts this folder on ``sys.path``.
"""

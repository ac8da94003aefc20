"""kpadstudy: the logic behind the K-pad study workflow.

Rule scripts under ``workflow/scripts/`` are thin wrappers over this package; every
function here is importable and tested on its own (see ``tests/``).
"""

__version__ = "0.1.0"

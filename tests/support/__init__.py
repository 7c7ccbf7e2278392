"""What the tests share: process helpers (procutil), racing threads
(racing), the NIXL tests' peer (nixl_peer), the multi-rank suite's helpers
(mpiutil) and the simulated hosts (simhosts, also a command: ``python
tests/support/simhosts.py up 2``).

Imported as ``support`` (``from support import procutil``): pytest puts
``tests/`` on ``sys.path`` (the directory of ``tests/conftest.py``).
"""

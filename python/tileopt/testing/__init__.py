"""tileopt.testing: helpers for testing tileopt, in the spirit of ``torch.testing``.

:mod:`tileopt.testing.models` holds reference models written in plain PyTorch (a GPT-style
block, a LLaMA-style block and their parts), one definition each, shared by the tests
(``test/python/frontend``), the graph benchmark (``benchmarks/graphs.py``) and ``make demo``.

:mod:`tileopt.testing.native` runs a script as a machine without tileopt's native build would
(the tests of what such a GPU machine runs).

Importing this package imports nothing else; :mod:`tileopt.testing.models` needs torch.
"""

"""``python -m hayata_py``: the ``hayata`` command line."""

from hayata_py.cli import main

main()

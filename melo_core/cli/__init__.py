"""The command line, ``python -m melo_core``: the parser and the core commands (``commands``), the
``train`` command (``train``), the ``cache`` command (``cache_admin``), the argparse types shared
by commands (``arguments``), what ``--scorers`` accepts (``catalogue``, also shown by the app's
home page), and the entry points through which layers above (the store) add commands
(``extensions``). The highest room: it may import any other, and no other room imports it."""

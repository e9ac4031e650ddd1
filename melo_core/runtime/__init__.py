"""How the library runs on a machine: results remembered on disk (``disk_cache``: pickles written
atomically, a stale one read as a miss, stamps keyed to their input files), memory handed back to
the system (``memory``), one ``prepare`` per data folder at a time with its measured time left
(``preparing``), and work run in fresh processes so that a model build's gigabytes leave with it
(``processes``). It knows nothing of ESCO, scorers or linking: it imports only the top level's
kernel (``config``, ``errors``)."""

"""ESCO and the data measured against it: the taxonomy as concepts with labels per language
(``taxonomy``), national crosswalks to ESCO and the SKOS relations (``crosswalk``), MELO datasets
in the official folder layout (``datasets``) and the builder that makes one from a crosswalk
(``builder``), and job-ad titles read as a dataset (``titles``). It reads and writes data only:
it imports the kernel, ``runtime`` and ``files``, never encoders, scorers, linking or evaluation."""

"""Files in and out: the paths a user names for output, checked before any work and written
without replacing what they are (``output``); strict readers of the benchmark's TSV files and of
CSV or Excel inputs, and the CSV writer (``tsv``); the one length and character rule for every
stored or linked text (``text_limits``). It imports only the top level's kernel (``errors``),
never ESCO, scorers or linking."""

"""Linking: a free-text occupation name to ranked ESCO concepts. The named pipelines (``pipeline``:
``melo_core/pipelines/*.toml`` read, checked, prepared), the engine that fuses their scorers with
known mentions, descriptions and a scheme's decisions (``linker``, ``descriptions``,
``scheme_learning``), query rules (``query_rules``), vector indexes (``index``), the language of
a column of titles (``language_id``) and bulk linking of millions of titles (``bulk``). It builds
on ``esco``, ``encoders`` and ``scorers``; it never imports ``evaluation`` or ``cli``."""

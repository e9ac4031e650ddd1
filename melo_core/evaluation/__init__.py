"""Measuring: how a scorer is ranked on a dataset and evaluated under that protocol (``protocol``),
the one engine every door evaluates through (``benchmarking.evaluate_one``), how sure a figure is
(``significance``), the MELO paper's published results (``published``), the dashboards'
computations (``analysis``), graded similarity (``graded``), the simulated curator and the
curator's effort (``simulate``, ``effort``), calibrated confidence (``calibration``), and
experiments as data with their runner and the one results table (``experiments``). The ranking
metrics themselves live in ``melo_core.metrics``, below every room, since training uses them
too. It may import every room but ``cli``."""

"""Stream sharing (paper 002, Kuntschke & Kemper): many saved queries over one stream, evaluated once.

Query properties (the paper's APT, for keyword queries and subscriptions),
matching and merging (widening) and narrowing of sharing classes, the shared
evaluation of a stream's classes, and window-based aggregates over relaxed
windows (RelaxWindow, SELECTWINDOWS).
"""

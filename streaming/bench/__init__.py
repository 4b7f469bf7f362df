"""Benchmarks: each module measures one family and writes JSON plus PNG plots."""

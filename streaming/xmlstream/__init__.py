"""XML data streams: DTDs, safe parsing of items, and the mapping of items to relation tuples."""

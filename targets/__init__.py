"""Systems under test other than the reference: the real programs its races come from, as released."""

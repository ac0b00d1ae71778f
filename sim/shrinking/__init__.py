"""Shrinking a failing scenario run: fewer faults and drives, and the decision passes shared with programs."""

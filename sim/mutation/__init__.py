"""Mutation: curated and operator mutants of the reference, the kill matrix, the coverage map that selects what
can kill each, and the reviewer's revert check."""

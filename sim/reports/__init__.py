"""What a run looks like to a person: the verdict table, the failure's timeline and repro file, the HTML page."""

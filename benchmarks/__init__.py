"""`make bench`: side-by-side measurements written as ratios to bench-results.md."""

"""Per stage, the moments of the step: what one pass and one layer keep, the framework's and precision's bytes, and the timeline of what is alive when."""

"""Splitting the layers over the stages and simulating the pipeline schedule: every stage's operations in order, in time, and what they hold."""

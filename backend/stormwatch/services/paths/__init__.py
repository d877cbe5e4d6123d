"""Path traces: storing the agents' traces, each pair's paths over time, and path changes."""

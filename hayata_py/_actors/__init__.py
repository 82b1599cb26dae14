"""The actors of an agent: supervisors, the agent (a shell around the invocation
machine), nodes, edges and the edge watcher."""
